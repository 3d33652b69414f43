// Calls, attributes, items and iteration in the symbolic interpreter: user functions and
// user modules are inlined; kiln's own functions, ops and modules run for real on fake tensors
// (their ops are recorded); builtins on known values are evaluated; the rest is Unsupported.
#include <Python.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/SymbolicInterpreter.h"
#include "runtime/Autocast.h"

namespace kiln::capture {

namespace {

nb::object builtin(const char* name) { return nb::module_::import_("builtins").attr(name); }

// A graph break at a call of one of kiln's functions marked kiln._compiling.not_traced (`fn`,
// when known, tells apart wrappers sharing one code object).
void throwIfNotTraced(nb::handle code, nb::handle fn = nb::handle()) {
  static nb::handle breakReason =
      nb::object(nb::module_::import_("kiln._compiling").attr("graph_break_reason")).release();
  nb::object why = breakReason(code, fn.is_valid() ? fn : nb::none());
  if (!why.is_none()) throw Unsupported{nb::cast<std::string>(why)};
}

// kiln's library code: run for real on fakes rather than traced instruction by instruction.
// kiln code that runs for real on the fakes while tracing. Not kiln.compiler, and not kiln.optim:
// an optimizer's step updates Python state (its state dict, step counts) and reaches the real
// parameters, so run for real inside a trace it would do half a step and then give up (AdamW's
// state left without exp_avg); it is interpreted like user code instead.
// Gradient clipping (kiln.nn.utils.clip_grad) reads and scales the parameters' .grad, which
// their fakes do not have: it is interpreted too, so that the grads become graph inputs.
// Activation checkpointing (kiln.utils.checkpoint) is interpreted: traced, it calls the user's
// function plainly (is_compiling()), whose parameters become graph inputs.
bool isKilnLibrary(nb::handle fn) {
  std::string mod = moduleOf(fn);
  // kiln.distributions is traced like user code, as TorchDynamo traces torch.distributions: its
  // objects are made inside compiled code and must be constructed symbolically. So is kiln.func
  // (grad, vmap, jacrev, ...: the function they are given is traced, as TorchDynamo's
  // higher-order ops trace it); its autograd steps (kiln.func._autograd_steps) and
  // functional_call run for real.
  // einops (rearrange/reduce/repeat/pack on kiln tensors through kiln's einops backend) is pure
  // shape bookkeeping around kiln ops: run for real, it records those ops (TorchDynamo likewise
  // puts einops' functions in the graph whole).
  if (mod == "einops" || startsWith(mod, "einops.")) return !startsWith(mod, "einops.layers");
  return (startsWith(mod, "kiln.") || mod == "kiln") && !startsWith(mod, "kiln.compiler") &&
         mod != "kiln.optim" && !startsWith(mod, "kiln.optim.") && mod != "kiln.nn.utils.clip_grad" &&
         mod != "kiln.utils.checkpoint" &&
         !startsWith(mod, "kiln.distributions") && mod != "kiln.func";
}

const char* kDataDependentMethods[] = {"item", "tolist", "numpy", "__bool__", "__int__",
                                       "__float__", "__index__", "data_ptr", "backward",
                                       "register_hook", "retain_grad", "__len__", "__iter__"};

bool inList(const std::string& s, const char* const* names, size_t n) {
  for (size_t i = 0; i < n; ++i)
    if (s == names[i]) return true;
  return false;
}

// Whether every module below `mod` is one of kiln's own with no module hooks: then running
// mod's forward for real on fakes only records its ops.
bool onlyPlainLibraryModulesBelow(nb::handle mod, int depth = 0) {
  PyObject** dictPtr = _PyObject_GetDictPtr(mod.ptr());
  PyObject* children = dictPtr && *dictPtr ? PyDict_GetItemString(*dictPtr, "_modules") : nullptr;
  if (!children || !PyDict_Check(children)) return true;
  if (depth > 64) return false;
  Py_ssize_t pos = 0;
  PyObject *key, *child;
  while (PyDict_Next(children, &pos, &key, &child)) {
    if (child == Py_None) continue;
    if (!isKilnLibrary(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(child))))) return false;
    PyObject** childDict = _PyObject_GetDictPtr(child);
    for (const char* table : {"_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"}) {
      PyObject* hooks = childDict && *childDict ? PyDict_GetItemString(*childDict, table) : nullptr;
      if (hooks && (!PyDict_Check(hooks) || PyDict_GET_SIZE(hooks) != 0)) return false;
    }
    if (!onlyPlainLibraryModulesBelow(child, depth + 1)) return false;
  }
  return true;
}

// Constants, and lists, tuples, dicts and sets made only of them: what a builtin method may be
// handed as Python values (copies) while tracing.
bool isPlainData(const VT* v) {
  switch (v->kind) {
  case VT::Kind::Constant:
  case VT::Kind::Set: return true;
  case VT::Kind::List:
  case VT::Kind::Tuple:
    for (VT* x : static_cast<const SequenceVT*>(v)->items)
      if (!isPlainData(x)) return false;
    return true;
  case VT::Kind::Dict:
    for (auto& e : static_cast<const DictVT*>(v)->entries)
      if (!isPlainData(e.second)) return false;
    return true;
  default: return false;
  }
}

bool allPlainData(const VTs& args, const Kwargs& kwargs) {
  for (VT* a : args)
    if (!isPlainData(a)) return false;
  for (auto& kv : kwargs)
    if (!isPlainData(kv.second)) return false;
  return true;
}

// The traced container kind whose unbound methods `obj` is one of (set.difference: Set), or
// Constant for anything else.
VT::Kind containerKindOf(nb::handle obj) {
  if (!Py_IS_TYPE(obj.ptr(), &PyMethodDescr_Type)) return VT::Kind::Constant;
  PyTypeObject* owner = reinterpret_cast<PyDescrObject*>(obj.ptr())->d_type;
  if (owner == &PySet_Type) return VT::Kind::Set;
  if (owner == &PyList_Type) return VT::Kind::List;
  if (owner == &PyDict_Type) return VT::Kind::Dict;
  return VT::Kind::Constant;
}

// A method descriptor of str, bytes, int, float, bool, complex, tuple or frozenset: it neither
// mutates its arguments nor reads state, so on constants it can run while tracing.
bool isImmutableBuiltinMethod(nb::handle obj) {
  if (!Py_IS_TYPE(obj.ptr(), &PyMethodDescr_Type)) return false;
  PyTypeObject* owner = reinterpret_cast<PyDescrObject*>(obj.ptr())->d_type;
  for (PyTypeObject* t : {&PyUnicode_Type, &PyBytes_Type, &PyLong_Type, &PyFloat_Type, &PyBool_Type,
                          &PyComplex_Type, &PyTuple_Type, &PyFrozenSet_Type})
    if (owner == t) return true;
  return false;
}

} // namespace

namespace {

bool isNnModuleClass(nb::handle cls) {
  static nb::handle module = nb::object(nb::module_::import_("kiln.nn").attr("Module")).release();
  return PyObject_IsSubclass(cls.ptr(), module.ptr()) == 1;
}

} // namespace

// kiln.set_printoptions(...) of constants: a call replayed after the graph, in program order with
// the other side effects, as TorchDynamo traces the stores into PRINT_OPTS. Tensors' f-strings
// are formatted by the glue after the replay, so the options take effect for those made after
// the call; one made before it would see them too: then it stays a break.
bool InstructionTranslator::replaysPrintOptions(VT* fn, const VTs& args, const Kwargs& kwargs) {
  static nb::handle setPrintOptions = nb::object(nb::module_::import_("kiln").attr("set_printoptions")).release();
  nb::handle f = fn->kind == VT::Kind::Function ? static_cast<FunctionVT*>(fn)->fn
                 : fn->kind == VT::Kind::Object ? static_cast<ObjectVT*>(fn)->object
                                                : nb::handle();
  if (!f.is_valid() || f.ptr() != setPrintOptions.ptr() || t_.madeFormat()) return false;
  nb::list pyArgs;
  nb::dict pyKwargs;
  for (VT* a : args) {
    if (a->kind != VT::Kind::Constant) return false;
    pyArgs.append(static_cast<ConstantVT*>(a)->value);
  }
  for (auto& [k, v] : kwargs) {
    if (v->kind != VT::Kind::Constant) return false;
    pyKwargs[k.c_str()] = static_cast<ConstantVT*>(v)->value;
  }
  static nb::handle partial = nb::object(nb::module_::import_("functools").attr("partial")).release();
  nb::object call = partial(f, *nb::tuple(pyArgs), **pyKwargs);
  t_.recordStore(Tracer::SideEffect::Kind::Call, call, "", nullptr);
  return true;
}

