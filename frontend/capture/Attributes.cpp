// Attribute loads, subscripts, unpacking and iteration in the symbolic interpreter.
#include <Python.h>

#include <algorithm>

#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/PythonVersion.h"
#include "frontend/capture/SymbolicInterpreter.h"

namespace kiln::capture {

namespace {

// Tensor attributes that are metadata (constants while tracing, guarded by the tensor's guard).
const char* kTensorMetadata[] = {"shape", "dtype", "ndim", "requires_grad", "is_leaf",
                                 "is_sparse", "is_quantized", "layout", "itemsize", "nbytes"};

bool isNnModuleObject(nb::handle o) {
  static nb::handle cls = nb::object(nb::module_::import_("kiln.nn").attr("Module")).release();
  return PyObject_IsInstance(o.ptr(), cls.ptr()) == 1;
}

bool isModuleDictEntry(nb::handle obj, const char* dict, const std::string& name, PyObject** out) {
  PyObject** dictPtr = _PyObject_GetDictPtr(obj.ptr());
  if (!dictPtr || !*dictPtr) return false;
  PyObject* d = PyDict_GetItemString(*dictPtr, dict);
  if (!d || !PyDict_Check(d)) return false;
  *out = PyDict_GetItemString(d, name.c_str());
  return *out != nullptr;
}

// A static method read through an instance is its plain function, a class method is bound to
// the class: what reading it from the class gives (Python's descriptor protocol). Invalid for
// any other attribute.
nb::object staticOrClassMethod(PyObject* attr, nb::handle cls) {
  if (PyObject_TypeCheck(attr, &PyStaticMethod_Type) || PyObject_TypeCheck(attr, &PyClassMethod_Type)) {
    PyObject* got = Py_TYPE(attr)->tp_descr_get(attr, nullptr, cls.ptr());
    if (!got) throw nb::python_error();
    return nb::steal(got);
  }
  return nb::object();
}

} // namespace

VT* InstructionTranslator::loadAttr(VT* obj, const std::string& name) {
  if (obj->kind == VT::Kind::Module || obj->kind == VT::Kind::Object)
    if (VT* stored = t_.storedValue(Tracer::SideEffect::Kind::Attr, identityOf(obj).ptr(), name)) return stored;
  switch (obj->kind) {
  case VT::Kind::Ndarray: return loadNdarrayAttr(static_cast<NdarrayVT*>(obj), name);
  case VT::Kind::Tensor: {
    auto* t = static_cast<TensorVT*>(obj);
    if (name == "device") return t_.constant(t_.deviceOf(t));
    if (name == "is_cpu" || name == "is_cuda" || name == "is_meta") {
      std::string type = nb::cast<std::string>(t_.deviceOf(t).attr("type"));
      return t_.constant(nb::bool_(name == "is_" + type));
    }
    if (name == "grad") return t_.loadGrad(t);
    // A tensor that does not require grad has no grad_fn (zero_grad(set_to_none=False) asks).
    if (name == "grad_fn" && !nb::cast<bool>(t->fake.attr("requires_grad"))) return t_.none();
    // `p.data`: the tensor's values without its autograd history, as TorchDynamo traces it
    // (a detached alias: `p.data.add_(g)` writes p, `h.data` carries no graph).
    if (name == "data") return callMethod(t_.make<MethodVT>(obj, "detach"), {}, {});
    if (name == "grad_fn" || name == "_version") throw Unsupported{"Tensor." + name};
    for (const char* m : kTensorMetadata)
      if (name == m) {
        VT* v = t_.wrapResult(t->fake.attr(name.c_str()));
        return name == "shape" ? t_.tagSizes(v) : v;
      }
    PyObject* descr = _PyType_Lookup(Py_TYPE(t->fake.ptr()), nb::str(name.c_str()).ptr());
    if (!descr) throw TraceError{"AttributeError: 'Tensor' object has no attribute '" + name + "'"};
    if (PyObject_TypeCheck(descr, &PyProperty_Type) || Py_TYPE(descr) == &PyGetSetDescr_Type) {
      static nb::handle getattr = nb::object(nb::module_::import_("builtins").attr("getattr")).release();
      VTs args{obj, t_.constant(nb::str(name.c_str()))};
      return t_.callReal(getattr, args, {});
    }
    return t_.make<MethodVT>(obj, name);
  }
  case VT::Kind::Module: {
    auto* m = static_cast<ModuleVT*>(obj);
    nb::handle mod = m->module;
    PyObject** dictPtr = _PyObject_GetDictPtr(mod.ptr());
    // `self.__dict__` (nn.Module.__getattr__ traced): the instance dict, as a dict from outside
    // (keys guarded, each value reached through it).
    if (name == "__dict__" && dictPtr && *dictPtr && m->source)
      return t_.wrap(*dictPtr, attrSource(m->source, name), true, m->path);
    if (dictPtr && *dictPtr) {
      if (PyObject* v = PyDict_GetItemString(*dictPtr, name.c_str()))
        return t_.wrap(v, m->source ? attrSource(m->source, name) : nullptr, true,
                       m->path.empty() ? name : m->path + "." + name);
    }
    for (const char* dict : {"_parameters", "_buffers", "_modules"}) {
      PyObject* v = nullptr;
      if (!isModuleDictEntry(mod, dict, name, &v)) continue;
      if (v == Py_None) return t_.none();
      SourcePtr src = m->source ? itemSource(attrSource(m->source, dict), nb::str(name.c_str())) : nullptr;
      return t_.wrap(v, src, true, m->path.empty() ? name : m->path + "." + name);
    }
    return loadClassAttr(obj, mod, name);
  }
  case VT::Kind::Object: {
    auto* o = static_cast<ObjectVT*>(obj);
    nb::handle x = o->object;
    if (PyModule_Check(x.ptr())) {
      // Attributes of Python modules (kiln.relu, math.pi) are taken as stable: not guarded.
      PyObject* v = PyObject_GetAttrString(x.ptr(), name.c_str());
      if (!v) {
        PyErr_Clear();
        throw TraceError{"AttributeError: module has no attribute '" + name + "'"};
      }
      return t_.wrap(nb::steal(v), nullptr);
    }
    if (PyType_Check(x.ptr()) || PyCFunction_Check(x.ptr()) ||
        Py_TYPE(x.ptr())->tp_name == std::string("kiln._C._OpFunction")) {
      PyObject* v = PyObject_GetAttrString(x.ptr(), name.c_str());
      if (!v) {
        PyErr_Clear();
        throw TraceError{"AttributeError: '" + std::string(kindName(obj)) + "' has no attribute '" + name + "'"};
      }
      return t_.wrap(nb::steal(v), nullptr);
    }
    PyObject** dictPtr = _PyObject_GetDictPtr(x.ptr());
    if (dictPtr && *dictPtr)
      if (PyObject* v = PyDict_GetItemString(*dictPtr, name.c_str()))
        return t_.wrap(v, o->source ? attrSource(o->source, name) : nullptr);
    return loadClassAttr(obj, x, name);
  }
  case VT::Kind::List:
  case VT::Kind::Tuple: {
    auto* s = static_cast<SequenceVT*>(obj);
    if (s->namedType.is_valid()) {
      nb::object fields = nb::getattr(s->namedType, "_fields", nb::none());
      if (fields.is_none()) fields = nb::getattr(s->namedType, "__match_args__", nb::none());
      if (!fields.is_none()) {
        size_t i = 0;
        for (nb::handle f : fields) {
          if (nb::cast<std::string>(f) == name && i < s->items.size()) return s->items[i];
          ++i;
        }
      }
      // A constant class attribute (`o._fields`, `o._field_defaults`): read from the class.
      PyObject* classAttr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(s->namedType.ptr()),
                                           nb::str(name.c_str()).ptr());
      if (classAttr && (PyTuple_CheckExact(classAttr) || PyDict_CheckExact(classAttr)) &&
          !PyCallable_Check(classAttr))
        return t_.wrapResult(nb::borrow(classAttr));
    }
    return t_.make<MethodVT>(obj, name);
  }
  case VT::Kind::Dict:
  case VT::Kind::Set:
    return t_.make<MethodVT>(obj, name);
  case VT::Kind::Super: {
    auto* sup = static_cast<SuperVT*>(obj);
    nb::handle selfType = sup->self->kind == VT::Kind::NewObject
                              ? nb::handle(static_cast<NewObjectVT*>(sup->self)->cls)
                              : nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(identityOf(sup->self).ptr())));
    nb::tuple mro = nb::borrow<nb::tuple>(reinterpret_cast<PyTypeObject*>(selfType.ptr())->tp_mro);
    bool after = false;
    for (nb::handle base : mro) {
      if (!after) {
        after = base.ptr() == sup->cls.ptr();
        continue;
      }
      nb::object dict = nb::steal(pyversion::typeDict(reinterpret_cast<PyTypeObject*>(base.ptr())));
      PyObject* attr = dict.is_valid() ? PyDict_GetItemString(dict.ptr(), name.c_str()) : nullptr;
      if (!attr) continue;
      if (PyObject_TypeCheck(attr, &PyStaticMethod_Type) || PyObject_TypeCheck(attr, &PyClassMethod_Type))
        throw Unsupported{"super()." + name + " (a static or class method)"};
      auto* m = t_.make<MethodVT>(sup->self, name);
      m->function = nb::borrow(attr);
      return m;
    }
    throw TraceError{"AttributeError: 'super' object has no attribute '" + name + "'"};
  }
  case VT::Kind::NewObject: {
    auto* o = static_cast<NewObjectVT*>(obj);
    if (VT* v = o->find(name)) return v;
    PyObject* attr = _PyType_Lookup(reinterpret_cast<PyTypeObject*>(o->cls.ptr()), nb::str(name.c_str()).ptr());
    if (!attr)
      throw TraceError{"AttributeError: '" + std::string(kindName(obj)) + "' object has no attribute '" + name + "'"};
    if (PyFunction_Check(attr)) return t_.make<MethodVT>(obj, name);
    if (PyObject_TypeCheck(attr, &PyProperty_Type)) {
      nb::object getter = nb::borrow(attr).attr("fget");
      if (PyFunction_Check(getter.ptr())) return call(t_.make<FunctionVT>(getter), VTs{obj}, {});
    }
    if (Py_TYPE(attr)->tp_descr_get == nullptr) return t_.wrap(attr, nullptr);
    if (nb::object method = staticOrClassMethod(attr, o->cls); method.is_valid()) return t_.wrap(method, nullptr);
    throw Unsupported{"the attribute " + name + " of a " + kindName(obj) + " (a descriptor)"};
  }
  case VT::Kind::Constant: {
    PyObject* v = PyObject_GetAttrString(static_cast<ConstantVT*>(obj)->value.ptr(), name.c_str());
    if (!v) {
      PyErr_Clear();
      throw TraceError{"AttributeError: '" + std::string(kindName(obj)) + "' object has no attribute '" + name + "'"};
    }
    nb::object value = nb::steal(v);
    if (PyCFunction_Check(v) || Py_TYPE(v) == &PyMethodDescr_Type ||
        std::string(Py_TYPE(v)->tp_name) == "method-wrapper")
      return t_.make<MethodVT>(obj, name);
    return t_.wrapResult(value);
  }
  case VT::Kind::Function: {
    PyObject* v = PyObject_GetAttrString(static_cast<FunctionVT*>(obj)->fn.ptr(), name.c_str());
    if (!v) {
      PyErr_Clear();
      throw TraceError{"AttributeError: function has no attribute '" + name + "'"};
    }
    return t_.wrapResult(nb::steal(v));
  }
  default:
    throw Unsupported{"reading the attribute " + name + " of a " + kindName(obj)};
  }
}

