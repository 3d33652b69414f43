// GuardTree evaluation: value accessors and checks read CPython and kiln objects directly, so a
// guard never runs user code (no __eq__, __hash__, __getattr__ or __len__ of user types).
#include "frontend/capture/GuardTree.h"
#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/Iterators.h"

#include <cstdint>
#include <nanobind/nanobind.h>

#include <cmath>
#include <cstdio>

#include "runtime/Autocast.h"
#include "runtime/DefaultDtype.h"
#include "runtime/DispatchKey.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"
#include "runtime/autograd/AutogradMeta.h"

namespace nb = nanobind;

namespace kiln::capture {

namespace {

enum class Access : uint8_t {
  Root,
  Local,
  ClosureCell,
  ClosureCellObject,
  Global,
  Item,
  Attr,
  FuncGlobal,
  FuncClosureCell,
  FuncDefault,
  IterItem
};
enum class CheckKind : uint8_t { Type, Id, Const, Length, DictKeys, Tensor, Grad, IterRemaining, RangeIter, Ndarray,
                                 IntRange, IntValues };

struct Check {
  CheckKind kind;
  nb::object object; // the type, the object, the constant, the tuple of dict keys, or (IntValues)
                     // the tuple of the tensor's values
  Py_ssize_t length = 0; // Length, IterRemaining, RangeIter (values left)
  long start = 0, step = 0; // RangeIter; IntRange: the bounds (inclusive)
  std::unique_ptr<TensorCheck> tensor; // Tensor; Grad (null: the grad must be None)
  std::unique_ptr<NdarrayCheck> ndarray; // Ndarray
};

// An object's buffer metadata (a NumPy array's), or false when it has no strided buffer.
bool readNdarray(PyObject* v, NdarrayCheck& out) {
  if (!PyObject_CheckBuffer(v)) return false;
  Py_buffer view;
  if (PyObject_GetBuffer(v, &view, PyBUF_RECORDS_RO) != 0) {
    PyErr_Clear();
    return false;
  }
  out.format = view.format ? view.format : "B";
  out.itemsize = view.itemsize;
  out.sizes.clear();
  out.strides.clear();
  for (int d = 0; d < view.ndim; ++d) {
    out.sizes.push_back(view.shape[d]);
    out.strides.push_back(view.strides[d]);
  }
  PyBuffer_Release(&view);
  return true;
}

std::string ndarrayText(const NdarrayCheck& a) {
  std::string s = "format='" + a.format + "', itemsize=" + std::to_string(a.itemsize) + ", shape=(";
  for (size_t d = 0; d < a.sizes.size(); ++d)
    s += (d ? ", " : "") + std::to_string(a.sizes[d]);
  s += "), strides=(";
  for (size_t d = 0; d < a.strides.size(); ++d)
    s += (d ? ", " : "") + std::to_string(a.strides[d]);
  return s + ")";
}

// Exact None/bool/int/float/str/bytes or a tuple of these, or a frozenset of str/int/bytes (the
// snapshot of a set from outside: a module's _non_persistent_buffers_set): comparing and
// printing them runs only CPython's own C code.
bool isConstValue(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  if (o == Py_None || o == Py_Ellipsis || t == &PyBool_Type || t == &PyLong_Type ||
      t == &PyFloat_Type || t == &PyComplex_Type || t == &PyUnicode_Type || t == &PyBytes_Type)
    return true;
  if (t == &PyFrozenSet_Type) {
    PyObject* it = PyObject_GetIter(o);
    bool ok = it != nullptr;
    while (PyObject* x = it ? PyIter_Next(it) : nullptr) {
      PyTypeObject* xt = Py_TYPE(x);
      ok = ok && (xt == &PyLong_Type || xt == &PyUnicode_Type || xt == &PyBytes_Type);
      Py_DECREF(x);
    }
    Py_XDECREF(it);
    return ok;
  }
  if (t != &PyTuple_Type) return false;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
    if (!isConstValue(PyTuple_GET_ITEM(o, i))) return false;
  return true;
}

// `expected` is a const value (isConstValue); `actual` is anything.
bool constEquals(PyObject* expected, PyObject* actual) {
  if (expected == actual) return true;
  PyTypeObject* t = Py_TYPE(expected);
  if (t == &PyFrozenSet_Type) {
    // A set (or frozenset) with the snapshot's elements: str/int/bytes hash and compare in C.
    if (!PyAnySet_CheckExact(actual) || PySet_GET_SIZE(actual) != PySet_GET_SIZE(expected)) return false;
    return PyObject_RichCompareBool(expected, actual, Py_EQ) == 1;
  }
  if (Py_TYPE(actual) != t || expected == Py_None || expected == Py_Ellipsis || t == &PyBool_Type) return false;
  if (t == &PyFloat_Type) {
    double a = PyFloat_AS_DOUBLE(expected), b = PyFloat_AS_DOUBLE(actual);
    // NaN equals NaN (a guard on NaN must pass again); 0.0 and -0.0 differ (1/x tells them apart).
    if (std::isnan(a)) return std::isnan(b);
    return a == b && std::signbit(a) == std::signbit(b);
  }
  if (t == &PyTuple_Type) {
    Py_ssize_t n = PyTuple_GET_SIZE(expected);
    if (PyTuple_GET_SIZE(actual) != n) return false;
    for (Py_ssize_t i = 0; i < n; ++i)
      if (!constEquals(PyTuple_GET_ITEM(expected, i), PyTuple_GET_ITEM(actual, i))) return false;
    return true;
  }
  // Exact int, complex, str, bytes: their rich comparison is C code that cannot fail.
  return PyObject_RichCompareBool(expected, actual, Py_EQ) == 1;
}

std::string addressText(PyObject* o) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "<%s object at %p>", Py_TYPE(o)->tp_name, static_cast<void*>(o));
  return buf;
}