// A logging call (`log.info(...)`, `logging.warning(...)`): its handlers write somewhere, at a
// level read when it runs. As TorchDynamo ("logging.Logger methods are not supported"), a break
// at the call: traced, a disabled logger's check was specialized and an enabled one ran its
// handlers once, at the trace.
static void checkNotLogging(VT* fn) {
  if (fn->kind == VT::Kind::Method) {
    // `log.info` of a Logger: its class's function.
    auto* m = static_cast<MethodVT*>(fn);
    if (m->self->kind != VT::Kind::Object || m->function.is_valid()) return;
    static nb::handle loggerType = nb::object(nb::module_::import_("logging").attr("Logger")).release();
    nb::handle self = static_cast<ObjectVT*>(m->self)->object;
    if (PyObject_IsInstance(self.ptr(), loggerType.ptr()) != 1) {
      PyErr_Clear();
      return;
    }
    for (const char* name : {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"})
      if (m->name == name)
        throw Unsupported{"a logging call (Logger." + m->name + ": a side effect the graph cannot replay)"};
    return;
  }
  if (fn->kind != VT::Kind::Function) return;
  static std::vector<PyObject*> loggingFunctions = [] {
    std::vector<PyObject*> out;
    nb::module_ logging = nb::module_::import_("logging");
    nb::object logger = logging.attr("Logger");
    for (const char* name : {"debug", "info", "warning", "warn", "error", "exception", "critical", "fatal", "log"}) {
      for (nb::handle owner : {nb::handle(logging), nb::handle(logger)})
        if (nb::hasattr(owner, name)) out.push_back(nb::object(owner.attr(name)).release().ptr());
    }
    return out;
  }();
  PyObject* f = static_cast<FunctionVT*>(fn)->fn.ptr();
  if (std::find(loggingFunctions.begin(), loggingFunctions.end(), f) != loggingFunctions.end())
    throw Unsupported{"a logging call (" + nb::cast<std::string>(nb::handle(f).attr("__qualname__")) +
                      ": a side effect the graph cannot replay)"};
}

VT* InstructionTranslator::call(VT* fn, VTs args, Kwargs kwargs) {
  if (VT* r = callWithNumpy(fn, args, kwargs)) return r;
  if (replaysPrintOptions(fn, args, kwargs)) return t_.none();
  checkNotLogging(fn);
  switch (fn->kind) {
  case VT::Kind::Function:
    return inlineFunction(static_cast<FunctionVT*>(fn), std::move(args), std::move(kwargs));
  case VT::Kind::NestedFunction: {
    auto* f = static_cast<NestedFunctionVT*>(fn);
    return inlineCall(f->code, f->globals, f->globalSourceFor, f->closure, f->defaults,
                      f->kwdefaults, std::move(args), std::move(kwargs));
  }
  case VT::Kind::Method:
    return callMethod(static_cast<MethodVT*>(fn), std::move(args), std::move(kwargs));
  case VT::Kind::Module:
    return callModule(static_cast<ModuleVT*>(fn), std::move(args), std::move(kwargs));
  case VT::Kind::GradModeExit: {
    t_.setGradMode(static_cast<GradModeExitVT*>(fn)->restore);
    return t_.constant(nb::bool_(false));
  }
  case VT::Kind::UserContextExit: {
    // The block ended normally (exit(None, None, None)): the generator's rest after its yield,
    // or the class's __exit__.
    auto* e = static_cast<UserContextExitVT*>(fn);
    if (e->done) throw Unsupported{"internal: a context manager's exit called twice"};
    e->done = true;
    VT* result = t_.constant(nb::bool_(false));
    if (e->exit) {
      result = call(e->exit, std::move(args), std::move(kwargs));
    } else {
      struct CallerOnUnwind {
        Tracer& t;
        nb::handle code;
        int instruction;
        int uncaught = std::uncaught_exceptions();
        ~CallerOnUnwind() {
          if (std::uncaught_exceptions() > uncaught) t.noteUnwoundCaller(code, instruction);
        }
      } caller{t_, code_, int(pc_ - 1)};
      std::shared_ptr<InstructionTranslator> generator = std::move(e->generator);
      generator->resumeToEnd();
      t_.setPosition(code_, int(pc_ - 1));
    }
    if (e->topFrame && !t_.userWiths.empty()) t_.userWiths.pop_back();
    return result;
  }
  case VT::Kind::AutocastExit: {
    autocast::setPackedState(static_cast<AutocastExitVT*>(fn)->restore);
    return t_.constant(nb::bool_(false));
  }
  case VT::Kind::Partial: {
    auto* p = static_cast<PartialVT*>(fn);
    return call(p->func, boundArgs(p->args, std::move(args)), boundKwargs(p->kwargs, std::move(kwargs)));
  }
  case VT::Kind::Object: {
    nb::handle obj = static_cast<ObjectVT*>(fn)->object;
    if (Py_TYPE(obj.ptr()) == partialType()) {
      // A functools.partial made outside (a module attribute, a default argument): guarded by
      // identity, so its function and bound arguments are its own; called as partial.__call__.
      SourcePtr src = fn->source;
      VT* func = t_.wrap(obj.attr("func"), src ? attrSource(src, "func") : nullptr);
      nb::tuple bound = nb::borrow<nb::tuple>(obj.attr("args"));
      VTs pre;
      for (size_t i = 0; i < bound.size(); ++i)
        pre.push_back(t_.wrap(bound[i], src ? itemSource(attrSource(src, "args"), nb::int_(i)) : nullptr));
      Kwargs kw;
      for (auto [k, v] : nb::borrow<nb::dict>(obj.attr("keywords")))
        kw.emplace_back(nb::cast<std::string>(k),
                        t_.wrap(v, src ? itemSource(attrSource(src, "keywords"), nb::borrow(k)) : nullptr));
      return call(func, boundArgs(pre, std::move(args)), boundKwargs(kw, std::move(kwargs)));
    }
    bool handled = false;
    VT* r = callBuiltin(obj, args, kwargs, handled);
    if (handled) return r;
    bool compiled = std::string(Py_TYPE(obj.ptr())->tp_name) == "kiln._C._capture.CompiledFunction";
    if (compiled && nb::getattr(obj, "_callback", nb::none()).is_none())
      throw Unsupported{"calling a function wrapped by kiln.compiler.disable"};
    // A function already wrapped by kiln.compile: trace through to what it wraps. Also when it
    // wraps kiln's own code (kiln.compile(model)'s forward is Linear.forward): called for real
    // on the fakes, it compiled and ran a program on them and its meta results reached the
    // caller at run time (a compiled step calling a compiled model returned meta tensors).
    if (PyObject_HasAttrString(obj.ptr(), "__wrapped__") && (compiled || !isKilnLibrary(obj)) &&
        !PyType_Check(obj.ptr())) {
      nb::object inner = obj.attr("__wrapped__");
      if (PyMethod_Check(inner.ptr()) && PyFunction_Check(PyMethod_GET_FUNCTION(inner.ptr()))) {
        // kiln.compile(model.step): a bound method, its function inlined with its object.
        args.insert(args.begin(), t_.wrap(PyMethod_GET_SELF(inner.ptr()), nullptr));
        return call(t_.wrap(PyMethod_GET_FUNCTION(inner.ptr()), nullptr), std::move(args), std::move(kwargs));
      }
      return call(t_.wrap(inner, nullptr), std::move(args), std::move(kwargs));
    }
    if (PyType_Check(obj.ptr()) && !isKilnLibrary(obj)) return construct(obj, std::move(args), std::move(kwargs));
    if (PyType_Check(obj.ptr()) && PyObject_HasAttrString(obj.ptr(), "_kiln_trace_constant")) {
      // kiln.finfo/iinfo of a dtype, a kiln.Size of constant sizes: an immutable value made of
      // constants, a constant of the trace.
      return t_.constant(constructFromConstants(obj, args, kwargs, "an argument of kiln.finfo/iinfo/Size (not a constant)"));
    }
    if (PyType_Check(obj.ptr()) && PyObject_HasAttrString(obj.ptr(), "_kiln_trace_noop_context")) {
      // kiln.autocast: made for real from its constant arguments. One that changes nothing (a
      // disabled autocast: enabled=False, or "cuda" without CUDA, as HF models write around
      // their rotary embeddings) is a no-op `with` of the trace; one that takes effect switches
      // autocast while the block is traced, so its ops record their casts.
      nb::object made = constructFromConstants(obj, args, kwargs, "an argument of kiln.autocast (not a constant)");
      if (PyObject_IsTrue(made.attr("_kiln_trace_noop_context").ptr())) return t_.make<GradModeVT>(t_.gradMode());
      nb::tuple state = nb::borrow<nb::tuple>(made.attr("_kiln_trace_state"));
      bool cuda = nb::cast<std::string>(state[0]) == "cuda";
      return t_.make<AutocastVT>(cuda ? DeviceType::CUDA : DeviceType::CPU, nb::cast<bool>(state[1]),
                                 python::dtypeFromObject(state[2].ptr()), nb::cast<bool>(state[3]));
    }
    if (PyType_Check(obj.ptr()) && isKilnLibrary(obj) && isNnModuleClass(obj)) return constructModule(obj, args, kwargs);
    if (PyType_Check(obj.ptr()))
      throw Unsupported{std::string("constructing a ") +
                        reinterpret_cast<PyTypeObject*>(obj.ptr())->tp_name + " object"};
    if (isKilnLibrary(obj) || PyCFunction_Check(obj.ptr()) ||
        Py_TYPE(obj.ptr())->tp_name == std::string("kiln._C._OpFunction"))
      return t_.callReal(obj, args, kwargs);
    if (isImmutableBuiltinMethod(obj) && allPlainData(args, kwargs)) {
      // str.isalnum(c), str.join(sep, parts), int.bit_length(n): an unbound method of an
      // immutable builtin type on plain data has a constant result (einops' pattern parser).
      return t_.callReal(obj, args, kwargs);
    }
    if (VT::Kind kind = containerKindOf(obj); kind != VT::Kind::Constant && !args.empty() && args[0]->kind == kind) {
      // set.difference(a, b) is a.difference(b): the container's traced method.
      std::string name = nb::cast<std::string>(obj.attr("__name__"));
      VT* self = args[0];
      args.erase(args.begin());
      return callMethod(t_.make<MethodVT>(self, name), std::move(args), std::move(kwargs));
    }
    if (VT* r = callUserObject(fn, reinterpret_cast<PyTypeObject*>(Py_TYPE(obj.ptr())), args, kwargs)) return r;
    throw Unsupported{std::string("calling ") + nb::cast<std::string>(nb::repr(obj))};
  }
  case VT::Kind::NewObject:
    if (VT* r = callUserObject(fn, reinterpret_cast<PyTypeObject*>(static_cast<NewObjectVT*>(fn)->cls.ptr()), args, kwargs))
      return r;
    throw Unsupported{std::string("calling a ") + kindName(fn)};
  case VT::Kind::Constant:
    throw TraceError{std::string("TypeError: '") + kindName(fn) + "' object is not callable"};
  default:
    throw Unsupported{std::string("calling a ") + kindName(fn)};
  }
}

// An object of a user class with a Python __call__ (guided-diffusion's _WrappedModel, a loss
// object, a callable config), called: its __call__ is inlined with the object as self, as
// TorchDynamo inlines a user-defined object's __call__. Null when the class has none.
VT* InstructionTranslator::callUserObject(VT* self, PyTypeObject* type, VTs& args, Kwargs& kwargs) {
  if (isKilnLibrary(nb::handle(reinterpret_cast<PyObject*>(type)))) return nullptr;
  PyObject* callFn = _PyType_Lookup(type, nb::str("__call__").ptr());
  if (!callFn || !PyFunction_Check(callFn)) return nullptr;
  args.insert(args.begin(), self);
  return inlineFunction(t_.make<FunctionVT>(nb::borrow(callFn)), std::move(args), std::move(kwargs));
}

VT* InstructionTranslator::inlineFunction(FunctionVT* f, VTs args, Kwargs kwargs, bool traceLibrary) {
  // `f(args)` of a @contextlib.contextmanager function: entered by a `with` (BEFORE_WITH).
  static nb::handle contextHelper =
      nb::object(nb::module_::import_("kiln._compiling").attr("CONTEXTMANAGER_HELPER_CODE")).release();
  if (PyFunction_GET_CODE(f->fn.ptr()) == contextHelper.ptr() && !suspendInline_) {
    nb::object wrapped = nb::getattr(f->fn, "__wrapped__", nb::none());
    if (PyFunction_Check(wrapped.ptr()) &&
        (reinterpret_cast<PyCodeObject*>(PyFunction_GET_CODE(wrapped.ptr()))->co_flags & CO_GENERATOR)) {
      auto* g = t_.make<FunctionVT>(wrapped);
      g->source = f->source ? attrSource(f->source, "__wrapped__") : nullptr;
      return t_.make<GeneratorContextVT>(g, std::move(args), std::move(kwargs));
    }
  }
  // kiln.compiler.is_compiling(): True for the code being traced (False when it runs).
  static nb::handle isCompiling =
      nb::object(nb::module_::import_("kiln._compiling").attr("is_compiling")).release();
  if (f->fn.ptr() == isCompiling.ptr() && args.empty() && kwargs.empty()) return t_.constant(nb::bool_(true));
  auto* fn = reinterpret_cast<PyFunctionObject*>(f->fn.ptr());
  // kiln's library functions run for real, except generator functions (nn.Module.parameters(),
  // named_modules(), ...): their generator object could not be iterated symbolically, so they
  // are unrolled like user generators.
  bool generator = reinterpret_cast<PyCodeObject*>(fn->func_code)->co_flags & CO_GENERATOR;
  // A function defined in the traced code has no Python object to hand to a call made for real
  // (F.triplet_margin_with_distance_loss(..., distance_function=lambda u, v: ...)): the library
  // function is inlined instead, as TorchDynamo inlines torch.nn.functional.
  bool takesNestedFunction = false;
  for (VT* a : args)
    takesNestedFunction |= a->kind == VT::Kind::NestedFunction;
  for (auto& [k, a] : kwargs)
    takesNestedFunction |= a->kind == VT::Kind::NestedFunction;
  if (isKilnLibrary(f->fn) && !generator && !traceLibrary && !takesNestedFunction) {
    throwIfNotTraced(fn->func_code, f->fn); // kiln.manual_seed: run between graphs, not at trace time
    // A kiln method run for real on a module of the user's (`super().forward(x)` in a subclass
    // of nn.LayerNorm, an inherited forward): it reads the module's parameters by itself, so
    // they are named first, as for kiln's own modules (callForward).
    for (VT* a : args)
      if (a->kind == VT::Kind::Module) {
        auto* m = static_cast<ModuleVT*>(a);
        if (!m->madeWhileTracing) t_.registerModule(m->module, m->path, m->source);
      }
    return t_.callReal(f->fn, args, kwargs);
  }
  SourcePtr src = f->source;
  VTs closure;
  if (fn->func_closure) {
    Py_ssize_t n = PyTuple_GET_SIZE(fn->func_closure);
    for (Py_ssize_t i = 0; i < n; ++i) {
      auto* cell = t_.make<RealCellVT>(nb::borrow(PyTuple_GET_ITEM(fn->func_closure, i)));
      cell->source = src ? funcClosureSource(src, int(i)) : nullptr;
      closure.push_back(cell);
    }
  }
  VTs defaults;
  if (fn->func_defaults) {
    Py_ssize_t n = PyTuple_GET_SIZE(fn->func_defaults);
    for (Py_ssize_t i = 0; i < n; ++i)
      defaults.push_back(t_.wrap(PyTuple_GET_ITEM(fn->func_defaults, i), nullptr));
  }
  VT* kwdefaults = nullptr;
  if (fn->func_kwdefaults) kwdefaults = t_.wrap(fn->func_kwdefaults, nullptr);
  GlobalSourceFn globalSource;
  if (src) globalSource = [src](const std::string& name) { return funcGlobalSource(src, name); };
  return inlineCall(nb::borrow(fn->func_code), nb::borrow(fn->func_globals), globalSource, closure,
                    defaults, kwdefaults, std::move(args), std::move(kwargs));
}

VT* InstructionTranslator::inlineCall(nb::handle code, nb::handle globals,
                                      GlobalSourceFn globalSource, VTs closure, VTs defaults,
                                      VT* kwdefaults, VTs args, Kwargs kwargs) {
  // kiln library functions that torch.compile does not trace into either (an optimizer's step
  // and zero_grad): a graph break at the call, which runs eagerly (a step is then captured as a
  // graph of its own: kiln/compiler/frame_callback.py).
  throwIfNotTraced(code);
  auto* co = reinterpret_cast<PyCodeObject*>(code.ptr());
  const int nargs = co->co_argcount, nkwonly = co->co_kwonlyargcount;
  const bool varargs = co->co_flags & CO_VARARGS, varkw = co->co_flags & CO_VARKEYWORDS;
  std::string fname = nb::cast<std::string>(code.attr("co_name"));
  VTs locals(size_t(co->co_nlocalsplus), nullptr);
  auto paramName = [&](int i) {
    return nb::cast<std::string>(nb::handle(PyTuple_GET_ITEM(co->co_localsplusnames, i)));
  };
  size_t npos = std::min(args.size(), size_t(nargs));
  for (size_t i = 0; i < npos; ++i)
    locals[i] = args[i];
  if (args.size() > size_t(nargs)) {
    if (!varargs)
      throw TraceError{"TypeError: " + fname + "() takes " + std::to_string(nargs) +
                       " positional arguments but " + std::to_string(args.size()) + " were given"};
    locals[size_t(nargs + nkwonly)] =
        t_.make<SequenceVT>(VT::Kind::Tuple, VTs(args.begin() + nargs, args.end()));
  } else if (varargs) {
    locals[size_t(nargs + nkwonly)] = t_.make<SequenceVT>(VT::Kind::Tuple, VTs{});
  }
  DictVT* extra = nullptr;
  if (varkw) {
    extra = t_.make<DictVT>();
    locals[size_t(nargs + nkwonly + (varargs ? 1 : 0))] = extra;
  }
  for (auto& [k, v] : kwargs) {
    int found = -1;
    for (int i = co->co_posonlyargcount; i < nargs + nkwonly; ++i)
      if (paramName(i) == k) found = i;
    if (found >= 0) {
      if (locals[size_t(found)])
        throw TraceError{"TypeError: " + fname + "() got multiple values for argument '" + k + "'"};
      locals[size_t(found)] = v;
    } else if (extra) {
      extra->entries.emplace_back(nb::str(k.c_str()), v);
    } else {
      throw TraceError{"TypeError: " + fname + "() got an unexpected keyword argument '" + k + "'"};
    }
  }
  int firstDefault = nargs - int(defaults.size());
  for (int i = 0; i < nargs; ++i) {
    if (locals[size_t(i)]) continue;
    if (i >= firstDefault) locals[size_t(i)] = defaults[size_t(i - firstDefault)];
    else
      throw TraceError{"TypeError: " + fname + "() missing required argument '" + paramName(i) + "'"};
  }
  for (int i = nargs; i < nargs + nkwonly; ++i) {
    if (locals[size_t(i)]) continue;
    int d = -1;
    if (kwdefaults && kwdefaults->kind == VT::Kind::Dict)
      d = static_cast<DictVT*>(kwdefaults)->find(nb::str(paramName(i).c_str()).ptr());
    if (d < 0)
      throw TraceError{"TypeError: " + fname + "() missing required keyword argument '" +
                       paramName(i) + "'"};
    locals[size_t(i)] = static_cast<DictVT*>(kwdefaults)->entries[size_t(d)].second;
  }
  std::shared_ptr<InstructionTranslator>* suspend = std::exchange(suspendInline_, nullptr);
  auto inner = std::make_shared<InstructionTranslator>(t_, code, globals, std::move(globalSource), depth_ + 1);
  inner->suspendAtYield_ = suspend != nullptr;
  struct CallerOnUnwind { // this frame's call site in the user stack of a failure inside
    Tracer& t;
    nb::handle code;
    int instruction;
    int uncaught = std::uncaught_exceptions();
    ~CallerOnUnwind() {
      if (std::uncaught_exceptions() > uncaught) t.noteUnwoundCaller(code, instruction);
    }
  } caller{t_, code_, int(pc_ - 1)};
  VT* r = inner->run(std::move(locals), closure);
  t_.setPosition(code_, int(pc_ - 1));
  if (suspend && inner->suspended_) *suspend = inner;
  return r;
}

// A module's forward pre-hooks or forward hooks (`table`) as a traced dict: its keys and each
// hook are guarded (through the module's source), so registering or removing a hook re-traces.
// nullptr: the module has no such table.
DictVT* InstructionTranslator::moduleHooks(ModuleVT* m, const char* table) {
  PyObject** dictPtr = _PyObject_GetDictPtr(m->module.ptr());
  PyObject* hooks = dictPtr && *dictPtr ? PyDict_GetItemString(*dictPtr, table) : nullptr;
  if (!hooks || !PyDict_Check(hooks)) return nullptr;
  VT* v = t_.wrap(hooks, m->source ? attrSource(m->source, table) : nullptr);
  return v->kind == VT::Kind::Dict ? static_cast<DictVT*>(v) : nullptr;
}

// Module.__call__ with hooks, traced as kiln's Module._call_with_hooks runs it: each pre-hook
// may replace the positional arguments, forward runs, each forward hook may replace the output.
// Hooks registered with with_kwargs=True are not traced (they break the graph).
VT* InstructionTranslator::callModule(ModuleVT* m, VTs args, Kwargs kwargs) {
  // kiln.compile(model) called in a traced frame (a compiled train step calling a compiled
  // model): the model itself is traced, as TorchDynamo inlines OptimizedModule._orig_mod. Its
  // forward is a compiled function, which cannot run on the fakes.
  nb::handle type = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(m->module.ptr())));
  if (moduleOf(type) == "kiln.compiler.optimized_module") {
    VT* inner = loadAttr(m, "_orig_mod");
    if (inner->kind == VT::Kind::Module)
      return callModule(static_cast<ModuleVT*>(inner), std::move(args), std::move(kwargs));
  }
  // Full backward hooks wrap the call's inputs and outputs in autograd Functions whose backward
  // runs Python: not traced (as TorchDynamo), the module runs eagerly with its hooks.
  for (const char* table : {"_backward_hooks", "_backward_pre_hooks"}) {
    DictVT* hooks = moduleHooks(m, table);
    if (hooks && !hooks->entries.empty())
      throw Unsupported{"calling an nn.Module with full backward hooks (register_full_backward_hook)"};
  }
  initializeLazyModule(m, args, kwargs);
  DictVT* pre = moduleHooks(m, "_forward_pre_hooks");
  DictVT* post = moduleHooks(m, "_forward_hooks");
  bool hooked = (pre && !pre->entries.empty()) || (post && !post->entries.empty());
  if (!hooked) return callForward(m, std::move(args), std::move(kwargs), false);
  for (const char* withKwargs : {"_forward_pre_hooks_with_kwargs", "_forward_hooks_with_kwargs"}) {
    PyObject* h = PyObject_GetAttrString(m->module.ptr(), withKwargs);
    if (!h) {
      PyErr_Clear();
      continue;
    }
    nb::object owned = nb::steal(h);
    if (PyObject_IsTrue(h) == 1)
      throw Unsupported{"calling an nn.Module that has hooks registered with with_kwargs=True"};
  }
  auto isNone = [](VT* v) {
    return v->kind == VT::Kind::Constant && static_cast<ConstantVT*>(v)->value.is_none();
  };
  VT* argTuple = t_.make<SequenceVT>(VT::Kind::Tuple, args);
  // kiln's modules run for real: their parameters are named before a hook of kiln's own reads
  // them (weight_norm's pre-hook computes the weight from weight_g and weight_v).
  if (isKilnLibrary(type)) t_.registerModule(m->module, m->path, m->source);
  if (pre)
    for (auto& entry : pre->entries) {
      VT* r = callHook(entry.second, VTs{m, argTuple});
      if (isNone(r)) continue;
      argTuple = r->kind == VT::Kind::Tuple ? r : t_.make<SequenceVT>(VT::Kind::Tuple, VTs{r});
    }
  VT* out = callForward(m, static_cast<SequenceVT*>(argTuple)->items, std::move(kwargs), true);
  if (post)
    for (auto& entry : post->entries) {
      VT* r = callHook(entry.second, VTs{m, argTuple, out});
      if (!isNone(r)) out = r;
    }
  return out;
}