VT* InstructionTranslator::wrapSubmodule(ModuleVT* parent, nb::handle sub) {
  // A submodule reached by indexing or iterating a container (Sequential, ModuleList): found
  // by identity among the parent's _modules, so it gets a guarded source and a readable path.
  PyObject** dictPtr = _PyObject_GetDictPtr(parent->module.ptr());
  PyObject* modules = dictPtr && *dictPtr ? PyDict_GetItemString(*dictPtr, "_modules") : nullptr;
  if (modules && PyDict_Check(modules)) {
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(modules, &pos, &k, &v)) {
      if (v != sub.ptr() || !PyUnicode_Check(k)) continue;
      std::string key = nb::cast<std::string>(nb::handle(k));
      SourcePtr src = parent->source ? itemSource(attrSource(parent->source, "_modules"), nb::borrow(k)) : nullptr;
      return t_.wrap(sub, src, true, parent->path.empty() ? key : parent->path + "." + key);
    }
  }
  return t_.wrap(sub, nullptr, true);
}

VT* InstructionTranslator::loadClassAttr(VT* obj, nb::handle x, const std::string& name) {
  PyObject* attr = _PyType_Lookup(Py_TYPE(x.ptr()), nb::str(name.c_str()).ptr());
  if (!attr) {
    TraceError missing{"AttributeError: '" + std::string(Py_TYPE(x.ptr())->tp_name) +
                       "' object has no attribute '" + name + "'"};
    // For an `except AttributeError:` to be traced, a later call must find it missing too: the
    // keys of the instance dict (and of a module's parameter, buffer and submodule dicts) are
    // guarded.
    PyObject** dictPtr = _PyObject_GetDictPtr(x.ptr());
    missing.catchable = obj->source && dictPtr && *dictPtr &&
                        (obj->kind == VT::Kind::Object || obj->kind == VT::Kind::Module);
    if (missing.catchable) {
      auto guardKeys = [&](const SourcePtr& source, PyObject* dict) {
        std::vector<PyObject*> keys;
        PyObject *key, *value;
        Py_ssize_t pos = 0;
        while (PyDict_Next(dict, &pos, &key, &value))
          keys.push_back(key);
        source->guardNode(t_.guards()).checkDictKeys(keys);
      };
      guardKeys(attrSource(obj->source, "__dict__"), *dictPtr);
      if (obj->kind == VT::Kind::Module)
        for (const char* table : {"_parameters", "_buffers", "_modules"})
          if (PyObject* d = PyDict_GetItemString(*dictPtr, table); d && PyDict_Check(d))
            guardKeys(attrSource(obj->source, table), d);
    }
    throw missing;
  }
  if (PyFunction_Check(attr)) return t_.make<MethodVT>(obj, name);
  if (PyObject_TypeCheck(attr, &PyProperty_Type)) {
    nb::object getter = nb::borrow(attr).attr("fget");
    if (PyFunction_Check(getter.ptr()))
      return call(t_.make<FunctionVT>(getter), VTs{obj}, {});
  }
  if (Py_TYPE(attr)->tp_descr_get == nullptr) return t_.wrap(attr, nullptr);
  nb::object method = staticOrClassMethod(attr, nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(x.ptr()))));
  if (method.is_valid()) return t_.wrap(method, nullptr);
  // A C method (numpy's ndarray.sum, a slot wrapper): never called while tracing, as its result
  // may depend on the object's data, but loading it is fine: calling it is then the graph break,
  // at the call, which runs it in Python and resumes after it (callMethod), where a break at the
  // load would run the rest of the frame eagerly. At a break it is rebuilt as `(self).name`.
  // The same for a method of a class bound by nanobind (kiln.Generator's manual_seed).
  std::string_view descrType = Py_TYPE(attr)->tp_name;
  if (Py_IS_TYPE(attr, &PyMethodDescr_Type) || Py_IS_TYPE(attr, &PyWrapperDescr_Type) ||
      descrType == "nanobind.nb_method" || descrType == "nb_method")
    return t_.make<MethodVT>(obj, name);
  throw Unsupported{"the attribute " + name + " of a " + Py_TYPE(x.ptr())->tp_name +
                    " (a descriptor)"};
}