// repr() for const values, "<type object at 0x...>" for anything else (no user __repr__ runs).
std::string safeRepr(PyObject* o) {
  if (!o) return "<unbound>";
  if (!isConstValue(o)) return addressText(o);
  PyObject* r = PyObject_Repr(o);
  const char* s = r ? PyUnicode_AsUTF8(r) : nullptr;
  std::string out = s ? s : "<unprintable>";
  Py_XDECREF(r);
  if (!s) PyErr_Clear();
  if (out.size() > 200) out = out.substr(0, 197) + "...";
  return out;
}

std::string intListText(IntArrayRef v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i)
    s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The sizes bound to the size symbols while one GuardTree::check runs (duck sizing: the
// first dim of a symbol binds it, later dims of it must be equal). No Python code runs during
// a check, so one table per thread suffices.
thread_local std::vector<int64_t> tSymbolValues;

// Why a tensor fails a check with symbolic dims, or empty when it passes (binding symbols).
std::string dynamicSizesFailure(const TensorCheck& t, const Tensor& x, const std::string& name) {
  if (x.dim() != int64_t(t.sizes.size()))
    return name + ".dim() == " + std::to_string(t.sizes.size()) + " (got " + std::to_string(x.dim()) + ")";
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    int64_t size = x.sizes()[d];
    std::string what = name + ".size()[" + std::to_string(d) + "]";
    if (t.symbols[d] < 0) {
      if (size != t.sizes[d])
        return what + " == " + std::to_string(t.sizes[d]) + " (got " + std::to_string(size) + ")";
      continue;
    }
    std::string sym = "s" + std::to_string(t.symbols[d]);
    if (size < kMinDynamicSize || size > t.maxDynamicSize)
      return std::to_string(kMinDynamicSize) + " <= " + what + " <= " + std::to_string(t.maxDynamicSize) +
             " (symbol " + sym + ", got " + std::to_string(size) + ")";
    size_t id = size_t(t.symbols[d]);
    if (tSymbolValues.size() <= id) tSymbolValues.resize(id + 1, -1);
    if (tSymbolValues[id] < 0) {
      tSymbolValues[id] = size;
    } else if (tSymbolValues[id] != size) {
      return what + " == " + sym + " = " + std::to_string(tSymbolValues[id]) + " (got " +
             std::to_string(size) + ")";
    }
  }
  int64_t expected = 1;
  for (size_t d = x.dim(); d-- > 0;) {
    if (x.sizes()[d] != 1 && x.strides()[d] != expected)
      return name + " is contiguous (got stride " + intListText(x.strides()) + ")";
    expected *= x.sizes()[d];
  }
  return {};
}

bool dynamicSizesPass(const TensorCheck& t, const Tensor& x) {
  return dynamicSizesFailure(t, x, "").empty();
}


const char* boolText(bool b) { return b ? "True" : "False"; }

PyObject* tensorBaseType() {
  static PyObject* type = nb::type<Tensor>().ptr();
  return type;
}

// collections.defaultdict (a C type with no public check macro).
PyObject* defaultDictType() {
  static PyObject* type = nb::object(nb::module_::import_("collections").attr("defaultdict")).release().ptr();
  return type;
}

// The tensor's .grad without making a Python object for it (null when it has none).
const Tensor* gradOf(const Tensor& t) {
  autograd::AutogradMeta* meta = autograd::metaIfAny(t);
  return meta && meta->grad.defined() ? &meta->grad : nullptr;
}

// list/tuple (or a subclass that keeps the base's subscript): reading the item storage is what
// indexing does.
bool isPlainSequence(PyObject* o) {
  PyMappingMethods* m = Py_TYPE(o)->tp_as_mapping;
  if (PyList_Check(o)) return m && m->mp_subscript == PyList_Type.tp_as_mapping->mp_subscript;
  if (PyTuple_Check(o)) return m && m->mp_subscript == PyTuple_Type.tp_as_mapping->mp_subscript;
  return false;
}

// A borrowed dict entry for a str/int key; null (no error set) when absent.
PyObject* dictLookup(PyObject* dict, PyObject* key) {
  PyObject* v = PyDict_GetItemWithError(dict, key);
  if (!v && PyErr_Occurred()) PyErr_Clear();
  return v;
}

// Dict keys and item accessors: constants compare by value, other keys (tensors keying an
// optimizer's state) by identity, so no user __eq__ runs.
bool sameKey(PyObject* expected, PyObject* actual) {
  return isConstValue(expected) ? constEquals(expected, actual) : expected == actual;
}

// The dict types whose item storage is what indexing reads (no __getitem__ of their own runs
// for a present key).
bool isPlainDict(PyObject* o) {
  return PyDict_CheckExact(o) || PyODict_CheckExact(o) ||
         Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(defaultDictType());
}

// An OrderedDict's keys in its own order (move_to_end reorders them, not the underlying dict's
// storage) are `keys`; its C iterator runs no user code.
bool odictKeysAre(PyObject* od, PyObject* keys) {
  PyObject* it = PyObject_GetIter(od);
  if (!it) {
    PyErr_Clear();
    return false;
  }
  bool same = true;
  Py_ssize_t i = 0;
  while (PyObject* k = PyIter_Next(it)) {
    same = same && i < PyTuple_GET_SIZE(keys) && sameKey(PyTuple_GET_ITEM(keys, i), k);
    ++i;
    Py_DECREF(k);
  }
  Py_DECREF(it);
  if (PyErr_Occurred()) PyErr_Clear();
  return same && i == PyTuple_GET_SIZE(keys);
}


} // namespace

