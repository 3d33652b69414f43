// NumPy inside traced code (TorchDynamo's NumpyNdarrayVariable / NumpyVariable): `t.numpy()`,
// `np.asarray(t)` and NumPy functions of such arrays are NdarrayVTs, graph tensors with NumPy's
// semantics. Every NumPy operation on them runs kiln._traced_numpy for real on the fakes (its kiln
// ops become nodes); an array that leaves the graph is made an ndarray by the glue. What that
// module does not trace raises NotImplementedError there: a graph break naming the function.
#include <Python.h>

#include <cstring>

#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/SymbolicInterpreter.h"

namespace kiln::capture {

namespace {

nb::handle tracedNumpy() {
  static nb::handle m = nb::module_::import_("kiln._traced_numpy").release();
  return m;
}

nb::object helper(const char* name) { return tracedNumpy().attr(name); }

// A function, ufunc, type or bound method of NumPy's (np.sin, np.mean, np.float32, np.random.rand).
bool isNumpyCallable(nb::handle fn) {
  std::string tp = Py_TYPE(fn.ptr())->tp_name;
  if (startsWith(tp, "numpy.")) return true; // ufuncs, array-function dispatchers
  std::string mod = moduleOf(fn);
  if (mod != "numpy" && !startsWith(mod, "numpy.")) return false;
  // ndarray and the scalar types are numpy's classes; so are functions in numpy's modules.
  return PyType_Check(fn.ptr()) || PyCallable_Check(fn.ptr());
}

bool holdsNdarray(const VT* v) {
  switch (v->kind) {
  case VT::Kind::Ndarray: return true;
  case VT::Kind::List:
  case VT::Kind::Tuple:
    for (VT* x : static_cast<const SequenceVT*>(v)->items)
      if (holdsNdarray(x)) return true;
    return false;
  default: return false;
  }
}

bool anyNdarray(const VTs& args, const Kwargs& kwargs) {
  for (VT* a : args)
    if (holdsNdarray(a)) return true;
  for (auto& kv : kwargs)
    if (holdsNdarray(kv.second)) return true;
  return false;
}

bool anyTensor(const VTs& args, const Kwargs& kwargs) {
  for (VT* a : args)
    if (containsTensor(a)) return true;
  for (auto& kv : kwargs)
    if (containsTensor(kv.second)) return true;
  return false;
}

nb::handle callableOf(VT* fn) {
  if (fn->kind == VT::Kind::Object) return static_cast<ObjectVT*>(fn)->object;
  if (fn->kind == VT::Kind::Function) return static_cast<FunctionVT*>(fn)->fn;
  // A class read from a module is a constant of the trace (np.float32).
  if (fn->kind == VT::Kind::Constant && PyType_Check(static_cast<ConstantVT*>(fn)->value.ptr()))
    return static_cast<ConstantVT*>(fn)->value;
  return nb::handle();
}

std::string displayName(nb::handle fn) {
  PyObject* n = PyObject_GetAttrString(fn.ptr(), "__name__");
  if (!n) {
    PyErr_Clear();
    return Py_TYPE(fn.ptr())->tp_name;
  }
  nb::object owned = nb::steal(n);
  return PyUnicode_Check(n) ? nb::cast<std::string>(owned) : Py_TYPE(fn.ptr())->tp_name;
}

} // namespace

bool isNumpyScalar(nb::handle value) {
  static nb::handle isScalar = nb::object(helper("is_numpy_scalar")).release();
  std::string mod = moduleOf(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(value.ptr()))));
  return (mod == "numpy" || startsWith(mod, "numpy.")) && nb::cast<bool>(isScalar(value));
}

nb::object Tracer::tracedArray(NdarrayVT* a) {
  static nb::handle cls = nb::object(helper("TracedArray")).release();
  return cls(a->fake, nb::bool_(a->scalar));
}

VT* Tracer::wrapTracedArray(nb::handle value) {
  static nb::handle cls = nb::object(helper("TracedArray")).release();
  if (Py_TYPE(value.ptr()) != reinterpret_cast<PyTypeObject*>(cls.ptr())) return nullptr;
  VT* t = wrapResult(nb::object(value.attr("tensor")));
  if (t->kind != VT::Kind::Tensor) throw Unsupported{"internal: a traced numpy array without a tensor"};
  return make<NdarrayVT>(static_cast<TensorVT*>(t)->fake, nb::cast<bool>(value.attr("scalar")));
}