// Whether `obj.name = value` on an object from outside the frame can be replayed by setattr after
// the graph, with reads later in the trace seeing `value`: a plain instance attribute (the type's
// own __setattr__, no descriptor of that name), or an nn.Module attribute that is not one of its
// parameters, buffers or submodules (those the graph reads as attributes it captured).
bool InstructionTranslator::replayableStore(VT* obj, const std::string& name, VT* value) {
  nb::handle target = identityOf(obj);
  if (!target.is_valid() || value->kind == VT::Kind::Module) return false;
  PyTypeObject* tp = Py_TYPE(target.ptr());
  if (obj->kind == VT::Kind::Module) {
    for (const char* registry : {"_parameters", "_buffers", "_modules"}) {
      PyObject** dictPtr = _PyObject_GetDictPtr(target.ptr());
      PyObject* reg = dictPtr && *dictPtr ? PyDict_GetItemString(*dictPtr, registry) : nullptr;
      if (!reg) continue;
      int has = PyDict_Check(reg) ? PyDict_Contains(reg, nb::str(name.c_str()).ptr()) : 1;
      if (has != 0) return false;
    }
    return true;
  }
  if (obj->kind != VT::Kind::Object || PyType_Check(target.ptr()) || PyModule_Check(target.ptr()) ||
      !_PyObject_GetDictPtr(target.ptr()) || tp->tp_setattro != PyObject_GenericSetAttr)
    return false;
  PyObject* descr = _PyType_Lookup(tp, nb::str(name.c_str()).ptr());
  return !descr || Py_TYPE(descr)->tp_descr_set == nullptr;
}