// The first call of one of kiln's lazy modules (nn.LazyLinear & co, whose forward pre-hook makes
// the parameters from the input's sizes): the hook runs now, for real, on the fakes (only their
// sizes are read), as TorchDynamo's initialize_lazy_module runs it at trace time, outside the
// graph. The parameters draw their initial values from the generator as the eager call would;
// the hook removes itself and the module becomes its cls_to_become, which the trace goes on
// with. (An error in the hook is the user's: the frame runs eagerly and raises it.)
void InstructionTranslator::initializeLazyModule(ModuleVT* m, const VTs& args, const Kwargs& kwargs) {
  static nb::handle mixin =
      nb::object(nb::module_::import_("kiln.nn.modules.lazy").attr("LazyModuleMixin")).release();
  nb::handle mod = m->module;
  int lazy = PyObject_IsInstance(mod.ptr(), mixin.ptr());
  if (lazy < 0) throw nb::python_error();
  PyObject** dictPtr = _PyObject_GetDictPtr(mod.ptr());
  if (!lazy || !dictPtr || !*dictPtr || !PyDict_GetItemString(*dictPtr, "_initialize_hook")) return;
  nb::list realArgs;
  for (VT* a : args)
    realArgs.append(t_.toPython(a));
  nb::dict realKwargs;
  for (auto& [k, v] : kwargs)
    realKwargs[k.c_str()] = t_.toPython(v);
  try {
    mod.attr("_infer_parameters")(mod, nb::tuple(realArgs), realKwargs);
  } catch (nb::python_error& e) {
    TraceError error{std::string(Py_TYPE(e.value().ptr())->tp_name) + ": " + nb::cast<std::string>(nb::str(e.value()))};
    error.catchable = false; // run on fakes (see Tracer::callReal)
    throw error;
  }
}

