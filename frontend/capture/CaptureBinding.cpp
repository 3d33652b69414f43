// kiln._C._capture: the Python surface of the frame hook (see docs in EvalFrame.h and the
// capture design: the callback protocol, CompiledFunction, GuardTree).
#include "frontend/capture/CaptureBinding.h"

#include <nanobind/stl/string.h>

#include "frontend/capture/Bytecode.h"
#include "frontend/capture/CompiledFunction.h"
#include "frontend/capture/EvalFrame.h"
#include "frontend/capture/GuardTreeBinding.h"
#include "frontend/capture/Iterators.h"
#include "frontend/capture/PythonVersion.h"
#include "runtime/Error.h"

namespace kiln::capture {

namespace {

// The type of SKIP: one instance, compared by identity in the hook.
struct SkipMarker {};

// A FrameInfo for calling func(*args) (what the hook would pass on a miss), for driving a tracer
// without the hook.
void initFrameInfo(FrameInfo* self, nb::handle func, nb::tuple args) {
  KILN_CHECK_TYPE(PyFunction_Check(func.ptr()), "FrameInfo: func must be a Python function");
  auto* f = reinterpret_cast<PyFunctionObject*>(func.ptr());
  auto* code = reinterpret_cast<PyCodeObject*>(f->func_code);
  KILN_CHECK_VALUE(nb::len(args) == size_t(numArgSlots(code)),
                   "FrameInfo: args must hold one value per argument slot of func's code");
  new (self) FrameInfo();
  self->code = nb::borrow(f->func_code);
  self->func = nb::borrow(func);
  self->args = args;
  self->globals = nb::borrow(f->func_globals);
  self->builtins = nb::borrow(f->func_builtins);
  self->isRoot = true;
}

} // namespace

void registerCapture(nb::module_& m) {
  nb::module_ c = m.def_submodule("_capture", "the PEP 523 frame hook and its guard trees");
  initEvalFrame();
  registerGuardTree(c);
  registerCompiledFunction(c.ptr());

  nb::class_<FrameInfo>(c, "FrameInfo",
                        "a frame that missed the cache, as the capture callback sees it")
      .def("__init__", &initFrameInfo, nb::arg("func"), nb::arg("args"))
      .def_ro("code", &FrameInfo::code)
      .def_ro("func", &FrameInfo::func)
      .def_ro("args", &FrameInfo::args)
      .def_ro("globals", &FrameInfo::globals)
      .def_ro("builtins", &FrameInfo::builtins)
      .def_ro("is_root", &FrameInfo::isRoot)
      .def_ro("num_entries", &FrameInfo::numEntries)
      .def_ro("failures", &FrameInfo::failures)
      .def("__repr__", [](const FrameInfo& i) {
        return "<FrameInfo " + nb::cast<std::string>(nb::repr(i.code)) +
               " entries=" + std::to_string(i.numEntries) + (i.isRoot ? " root>" : ">");
      });

  nb::class_<SkipMarker>(c, "_SkipMarker").def("__repr__", [](const SkipMarker&) {
    return "SKIP";
  });
  nb::object skip = nb::cast(SkipMarker{});
  c.attr("SKIP") = skip;
  setSkipMarker(skip.release().ptr()); // held for the life of the process

  c.def(
      "set_callback",
      [](nb::handle callback) {
        KILN_CHECK_TYPE(callback.is_none() || PyCallable_Check(callback.ptr()),
                        "set_callback: expected a callable or None");
        PyObject* previous = exchangeCallback(callback.is_none() ? nullptr : callback.ptr());
        return previous ? nb::steal(previous) : nb::none();
      },
      nb::arg("callback").none(),
      "sets this thread's capture callback (None: off); returns the previous one");
  c.def("reset", &resetCaches, "drops every code object's cache entries and SKIP mark");
  c.def(
      "cache_entries", [](nb::handle code) { return cacheEntries(code.ptr()); }, nb::arg("code"),
      "[(guards, glue), ...] of a code object, most recently used first");
  c.def(
      "skip_code", [](nb::handle code) { markSkipped(code.ptr()); }, nb::arg("code"),
      "marks a code object SKIP (the hook runs it at once) until reset()");
  c.def("hook_installed", &hookInstalled, "whether the eval-frame function is installed now");
  // False on a CPython newer than kiln knows: the hook is never installed there (PythonVersion.h).
  c.attr("supported") = nb::bool_(pyversion::kCaptureSupported);
  // The glue's accessor for an iterator argument (a comprehension's `.0`): the item a graph
  // input comes from.
  c.def(
      "iter_item",
      [](nb::handle it, Py_ssize_t i) {
        KILN_CHECK_TYPE(iterators::isSeqIter(it.ptr()), "iter_item: expected a list or tuple iterator, got ",
                        Py_TYPE(it.ptr())->tp_name);
        PyObject* v = iterators::seqIterItem(it.ptr(), i);
        KILN_CHECK_INDEX(v, "iter_item: the iterator has fewer than ", i + 1, " items left");
        return nb::borrow(v);
      },
      nb::arg("iterator"), nb::arg("index"), "the index-th item a list/tuple iterator has left");
  c.def("opcode_support", &opcodeSupport,
        "{opname: None (the tracer runs it) or why it is a graph break}, for every opname kiln knows");
}

} // namespace kiln::capture