struct GuardNode::Impl {
  Access access = Access::Root;
  Py_ssize_t index = 0; // Local, ClosureCell(Object), FuncClosureCell, FuncDefault, IterItem
  nb::object key;       // Item key; name (interned str) for Global, Attr, FuncGlobal
  std::string name;
  std::vector<Check> checks;
  std::vector<std::unique_ptr<GuardNode>> children;

  GuardNode& child(Access a, Py_ssize_t i, PyObject* k, std::string childName);
  size_t numChecks() const;
  void str(std::string& out) const;
  bool check(PyObject* value, const FrameView& frame, std::string* failure) const;
  PyObject* read(PyObject* parent, const FrameView& frame, std::string* why) const;
  bool passes(const Check& c, PyObject* v) const;
  std::string describe(const Check& c) const;
  std::string actual(const Check& c, PyObject* v) const;
  int maxLocal() const;
};

GuardNode::GuardNode() : impl_(std::make_unique<Impl>()) {}
GuardNode::~GuardNode() = default;
const std::string& GuardNode::name() const { return impl_->name; }

GuardNode& GuardNode::Impl::child(Access a, Py_ssize_t i, PyObject* k, std::string childName) {
  for (auto& c : children) {
    Impl& ci = *c->impl_;
    if (ci.access != a || ci.index != i) continue;
    if (!k || (ci.key.ptr() && sameKey(ci.key.ptr(), k))) return *c;
  }
  auto node = std::unique_ptr<GuardNode>(new GuardNode());
  node->impl_->access = a;
  node->impl_->index = i;
  if (k) node->impl_->key = nb::borrow(k);
  node->impl_->name = std::move(childName);
  children.push_back(std::move(node));
  return *children.back();
}

// An interned str for a name: dict lookups of interned keys hit by identity.
static nb::object internedName(const std::string& name) {
  PyObject* s = PyUnicode_InternFromString(name.c_str());
  if (!s) throw nb::python_error();
  return nb::steal(s);
}

bool isIdentityKeyed(PyObject* o) {
  if (PyType_Check(o))
    return Py_TYPE(o)->tp_hash == PyType_Type.tp_hash && Py_TYPE(o)->tp_richcompare == PyType_Type.tp_richcompare;
  return Py_TYPE(o)->tp_hash == PyBaseObject_Type.tp_hash &&
         Py_TYPE(o)->tp_richcompare == PyBaseObject_Type.tp_richcompare &&
         !PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(tensorBaseType()));
}

GuardNode& GuardNode::item(PyObject* key) {
  KILN_CHECK_TYPE(PyUnicode_CheckExact(key) || PyLong_CheckExact(key) || isIdentityKeyed(key) ||
                      PyObject_TypeCheck(key, reinterpret_cast<PyTypeObject*>(tensorBaseType())),
                  "GuardNode.item: key must be a str, an int, a tensor or an object compared by identity (got ", Py_TYPE(key)->tp_name,
                  ")");
  return impl_->child(Access::Item, 0, key, impl_->name + "[" + safeRepr(key) + "]");
}

GuardNode& GuardNode::attr(const std::string& name) {
  nb::object k = internedName(name);
  return impl_->child(Access::Attr, 0, k.ptr(), impl_->name + "." + name);
}

GuardNode& GuardNode::funcGlobal(const std::string& name) {
  nb::object k = internedName(name);
  return impl_->child(Access::FuncGlobal, 0, k.ptr(), impl_->name + ".__globals__['" + name + "']");
}

GuardNode& GuardNode::funcClosureCell(int index) {
  KILN_CHECK_INDEX(index >= 0, "GuardNode.func_closure_cell: negative index ", index);
  return impl_->child(Access::FuncClosureCell, index, nullptr,
                      impl_->name + ".__closure__[" + std::to_string(index) + "].cell_contents");
}

GuardNode& GuardNode::funcDefault(int index) {
  KILN_CHECK_INDEX(index >= 0, "GuardNode.func_default: negative index ", index);
  return impl_->child(Access::FuncDefault, index, nullptr,
                      impl_->name + ".__defaults__[" + std::to_string(index) + "]");
}

GuardNode& GuardNode::iterItem(int index) {
  KILN_CHECK_INDEX(index >= 0, "GuardNode.iter_item: negative index ", index);
  return impl_->child(Access::IterItem, index, nullptr,
                      impl_->name + ".remaining[" + std::to_string(index) + "]");
}

void GuardNode::checkType(PyTypeObject* type) {
  impl_->checks.push_back(
      {CheckKind::Type, nb::borrow(reinterpret_cast<PyObject*>(type)), 0, 0, 0, nullptr, nullptr});
}

void GuardNode::checkId(PyObject* object) {
  impl_->checks.push_back({CheckKind::Id, nb::borrow(object), 0, 0, 0, nullptr, nullptr});
}

void GuardNode::checkConst(PyObject* value) {
  KILN_CHECK_TYPE(
      isConstValue(value), "GuardNode.check_const: ", Py_TYPE(value)->tp_name,
      " is not a constant type (None, Ellipsis, bool, int, float, complex, str, bytes, or a tuple of these)");
  impl_->checks.push_back({CheckKind::Const, nb::borrow(value), 0, 0, 0, nullptr, nullptr});
}

void GuardNode::checkLength(Py_ssize_t n) {
  KILN_CHECK_VALUE(n >= 0, "GuardNode.check_length: negative length ", n);
  impl_->checks.push_back({CheckKind::Length, nb::object(), n, 0, 0, nullptr, nullptr});
}