// A module hook. One that is an object of kiln's own (nn.utils.weight_norm's WeightNorm, whose
// pre-hook sets `module.weight` from weight_g and weight_v) is traced like user code: run for
// real, its attribute store would put a fake on the real module; traced, the store is a side
// effect the module's forward reads (callForward) and the glue replays.
VT* InstructionTranslator::callHook(VT* hook, VTs args) {
  if (hook->kind == VT::Kind::Object) {
    nb::handle obj = static_cast<ObjectVT*>(hook)->object;
    nb::handle cls = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr())));
    if (!PyType_Check(obj.ptr()) && isKilnLibrary(cls)) {
      nb::object callFn = nb::getattr(cls, "__call__", nb::none());
      if (PyFunction_Check(callFn.ptr())) {
        args.insert(args.begin(), hook);
        return inlineFunction(t_.make<FunctionVT>(callFn), std::move(args), {}, true);
      }
    }
  }
  return call(hook, std::move(args), {});
}

// The module's forward: kiln's own modules run for real on fakes (their forward when the hooks
// were traced here, so they do not run twice), user modules are inlined. A kiln module one of
// whose attributes the trace stored (a weight_norm hook's `weight`) is inlined too: run for
// real, it would read the real attribute, not the stored one.
VT* InstructionTranslator::callForward(ModuleVT* m, VTs args, Kwargs kwargs, bool hooked) {
  nb::handle mod = m->module;
  nb::handle type = nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(mod.ptr())));
  bool library = isKilnLibrary(type);
  if (library && onlyPlainLibraryModulesBelow(mod) && !t_.hasStoredAttr(mod.ptr())) {
    t_.registerModule(mod, m->path, m->source);
    return hooked ? t_.callReal(mod.attr("forward"), args, kwargs) : t_.callReal(mod, args, kwargs);
  }
  nb::object forward = type.attr("forward");
  if (!PyFunction_Check(forward.ptr()))
    throw Unsupported{"an nn.Module whose forward is not a Python function"};
  auto* f = t_.make<FunctionVT>(forward);
  args.insert(args.begin(), m);
  // One of kiln's containers (Sequential, ModuleList users, MultiheadAttention) holding a user
  // module or a hooked one is traced like a user module: run for real, the Python code below it
  // (a forward hook appending to a list, a counter in a user forward) would run once, while
  // tracing, on fake tensors, and not when the graph runs again.
  return inlineFunction(f, std::move(args), std::move(kwargs), library);
}

