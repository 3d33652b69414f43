// The Python GuardTree type and its builder nodes (for the compile policy, tests and logs).
#include "frontend/capture/GuardTreeBinding.h"

#include <nanobind/stl/string.h>

#include <vector>

#include "frontend/binding/PythonConvert.h"
#include "runtime/Error.h"

namespace kiln::capture {

namespace {

struct PyGuardTree {
  std::shared_ptr<GuardTree> tree;
};

// A node of a tree; holding the tree keeps the node alive.
struct PyGuardNode {
  std::shared_ptr<GuardTree> tree;
  GuardNode* node;
};

PyGuardNode nodeOf(const PyGuardTree& g, GuardNode& n) { return {g.tree, &n}; }
PyGuardNode nodeOf(const PyGuardNode& p, GuardNode& n) { return {p.tree, &n}; }

// The guards checked as the hook would, against `func` called with `args` (before it ran).
nb::object checkFrame(const PyGuardTree& g, nb::handle func, nb::handle args) {
  KILN_CHECK_TYPE(PyFunction_Check(func.ptr()), "check_frame: func must be a Python function");
  KILN_CHECK_TYPE(PyTuple_Check(args.ptr()), "check_frame: args must be a tuple");
  auto* f = reinterpret_cast<PyFunctionObject*>(func.ptr());
  auto* code = reinterpret_cast<PyCodeObject*>(f->func_code);
  Py_ssize_t n = PyTuple_GET_SIZE(args.ptr());
  KILN_CHECK_VALUE(n <= code->co_nlocalsplus, "check_frame: ", n, " arguments for a code with ",
                   code->co_nlocalsplus, " local slots");
  // The frame's slots past the arguments are unbound until its first instructions run.
  std::vector<PyObject*> locals(
      size_t(std::max<Py_ssize_t>(code->co_nlocalsplus, g.tree->numLocals())), nullptr);
  for (Py_ssize_t i = 0; i < n; ++i)
    locals[size_t(i)] = PyTuple_GET_ITEM(args.ptr(), i);
  FrameView view{locals.data(), f->func_globals, f->func_builtins, f->func_closure};
  std::string failure;
  if (g.tree->check(view, &failure)) return nb::none();
  return nb::str(failure.c_str(), failure.size());
}

TensorCheck tensorCheckOf(nb::handle t) {
  KILN_CHECK_TYPE(python::isTensor(t.ptr()), "check_tensor: expected a tensor, got ",
                  Py_TYPE(t.ptr())->tp_name);
  const Tensor& x = python::unwrapTensor(t.ptr());
  TensorCheck c;
  c.type = Py_TYPE(t.ptr());
  c.dtype = x.dtype();
  c.device = x.device();
  c.sizes = DimVector(x.sizes());
  c.strides = DimVector(x.strides());
  c.requiresGrad = x.requiresGrad();
  return c;
}

} // namespace

GuardTree* guardTreeFromObject(PyObject* o) {
  if (!nb::isinstance<PyGuardTree>(o)) return nullptr;
  return nb::inst_ptr<PyGuardTree>(o)->tree.get();
}

nb::object wrapGuardTree(std::shared_ptr<GuardTree> tree) {
  return nb::cast(PyGuardTree{std::move(tree)});
}

void registerGuardTree(nb::module_& m) {
  nb::class_<PyGuardTree>(m, "GuardTree",
                          "Guards of a cache entry: value accessors from the frame, checks on them")
      .def("__init__",
           [](PyGuardTree* self) { new (self) PyGuardTree{std::make_shared<GuardTree>()}; })
      .def("__str__", [](const PyGuardTree& g) { return g.tree->str(); })
      .def("__repr__",
           [](const PyGuardTree& g) {
             return "<GuardTree with " + std::to_string(g.tree->numChecks()) + " checks>";
           })
      .def_prop_ro("num_checks", [](const PyGuardTree& g) { return g.tree->numChecks(); })
      .def("check_frame", &checkFrame, nb::arg("func"), nb::arg("args"),
           "None when the guards pass for func called with args, else the failing check")
      .def(
          "local",
          [](const PyGuardTree& g, int i, const std::string& name) {
            return nodeOf(g, g.tree->local(i, name));
          },
          nb::arg("index"), nb::arg("name"))
      .def(
          "closure_cell",
          [](const PyGuardTree& g, int i, const std::string& name) {
            return nodeOf(g, g.tree->closureCell(i, name));
          },
          nb::arg("index"), nb::arg("name"))
      .def(
          "closure_cell_object",
          [](const PyGuardTree& g, int i, const std::string& name) {
            return nodeOf(g, g.tree->closureCellObject(i, name));
          },
          nb::arg("index"), nb::arg("name"))
      .def(
          "global_",
          [](const PyGuardTree& g, const std::string& name) {
            return nodeOf(g, g.tree->global(name));
          },
          nb::arg("name"))
      .def(
          "check_grad_mode", [](const PyGuardTree& g, bool on) { g.tree->checkGradMode(on); },
          nb::arg("enabled"));

  // Checks return the node itself, so they chain: g.local(0,
  // "L['t']").check_type(tuple).check_length(2).
  nb::class_<PyGuardNode>(m, "GuardNode",
                          "A value of a GuardTree (an accessor path) and its checks")
      .def_prop_ro("name", [](const PyGuardNode& n) { return n.node->name(); })
      .def("item",
           [](const PyGuardNode& n, nb::handle key) { return nodeOf(n, n.node->item(key.ptr())); })
      .def("attr", [](const PyGuardNode& n,
                      const std::string& name) { return nodeOf(n, n.node->attr(name)); })
      .def("func_global",
           [](const PyGuardNode& n, const std::string& name) {
             return nodeOf(n, n.node->funcGlobal(name));
           })
      .def("func_closure_cell",
           [](const PyGuardNode& n, int i) { return nodeOf(n, n.node->funcClosureCell(i)); })
      .def("func_default",
           [](const PyGuardNode& n, int i) { return nodeOf(n, n.node->funcDefault(i)); })
      .def("iter_item",
           [](const PyGuardNode& n, int i) { return nodeOf(n, n.node->iterItem(i)); })
      .def("check_type",
           [](nb::handle self, nb::handle type) {
             KILN_CHECK_TYPE(PyType_Check(type.ptr()), "check_type: expected a type, got ",
                             Py_TYPE(type.ptr())->tp_name);
             nb::inst_ptr<PyGuardNode>(self)->node->checkType(
                 reinterpret_cast<PyTypeObject*>(type.ptr()));
             return self;
           })
      .def(
          "check_id",
          [](nb::handle self, nb::handle o) {
            nb::inst_ptr<PyGuardNode>(self)->node->checkId(o.ptr());
            return self;
          },
          nb::arg("object").none())
      .def(
          "check_const",
          [](nb::handle self, nb::handle v) {
            nb::inst_ptr<PyGuardNode>(self)->node->checkConst(v.ptr());
            return self;
          },
          nb::arg("value").none())
      .def("check_length",
           [](nb::handle self, Py_ssize_t n) {
             nb::inst_ptr<PyGuardNode>(self)->node->checkLength(n);
             return self;
           })
      .def("check_iter_remaining",
           [](nb::handle self, Py_ssize_t n) {
             nb::inst_ptr<PyGuardNode>(self)->node->checkIterRemaining(n);
             return self;
           })
      .def("check_range_iter",
           [](nb::handle self, long next, long step, long remaining) {
             nb::inst_ptr<PyGuardNode>(self)->node->checkRangeIter(next, step, remaining);
             return self;
           }, nb::arg("next"), nb::arg("step"), nb::arg("remaining"))
      .def("check_dict_keys",
           [](nb::handle self, nb::handle keys) {
             nb::object seq = nb::steal(
                 PySequence_Fast(keys.ptr(), "check_dict_keys: expected a sequence of keys"));
             if (!seq) throw nb::python_error();
             std::vector<PyObject*> ks;
             for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(seq.ptr()); ++i)
               ks.push_back(PySequence_Fast_GET_ITEM(seq.ptr(), i));
             nb::inst_ptr<PyGuardNode>(self)->node->checkDictKeys(ks);
             return self;
           })
      .def(
          "check_tensor",
          [](nb::handle self, nb::handle t) {
            nb::inst_ptr<PyGuardNode>(self)->node->checkTensor(tensorCheckOf(t));
            return self;
          },
          "checks type, dtype, device, sizes, strides and requires_grad against an example tensor");
}

} // namespace kiln::capture