// `module.name = value` where value is the parameter or buffer already there (`self.count += 1`
// on a buffer: the in-place add returns the buffer, then Python stores it back): nothing to do.
bool InstructionTranslator::storesItself(VT* obj, const std::string& name, VT* value) {
  if (obj->kind != VT::Kind::Module || value->kind != VT::Kind::Tensor) return false;
  PyObject** dictPtr = _PyObject_GetDictPtr(static_cast<ModuleVT*>(obj)->module.ptr());
  if (!dictPtr || !*dictPtr) return false;
  for (const char* registry : {"_parameters", "_buffers"}) {
    PyObject* reg = PyDict_GetItemString(*dictPtr, registry);
    PyObject* current = reg && PyDict_Check(reg) ? PyDict_GetItemString(reg, name.c_str()) : nullptr;
    if (!current) continue;
    VT* known = t_.knownTensor(current);
    return known && known->kind == VT::Kind::Tensor &&
           static_cast<TensorVT*>(known)->fake.ptr() == static_cast<TensorVT*>(value)->fake.ptr();
  }
  return false;
}

void InstructionTranslator::storeAttr(VT* obj, const std::string& name, VT* value) {
  if (obj->kind == VT::Kind::NewObject) {
    // An object made while tracing: its state lives in the trace (it may not escape it).
    auto* o = static_cast<NewObjectVT*>(obj);
    for (auto& [k, v] : o->attrs)
      if (k == name) {
        v = value;
        return;
      }
    o->attrs.emplace_back(name, value);
    return;
  }
  if (obj->kind == VT::Kind::Module && static_cast<ModuleVT*>(obj)->madeWhileTracing)
    // Its own code reads its attributes for real while tracing: a store replayed after the
    // graph would come too late (and stay on the one object every call shares).
    throw Unsupported{"setting an attribute of an nn.Module made in the compiled code"};
  if (obj->kind == VT::Kind::Tensor && name == "grad") {
    t_.storeGrad(static_cast<TensorVT*>(obj), value);
    return;
  }
  if (obj->kind == VT::Kind::Module && name == "training" &&
      !(value->kind == VT::Kind::Constant &&
        PyObject_RichCompareBool(static_cast<ConstantVT*>(value)->value.ptr(),
                                 nb::getattr(static_cast<ModuleVT*>(obj)->module, "training", nb::none()).ptr(),
                                 Py_EQ) == 1)) {
    // model.eval() / train() switching the mode: replayed after the graph, the switch would come
    // too late for kiln's modules, which run for real while tracing and read their real flag (a
    // BatchNorm traced after eval() would normalize with batch statistics). A graph break at the
    // call; storing the flag a module already has is nothing.
    PyErr_Clear();
    throw Unsupported{"switching a module between training and eval mode (train()/eval()) while "
                      "tracing: kiln's modules read their real flag"};
  }
  if (obj->kind == VT::Kind::Module && name == "training") return;
  if (replayableStore(obj, name, value)) {
    // An nn.Module's or plain object's attribute: replayed with setattr after the graph; reads
    // later in the trace see the stored value.
    t_.recordStore(Tracer::SideEffect::Kind::Attr, identityOf(obj), name, value);
    return;
  }
  if (storesItself(obj, name, value)) return;
  throw Unsupported{"assigning the attribute " + name + " of a " + kindName(obj) +
                    " (a side effect the graph cannot replay)"};
}