VT* InstructionTranslator::callMethod(MethodVT* m, VTs args, Kwargs kwargs) {
  VT* self = m->self;
  const std::string& name = m->name;
  if (name == "new_tensor" && self->kind == VT::Kind::Tensor && args.size() == 1 && !containsTensor(args[0])) {
    // `x.new_tensor([1.0, 2.0])`: a constant of the graph in x's dtype on x's real device, as
    // `kiln.tensor(data, dtype=..., device=...)` written in the traced code. (Inlined, the method
    // read the fake's meta device and moved the tensor there with an op: a tensor made from
    // Python data inside an op, which the tracer refuses.)
    static nb::handle tensorFn = nb::object(nb::module_::import_("kiln").attr("tensor")).release();
    auto* t = static_cast<TensorVT*>(self);
    auto given = [&](const char* k) {
      return std::any_of(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == k; });
    };
    if (!given("dtype")) kwargs.emplace_back("dtype", t_.constant(t->fake.attr("dtype")));
    if (!given("device")) kwargs.emplace_back("device", t_.constant(t_.deviceOf(t)));
    return t_.callReal(tensorFn, std::move(args), kwargs);
  }
  if (m->function.is_valid()) {
    if (PyFunction_Check(m->function.ptr())) {
      args.insert(args.begin(), self);
      return inlineFunction(t_.make<FunctionVT>(m->function), std::move(args), std::move(kwargs));
    }
    static nb::handle objectInit = nb::object(nb::borrow(reinterpret_cast<PyObject*>(&PyBaseObject_Type)).attr("__init__")).release();
    if (m->function.ptr() == objectInit.ptr() && args.empty() && kwargs.empty()) return t_.none();
    throw Unsupported{"calling super()." + name + " (not a Python function)"};
  }
  if (self->kind == VT::Kind::Ndarray)
    return callNdarrayMethod(static_cast<NdarrayVT*>(self), name, std::move(args), std::move(kwargs));
  if (self->kind == VT::Kind::Tensor && name == "numpy")
    return tensorNumpy(static_cast<TensorVT*>(self), args, kwargs);
  switch (self->kind) {
  case VT::Kind::Tensor: {
    if (inList(name, kDataDependentMethods, std::size(kDataDependentMethods)))
      throw Unsupported{"Tensor." + name + "() (its result depends on tensor data)"};
    if (name == "get_device") { // the fake is on meta: answer for the real device
      nb::object device = t_.deviceOf(static_cast<TensorVT*>(self));
      nb::object index = device.attr("index");
      return t_.constant(nb::cast<std::string>(device.attr("type")) == "cpu" ? nb::int_(-1)
                         : index.is_none()                                   ? nb::int_(0)
                                                                             : nb::int_(nb::cast<long>(index)));
    }
    // Metadata methods (size, dim, stride, ...) return Python values of the fake: constants,
    // guarded by the tensor's guard. Everything else records its ops, but for kiln's Python
    // methods marked not_traced (Tensor.to_sparse): a break at the call.
    nb::object method = static_cast<TensorVT*>(self)->fake.attr(name.c_str());
    if (PyMethod_Check(method.ptr()) && PyFunction_Check(PyMethod_GET_FUNCTION(method.ptr()))) {
      nb::handle fn = PyMethod_GET_FUNCTION(method.ptr());
      throwIfNotTraced(fn.attr("__code__"), fn);
    }
    VT* r = t_.callReal(method, args, kwargs);
    return name == "size" ? t_.tagSizes(r) : r;
  }
  case VT::Kind::List:
  case VT::Kind::Tuple:
    return callSequenceMethod(static_cast<SequenceVT*>(self), name, args, kwargs);
  case VT::Kind::Dict:
    return callDictMethod(static_cast<DictVT*>(self), name, args, kwargs);
  case VT::Kind::Set:
    return callSetMethod(static_cast<SetVT*>(self), name, args);
  case VT::Kind::NewObject: {
    auto* o = static_cast<NewObjectVT*>(self);
    PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o->cls.ptr()), nb::str(name.c_str()).ptr());
    if (!attr || !PyFunction_Check(attr)) throw Unsupported{"calling the method " + name + " of a " + kindName(self)};
    args.insert(args.begin(), self);
    return inlineFunction(t_.make<FunctionVT>(nb::borrow(attr)), std::move(args), std::move(kwargs));
  }
  case VT::Kind::Module:
  case VT::Kind::Object: {
    nb::handle obj = identityOf(self);
    PyObject* attr = _PyType_Lookup(Py_TYPE(obj.ptr()), nb::str(name.c_str()).ptr());
    if (attr && PyFunction_Check(attr)) {
      auto* f = t_.make<FunctionVT>(nb::borrow(attr));
      bool libraryModuleMethod = self->kind == VT::Kind::Module && isKilnLibrary(attr);
      // `self.forward(x)` of one of kiln's modules (Module.__call__'s frame captured by itself):
      // its forward runs on fakes with the module's parameters known, as a call of the module.
      if (libraryModuleMethod && name == "forward")
        return callForward(static_cast<ModuleVT*>(self), std::move(args), std::move(kwargs), true);
      args.insert(args.begin(), self);
      // The methods of nn.Module itself (train, eval, zero_grad, ...) are traced, not run for
      // real: run for real, their writes to the module tree (`training = mode` on every child)
      // would happen once, while tracing, and not when the graph runs again. (A layer's own
      // methods, such as Linear.reset_parameters, still run for real; state_dict.py holds
      // Module's state-dict half.) So are the views of
      // kiln's containers (ModuleDict.items/keys/values): run for real they hand back a real
      // odict view the trace cannot iterate; traced, they read `_modules` as a guarded dict.
      std::string owner = libraryModuleMethod ? moduleOf(attr) : "";
      bool moduleMethod = owner == "kiln.nn.modules.module" || owner == "kiln.nn.modules.state_dict" ||
                          (owner == "kiln.nn.modules.container" &&
                           (name == "items" || name == "keys" || name == "values"));
      // So is a hook handle's remove() (its pops from the module's hook dicts are side effects
      // replayed after the graph): run for real, it removed the hook at the trace, once, and the
      // trace after the break no longer saw the hook fire (module_hooks lost its activations).
      moduleMethod = moduleMethod || (self->kind == VT::Kind::Object && isKilnLibrary(attr) &&
                                      moduleOf(attr) == "kiln.utils.hooks");
      return inlineFunction(f, std::move(args), std::move(kwargs), moduleMethod);
    }
    throw Unsupported{"calling the method " + name + " of a " + kindName(self)};
  }
  case VT::Kind::Constant: {
    nb::object bound = static_cast<ConstantVT*>(self)->value.attr(name.c_str());
    VTs all = args;
    for (auto& kv : kwargs)
      all.push_back(kv.second);
    if (name == "format" && PyUnicode_CheckExact(static_cast<ConstantVT*>(self)->value.ptr()) &&
        std::any_of(all.begin(), all.end(), [](VT* a) { return containsTensor(a); }))
      // `"{:.3f}".format(loss)`: formatted after the graph, as an f-string of a tensor.
      return t_.make<FormatVT>(nb::cast<std::string>(static_cast<ConstantVT*>(self)->value), std::move(args),
                               std::move(kwargs));
    // Plain data arguments are handed over as copies (",".join(parts) with parts a traced list).
    if (!allPlainData(args, kwargs))
      throw Unsupported{"calling " + name + " of a constant with arguments that are not plain data"};
    return t_.callReal(bound, args, kwargs);
  }
  default:
    throw Unsupported{"calling the method " + name + " of a " + kindName(self)};
  }
}

VT* InstructionTranslator::callSequenceMethod(SequenceVT* s, const std::string& name, VTs& args,
                                              Kwargs& kwargs) {
  const bool isList = s->kind == VT::Kind::List;
  auto arg = [&](size_t i) -> VT* {
    if (i >= args.size()) throw TraceError{"TypeError: " + name + "() missing an argument"};
    return args[i];
  };
  if (isList && name == "append") {
    mutateList(s);
    s->items.push_back(arg(0));
    return t_.none();
  }
  if (isList && name == "extend") {
    VTs more = unpack(arg(0));
    mutateList(s);
    s->items.insert(s->items.end(), more.begin(), more.end());
    return t_.none();
  }
  if (isList && name == "insert") {
    long i = nb::cast<long>(constantValue(arg(0), "a list index"));
    long n = long(s->items.size());
    i = i < 0 ? std::max(0L, i + n) : std::min(i, n);
    mutateList(s);
    s->items.insert(s->items.begin() + i, arg(1));
    return t_.none();
  }
  if (isList && name == "pop") {
    long n = long(s->items.size());
    long i = args.empty() ? -1 : nb::cast<long>(constantValue(args[0], "a list index"));
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw TraceError{"IndexError: pop index out of range"};
    mutateList(s);
    VT* v = s->items[size_t(i)];
    s->items.erase(s->items.begin() + i);
    return v;
  }
  if (isList && name == "reverse") {
    mutateList(s);
    std::reverse(s->items.begin(), s->items.end());
    return t_.none();
  }
  if (isList && name == "clear") {
    mutateList(s);
    s->items.clear();
    return t_.none();
  }
  if (isList && name == "copy") return t_.make<SequenceVT>(VT::Kind::List, s->items);
  if (name == "index" || name == "count") {
    long count = 0;
    for (size_t i = 0; i < s->items.size(); ++i) {
      VT* x = s->items[i];
      bool eq = isSame(x, arg(0)) ||
                (x->kind != VT::Kind::Tensor && arg(0)->kind != VT::Kind::Tensor &&
                 truthy(compareOp(2, x, arg(0))));
      if (eq && name == "index") return t_.constant(nb::int_(long(i)));
      count += eq;
    }
    if (name == "index") throw TraceError{"ValueError: value is not in list"};
    return t_.constant(nb::int_(count));
  }
  throw Unsupported{std::string(isList ? "list." : "tuple.") + name + "()"};
}