void GuardNode::checkIterRemaining(Py_ssize_t n) {
  KILN_CHECK_VALUE(n >= 0, "GuardNode.check_iter_remaining: negative length ", n);
  impl_->checks.push_back({CheckKind::IterRemaining, nb::object(), n, 0, 0, nullptr, nullptr});
}

void GuardNode::checkRangeIter(long next, long step, long remaining) {
  KILN_CHECK_VALUE(remaining >= 0, "GuardNode.check_range_iter: negative length ", remaining);
  impl_->checks.push_back({CheckKind::RangeIter, nb::object(), remaining, next, step, nullptr, nullptr});
}

void GuardNode::checkIntRange(long low, long high) {
  impl_->checks.push_back({CheckKind::IntRange, nb::object(), 0, low, high, nullptr, nullptr});
}

namespace {

// An int's value when it fits a long (false for other values, and for bools).
bool readLong(PyObject* v, long* out) {
  if (!PyLong_Check(v) || PyBool_Check(v)) return false;
  int overflow = 0;
  *out = PyLong_AsLongAndOverflow(v, &overflow);
  if (*out == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return false;
  }
  return overflow == 0;
}

} // namespace

void GuardNode::checkDictKeys(const std::vector<PyObject*>& keys) {
  PyObject* tuple = PyTuple_New(Py_ssize_t(keys.size()));
  if (!tuple) throw nb::python_error();
  nb::object keep = nb::steal(tuple);
  for (size_t i = 0; i < keys.size(); ++i) {
    KILN_CHECK_TYPE(PyUnicode_CheckExact(keys[i]) || PyLong_CheckExact(keys[i]) || isIdentityKeyed(keys[i]) ||
                        PyObject_TypeCheck(keys[i], reinterpret_cast<PyTypeObject*>(tensorBaseType())),
                    "GuardNode.check_dict_keys: keys must be str, int, tensors or objects compared by identity (got ",
                    Py_TYPE(keys[i])->tp_name, ")");
    Py_INCREF(keys[i]);
    PyTuple_SET_ITEM(tuple, Py_ssize_t(i), keys[i]);
  }
  impl_->checks.push_back({CheckKind::DictKeys, std::move(keep), 0, 0, 0, nullptr, nullptr});
}

void GuardNode::checkGrad(const TensorCheck* grad) {
  impl_->checks.push_back({CheckKind::Grad, nb::object(), 0, 0, 0,
                           grad ? std::make_unique<TensorCheck>(*grad) : nullptr, nullptr});
}

bool readIntValues(const Tensor& t, std::vector<int64_t>& out) {
  if (!t.device().isCpu() || t.isMeta() || t.dim() > 1 || !(t.dtype() == ScalarType::Int64 || t.dtype() == ScalarType::Int32))
    return false;
  const int64_t n = t.numel(), stride = t.dim() ? t.strides()[0] : 0;
  out.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i)
    out[size_t(i)] = t.dtype() == ScalarType::Int64 ? t.data<int64_t>()[i * stride] : t.data<int32_t>()[i * stride];
  return true;
}

void GuardNode::checkIntValues(const std::vector<int64_t>& values) {
  nb::list items;
  for (int64_t v : values)
    items.append(nb::int_(v));
  impl_->checks.push_back({CheckKind::IntValues, nb::tuple(items), 0, 0, 0, nullptr, nullptr});
}

namespace {

// Whether `want` (a tuple of ints) holds exactly `values`.
bool sameIntValues(PyObject* want, const std::vector<int64_t>& values) {
  if (PyTuple_GET_SIZE(want) != Py_ssize_t(values.size())) return false;
  for (size_t i = 0; i < values.size(); ++i)
    if (PyLong_AsLongLong(PyTuple_GET_ITEM(want, Py_ssize_t(i))) != values[i]) return false;
  return true;
}

std::vector<int64_t> intValuesOf(PyObject* tuple) {
  std::vector<int64_t> values;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(tuple); ++i)
    values.push_back(PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i)));
  return values;
}

} // namespace

void GuardNode::checkNdarray(const NdarrayCheck& a) {
  Check c{CheckKind::Ndarray, nb::object(), 0, 0, 0, nullptr, nullptr};
  c.ndarray = std::make_unique<NdarrayCheck>(a);
  impl_->checks.push_back(std::move(c));
}

void GuardNode::checkTensor(const TensorCheck& t) {
  PyObject* type = reinterpret_cast<PyObject*>(t.type);
  KILN_CHECK_TYPE(type && PyType_Check(type) && PyObject_IsSubclass(type, tensorBaseType()) == 1,
                  "GuardNode.check_tensor: the type must be a tensor type");
  impl_->checks.push_back(
      {CheckKind::Tensor, nb::borrow(type), 0, 0, 0, std::make_unique<TensorCheck>(t), nullptr});
}