namespace {

// A nonempty list (nested lists too) of plain ints or of bools: an index tensor in a subscript.
bool isIndexList(nb::handle v, int depth = 0) {
  if (!PyList_CheckExact(v.ptr()) || PyList_GET_SIZE(v.ptr()) == 0 || depth > 8) return false;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(v.ptr()); ++i) {
    PyObject* x = PyList_GET_ITEM(v.ptr(), i);
    if (!(PyLong_CheckExact(x) || PyBool_Check(x) || isIndexList(x, depth + 1))) return false;
  }
  return true;
}

} // namespace

// A list of constant ints or bools in a tensor subscript (`x[:, [0, 2, 4]]`) indexes as a tensor,
// as in PyTorch. It is made here, as a constant of the graph (like `kiln.tensor([0, 2, 4])`
// written in the traced code), rather than by the indexing binding in the middle of the op,
// where the tracer must refuse a tensor made from Python data.
VT* InstructionTranslator::tensorIndexKey(VT* key) {
  auto convert = [&](VT* k) -> VT* {
    if (k->kind != VT::Kind::List || containsTensor(k)) return k;
    nb::object value = t_.toPython(k);
    if (!isIndexList(value)) return k;
    static nb::handle tensor = nb::object(nb::module_::import_("kiln").attr("tensor")).release();
    return t_.wrapResult(tensor(value));
  };
  if (key->kind != VT::Kind::Tuple) return convert(key);
  auto* s = static_cast<SequenceVT*>(key);
  VTs items;
  bool changed = false;
  for (VT* k : s->items) {
    items.push_back(convert(k));
    changed |= items.back() != k;
  }
  return changed ? t_.make<SequenceVT>(VT::Kind::Tuple, items) : key;
}