VT* Tracer::wrapNdarray(nb::handle value, const SourcePtr& source, bool viaModule) {
  static nb::handle fromNumpy = nb::object(nb::module_::import_("kiln").attr("from_numpy")).release();
  GuardNode* g = source ? &source->guardNode(*guards_) : nullptr;
  if (isNumpyScalar(value)) {
    // np.float64(...) handed to the frame (a metric a resume function gets): a 0-d graph input
    // whatever its value, its type guarded.
    static nb::handle scalarInput = nb::object(helper("scalar_input")).release();
    nb::object example = scalarInput(value);
    const Tensor& t = python::unwrapTensor(example.ptr());
    g->checkType(Py_TYPE(value.ptr()));
    Node* node = placeholder(source->identifier());
    inputExprs_.push_back(constantRef(scalarInput) + "(" + source->expr() + ")");
    Tensor fake = compiler::makeFake(t);
    node->meta.type = Type(TensorType{t.dtype(), {}, std::nullopt, t.device()});
    recorder_.bind(fake, node, t.device());
    return make<NdarrayVT>(nb::steal(python::wrapTensor(fake)), true);
  }
  static nb::handle supported = nb::object(helper("supported_array")).release();
  if (!nb::cast<bool>(supported(value))) return nullptr;
  nb::object real = fromNumpy(value); // shares the array's memory
  if (!(source && source->isArgument() && !viaModule)) {
    // A global or closure array: a constant of the graph viewing its memory, pinned by identity.
    if (g) g->checkId(value.ptr());
    VT* t = wrapTensor(real, nullptr, false, source ? source->identifier() : "_ndarray_constant");
    return make<NdarrayVT>(static_cast<TensorVT*>(t)->fake, false);
  }
  const Tensor& t = python::unwrapTensor(real.ptr());
  NdarrayCheck check;
  {
    Py_buffer view;
    if (PyObject_GetBuffer(value.ptr(), &view, PyBUF_RECORDS_RO) != 0) throw nb::python_error();
    check.format = view.format ? view.format : "B";
    check.itemsize = view.itemsize;
    for (int d = 0; d < view.ndim; ++d) {
      check.sizes.push_back(view.shape[d]);
      check.strides.push_back(view.strides[d]);
    }
    PyBuffer_Release(&view);
  }
  g->checkType(Py_TYPE(value.ptr()));
  g->checkNdarray(check);
  std::string expr = source->expr();
  Node* node = placeholder(source->identifier());
  std::string input = constantRef(fromNumpy) + "(" + expr + ")";
  inputExprs_.push_back(input);
  inputExprOf_[node] = input;
  Tensor fake = compiler::makeFake(t);
  node->meta.type = Type(TensorType{t.dtype(), {}, std::nullopt, t.device()});
  for (int64_t s : fake.sizes())
    node->meta.type->tensor().sizes.emplace_back(s);
  recorder_.bind(fake, node, t.device());
  auto* vt = make<NdarrayVT>(nb::steal(python::wrapTensor(fake)), false);
  vt->source = source;
  return vt;
}

std::string Tracer::ndarrayOutputExpr(NdarrayVT* a, std::vector<Node*>& outputs, nb::list& constants) {
  // The tensor's memory as an ndarray (shared, as Tensor.numpy()); a NumPy scalar is its item.
  std::string tensor = outputExpr(make<TensorVT>(a->fake), outputs, constants);
  return tensor + ".numpy()" + (a->scalar ? "[()]" : "");
}

VT* InstructionTranslator::tensorNumpy(TensorVT* t, const VTs& args, const Kwargs& kwargs) {
  static nb::handle fn = nb::object(helper("tensor_numpy")).release();
  VTs all{t};
  all.insert(all.end(), args.begin(), args.end());
  Kwargs kw = kwargs;
  kw.emplace_back("device_type", t_.constant(nb::object(t_.deviceOf(t).attr("type"))));
  return t_.callReal(fn, all, kw);
}

VT* InstructionTranslator::loadNdarrayAttr(NdarrayVT* a, const std::string& name) {
  static nb::handle isMethod = nb::object(helper("is_method")).release();
  if (nb::cast<bool>(isMethod(nb::str(name.c_str())))) return t_.make<MethodVT>(a, name);
  static nb::handle getattr = nb::object(nb::module_::import_("builtins").attr("getattr")).release();
  return t_.callReal(getattr, VTs{a, t_.constant(nb::str(name.c_str()))}, {});
}

VT* InstructionTranslator::callNdarrayMethod(NdarrayVT* a, const std::string& name, VTs args, Kwargs kwargs) {
  static nb::handle callMethodFn = nb::object(helper("call_method")).release();
  args.insert(args.begin(), {a, t_.constant(nb::str(name.c_str()))});
  return t_.callReal(callMethodFn, args, kwargs);
}