// Reads this node's value from its parent's (or from the frame for the tree's accessors).
// Returns a borrowed reference, or null with `why` saying what was missing.
PyObject* GuardNode::Impl::read(PyObject* parent, const FrameView& frame, std::string* why) const {
  auto fail = [&](std::string text) -> PyObject* {
    if (why) *why = std::move(text);
    return nullptr;
  };
  switch (access) {
  case Access::Root:
    return nullptr;
  case Access::Local: {
    PyObject* v = frame.locals ? frame.locals[index] : nullptr;
    return v ? v : fail("unbound");
  }
  case Access::ClosureCell: {
    PyObject* c = frame.closure;
    if (!c || !PyTuple_Check(c) || index >= PyTuple_GET_SIZE(c)) return fail("no such cell");
    PyObject* cell = PyTuple_GET_ITEM(c, index);
    PyObject* v = PyCell_Check(cell) ? PyCell_GET(cell) : nullptr;
    return v ? v : fail("empty cell");
  }
  case Access::ClosureCellObject: {
    PyObject* c = frame.closure;
    if (!c || !PyTuple_Check(c) || index >= PyTuple_GET_SIZE(c)) return fail("no such cell");
    return PyTuple_GET_ITEM(c, index);
  }
  case Access::Global: {
    PyObject* v = frame.globals ? dictLookup(frame.globals, key.ptr()) : nullptr;
    if (!v && frame.builtins) v = dictLookup(frame.builtins, key.ptr());
    return v ? v : fail("undefined");
  }
  case Access::Item: {
    // OrderedDict (nn.Module's _parameters/_modules) and defaultdict (an optimizer's state) keep
    // dict's lookup for present keys, so they read the same. A tensor key hashes by identity.
    if (isPlainDict(parent)) {
      PyObject* v = dictLookup(parent, key.ptr());
      return v ? v : fail("missing key");
    }
    if (!PyLong_CheckExact(key.ptr()) || !isPlainSequence(parent))
      return fail(std::string("item of a ") + Py_TYPE(parent)->tp_name);
    Py_ssize_t i = PyLong_AsSsize_t(key.ptr());
    if (i == -1 && PyErr_Occurred()) PyErr_Clear();
    Py_ssize_t n = PyList_Check(parent) ? PyList_GET_SIZE(parent) : PyTuple_GET_SIZE(parent);
    if (i < 0) i += n;
    if (i < 0 || i >= n) return fail("index out of range");
    return PyList_Check(parent) ? PyList_GET_ITEM(parent, i) : PyTuple_GET_ITEM(parent, i);
  }
  case Access::Attr: {
    // A bound builtin method's owner (`res.append` on a resume function's stack): no __dict__.
    if (PyCFunction_Check(parent) && PyUnicode_CompareWithASCIIString(key.ptr(), "__self__") == 0) {
      PyObject* owner = PyCFunction_GET_SELF(parent);
      return owner && !PyModule_Check(owner) ? owner : fail("a function without __self__");
    }
    PyObject* dict = nullptr;
    if (PyModule_Check(parent)) {
      dict = PyModule_GetDict(parent);
    } else {
      // Materialising a managed dict allocates; keep the collector (and so finalizers) out.
      int gcWasEnabled = PyGC_Disable();
      PyObject** slot = _PyObject_GetDictPtr(parent);
      if (gcWasEnabled) PyGC_Enable();
      dict = slot ? *slot : nullptr;
    }
    if (!dict) return fail(std::string("a ") + Py_TYPE(parent)->tp_name + " without __dict__");
    // `obj.__dict__` itself (a module's instance dict read by nn.Module.__getattr__).
    if (!PyModule_Check(parent) && PyUnicode_CompareWithASCIIString(key.ptr(), "__dict__") == 0) return dict;
    PyObject* v = dictLookup(dict, key.ptr());
    return v ? v : fail("no such attribute");
  }
  case Access::FuncGlobal: {
    if (!PyFunction_Check(parent))
      return fail(std::string("a ") + Py_TYPE(parent)->tp_name + ", not a function");
    auto* f = reinterpret_cast<PyFunctionObject*>(parent);
    PyObject* v = dictLookup(f->func_globals, key.ptr());
    if (!v) v = dictLookup(f->func_builtins, key.ptr());
    return v ? v : fail("undefined");
  }
  case Access::FuncClosureCell:
  case Access::FuncDefault: {
    if (!PyFunction_Check(parent))
      return fail(std::string("a ") + Py_TYPE(parent)->tp_name + ", not a function");
    auto* f = reinterpret_cast<PyFunctionObject*>(parent);
    PyObject* t = access == Access::FuncDefault ? f->func_defaults : f->func_closure;
    if (!t || index >= PyTuple_GET_SIZE(t)) return fail("index out of range");
    PyObject* v = PyTuple_GET_ITEM(t, index);
    if (access == Access::FuncDefault) return v;
    v = PyCell_Check(v) ? PyCell_GET(v) : nullptr;
    return v ? v : fail("empty cell");
  }
  case Access::IterItem: {
    if (!iterators::isSeqIter(parent)) return fail(std::string("a ") + Py_TYPE(parent)->tp_name);
    PyObject* v = iterators::seqIterItem(parent, index);
    return v ? v : fail("fewer items left");
  }
  }
  return nullptr;
}