VT* InstructionTranslator::getItem(VT* obj, VT* key) {
  switch (obj->kind) {
  case VT::Kind::Ndarray: return applyOperator("getitem", {obj, key});
  case VT::Kind::Tensor:
    return applyOperator("getitem", {obj, tensorIndexKey(key)});
  case VT::Kind::List:
  case VT::Kind::Tuple: {
    auto* s = static_cast<SequenceVT*>(obj);
    nb::object k = constantValue(key, "a list index");
    Py_ssize_t n = Py_ssize_t(s->items.size());
    if (PySlice_Check(k.ptr())) {
      Py_ssize_t start, stop, step, len;
      if (PySlice_GetIndicesEx(k.ptr(), n, &start, &stop, &step, &len) < 0) throw nb::python_error();
      VTs out;
      for (Py_ssize_t i = 0, j = start; i < len; ++i, j += step)
        out.push_back(s->items[size_t(j)]);
      return t_.make<SequenceVT>(obj->kind == VT::Kind::List ? VT::Kind::List : VT::Kind::Tuple, out);
    }
    Py_ssize_t i = PyNumber_AsSsize_t(k.ptr(), PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) throw nb::python_error();
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw TraceError{"IndexError: index out of range"};
    return s->items[size_t(i)];
  }
  case VT::Kind::Dict: {
    auto* d = static_cast<DictVT*>(obj);
    nb::object k = dictKey(key);
    int i = d->find(k.ptr());
    if (i >= 0) return d->entries[size_t(i)].second;
    if (!d->defaultFactory.is_valid() || d->defaultFactory.is_none())
      throw TraceError{"KeyError: " + (python::isTensor(k.ptr()) ? std::string("<a tensor>") : nb::cast<std::string>(nb::repr(k)))};
    // defaultdict.__missing__: the factory's value is stored under the key.
    VT* value = call(t_.wrap(d->defaultFactory, nullptr), {}, {});
    dictSet(d, key, value);
    return value;
  }
  case VT::Kind::Constant:
    return t_.wrapResult(static_cast<ConstantVT*>(obj)->value[constantValue(key, "an index")]);
  case VT::Kind::Module: {
    auto* m = static_cast<ModuleVT*>(obj);
    nb::object sub = m->module[constantValue(key, "a module index")];
    if (isNnModuleObject(sub)) return wrapSubmodule(m, sub);
    return t_.wrapResult(sub);
  }
  default:
    throw Unsupported{std::string("indexing a ") + kindName(obj)};
  }
}

