// Tensor autograd properties, backward/grad, nodes and custom Functions for Python.
#include "frontend/binding/AutogradBinding.h"

#include <cstdint>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "compiler/OpRecorder.h"
#include "frontend/binding/PythonConvert.h"
#include "generated/Ops.h"
#include "runtime/DispatchKey.h"
#include "runtime/Error.h"
#include "runtime/autograd/AutogradMeta.h"
#include "runtime/autograd/Engine.h"
#include "runtime/autograd/SavedVariable.h"

namespace kiln::python {

using namespace kiln::autograd;

namespace {

// A grad_fn as Python sees it (a new handle per access; `==` compares the node).
struct AutogradNodeHandle {
  IntrusivePtr<autograd::Node> node;
};

// A hook's handle: remove() turns the hook into a no-op.
struct GradHookHandle {
  std::shared_ptr<bool> alive;
  void remove() { *alive = false; }
};

nb::object wrap(const Tensor& t) { return nb::steal(wrapTensor(t)); }

nb::object nodeObject(const IntrusivePtr<autograd::Node>& n) {
  if (!n) return nb::none();
  return nb::cast(AutogradNodeHandle{n});
}

// A Python hook on a gradient: fn(grad) -> replacement or None.
GradHook pythonGradHook(nb::object fn, std::shared_ptr<bool> alive) {
  return [fn = std::move(fn), alive = std::move(alive)](const Tensor& g) -> Tensor {
    if (!*alive) return Tensor();
    nb::gil_scoped_acquire gil;
    nb::object r = fn(wrap(g));
    if (r.is_none()) return Tensor();
    if (!isTensor(r.ptr())) throw TypeError("hook returned a value that is not a Tensor");
    Tensor out = unwrapTensor(r.ptr());
    KILN_CHECK(DimVector(out.sizes()) == DimVector(g.sizes()), "hook 'hook' has changed the size of value");
    return out;
  };
}

// saved_tensors_hooks(pack, unpack) of Python: what pack(t) returns is kept for the backward.
class PythonSavedTensorHooks final : public SavedTensorHooks {
public:
  PythonSavedTensorHooks(nb::object pack, nb::object unpack) : pack_(std::move(pack)), unpack_(std::move(unpack)) {}
  ~PythonSavedTensorHooks() override {
    nb::gil_scoped_acquire gil;
    pack_.reset();
    unpack_.reset();
  }

  std::shared_ptr<void> pack(const Tensor& t) override {
    nb::gil_scoped_acquire gil;
    auto* kept = new nb::object(pack_(wrap(t)));
    return std::shared_ptr<void>(kept, [](void* p) {
      nb::gil_scoped_acquire g;
      delete static_cast<nb::object*>(p);
    });
  }