bool GuardNode::Impl::passes(const Check& c, PyObject* v) const {
  switch (c.kind) {
  case CheckKind::Type:
    return reinterpret_cast<PyObject*>(Py_TYPE(v)) == c.object.ptr();
  case CheckKind::Id:
    return v == c.object.ptr();
  case CheckKind::Const:
    return constEquals(c.object.ptr(), v);
  case CheckKind::Length:
    if (PyList_Check(v)) return PyList_GET_SIZE(v) == c.length;
    if (PyTuple_Check(v)) return PyTuple_GET_SIZE(v) == c.length;
    if (PyDict_Check(v)) return PyDict_GET_SIZE(v) == c.length;
    return false;
  case CheckKind::DictKeys: {
    PyObject* keys = c.object.ptr();
    if (!isPlainDict(v) || PyDict_GET_SIZE(v) != PyTuple_GET_SIZE(keys)) return false;
    Py_ssize_t pos = 0, i = 0;
    PyObject *k, *value;
    if (PyODict_CheckExact(v)) return odictKeysAre(v, keys);
    while (PyDict_Next(v, &pos, &k, &value))
      if (!sameKey(PyTuple_GET_ITEM(keys, i++), k)) return false;
    return true;
  }
  case CheckKind::Tensor: {
    const TensorCheck& t = *c.tensor;
    if (Py_TYPE(v) != t.type || !nb::inst_ready(v)) return false;
    const Tensor& x = *nb::inst_ptr<Tensor>(v);
    if (!(x.dtype() == t.dtype && x.device() == t.device && x.requiresGrad() == t.requiresGrad))
      return false;
    if (t.symbols.empty()) return x.sizes() == IntArrayRef(t.sizes) && x.strides() == IntArrayRef(t.strides);
    return dynamicSizesPass(t, x);
  }
  case CheckKind::IterRemaining:
    return iterators::isSeqIter(v) && iterators::seqIterRemaining(v) == c.length;
  case CheckKind::Ndarray: {
    NdarrayCheck got;
    const NdarrayCheck& want = *c.ndarray;
    return readNdarray(v, got) && got.format == want.format && got.itemsize == want.itemsize &&
           got.sizes == want.sizes && got.strides == want.strides;
  }
  case CheckKind::IntRange: {
    long x = 0;
    return readLong(v, &x) && c.start <= x && x <= c.step;
  }
  case CheckKind::RangeIter: {
    long next = 0, step = 0, left = 0;
    if (!iterators::isRangeIter(v) || !iterators::rangeIterState(v, &next, &step, &left)) return false;
    // An empty rest matches whatever its start and step.
    return left == c.length && (left == 0 || (next == c.start && (left == 1 || step == c.step)));
  }
  case CheckKind::IntValues: {
    std::vector<int64_t> got;
    return PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(tensorBaseType())) && nb::inst_ready(v) &&
           readIntValues(*nb::inst_ptr<Tensor>(v), got) && sameIntValues(c.object.ptr(), got);
  }
  case CheckKind::Grad: {
    if (!PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(tensorBaseType())) || !nb::inst_ready(v))
      return false;
    const Tensor* g = gradOf(*nb::inst_ptr<Tensor>(v));
    if (!c.tensor) return g == nullptr;
    const TensorCheck& t = *c.tensor;
    return g && g->dtype() == t.dtype && g->device() == t.device && g->requiresGrad() == t.requiresGrad &&
           g->sizes() == IntArrayRef(t.sizes) && g->strides() == IntArrayRef(t.strides);
  }
  }
  return false;
}

// The check as str() prints it.
std::string GuardNode::Impl::describe(const Check& c) const {
  switch (c.kind) {
  case CheckKind::Type:
    return "type(" + name + ") is " + reinterpret_cast<PyTypeObject*>(c.object.ptr())->tp_name;
  case CheckKind::Id:
    return name + " is " + addressText(c.object.ptr());
  case CheckKind::Const:
    return name + " == " + safeRepr(c.object.ptr());
  case CheckKind::Length:
    return "len(" + name + ") == " + std::to_string(c.length);
  case CheckKind::IterRemaining:
    return name + " has " + std::to_string(c.length) + " items left";
  case CheckKind::Ndarray:
    return "check_ndarray(" + name + ", " + ndarrayText(*c.ndarray) + ")";
  case CheckKind::IntRange:
    return std::to_string(c.start) + " <= " + name + " <= " + std::to_string(c.step);
  case CheckKind::RangeIter:
    return "list(" + name + ") == list(range(" + std::to_string(c.start) + ", " +
           std::to_string(c.start + c.length * c.step) + ", " + std::to_string(c.step) + "))";
  case CheckKind::DictKeys: {
    std::string s = "list(" + name + ".keys()) == [";
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(c.object.ptr()); ++i)
      s += (i ? ", " : "") + safeRepr(PyTuple_GET_ITEM(c.object.ptr(), i));
    return s + "]";
  }
  case CheckKind::IntValues:
    return name + ".tolist() == " + intListText(intValuesOf(c.object.ptr()));
  case CheckKind::Grad: {
    if (!c.tensor) return name + ".grad is None";
    const TensorCheck& t = *c.tensor;
    return "check_tensor(" + name + ".grad, " + scalarTypeName(t.dtype) + ", device=" + t.device.str() +
           ", size=" + intListText(t.sizes) + ", stride=" + intListText(t.strides) +
           ", requires_grad=" + boolText(t.requiresGrad) + ")";
  }
  case CheckKind::Tensor: {
    const TensorCheck& t = *c.tensor;
    if (!t.symbols.empty()) {
      std::string size = "[";
      for (size_t d = 0; d < t.sizes.size(); ++d)
        size += (d ? ", " : "") + (t.symbols[d] < 0 ? std::to_string(t.sizes[d]) : "s" + std::to_string(t.symbols[d]));
      return "check_tensor(" + name + ", " + t.type->tp_name + ", " + scalarTypeName(t.dtype) +
             ", device=" + t.device.str() + ", size=" + size + "], contiguous, " +
             std::to_string(kMinDynamicSize) + " <= s <= " + std::to_string(t.maxDynamicSize) +
             ", requires_grad=" + boolText(t.requiresGrad) + ")";
    }
    return "check_tensor(" + name + ", " + t.type->tp_name + ", " + scalarTypeName(t.dtype) +
           ", device=" + t.device.str() + ", size=" + intListText(t.sizes) +
           ", stride=" + intListText(t.strides) + ", requires_grad=" + boolText(t.requiresGrad) +
           ")";
  }
  }
  return {};
}