void InstructionTranslator::setItem(VT* obj, VT* key, VT* value) {
  switch (obj->kind) {
  case VT::Kind::Ndarray:
    applyOperator("setitem", {obj, key, value});
    return;
  case VT::Kind::Tensor:
    applyOperator("setitem", {obj, tensorIndexKey(key), value});
    return;
  case VT::Kind::List: {
    auto* s = static_cast<SequenceVT*>(obj);
    Py_ssize_t n = Py_ssize_t(s->items.size());
    nb::object index = constantValue(key, "a list index");
    if (PySlice_Check(index.ptr())) { // xs[a:b] = ... (3.12 also as STORE_SLICE)
      setListSlice(s, index, value);
      return;
    }
    Py_ssize_t i = nb::cast<Py_ssize_t>(index);
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw TraceError{"IndexError: list assignment index out of range"};
    mutateList(s);
    s->items[size_t(i)] = value;
    return;
  }
  case VT::Kind::Dict:
    dictSet(static_cast<DictVT*>(obj), key, value);
    return;
  default:
    throw Unsupported{std::string("assigning an item of a ") + kindName(obj)};
  }
}

// xs[slice] = value, or `del xs[slice]` when value is null.
void InstructionTranslator::setListSlice(SequenceVT* s, nb::handle slice, VT* value) {
  Py_ssize_t start, stop, step;
  if (PySlice_Unpack(slice.ptr(), &start, &stop, &step) < 0) throw nb::python_error();
  Py_ssize_t count = PySlice_AdjustIndices(Py_ssize_t(s->items.size()), &start, &stop, step);
  VTs items = value ? unpack(value) : VTs{}; // null: `del xs[slice]`
  mutateList(s);
  if (!value && step != 1) {
    std::vector<Py_ssize_t> gone;
    for (Py_ssize_t k = 0; k < count; ++k)
      gone.push_back(start + k * step);
    std::sort(gone.rbegin(), gone.rend());
    for (Py_ssize_t i : gone)
      s->items.erase(s->items.begin() + i);
    return;
  }
  if (step == 1) {
    s->items.erase(s->items.begin() + start, s->items.begin() + start + count);
    s->items.insert(s->items.begin() + start, items.begin(), items.end());
    return;
  }
  if (Py_ssize_t(items.size()) != count)
    throw TraceError{"ValueError: attempt to assign sequence of size " + std::to_string(items.size()) +
                     " to extended slice of size " + std::to_string(count)};
  for (Py_ssize_t k = 0; k < count; ++k)
    s->items[size_t(start + k * step)] = items[size_t(k)];
}