VT* InstructionTranslator::callDictMethod(DictVT* d, const std::string& name, VTs& args,
                                          Kwargs& kwargs) {
  if (name == "keys" || name == "values" || name == "items") {
    VTs out;
    for (auto& [k, v] : d->entries) {
      if (name == "keys") out.push_back(t_.keyVT(k));
      else if (name == "values") out.push_back(v);
      else out.push_back(t_.make<SequenceVT>(VT::Kind::Tuple, VTs{t_.keyVT(k), v}));
    }
    return t_.make<SequenceVT>(VT::Kind::Tuple, out);
  }
  if (name == "get" && !args.empty()) {
    int i = d->find(dictKey(args[0]).ptr());
    if (i >= 0) return d->entries[size_t(i)].second;
    return args.size() > 1 ? args[1] : t_.none();
  }
  if (name == "copy") {
    auto* c = t_.make<DictVT>();
    c->entries = d->entries;
    return c;
  }
  if (name == "update") {
    for (VT* a : args) {
      if (a->kind != VT::Kind::Dict) throw Unsupported{"dict.update() with a non-dict"};
      for (auto& [k, v] : static_cast<DictVT*>(a)->entries)
        dictSet(d, t_.keyVT(k), v);
    }
    for (auto& [k, v] : kwargs)
      dictSet(d, t_.constant(nb::str(k.c_str())), v);
    return t_.none();
  }
  if ((name == "pop" || name == "setdefault") && !args.empty()) {
    nb::object key = dictKey(args[0]);
    int i = d->find(key.ptr());
    if (name == "setdefault") {
      if (i >= 0) return d->entries[size_t(i)].second;
      VT* v = args.size() > 1 ? args[1] : t_.none();
      dictSet(d, args[0], v);
      return v;
    }
    if (i < 0) {
      if (args.size() > 1) return args[1];
      throw TraceError{"KeyError: " + nb::cast<std::string>(nb::repr(key))};
    }
    mutateDict(d);
    VT* v = d->entries[size_t(i)].second;
    d->entries.erase(d->entries.begin() + i);
    return v;
  }
  throw Unsupported{"dict." + name + "()"};
}

VT* InstructionTranslator::callSetMethod(SetVT* s, const std::string& name, VTs& args) {
  static const char* mutating[] = {"add", "discard", "remove", "update", "clear",
                                   "intersection_update", "difference_update"};
  static const char* pure[] = {"union", "intersection", "difference", "symmetric_difference",
                               "issubset", "issuperset", "isdisjoint", "copy"};
  bool isMutating = false, isPure = false;
  for (const char* m : mutating) isMutating |= name == m;
  for (const char* m : pure) isPure |= name == m;
  if (!isMutating && !isPure) throw Unsupported{"set." + name + "()"};
  if (isMutating && s->fromOutside) throw Unsupported{"set." + name + "() on a set from outside the compiled code"};
  nb::list pyArgs;
  for (VT* a : args)
    pyArgs.append(a->kind == VT::Kind::Set ? static_cast<SetVT*>(a)->set
                  : isPlainData(a)             ? t_.toPython(a) // ids.update([...]) as einops does
                                               : nb::object(constantValue(a, "a set method argument")));
  nb::object r = s->set.attr(name.c_str())(*pyArgs);
  if (isMutating) return t_.none();
  if (PyAnySet_Check(r.ptr())) return t_.make<SetVT>(r);
  return t_.wrapResult(r);
}

VT* InstructionTranslator::zeroArgSuper() {
  // super() with no arguments: the __class__ cell of this frame and its first argument.
  auto* co = reinterpret_cast<PyCodeObject*>(code_.ptr());
  VT* cls = nullptr;
  for (int i = 0; i < co->co_nlocalsplus; ++i)
    if (localName(i) == "__class__" && locals_[size_t(i)]) cls = loadCell(locals_[size_t(i)], i);
  if (!cls || co->co_argcount == 0 || !locals_[0])
    throw TraceError{"RuntimeError: super(): no arguments"};
  VT* self = locals_[0];
  if (self->kind == VT::Kind::Cell) self = static_cast<CellVT*>(self)->contents;
  nb::handle type = identityOf(cls);
  if (!type.is_valid() || !PyType_Check(type.ptr())) throw Unsupported{"super() in this context"};
  return t_.make<SuperVT>(self, nb::borrow(type));
}

namespace {

// A collections.namedtuple class (a tuple subclass with _fields and _make, whose __new__ is the
// generated one taking the fields).
// collections.OrderedDict itself (not a subclass, whose methods may differ).
bool isOrderedDictClass(nb::handle cls) {
  static nb::handle ordered = nb::object(nb::module_::import_("collections").attr("OrderedDict")).release();
  return cls.ptr() == ordered.ptr();
}

bool isNamedTupleClass(nb::handle cls) {
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  if (!PyType_IsSubtype(type, &PyTuple_Type) || type == &PyTuple_Type) return false;
  nb::object fields = nb::getattr(cls, "_fields", nb::none());
  if (!PyTuple_CheckExact(fields.ptr()) || !nb::hasattr(cls, "_make")) return false;
  for (nb::handle f : fields)
    if (!PyUnicode_CheckExact(f.ptr())) return false;
  // No __new__ or __init__ of a subclass's own: the class namedtuple generated makes it.
  for (nb::handle base : nb::borrow<nb::tuple>(cls.attr("__mro__"))) {
    PyObject* dict = reinterpret_cast<PyTypeObject*>(base.ptr())->tp_dict;
    if (PyDict_GetItemString(dict, "_fields")) return true;
    if (PyDict_GetItemString(dict, "__new__") || PyDict_GetItemString(dict, "__init__")) return false;
  }
  return false;
}

} // namespace

// `Out(logits, hidden)`: a tuple of its fields (positional, keyword or default), rebuilt as an
// Out where it leaves the graph, as TorchDynamo's NamedTupleVariable.
VT* InstructionTranslator::constructNamedTuple(nb::handle cls, VTs args, Kwargs kwargs) {
  nb::tuple fields = nb::borrow<nb::tuple>(cls.attr("_fields"));
  nb::dict defaults = nb::borrow<nb::dict>(nb::getattr(cls, "_field_defaults", nb::dict()));
  std::string name = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name;
  if (args.size() > fields.size())
    throw TraceError{"TypeError: " + name + "() takes " + std::to_string(fields.size()) +
                     " positional arguments but " + std::to_string(args.size()) + " were given"};
  VTs items(fields.size(), nullptr);
  for (size_t i = 0; i < args.size(); ++i)
    items[i] = args[i];
  for (auto& [k, v] : kwargs) {
    size_t i = 0;
    while (i < fields.size() && nb::cast<std::string>(fields[i]) != k)
      ++i;
    if (i == fields.size())
      throw TraceError{"TypeError: " + name + "() got an unexpected keyword argument '" + k + "'"};
    if (items[i]) throw TraceError{"TypeError: " + name + "() got multiple values for argument '" + k + "'"};
    items[i] = v;
  }
  for (size_t i = 0; i < fields.size(); ++i) {
    if (items[i]) continue;
    if (!defaults.contains(fields[i]))
      throw TraceError{"TypeError: " + name + "() missing required argument '" + nb::cast<std::string>(fields[i]) + "'"};
    items[i] = t_.wrapResult(defaults[fields[i]]);
  }
  auto* s = t_.make<SequenceVT>(VT::Kind::Tuple, items);
  s->namedType = nb::borrow(cls);
  return s;
}

// `nn.Unfold(kernel_size=2)(x)` in traced code: one of kiln's modules made from constant arguments
// while tracing, as TorchDynamo inlines the __init__ of a new module. Only a stateless one (no
// parameters or buffers: Unfold, ReLU, Flatten, Softmax, ...), which the trace then calls like
// any module; one with parameters would be a new set of weights at each eager call, which a
// graph cannot make (TorchDynamo breaks at its nn.Parameter() too).
VT* InstructionTranslator::constructModule(nb::handle cls, const VTs& args, const Kwargs& kwargs) {
  const char* name = reinterpret_cast<PyTypeObject*>(cls.ptr())->tp_name;
  nb::object made = constructFromConstants(cls, args, kwargs, "an argument of a module made in compiled code (not a constant)");
  bool stateful = nb::len(nb::list(made.attr("parameters")())) || nb::len(nb::list(made.attr("buffers")()));
  if (stateful)
    throw Unsupported{std::string("constructing a ") + name + " (a module with parameters or buffers) in compiled code"};
  auto* m = t_.make<ModuleVT>(made);
  m->path = name;
  m->madeWhileTracing = true;
  return m;
}

nb::object InstructionTranslator::constructFromConstants(nb::handle cls, const VTs& args, const Kwargs& kwargs,
                                                          const char* what) {
  nb::dict pyKwargs;
  for (auto& [k, v] : kwargs)
    pyKwargs[k.c_str()] = constantValue(v, what);
  nb::list pyArgs;
  for (VT* a : args)
    pyArgs.append(constantValue(a, what));
  PyObject* r = PyObject_Call(cls.ptr(), nb::tuple(pyArgs).ptr(), pyKwargs.ptr());
  if (!r) {
    nb::python_error e;
    throw TraceError{std::string(Py_TYPE(e.value().ptr())->tp_name) + ": " + nb::cast<std::string>(nb::str(e.value()))};
  }
  return nb::steal(r);
}

PyTypeObject* InstructionTranslator::partialType() {
  static nb::handle partial = nb::object(nb::module_::import_("functools").attr("partial")).release();
  return reinterpret_cast<PyTypeObject*>(partial.ptr());
}

VTs InstructionTranslator::boundArgs(const VTs& bound, VTs args) {
  VTs all = bound;
  all.insert(all.end(), args.begin(), args.end());
  return all;
}