// The failure text for a check that did not pass: the failing part and the value it saw.
std::string GuardNode::Impl::actual(const Check& c, PyObject* v) const {
  std::string got = " (got ";
  switch (c.kind) {
  case CheckKind::Type:
    return describe(c) + got + Py_TYPE(v)->tp_name + ")";
  case CheckKind::Id:
    return describe(c) + got + addressText(v) + ")";
  case CheckKind::Const:
    return describe(c) + got + safeRepr(v) + ")";
  case CheckKind::Length: {
    if (!PyList_Check(v) && !PyTuple_Check(v) && !PyDict_Check(v))
      return describe(c) + got + "a " + Py_TYPE(v)->tp_name + ")";
    Py_ssize_t n = PyList_Check(v)    ? PyList_GET_SIZE(v)
                   : PyTuple_Check(v) ? PyTuple_GET_SIZE(v)
                                      : PyDict_GET_SIZE(v);
    return describe(c) + got + std::to_string(n) + ")";
  }
  case CheckKind::Ndarray: {
    NdarrayCheck x;
    if (!readNdarray(v, x)) return describe(c) + got + "a " + Py_TYPE(v)->tp_name + ")";
    return describe(c) + got + ndarrayText(x) + ")";
  }
  case CheckKind::IterRemaining:
    if (!iterators::isSeqIter(v)) return describe(c) + got + "a " + Py_TYPE(v)->tp_name + ")";
    return describe(c) + got + std::to_string(iterators::seqIterRemaining(v)) + ")";
  case CheckKind::IntRange:
    return describe(c) + got + safeRepr(v) + ")";
  case CheckKind::RangeIter: {
    long next = 0, step = 0, left = 0;
    if (!iterators::isRangeIter(v) || !iterators::rangeIterState(v, &next, &step, &left))
      return describe(c) + got + "a " + Py_TYPE(v)->tp_name + ")";
    return describe(c) + got + "range(" + std::to_string(next) + ", " + std::to_string(next + left * step) +
           ", " + std::to_string(step) + "))";
  }
  case CheckKind::DictKeys: {
    if (!isPlainDict(v)) return describe(c) + got + "a " + Py_TYPE(v)->tp_name + ")";
    std::string keys = "[";
    Py_ssize_t pos = 0;
    PyObject *k, *value;
    while (PyDict_Next(v, &pos, &k, &value))
      keys += (keys.size() > 1 ? ", " : "") + safeRepr(k);
    return describe(c) + got + keys + "])";
  }
  case CheckKind::IntValues: {
    std::vector<int64_t> values;
    bool isTensor = PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(tensorBaseType())) && nb::inst_ready(v);
    if (!isTensor || !readIntValues(*nb::inst_ptr<Tensor>(v), values))
      return describe(c) + got + "not a CPU tensor of integers of at most one dim)";
    return describe(c) + got + intListText(values) + ")";
  }
  case CheckKind::Grad: {
    bool isTensor = PyObject_TypeCheck(v, reinterpret_cast<PyTypeObject*>(tensorBaseType())) && nb::inst_ready(v);
    const Tensor* g = isTensor ? gradOf(*nb::inst_ptr<Tensor>(v)) : nullptr;
    return describe(c) + got + (!isTensor ? std::string("not a tensor") : g ? "a grad of size " + intListText(g->sizes()) + ", " + scalarTypeName(g->dtype()) : std::string("None")) + ")";
  }
  case CheckKind::Tensor: {
    const TensorCheck& t = *c.tensor;
    if (Py_TYPE(v) != t.type)
      return "type(" + name + ") is " + t.type->tp_name + got + Py_TYPE(v)->tp_name + ")";
    if (!nb::inst_ready(v)) return name + " is an initialized tensor (got an uninitialized one)";
    const Tensor& x = *nb::inst_ptr<Tensor>(v);
    if (x.dtype() != t.dtype)
      return name + ".dtype == " + scalarTypeName(t.dtype) + got + scalarTypeName(x.dtype()) + ")";
    if (!(x.device() == t.device))
      return name + ".device == " + t.device.str() + got + x.device().str() + ")";
    if (!t.symbols.empty()) {
      // The symbols this tensor binds were bound by the failed check; the text is rebuilt
      // from the bindings of the checks before it (the failure path of check() only).
      std::string why = dynamicSizesFailure(t, x, name);
      return why.empty() ? name + ".requires_grad == " + boolText(t.requiresGrad) + got +
                               boolText(x.requiresGrad()) + ")"
                         : why;
    }
    if (x.dim() != int64_t(t.sizes.size()))
      return name + ".dim() == " + std::to_string(t.sizes.size()) + got + std::to_string(x.dim()) +
             ")";
    for (size_t d = 0; d < t.sizes.size(); ++d)
      if (x.sizes()[d] != t.sizes[d])
        return name + ".size()[" + std::to_string(d) + "] == " + std::to_string(t.sizes[d]) + got +
               std::to_string(x.sizes()[d]) + ")";
    for (size_t d = 0; d < t.strides.size(); ++d)
      if (x.strides()[d] != t.strides[d])
        return name + ".stride()[" + std::to_string(d) + "] == " + std::to_string(t.strides[d]) +
               got + std::to_string(x.strides()[d]) + ")";
    return name + ".requires_grad == " + boolText(t.requiresGrad) + got +
           boolText(x.requiresGrad()) + ")";
  }
  }
  return {};
}

bool GuardNode::Impl::check(PyObject* value, const FrameView& frame, std::string* failure) const {
  for (const Check& c : checks) {
    if (passes(c, value)) continue;
    if (failure) *failure = actual(c, value);
    return false;
  }
  for (const auto& child : children) {
    const Impl& ci = *child->impl_;
    std::string why;
    PyObject* v = ci.read(value, frame, failure ? &why : nullptr);
    if (!v) {
      if (failure) *failure = ci.name + " exists (got " + why + ")";
      return false;
    }
    if (!ci.check(v, frame, failure)) return false;
  }
  return true;
}

