// kiln._C._capture.trace_frame: runs the symbolic interpreter over a frame and returns the
// graph, its guards, how to feed its inputs from the frame's arguments and how to rebuild the
// frame's return value from its outputs (see docs/capture.md).
#include <Python.h>

#include <nanobind/stl/string.h>

#include "frontend/binding/FxBinding.h"
#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/GuardTreeBinding.h"
#include "frontend/capture/SymbolicInterpreter.h"
#include "frontend/capture/TraceFrame.h"
#include "runtime/Error.h"

namespace kiln::capture {

namespace {

std::string literal(nb::handle o) { return nb::cast<std::string>(nb::repr(o)); }

} // namespace

std::string Tracer::outputExpr(VT* v, std::vector<Node*>& outputs, nb::list& constants) {
  auto constantRef = [&](nb::handle o) {
    constants.append(o);
    return "__c[" + std::to_string(nb::len(constants) - 1) + "]";
  };
  switch (v->kind) {
  case VT::Kind::Tensor: {
    Node* n = recorder_.nodeOf(python::unwrapTensor(static_cast<TensorVT*>(v)->fake.ptr()));
    if (!n) throw Unsupported{"internal: a returned tensor is not part of the graph"};
    size_t i = std::find(outputs.begin(), outputs.end(), n) - outputs.begin();
    if (i == outputs.size()) outputs.push_back(n);
    return "__o[" + std::to_string(i) + "]";
  }
  case VT::Kind::Constant: {
    PyObject* o = static_cast<ConstantVT*>(v)->value.ptr();
    if (o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyUnicode_CheckExact(o))
      return literal(o);
    return constantRef(o);
  }
  case VT::Kind::List:
  case VT::Kind::Tuple: {
    auto* s = static_cast<SequenceVT*>(v);
    if (s->original.is_valid() && !s->mutated && !containsTensor(s))
      return s->source && s->source->isArgument() ? s->source->expr() : constantRef(s->original);
    std::string body;
    for (VT* x : s->items)
      body += outputExpr(x, outputs, constants) + ", ";
    if (v->kind == VT::Kind::List) return "[" + body + "]";
    std::string tuple = "(" + body + ")";
    if (!s->namedType.is_valid()) return tuple;
    if (PyObject_HasAttrString(s->namedType.ptr(), "_make"))
      return constantRef(s->namedType) + "._make(" + tuple + ")";
    return constantRef(s->namedType) + "(" + tuple + ")";
  }
  case VT::Kind::Dict: {
    auto* d = static_cast<DictVT*>(v);
    if (d->original.is_valid() && !d->mutated && !containsTensor(d))
      return d->source && d->source->isArgument() ? d->source->expr() : constantRef(d->original);
    std::string body;
    for (auto& [k, x] : d->entries) {
      std::string key = PyUnicode_CheckExact(k.ptr()) || PyLong_CheckExact(k.ptr()) ? literal(k) : constantRef(k);
      body += key + ": " + outputExpr(x, outputs, constants) + ", ";
    }
    return "{" + body + "}";
  }
  case VT::Kind::Set: return "set(" + constantRef(toPython(v)) + ")";
  case VT::Kind::Function:
  case VT::Kind::Module:
  case VT::Kind::Object: return constantRef(toPython(v));
  default:
    throw Unsupported{std::string("returning a value of this kind (") +
                      (v->kind == VT::Kind::NestedFunction ? "a function defined inside the compiled one"
                       : v->kind == VT::Kind::NewObject ? "an object created inside the compiled one"
                                                        : "an iterator or internal value") + ")"};
  }
}

nb::dict Tracer::run() {
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  int nargs = co->co_argcount + co->co_kwonlyargcount + ((co->co_flags & CO_VARARGS) ? 1 : 0) +
              ((co->co_flags & CO_VARKEYWORDS) ? 1 : 0);
  VTs locals(size_t(co->co_nlocalsplus), nullptr);
  auto localName = [&](int i) {
    return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_localsplusnames, i)));
  };
  if (nb::len(args_) != size_t(nargs))
    throw Unsupported{"internal: the frame's argument count does not match its code"};
  for (int i = 0; i < nargs; ++i)
    locals[size_t(i)] = wrap(args_[size_t(i)], localSource(i, localName(i)));
  VTs closure;
  PyObject* cells = PyFunction_Check(func_.ptr())
                        ? reinterpret_cast<PyFunctionObject*>(func_.ptr())->func_closure
                        : nullptr;
  if (cells) {
    int firstFree = co->co_nlocalsplus - co->co_nfreevars;
    for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(cells); ++j) {
      auto* cell = make<RealCellVT>(nb::borrow(PyTuple_GET_ITEM(cells, j)));
      cell->source = closureSource(int(j), localName(firstFree + int(j)));
      closure.push_back(cell);
    }
  }
  guards_->checkGradMode(gradMode_);
  InstructionTranslator top(*this, code_, globals_, [](const std::string& name) { return globalSource(name); }, 0);
  VT* result = top.run(std::move(locals), closure);

  std::vector<Node*> outputs;
  nb::list constants;
  std::string output = outputExpr(result, outputs, constants);
  std::vector<Argument> outs;
  for (Node* n : outputs)
    outs.emplace_back(n);
  graph_.output(Argument::tuple(std::move(outs)));

  nb::dict d;
  d["ok"] = true;
  nb::list inputs;
  for (const std::string& e : inputExprs_)
    inputs.append(nb::str(e.c_str()));
  d["inputs"] = inputs;
  d["output"] = nb::str(output.c_str());
  d["constants"] = constants;
  d["attrs"] = attrs_;
  d["op_count"] = recorder_.numRecorded();
  d["graph"] = python::wrapGraph(std::move(graph_));
  d["guards"] = wrapGuardTree(guards_);
  return d;
}

nb::dict Tracer::failure(const char* kind, const std::string& reason) {
  nb::dict d;
  d["ok"] = false;
  d["kind"] = kind;
  d["reason"] = reason;
  SourceLoc loc = location();
  d["filename"] = loc.file;
  d["lineno"] = loc.line;
  std::string line;
  if (!loc.file.empty()) {
    nb::object text = nb::module_::import_("linecache").attr("getline")(loc.file, loc.line);
    line = nb::cast<std::string>(text.attr("strip")());
  }
  d["line"] = line;
  return d;
}

nb::dict traceFrame(nb::handle frameInfo, nb::handle options) {
  Tracer tracer(frameInfo.attr("func"), frameInfo.attr("code"), frameInfo.attr("args"),
                frameInfo.attr("globals"), frameInfo.attr("builtins"));
  try {
    return tracer.run();
  } catch (const Unsupported& u) {
    return tracer.failure("unsupported", u.reason);
  } catch (const TraceError& e) {
    return tracer.failure("error", e.reason);
  } catch (nb::python_error& e) {
    std::string what = std::string(Py_TYPE(e.value().ptr())->tp_name) + ": " +
                       nb::cast<std::string>(nb::str(e.value()));
    return tracer.failure("error", what);
  } catch (const std::exception& e) {
    return tracer.failure("unsupported", e.what());
  }
}

void registerTraceFrame(nb::module_& m) {
  nb::module_ capture = m.def_submodule("_capture", "frame capture (used by kiln.compile)");
  capture.def("trace_frame", &traceFrame, nb::arg("frame_info"), nb::arg("options") = nb::none(),
              "Traces a frame (its function, code, bound arguments, globals, builtins) into a "
              "graph; see docs/capture.md for the result.");
}

} // namespace kiln::capture