VT* InstructionTranslator::callNumpy(nb::handle fn, VTs& args, Kwargs& kwargs) {
  static nb::handle callNumpyFn = nb::object(helper("call_numpy")).release();
  std::string name = displayName(fn);
  std::string mod = moduleOf(fn);
  if (startsWith(mod, "numpy.random") || startsWith(Py_TYPE(fn.ptr())->tp_name, "numpy.random"))
    throw Unsupported{"numpy function np.random." + name + " is not traced (random numbers)"};
  if (anyNdarray(args, kwargs) || anyTensor(args, kwargs)) {
    VTs all{t_.constant(nb::borrow(fn))};
    all.insert(all.end(), args.begin(), args.end());
    return t_.callReal(callNumpyFn, all, kwargs);
  }
  // Only constants: NumPy computes the value now (np.float32(0.5), np.sqrt(2.0), np.zeros(3)),
  // where the function is pure.
  static nb::handle foldable = nb::object(helper("foldable")).release();
  if (!nb::cast<bool>(foldable(fn))) throw Unsupported{"numpy function np." + name + " is not traced"};
  nb::list pyArgs;
  for (VT* a : args) {
    if (a->kind != VT::Kind::Constant) throw Unsupported{"calling numpy function np." + name + " on a " + kindName(a)};
    pyArgs.append(static_cast<ConstantVT*>(a)->value);
  }
  nb::dict pyKwargs;
  for (auto& [k, v] : kwargs) {
    if (v->kind != VT::Kind::Constant) throw Unsupported{"calling numpy function np." + name + " on a " + kindName(v)};
    pyKwargs[k.c_str()] = static_cast<ConstantVT*>(v)->value;
  }
  PyObject* r = PyObject_Call(fn.ptr(), nb::tuple(pyArgs).ptr(), pyKwargs.ptr());
  if (!r) {
    nb::python_error e;
    throw TraceError{std::string(Py_TYPE(e.value().ptr())->tp_name) + ": " + nb::cast<std::string>(nb::str(e.value()))};
  }
  nb::object result = nb::steal(r);
  if (std::string(Py_TYPE(r)->tp_name) == "numpy.ndarray") {
    // A new array at every call: a constant of the graph, copied so that writes into it stay
    // in this call.
    static nb::handle constantArray = nb::object(helper("constant_array")).release();
    VT* tensor = t_.wrapResult(constantArray(result));
    static nb::handle fresh = nb::object(helper("fresh_array")).release();
    return t_.callReal(fresh, VTs{tensor}, {});
  }
  return t_.constant(result); // a NumPy scalar or a Python value: immutable
}

VT* InstructionTranslator::callWithNumpy(VT* fn, VTs& args, Kwargs& kwargs) {
  nb::handle obj = callableOf(fn);
  if (!obj.is_valid()) return nullptr;
  if (isNumpyCallable(obj)) return callNumpy(obj, args, kwargs);
  if (!anyNdarray(args, kwargs)) return nullptr;
  static nb::handle builtins = nb::module_::import_("builtins").release();
  auto is = [&](const char* name) { return obj.ptr() == nb::object(builtins.attr(name)).ptr(); };
  if ((is("isinstance") || is("type")) && !args.empty() && args[0]->kind == VT::Kind::Ndarray) {
    static nb::handle classOf = nb::object(helper("numpy_class")).release();
    nb::object cls = classOf(t_.tracedArray(static_cast<NdarrayVT*>(args[0])));
    if (is("type") && args.size() == 1) return t_.constant(cls);
    if (is("isinstance") && args.size() == 2) {
      int r = PyObject_IsSubclass(cls.ptr(), t_.toPython(args[1]).ptr());
      if (r < 0) throw nb::python_error();
      return t_.constant(nb::bool_(r == 1));
    }
  }
  for (const char* name : {"float", "int", "bool", "complex", "str", "repr", "format"})
    if (is(name))
      throw Unsupported{std::string(name) + "() of a numpy array (its value is data: data-dependent)"};
  for (const char* name : {"len", "abs", "min", "max", "sum", "round", "tuple", "list"})
    if (is(name)) return t_.callReal(obj, args, kwargs);
  // kiln.from_numpy(a) and friends: the array's tensor, shared (from_numpy, as_tensor, asarray)
  // or copied (tensor), then moved to a dtype or device given (kiln_conversion).
  static nb::handle kiln = nb::module_::import_("kiln").release();
  if (!args.empty() && args[0]->kind == VT::Kind::Ndarray && args.size() == 1) {
    static nb::handle conversion = nb::object(helper("kiln_conversion")).release();
    for (const char* name : {"from_numpy", "as_tensor", "asarray", "tensor"})
      if (nb::hasattr(kiln, name) && obj.ptr() == nb::object(kiln.attr(name)).ptr()) {
        VTs all{t_.constant(nb::str(name)), t_.make<TensorVT>(static_cast<NdarrayVT*>(args[0])->fake)};
        return t_.callReal(conversion, all, kwargs);
      }
  }
  // kiln's functions and C functions would get the TracedArray itself; user code is inlined with
  // its numpy arguments.
  std::string mod = moduleOf(obj);
  if (mod == "kiln" || startsWith(mod, "kiln.") || PyCFunction_Check(obj.ptr()) ||
      std::strcmp(Py_TYPE(obj.ptr())->tp_name, "kiln._C._OpFunction") == 0)
    throw Unsupported{"a numpy array passed to " + displayName(obj) + " (not traced)"};
  return nullptr;
}

} // namespace kiln::capture