size_t GuardNode::Impl::numChecks() const {
  size_t n = checks.size();
  for (const auto& c : children)
    n += c->impl_->numChecks();
  return n;
}

void GuardNode::Impl::str(std::string& out) const {
  for (const Check& c : checks)
    out += describe(c) + "\n";
  for (const auto& c : children)
    c->impl_->str(out);
}

int GuardNode::Impl::maxLocal() const {
  int m = access == Access::Local ? int(index) : -1;
  for (const auto& c : children)
    m = std::max(m, c->impl_->maxLocal());
  return m;
}

GuardTree::GuardTree() : root_(new GuardNode()) {}
GuardTree::~GuardTree() = default;

GuardNode& GuardTree::local(int index, const std::string& name) {
  KILN_CHECK_INDEX(index >= 0, "GuardTree.local: negative index ", index);
  return root_->impl_->child(Access::Local, index, nullptr, name);
}

GuardNode& GuardTree::closureCell(int index, const std::string& name) {
  KILN_CHECK_INDEX(index >= 0, "GuardTree.closure_cell: negative index ", index);
  return root_->impl_->child(Access::ClosureCell, index, nullptr, name);
}

GuardNode& GuardTree::closureCellObject(int index, const std::string& name) {
  KILN_CHECK_INDEX(index >= 0, "GuardTree.closure_cell_object: negative index ", index);
  return root_->impl_->child(Access::ClosureCellObject, index, nullptr, name);
}

GuardNode& GuardTree::global(const std::string& name) {
  nb::object k = internedName(name);
  return root_->impl_->child(Access::Global, 0, k.ptr(), "G['" + name + "']");
}

void GuardTree::checkGradMode(bool enabled) { gradMode_ = enabled ? 1 : 0; }

void GuardTree::checkAutocast(uint32_t packed) { autocast_ = packed; }

void GuardTree::checkDefaultDtype(ScalarType t) { defaultDtype_ = int(t); }

namespace {
// kiln.set_default_device's value as one number: 0 for none (the CPU), else the device.
int64_t defaultDeviceCode(std::optional<Device> d) {
  return d ? 1 + int64_t(d->type) * 256 + (int64_t(d->index) + 1) : 0;
}
std::string defaultDeviceText(int64_t code) {
  if (code == 0) return "None";
  return Device(DeviceType((code - 1) / 256), int8_t((code - 1) % 256 - 1)).str();
}
} // namespace

void GuardTree::checkDefaultDevice() { defaultDevice_ = defaultDeviceCode(python::defaultDevice()); }

namespace {
std::string autocastText(uint32_t packed) {
  auto dtypeName = [](uint32_t bits) { return scalarTypeName(ScalarType(bits & 0xff)); };
  std::string out = std::string("cpu ") + (packed & 1 ? "on " : "off ") + dtypeName(packed >> 8) +
                    ", cuda " + (packed & 2 ? "on " : "off ") + dtypeName(packed >> 16);
  return out;
}
} // namespace

bool GuardTree::check(const FrameView& frame, std::string* failure) const {
  tSymbolValues.clear();
  if (gradMode_ >= 0 && GradMode::isEnabled() != bool(gradMode_)) {
    if (failure)
      *failure = std::string("grad_mode == ") + boolText(gradMode_) + " (got " +
                 boolText(!gradMode_) + ")";
    return false;
  }
  if (autocast_ >= 0 && autocast::packedState() != uint32_t(autocast_)) {
    if (failure)
      *failure = "autocast == (" + autocastText(uint32_t(autocast_)) + ") (got " +
                 autocastText(autocast::packedState()) + ")";
    return false;
  }
  if (defaultDevice_ >= 0 && defaultDeviceCode(python::defaultDevice()) != defaultDevice_) {
    if (failure)
      *failure = "default_device == " + defaultDeviceText(defaultDevice_) + " (got " +
                 defaultDeviceText(defaultDeviceCode(python::defaultDevice())) + ")";
    return false;
  }
  if (defaultDtype_ >= 0 && defaultFloatType() != ScalarType(defaultDtype_)) {
    if (failure)
      *failure = std::string("default_dtype == ") + scalarTypeName(ScalarType(defaultDtype_)) + " (got " +
                 scalarTypeName(defaultFloatType()) + ")";
    return false;
  }
  return root_->impl_->check(nullptr, frame, failure);
}

size_t GuardTree::numChecks() const {
  return root_->impl_->numChecks() + (gradMode_ >= 0 ? 1 : 0) + (autocast_ >= 0 ? 1 : 0) +
         (defaultDtype_ >= 0 ? 1 : 0) + (defaultDevice_ >= 0 ? 1 : 0);
}

std::string GuardTree::str() const {
  std::string out;
  if (gradMode_ >= 0) out += std::string("grad_mode == ") + boolText(gradMode_) + "\n";
  if (autocast_ >= 0) out += "autocast == (" + autocastText(uint32_t(autocast_)) + ")\n";
  if (defaultDtype_ >= 0) out += std::string("default_dtype == ") + scalarTypeName(ScalarType(defaultDtype_)) + "\n";
  if (defaultDevice_ >= 0) out += "default_device == " + defaultDeviceText(defaultDevice_) + "\n";
  root_->impl_->str(out);
  if (!out.empty()) out.pop_back();
  return out;
}

int GuardTree::numLocals() const { return root_->impl_->maxLocal() + 1; }

} // namespace kiln::capture