  Tensor unpack(const std::shared_ptr<void>& packed) override {
    nb::gil_scoped_acquire gil;
    nb::object r = unpack_(*static_cast<nb::object*>(packed.get()));
    if (!isTensor(r.ptr()))
      throw TypeError(std::string("Output of saved tensor unpack_hook expected to be a Tensor but got result of type ") +
                      Py_TYPE(r.ptr())->tp_name);
    return unwrapTensor(r.ptr());
  }

private:
  nb::object pack_, unpack_;
};

std::vector<Tensor> tensorsOf(const nb::handle& seq) {
  std::vector<Tensor> out;
  for (nb::handle h : seq) {
    if (h.is_none()) out.emplace_back();
    else out.push_back(unwrapTensor(h.ptr()));
  }
  return out;
}

// A custom kiln.autograd.Function's node: backward is the Python class's backward(ctx, *grads).
class PyFunctionNode final : public autograd::Node {
public:
  PyFunctionNode(nb::object ctx, nb::object backward, std::string name, std::vector<int> inputEdge,
                 bool materialize)
      : ctx_(std::move(ctx)), backward_(std::move(backward)), name_(std::move(name)),
        inputEdge_(std::move(inputEdge)), materialize_(materialize) {}
  ~PyFunctionNode() override {
    nb::gil_scoped_acquire gil;
    ctx_.reset();
    backward_.reset();
  }
  std::string name() const override { return name_; }
  void releaseVariables() override {
    for (auto& s : saved_) s.reset();
    released_ = true;
  }
  std::vector<Tensor> apply(std::vector<Tensor>&& grads) override {
    nb::gil_scoped_acquire gil;
    nb::list args;
    args.append(ctx_);
    for (size_t i = 0; i < grads.size(); ++i) {
      Tensor g = grads[i];
      if (!g.defined() && materialize_ && isDifferentiableType(inputMetadata()[i].dtype))
        g = ops::zeros(inputMetadata()[i].sizes, inputMetadata()[i].dtype, inputMetadata()[i].device);
      args.append(wrap(g));
    }
    nb::list saved;
    for (const SavedVariable& s : saved_) saved.append(wrap(s.unpack(this)));
    if (released_ && saved_.empty() == false) saved_.front().unpack(this); // raises the freed error
    nb::setattr(ctx_, "_saved_unpacked", nb::tuple(saved));
    nb::object result = backward_(*nb::tuple(args));
    nb::delattr(ctx_, "_saved_unpacked");
    std::vector<nb::object> values;
    if (nb::isinstance<nb::tuple>(result) || nb::isinstance<nb::list>(result)) {
      for (nb::handle h : result) values.push_back(nb::borrow(h));
    } else {
      values.push_back(result);
    }
    // Trailing Nones beyond the inputs are allowed, as in PyTorch.
    while (values.size() > inputEdge_.size() && values.back().is_none()) values.pop_back();
    KILN_CHECK(values.size() == inputEdge_.size(), "function ", name_,
               " returned an incorrect number of gradients (expected ", inputEdge_.size(), ", got ",
               values.size(), ")");
    std::vector<Tensor> out(nextEdges().size());
    for (size_t i = 0; i < values.size(); ++i) {
      if (inputEdge_[i] < 0 || values[i].is_none()) continue;
      if (!isTensor(values[i].ptr()))
        throw TypeError(strCat("function ", name_, " returned a gradient that is not a Tensor"));
      out[size_t(inputEdge_[i])] = unwrapTensor(values[i].ptr());
    }
    return out;
  }
  std::vector<SavedVariable> saved_;

private:
  nb::object ctx_, backward_;
  std::string name_;
  std::vector<int> inputEdge_; // per forward argument: its edge, or -1 (not a tensor)
  bool materialize_;
  bool released_ = false;
};

void setRequiresGrad(const Tensor& t, bool on) {
  KILN_CHECK(!on || isDifferentiableType(t.dtype()),
             "only Tensors of floating point and complex dtype can require gradients (got ", scalarTypeName(t.dtype()), ")");
  if (!isLeaf(t)) {
    KILN_CHECK(on, "you can only change requires_grad flags of leaf variables. If you want to use a computed "
                   "variable in a subgraph that doesn't require differentiation use var_no_grad = var.detach().");
    return;
  }
  KILN_CHECK(!on || !t.impl()->isInference || InferenceMode::isEnabled(),
             "Setting requires_grad=True on inference tensor outside InferenceMode is not allowed.");
  t.impl()->requiresGrad = on;
}

} // namespace

void registerAutograd(nb::module_& m, TensorClass& cls) {
  nb::class_<AutogradNodeHandle>(m, "_AutogradNode")
      .def("name", [](const AutogradNodeHandle& h) { return h.node->name(); })
      .def_prop_ro("next_functions",
                   [](const AutogradNodeHandle& h) {
                     nb::list out;
                     for (const Edge& e : h.node->nextEdges())
                       out.append(nb::make_tuple(nodeObject(e.fn), e.inputNr));
                     return nb::tuple(out);
                   })
      .def_prop_ro("variable",
                   [](const AutogradNodeHandle& h) -> nb::object {
                     auto* acc = dynamic_cast<AccumulateGrad*>(h.node.get());
                     if (!acc) throw nb::attribute_error("'Node' object has no attribute 'variable'");
                     return wrap(Tensor(acc->variable()));
                   })
      .def("register_hook",
           [](const AutogradNodeHandle& h, nb::object fn) {
             auto alive = std::make_shared<bool>(true);
             h.node->addPostHook([fn, alive](std::vector<Tensor>& gradInputs, const std::vector<Tensor>& gradOutputs) {
               if (!*alive) return;
               nb::gil_scoped_acquire gil;
               nb::list gi, go;
               for (const Tensor& t : gradInputs) gi.append(wrap(t));
               for (const Tensor& t : gradOutputs) go.append(wrap(t));
               nb::object r = fn(nb::tuple(gi), nb::tuple(go));
               if (!r.is_none()) gradInputs = tensorsOf(r);
             });
             return GradHookHandle{alive};
           })
      .def("register_prehook",
           [](const AutogradNodeHandle& h, nb::object fn) {
             auto alive = std::make_shared<bool>(true);
             h.node->addNodePreHook([fn, alive](std::vector<Tensor>& gradOutputs) {
               if (!*alive) return;
               nb::gil_scoped_acquire gil;
               nb::list go;
               for (const Tensor& t : gradOutputs) go.append(wrap(t));
               nb::object r = fn(nb::tuple(go));
               if (!r.is_none()) gradOutputs = tensorsOf(r);
             });
             return GradHookHandle{alive};
           })
      .def("__eq__", [](const AutogradNodeHandle& a, nb::handle b) {
        return nb::isinstance<AutogradNodeHandle>(b) && nb::cast<const AutogradNodeHandle&>(b).node == a.node;
      })
      .def("__hash__", [](const AutogradNodeHandle& h) { return reinterpret_cast<uintptr_t>(h.node.get()) >> 4; })
      .def("__repr__", [](const AutogradNodeHandle& h) {
        return strCat("<", h.node->name(), " object at 0x", std::hex, reinterpret_cast<uintptr_t>(h.node.get()), ">");
      });
  nb::class_<GradHookHandle>(m, "_HookHandle").def("remove", &GradHookHandle::remove);

  cls.def_prop_rw(
         "grad",
         [](const Tensor& t) -> nb::object {
           // kiln library code run for real by kiln.compile's tracer sees fakes for the frame's
           // tensors: their .grad would be None where the real tensor has one (clipping nothing,
           // silently). The tracer turns this error into a graph break.
           if (const compiler::OpRecorder* r = compiler::OpRecorder::current(); r && r->nodeOf(t))
             throw NotImplementedError("Tensor.grad of a tensor traced by kiln.compile, read by library code "
                                       "running on its fake");
           AutogradMeta* meta = metaIfAny(t);
           return meta && meta->grad.defined() ? wrap(meta->grad) : nb::none();
         },
         [](const Tensor& t, nb::handle g) {
           if (g.is_none()) {
             if (AutogradMeta* meta = metaIfAny(t)) meta->grad = Tensor();
             return;
           }
           if (!isTensor(g.ptr())) throw TypeError("assigned grad expected to be a Tensor or None");
           const Tensor& v = unwrapTensor(g.ptr());
           KILN_CHECK(v.dtype() == t.dtype(), "assigned grad has data of a different type");
           KILN_CHECK(DimVector(v.sizes()) == DimVector(t.sizes()), "assigned grad has data of a different size");
           metaOf(t).grad = v;
         },
         nb::for_setter(nb::arg("value").none()))
      .def_prop_ro("grad_fn", [](const Tensor& t) { return nodeObject(gradFnOf(t)); })
      .def_prop_ro("is_leaf", [](const Tensor& t) { return isLeaf(t); })
      .def_prop_ro("output_nr", [](const Tensor& t) {
        AutogradMeta* meta = metaIfAny(t);
        return meta ? meta->outputNr : 0u;
      })
      .def_prop_ro("retains_grad", [](const Tensor& t) {
        AutogradMeta* meta = metaIfAny(t);
        return meta && meta->retainsGrad;
      })
      .def_prop_ro("_base", [](const Tensor& t) -> nb::object {
        AutogradMeta* meta = metaIfAny(t);
        return meta && meta->isView() ? wrap(meta->viewBase) : nb::none();
      })
      .def("_is_view", [](const Tensor& t) {
        AutogradMeta* meta = metaIfAny(t);
        return meta && meta->isView();
      })
      .def("is_inference", [](const Tensor& t) { return t.impl()->isInference; })
      .def_prop_rw(
          "requires_grad", [](const Tensor& t) { return t.requiresGrad(); },
          [](const Tensor& t, bool on) { setRequiresGrad(t, on); })
      .def(
          "_set_data",
          [](nb::handle self, const Tensor& value) {
            // Tensor.data = value (torch's set_data): this object now views value's data, of any
            // shape, dtype or device, and keeps its own requires_grad and grad (lazy modules materialize
            // their parameters so; optimizers and modules holding the object see the new data).
            Tensor& t = unwrapTensor(self.ptr());
            KILN_CHECK(isLeaf(t) || !t.requiresGrad(),
                       "data set on a non-leaf tensor that requires grad: detach it first");
            const bool requiresGrad = t.requiresGrad();
            AutogradMeta* meta = metaIfAny(t);
            Tensor grad = meta ? meta->grad : Tensor();
            t = value.asStrided(value.sizes(), value.strides(), value.storageOffset());
            if (requiresGrad) setRequiresGrad(t, true);
            if (grad.defined()) metaOf(t).grad = grad;
          },
          nb::arg("value"))
      .def(
          "requires_grad_",
          [](nb::handle self, bool on) {
            setRequiresGrad(unwrapTensor(self.ptr()), on);
            return nb::borrow(self);
          },
          nb::arg("requires_grad") = true)
      .def("retain_grad",
           [](const Tensor& t) {
             KILN_CHECK(t.requiresGrad(), "can't retain_grad on Tensor that has requires_grad=False");
             if (isLeaf(t)) return;
             AutogradMeta& meta = metaOf(t);
             if (meta.retainsGrad) return;
             meta.retainsGrad = true;
             TensorImpl* impl = t.impl(); // cleared from the node when the tensor dies
             gradFnOf(t)->addRetainGradHook(meta.outputNr, [impl](const Tensor& g) {
               AutogradMeta& m = *impl->autogradMeta;
               if (!m.grad.defined()) m.grad = ops::clone(ops::detach(g));
               else m.grad = ops::add(m.grad, g);
               return Tensor();
             });
           })
      .def("register_hook",
           [](const Tensor& t, nb::object fn) {
             KILN_CHECK(t.requiresGrad(), "cannot register a hook on a tensor that doesn't require gradient");
             auto alive = std::make_shared<bool>(true);
             if (isLeaf(t)) metaOf(t).leafHooks.push_back(pythonGradHook(fn, alive));
             else gradFnOf(t)->addTensorPreHook(metaOf(t).outputNr, pythonGradHook(fn, alive));
             return GradHookHandle{alive};
           })
      .def("detach_", [](nb::handle self) {
        const Tensor& t = unwrapTensor(self.ptr());
        AutogradMeta* meta = metaIfAny(t);
        KILN_CHECK(!(meta && meta->isView()),
                   "Can't detach views in-place. Use detach() instead. If you are using DistributedDataParallel "
                   "(DDP) for training, and gradient_as_bucket_view is set as True, gradients are views of DDP "
                   "buckets, and hence detach_() cannot be called on these gradients. To fix this error, please "
                   "refer to the Optimizer.zero_grad() function in torch/optim/optimizer.py as the solution.");
        if (meta) {
          meta->gradFn = IntrusivePtr<autograd::Node>();
          meta->outputNr = 0;
        }
        t.impl()->requiresGrad = false;
        return nb::borrow(self);
      });

  m.def(
      "_push_saved_tensors_hooks",
      [](nb::object pack, nb::object unpack) {
        if (pack.is_none() && unpack.is_none()) {
          pushSavedTensorHooks(nullptr); // none until the matching pop (kiln.compile's tracing)
          return;
        }
        pushSavedTensorHooks(std::make_shared<PythonSavedTensorHooks>(std::move(pack), std::move(unpack)));
      },
      nb::arg("pack").none(), nb::arg("unpack").none(),
      "Makes pack/unpack the innermost saved-tensor hooks of this thread (saved_tensors_hooks); "
      "None, None: no hooks until the matching pop.");
  m.def("_pop_saved_tensors_hooks", &popSavedTensorHooks, "Ends the innermost saved-tensor hooks.");

  m.def("_run_backward",
        [](nb::handle roots, nb::handle grads, bool keepGraph, bool createGraph, nb::handle inputs,
           bool allowUnused, bool accumulateGrad) {
          BackwardOptions o;
          o.keepGraph = keepGraph;
          o.createGraph = createGraph;
          o.allowUnused = allowUnused;
          o.accumulateGrad = accumulateGrad;
          std::vector<Tensor> in = tensorsOf(inputs);
          std::vector<Tensor> got = runBackward(tensorsOf(roots), tensorsOf(grads), in, o);
          nb::list out;
          for (size_t i = 0; i < got.size(); ++i) {
            // backward(inputs=[non-leaf]): its gradient accumulates into its .grad as well.
            if (accumulateGrad && got[i].defined() && !isLeaf(in[i])) {
              AutogradMeta& meta = metaOf(in[i]);
              meta.grad = meta.grad.defined() ? ops::add(meta.grad, got[i]) : got[i];
            }
            out.append(wrap(got[i]));
          }
          return out;
        });

  // Records a custom Function call: outputs get a node that calls backward(ctx, *grads).
  m.def("_record_function",
        [](nb::object ctx, nb::object backward, std::string name, nb::handle args, nb::handle outputs,
           nb::handle toSave, nb::handle dirty, nb::handle nonDifferentiable, bool materialize) {
          // Under kiln.compile's capture the inputs are fakes and the graph cannot hold a Python
          // backward: recorded here it would be lost (the compiled output would not reach the
          // Function's backward, silently wrong gradients). Function.apply records one node
          // instead (CustomFunctionBinding.h); AOT's traces run the backward on their fakes.
          const compiler::OpRecorder* recorder = compiler::OpRecorder::current();
          if (recorder && !recorder->tracesCustomFunctions)
            throw NotImplementedError("a custom kiln.autograd.Function (" + name +
                                      ") called with inputs that require grad: its backward is "
                                      "Python code that a graph cannot hold");
          std::vector<int> inputEdge;
          std::vector<Edge> edges;
          for (nb::handle a : args) {
            if (isTensor(a.ptr())) {
              inputEdge.push_back(int(edges.size()));
              edges.push_back(gradientEdge(unwrapTensor(a.ptr())));
            } else {
              inputEdge.push_back(-1);
            }
          }
          auto node = makeIntrusive<PyFunctionNode>(ctx, backward, name, inputEdge, materialize);
          node->setNextEdges(std::move(edges));
          auto contains = [](nb::handle seq, nb::handle o) {
            for (nb::handle x : seq)
              if (x.ptr() == o.ptr()) return true;
            return false;
          };
          nb::list result;
          for (nb::handle o : outputs) {
            if (!isTensor(o.ptr())) {
              result.append(o);
              continue;
            }
            Tensor t = unwrapTensor(o.ptr());
            bool isInput = contains(args, o);
            if (contains(nonDifferentiable, o)) {
              node->addInputMetadata(t);
              result.append(o);
              continue;
            }
            if (contains(dirty, o)) {
              KILN_CHECK(!(t.requiresGrad() && isLeaf(t)),
                         "a leaf Variable that requires grad is being used in an in-place operation.");
              setHistory(t, node);
              result.append(o);
            } else if (isInput) {
              Tensor alias = t.asStrided(t.sizes(), t.strides(), t.storageOffset());
              setHistory(alias, node);
              result.append(wrap(alias));
            } else {
              if (isDifferentiableType(t.dtype())) setHistory(t, node);
              else node->addInputMetadata(t);
              result.append(o);
            }
          }
          for (nb::handle s : toSave) {
            if (s.is_none()) {
              node->saved_.emplace_back();
              continue;
            }
            const Tensor& t = unwrapTensor(s.ptr());
            node->saved_.emplace_back(t, contains(outputs, s) && !contains(args, s));
          }
          return result;
        });
}

} // namespace kiln::python