void InstructionTranslator::deleteItem(VT* obj, VT* key) {
  if (obj->kind == VT::Kind::Dict) {
    auto* d = static_cast<DictVT*>(obj);
    int i = d->find(dictKey(key).ptr());
    if (i < 0) throw TraceError{"KeyError"};
    mutateDict(d);
    d->entries.erase(d->entries.begin() + i);
    return;
  }
  if (obj->kind == VT::Kind::List) {
    auto* s = static_cast<SequenceVT*>(obj);
    Py_ssize_t n = Py_ssize_t(s->items.size());
    nb::object index = constantValue(key, "a list index");
    if (PySlice_Check(index.ptr())) { // del xs[a:b]
      setListSlice(s, index, nullptr);
      return;
    }
    Py_ssize_t i = nb::cast<Py_ssize_t>(index);
    if (i < 0) i += n;
    if (i < 0 || i >= n) throw TraceError{"IndexError: list assignment index out of range"};
    mutateList(s);
    s->items.erase(s->items.begin() + i);
    return;
  }
  throw Unsupported{std::string("deleting an item of a ") + kindName(obj)};
}

VTs InstructionTranslator::unpack(VT* v) {
  switch (v->kind) {
  case VT::Kind::List:
  case VT::Kind::Tuple:
    return static_cast<SequenceVT*>(v)->items;
  case VT::Kind::Dict: {
    VTs keys;
    for (auto& e : static_cast<DictVT*>(v)->entries)
      keys.push_back(t_.keyVT(e.first));
    return keys;
  }
  case VT::Kind::Iterator: {
    auto* it = static_cast<IteratorVT*>(v);
    VTs rest(it->items.begin() + long(it->next), it->items.end());
    it->next = it->items.size();
    return rest;
  }
  case VT::Kind::Constant: {
    nb::handle c = static_cast<ConstantVT*>(v)->value;
    VTs out;
    Py_ssize_t n = PyObject_Length(c.ptr());
    if (n < 0) {
      PyErr_Clear();
      throw TraceError{std::string("TypeError: '") + kindName(v) + "' object is not iterable"};
    }
    if (n > 100000) throw Unsupported{"iterating over more than 100000 constants"};
    for (nb::handle x : c)
      out.push_back(t_.wrapResult(x));
    return out;
  }
  case VT::Kind::Ndarray:
  case VT::Kind::Tensor: {
    static nb::handle tuple = nb::object(nb::module_::import_("builtins").attr("tuple")).release();
    VT* r = t_.callReal(tuple, VTs{v}, {});
    return unpack(r);
  }
  case VT::Kind::Set: {
    VTs out;
    for (nb::handle x : static_cast<SetVT*>(v)->set)
      out.push_back(t_.constant(nb::borrow(x)));
    return out;
  }
  case VT::Kind::Module: {
    auto* parent = static_cast<ModuleVT*>(v);
    VTs out;
    for (nb::handle m : parent->module)
      out.push_back(wrapSubmodule(parent, m));
    return out;
  }
  default:
    throw Unsupported{std::string("iterating a ") + kindName(v)};
  }
}

VT* InstructionTranslator::getIter(VT* v) {
  if (v->kind == VT::Kind::Iterator) return v;
  return t_.make<IteratorVT>(unpack(v));
}

} // namespace kiln::capture