Kwargs InstructionTranslator::boundKwargs(const Kwargs& bound, Kwargs kwargs) {
  Kwargs all;
  for (const auto& [k, v] : bound) {
    bool overridden = std::any_of(kwargs.begin(), kwargs.end(), [&](const auto& kv) { return kv.first == k; });
    if (!overridden) all.emplace_back(k, v);
  }
  all.insert(all.end(), kwargs.begin(), kwargs.end());
  return all;
}

VT* InstructionTranslator::construct(nb::handle cls, VTs args, Kwargs kwargs) {
  if (cls.ptr() == reinterpret_cast<PyObject*>(partialType())) {
    // functools.partial(f, ...): kept symbolic (a partial of a partial binds both, as functools).
    if (args.empty()) throw TraceError{"TypeError: type 'partial' takes at least one argument"};
    VT* func = args[0];
    VTs bound(args.begin() + 1, args.end());
    if (func->kind == VT::Kind::Partial) {
      auto* inner = static_cast<PartialVT*>(func);
      return t_.make<PartialVT>(inner->func, boundArgs(inner->args, std::move(bound)),
                                boundKwargs(inner->kwargs, std::move(kwargs)));
    }
    return t_.make<PartialVT>(func, std::move(bound), std::move(kwargs));
  }
  if (isNamedTupleClass(cls))
    return constructNamedTuple(cls, std::move(args), std::move(kwargs));
  if (isOrderedDictClass(cls)) {
    // OrderedDict(...) (Module.state_dict's destination): a dict made while tracing, rebuilt as
    // an OrderedDict where it leaves the graph. (Its own methods, move_to_end, are not traced.)
    bool handled = false;
    VT* made = callBuiltin(reinterpret_cast<PyObject*>(&PyDict_Type), args, kwargs, handled);
    if (!handled || made->kind != VT::Kind::Dict) throw Unsupported{"constructing a collections.OrderedDict object"};
    static_cast<DictVT*>(made)->madeType = nb::borrow(cls);
    return made;
  }
  // An exception to raise (`raise ValueError("...")`): made for real from constants when its
  // class constructs as BaseException does (no __new__ or __init__ of Python code).
  auto* type = reinterpret_cast<PyTypeObject*>(cls.ptr());
  if (PyType_IsSubtype(type, reinterpret_cast<PyTypeObject*>(PyExc_BaseException)) && allConstant(args) &&
      std::all_of(kwargs.begin(), kwargs.end(), [](const auto& kv) { return kv.second->kind == VT::Kind::Constant; })) {
    PyObject* init = _PyType_Lookup(type, nb::str("__init__").ptr());
    PyObject* made = _PyType_Lookup(type, nb::str("__new__").ptr());
    if (!(init && PyFunction_Check(init)) && !(made && PyFunction_Check(made))) {
      nb::object instance = constructFromConstants(cls, args, kwargs, "an exception's arguments");
      std::string text = nb::cast<std::string>(nb::str(instance));
      return t_.make<ExceptionVT>(nb::borrow(cls), instance,
                                  std::string(type->tp_name) + (text.empty() ? "" : ": " + text));
    }
  }
  // Instances of plain user classes (object.__new__, a Python __init__) are tracked
  // symbolically; they must not escape the trace.
  if (Py_TYPE(cls.ptr()) != &PyType_Type || type->tp_new != PyBaseObject_Type.tp_new)
    throw Unsupported{std::string("constructing a ") + type->tp_name + " object"};
  auto* obj = t_.make<NewObjectVT>(nb::borrow(cls));
  PyObject* init = _PyType_Lookup(type, nb::str("__init__").ptr());
  if (init && PyFunction_Check(init)) {
    args.insert(args.begin(), obj);
    inlineFunction(t_.make<FunctionVT>(nb::borrow(init)), std::move(args), std::move(kwargs));
  } else if (!args.empty() || !kwargs.empty()) {
    throw TraceError{std::string("TypeError: ") + type->tp_name + "() takes no arguments"};
  }
  return obj;
}

VT* InstructionTranslator::callBuiltin(nb::handle fn, VTs& args, Kwargs& kwargs, bool& handled) {
  handled = true;
  auto is = [&](const char* name) { return fn.ptr() == builtin(name).ptr(); };
  static nb::handle kiln = nb::object(nb::module_::import_("kiln")).release();
  for (const char* mode : {"no_grad", "enable_grad", "set_grad_enabled", "inference_mode"}) {
    if (fn.ptr() != kiln.attr(mode).ptr()) continue;
    if (std::string(mode) == "set_grad_enabled") {
      bool on = PyObject_IsTrue(constantValue(args.at(0), "a grad mode").ptr());
      auto* g = t_.make<GradModeVT>(on);
      // set_grad_enabled takes effect when called, like torch's; `with` restores it.
      g->previous = t_.gradMode();
      t_.setGradMode(on);
      return g;
    }
    if (std::string(mode) == "inference_mode") {
      if (!args.empty() && !PyObject_IsTrue(constantValue(args[0], "a mode").ptr()))
        return t_.make<GradModeVT>(t_.gradMode());
      // Traced as no_grad, its results came out of the graph as ordinary tensors
      // (is_inference() False, usable by autograd): the block runs eagerly.
      throw Unsupported{"kiln.inference_mode() (its results are inference tensors)"};
    }
    return t_.make<GradModeVT>(std::string(mode) == "enable_grad");
  }
  // kiln._C's own grad-mode switch (an optimizer's step runs under it): a grad-mode change of
  // the trace, as `with no_grad()` is.
  static nb::handle setGradEnabled = nb::object(kiln.attr("_C").attr("_set_grad_enabled")).release();
  static nb::handle isGradEnabled = nb::object(kiln.attr("_C").attr("is_grad_enabled")).release();
  if (fn.ptr() == setGradEnabled.ptr() && args.size() == 1 && kwargs.empty()) {
    t_.setGradMode(PyObject_IsTrue(constantValue(args[0], "a grad mode").ptr()));
    return t_.none();
  }
  if (fn.ptr() == isGradEnabled.ptr() && args.empty() && kwargs.empty())
    return t_.constant(nb::bool_(t_.gradMode()));

  if (is("print")) throw Unsupported{"print() (a side effect the graph cannot replay)"};
  if (is("super") && args.empty()) return zeroArgSuper();
  if (is("len")) {
    VT* x = args.at(0);
    if (x->kind == VT::Kind::Set) return t_.constant(nb::int_(PySet_GET_SIZE(static_cast<SetVT*>(x)->set.ptr())));
    if (x->kind == VT::Kind::List || x->kind == VT::Kind::Tuple)
      return t_.constant(nb::int_(static_cast<SequenceVT*>(x)->items.size()));
    if (x->kind == VT::Kind::Dict)
      return t_.constant(nb::int_(static_cast<DictVT*>(x)->entries.size()));
    return t_.constant(nb::int_(nb::len(t_.toPython(x))));
  }
  if ((is("type") || is("isinstance")) && !args.empty() && args[0]->kind == VT::Kind::NewObject && kwargs.empty()) {
    // An object made while tracing (a dataclass result): its class is known.
    nb::handle cls = static_cast<NewObjectVT*>(args[0])->cls;
    if (is("type") && args.size() == 1) return t_.wrapResult(cls);
    if (is("isinstance") && args.size() == 2) {
      int r = PyObject_IsSubclass(cls.ptr(), t_.toPython(args[1]).ptr());
      if (r < 0) throw nb::python_error();
      return t_.constant(nb::bool_(r == 1));
    }
  }
  if ((is("type") || is("isinstance")) && !args.empty() && kwargs.empty() &&
      (args[0]->kind == VT::Kind::List || args[0]->kind == VT::Kind::Tuple)) {
    // A list or tuple (of objects made while tracing, say): its class is known without
    // converting its items.
    auto* seq = static_cast<SequenceVT*>(args[0]);
    nb::handle cls = seq->namedType.is_valid() ? seq->namedType
                     : seq->original.is_valid()
                         ? nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(seq->original.ptr())))
                         : nb::handle(reinterpret_cast<PyObject*>(args[0]->kind == VT::Kind::List ? &PyList_Type
                                                                                                 : &PyTuple_Type));
    if (is("type") && args.size() == 1) return t_.wrapResult(cls);
    if (is("isinstance") && args.size() == 2) {
      int r = PyObject_IsSubclass(cls.ptr(), t_.toPython(args[1]).ptr());
      if (r < 0) throw nb::python_error();
      return t_.constant(nb::bool_(r == 1));
    }
  }
  if (is("callable") && args.size() == 1 && kwargs.empty()) {
    // Functions made while tracing (`default(x, lambda: ...)`) cannot be handed to the real
    // callable(): what is callable is known from the kind.
    switch (args[0]->kind) {
    case VT::Kind::Function:
    case VT::Kind::NestedFunction:
    case VT::Kind::Method:
    case VT::Kind::Partial:
    case VT::Kind::Module:
      return t_.constant(nb::bool_(true));
    case VT::Kind::Tensor:
    case VT::Kind::List:
    case VT::Kind::Tuple:
    case VT::Kind::Dict:
    case VT::Kind::Set:
    case VT::Kind::Number:
    case VT::Kind::Ndarray:
      return t_.constant(nb::bool_(false));
    case VT::Kind::NewObject: {
      auto* type = reinterpret_cast<PyTypeObject*>(static_cast<NewObjectVT*>(args[0])->cls.ptr());
      return t_.constant(nb::bool_(type->tp_call != nullptr));
    }
    default:
      break;
    }
  }
  if (is("isinstance") || is("issubclass") || is("callable") || is("type")) {
    VTs a = args;
    nb::list py;
    // An iterator stands in as an empty one: toPython would hand over (and so use up) its items.
    // A dynamic number stands in as a number of its type.
    for (VT* v : a)
      py.append(v->kind == VT::Kind::Iterator ? nb::iter(nb::list())
                : v->kind == VT::Kind::Number ? (static_cast<NumberVT*>(v)->isFloat ? nb::object(nb::float_(0.5))
                                                                                   : nb::object(nb::int_(2)))
                                              : t_.toPython(v));
    return t_.wrapResult(fn(*py));
  }
  if (is("range") || is("slice")) {
    // A loop over range(size) unrolls to as many steps as the size: that size specializes.
    static nb::handle loopBound =
        nb::object(nb::module_::import_("kiln.compiler.dynamic").attr("record_loop_bound")).release();
    for (VT* a : args) {
      nb::object bound = constantValue(a, "a range bound");
      if (is("range")) loopBound(bound);
    }
    return t_.callReal(fn, args, kwargs);
  }
  if (is("enumerate")) {
    VTs items = unpack(args.at(0));
    long start = args.size() > 1 ? nb::cast<long>(constantValue(args[1], "enumerate's start")) : 0;
    for (auto& [k, v] : kwargs)
      if (k == "start") start = nb::cast<long>(constantValue(v, "enumerate's start"));
    VTs out;
    for (size_t i = 0; i < items.size(); ++i)
      out.push_back(t_.make<SequenceVT>(VT::Kind::Tuple, VTs{t_.constant(nb::int_(start + long(i))), items[i]}));
    return t_.make<IteratorVT>(out);
  }
  if (is("zip")) {
    std::vector<VTs> seqs;
    size_t n = SIZE_MAX;
    for (VT* a : args) {
      seqs.push_back(unpack(a));
      n = std::min(n, seqs.back().size());
    }
    VTs out;
    for (size_t i = 0; seqs.size() && i < n; ++i) {
      VTs row;
      for (auto& s : seqs)
        row.push_back(s[i]);
      out.push_back(t_.make<SequenceVT>(VT::Kind::Tuple, row));
    }
    return t_.make<IteratorVT>(out);
  }
  static nb::handle chain = nb::object(nb::module_::import_("itertools").attr("chain")).release();
  if (fn.ptr() == chain.ptr() && kwargs.empty()) {
    // itertools.chain(a, b, ...): the items of each in turn (einops walks its axes with it).
    VTs items;
    for (VT* a : args) {
      VTs more = unpack(a);
      items.insert(items.end(), more.begin(), more.end());
    }
    return t_.make<IteratorVT>(items);
  }
  if (is("reversed")) {
    VTs items = unpack(args.at(0));
    std::reverse(items.begin(), items.end());
    return t_.make<IteratorVT>(items);
  }
  if (is("iter")) return getIter(args.at(0));
  if (is("next") && !args.empty() && args.size() <= 2 && args[0]->kind == VT::Kind::Iterator && kwargs.empty()) {
    // One item of a traced iterator (run for real, next() was handed all of its remaining
    // items and the ones after the first were lost: a second next() raised StopIteration).
    auto* it = static_cast<IteratorVT*>(args[0]);
    if (it->next < it->items.size()) return it->items[it->next++];
    if (args.size() == 2) return args[1];
    throw TraceError{"StopIteration: next() of an exhausted iterator"};
  }
  if (is("map") && args.size() >= 2) {
    std::vector<VTs> seqs;
    size_t n = SIZE_MAX;
    for (size_t i = 1; i < args.size(); ++i) {
      seqs.push_back(unpack(args[i]));
      n = std::min(n, seqs.back().size());
    }
    VTs out;
    for (size_t i = 0; i < n; ++i) {
      VTs row;
      for (auto& sq : seqs)
        row.push_back(sq[i]);
      out.push_back(call(args[0], row, {}));
    }
    return t_.make<IteratorVT>(out);
  }
  if (is("filter") && args.size() == 2) {
    VTs out;
    for (VT* x : unpack(args[1]))
      if (truthy(isNone(args[0]) ? x : call(args[0], VTs{x}, {}))) out.push_back(x);
    return t_.make<IteratorVT>(out);
  }
  if (is("set") && kwargs.empty() && args.size() <= 1) {
    nb::object out = nb::steal(PySet_New(nullptr));
    if (!args.empty())
      for (VT* x : unpack(args[0]))
        if (PySet_Add(out.ptr(), constantValue(x, "a set element").ptr()) < 0) throw nb::python_error();
    return t_.make<SetVT>(out);
  }
  if (is("list") || is("tuple")) {
    VTs items = args.empty() ? VTs{} : unpack(args[0]);
    return t_.make<SequenceVT>(is("list") ? VT::Kind::List : VT::Kind::Tuple, items);
  }
  if (is("dict")) {
    auto* d = t_.make<DictVT>();
    if (!args.empty()) {
      if (args[0]->kind == VT::Kind::Dict) d->entries = static_cast<DictVT*>(args[0])->entries;
      else
        for (VT* pair : unpack(args[0])) {
          VTs kv = unpack(pair);
          dictSet(d, kv.at(0), kv.at(1));
        }
    }
    for (auto& [k, v] : kwargs)
      dictSet(d, t_.constant(nb::str(k.c_str())), v);
    return d;
  }
  if (is("id") && args.size() == 1 && kwargs.empty() && args[0]->kind == VT::Kind::Tensor &&
      static_cast<TensorVT*>(args[0])->real.is_valid()) {
    // A tensor from outside is the real object to the user's code (a parameter keying an
    // optimizer's state, reached both as a key and through param_groups): its id, not its fake's.
    return t_.constant(nb::int_(reinterpret_cast<intptr_t>(static_cast<TensorVT*>(args[0])->real.ptr())));
  }
  if (is("sum")) {
    VTs items = unpack(args.at(0));
    VT* acc = args.size() > 1 ? args[1] : t_.constant(nb::int_(0));
    for (auto& [k, v] : kwargs)
      if (k == "start") acc = v;
    for (VT* x : items)
      acc = binaryOp(kNbAdd, acc, x);
    return acc;
  }
  if ((is("float") || is("int")) && args.size() == 1 && kwargs.empty() && args[0]->kind == VT::Kind::Number) {
    // float(n) and int(n) of a dynamic number: graph values too.
    static nb::handle cls =
        nb::object(nb::module_::import_("kiln._traced_numbers").attr("TracedNumber")).release();
    return t_.callReal(cls.attr(is("float") ? "to_float" : "to_int"), args, {});
  }
  if (is("min") || is("max") || is("sorted") || is("any") || is("all") || is("abs") ||
      is("round") || is("divmod") || is("pow") || is("int") || is("float") || is("bool") ||
      is("str") || is("repr") || is("format") || is("hash") || is("chr") || is("ord")) {
    // The text (or hash) of a tensor is its data (or its identity): run on the fake it printed
    // "device='meta'". As TorchDynamo ("repr() on tensor"), a break.
    if (is("str") || is("repr") || is("format") || is("hash"))
      for (VT* a : args)
        if (containsTensor(a)) throw Unsupported{"str()/repr()/format()/hash() of a tensor (it reads the data)"};
    // Over several values or one iterable: materialize, then run the builtin for real (on
    // tensors that records their ops; a comparison of tensor values is data-dependent).
    if ((is("min") || is("max") || is("sorted") || is("any") || is("all")) && args.size() == 1 &&
        args[0]->kind != VT::Kind::Tensor) {
      VTs items = unpack(args[0]);
      VTs one{t_.make<SequenceVT>(VT::Kind::List, items)};
      return t_.callReal(fn, one, kwargs);
    }
    return t_.callReal(fn, args, kwargs);
  }
  // getattr(x, name, default) and hasattr(x, name) answer a missing attribute (the tracer's
  // "AttributeError: ..." reasons); any other reason the attribute cannot be traced stays a break
  // (answering False or the default there would be silently wrong).
  auto missing = [](const TraceError& e) { return e.reason.starts_with("AttributeError:"); };
  if (is("getattr") && args.size() == 3) {
    try {
      return loadAttr(args[0], nb::cast<std::string>(constantValue(args[1], "an attribute name")));
    } catch (const TraceError& e) {
      if (!missing(e)) throw;
      return args[2];
    }
  }
  if (is("setattr") && args.size() == 3 && kwargs.empty()) {
    storeAttr(args[0], nb::cast<std::string>(constantValue(args[1], "an attribute name")), args[2]);
    return t_.none();
  }
  if (is("getattr") && args.size() == 2)
    return loadAttr(args[0], nb::cast<std::string>(constantValue(args[1], "an attribute name")));
  if (is("hasattr") && args.size() == 2) {
    try {
      loadAttr(args[0], nb::cast<std::string>(constantValue(args[1], "an attribute name")));
      return t_.constant(nb::bool_(true));
    } catch (const TraceError& e) {
      if (!missing(e)) throw;
      return t_.constant(nb::bool_(false));
    }
  }
  // math.* and operator.* functions: real calls (on constants they fold, on tensors they record).
  std::string mod = moduleOf(fn);
  if (PyCFunction_Check(fn.ptr()) && (mod == "math" || mod == "_operator" || mod == "operator"))
    return t_.callReal(fn, args, kwargs);
  handled = false;
  return nullptr;
}

std::string moduleOf(nb::handle obj) {
  PyObject* m = PyObject_GetAttrString(obj.ptr(), "__module__");
  if (!m) {
    PyErr_Clear();
    return "";
  }
  nb::object owned = nb::steal(m);
  return PyUnicode_Check(m) ? nb::cast<std::string>(owned) : "";
}

} // namespace kiln::capture
