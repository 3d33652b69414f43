// Overload resolution and argument conversion for op calls from Python.
#include "frontend/binding/PythonArgParser.h"

#include "frontend/binding/PythonConvert.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"
#include <cstdint>

namespace kiln::python {

namespace {

const char* pyTypeName(PyObject* o) {
  if (isTensor(o)) return "Tensor";
  return Py_TYPE(o)->tp_name;
}

bool asInt(PyObject* o, int64_t& out) {
  if (isPyInt(o)) {
    out = PyLong_AsLongLong(o);
    if (out == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      return false;
    }
    return true;
  }
  if (PyBool_Check(o) || PyFloat_Check(o)) return false;
  if (isTensor(o)) {
    const Tensor& t = unwrapTensor(o);
    if (t.numel() != 1 || !isIntegralType(t.dtype(), false) || t.isMeta()) return false;
    out = t.item().toInt();
    return true;
  }
  if (PyIndex_Check(o)) { // numpy integers and the like
    PyObject* idx = PyNumber_Index(o);
    if (!idx) {
      PyErr_Clear();
      return false;
    }
    out = PyLong_AsLongLong(idx);
    Py_DECREF(idx);
    return true;
  }
  return false;
}

bool asIntList(PyObject* o, const ArgSpec& spec, bool allowSingle, Value& out) {
  int64_t v;
  if ((spec.fixedLength > 0 || allowSingle) && asInt(o, v)) {
    out = Value(std::vector<int64_t>(size_t(std::max(spec.fixedLength, 1)), v));
    return true;
  }
  if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
  PyObject** items = PySequence_Fast_ITEMS(o);
  std::vector<int64_t> list(static_cast<size_t>(n));
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!asInt(items[i], list[size_t(i)])) return false;
  out = Value(std::move(list));
  return true;
}

bool asTensor(PyObject* o, bool allowNumber, Value& out) {
  if (isTensor(o)) {
    out = Value(unwrapTensor(o));
    return true;
  }
  if (allowNumber && PyComplex_Check(o)) {
    // A Python complex number: a wrapped complex128 number (torch's wrapped_scalar_tensor).
    Tensor t = Tensor::empty({}, ScalarType::ComplexDouble);
    t.data<double>()[0] = PyComplex_RealAsDouble(o);
    t.data<double>()[1] = PyComplex_ImagAsDouble(o);
    t.impl()->isWrappedNumber = true;
    out = Value(std::move(t));
    return true;
  }
  if (allowNumber && isNumberLike(o)) {
    out = Value(Tensor::wrapScalar(toScalarFromNumber(o)));
    return true;
  }
  return false;
}

// tensorAsScalar: may a 0-d tensor bind to a Scalar parameter? Resolution tries without it
// first, so an overload taking the tensor as a Tensor wins (as PyTorch orders overloads).
bool convert(PyObject* o, const ArgSpec& spec, bool firstArg, bool allowSingleInt, bool tensorAsScalar,
             Value& out) {
  if (o == Py_None && (spec.optional || spec.type == ArgType::Generator)) {
    out = Value();
    return true;
  }
  switch (spec.type) {
  case ArgType::Tensor:
    return asTensor(o, !firstArg, out);
  case ArgType::TensorList:
  case ArgType::OptionalTensorList: {
    if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    PyObject** items = PySequence_Fast_ITEMS(o);
    if (spec.type == ArgType::TensorList) {
      std::vector<Tensor> list;
      list.reserve(size_t(n));
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (!isTensor(items[i])) return false;
        list.push_back(unwrapTensor(items[i]));
      }
      out = Value(std::move(list));
    } else {
      std::vector<std::optional<Tensor>> list;
      for (Py_ssize_t i = 0; i < n; ++i) {
        if (items[i] == Py_None) list.emplace_back(std::nullopt);
        else if (isTensor(items[i])) list.emplace_back(unwrapTensor(items[i]));
        else return false;
      }
      out = Value(std::move(list));
    }
    return true;
  }
  case ArgType::Int: {
    int64_t v;
    if (!asInt(o, v)) return false;
    out = Value(v);
    return true;
  }
  case ArgType::IntList:
    return asIntList(o, spec, allowSingleInt, out);
  case ArgType::Float: {
    if (PyFloat_Check(o) || isPyInt(o)) {
      out = Value(PyFloat_AsDouble(o));
      return true;
    }
    if (isTensor(o) && unwrapTensor(o).numel() == 1 && !unwrapTensor(o).isMeta()) {
      out = Value(unwrapTensor(o).item().toDouble());
      return true;
    }
    if (!PyBool_Check(o) && isNumberLike(o)) {
      out = Value(toScalarFromNumber(o).toDouble());
      return true;
    }
    return false;
  }
  case ArgType::FloatList: {
    if (PyFloat_Check(o) || isPyInt(o)) {
      out = Value(std::vector<double>{PyFloat_AsDouble(o)});
      return true;
    }
    if (!PyTuple_Check(o) && !PyList_Check(o)) return false;
    std::vector<double> list;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
      PyObject* it = PySequence_Fast_ITEMS(o)[i];
      if (!PyFloat_Check(it) && !isPyInt(it)) return false;
      list.push_back(PyFloat_AsDouble(it));
    }
    out = Value(std::move(list));
    return true;
  }
  case ArgType::Bool:
    if (PyBool_Check(o)) {
      out = Value(o == Py_True);
      return true;
    }
    return false;
  case ArgType::Scalar:
    if (isNumberLike(o)) {
      out = Value(toScalarFromNumber(o));
      return true;
    }
    if (tensorAsScalar && isTensor(o) && unwrapTensor(o).dim() == 0 && !unwrapTensor(o).isMeta()) {
      out = Value(unwrapTensor(o).item());
      return true;
    }
    return false;
  case ArgType::ScalarType:
    if (isDtypeObject(o)) {
      out = Value(dtypeFromObject(o));
      return true;
    }
    if (o == reinterpret_cast<PyObject*>(&PyFloat_Type)) out = Value(ScalarType::Float64);
    else if (o == reinterpret_cast<PyObject*>(&PyLong_Type)) out = Value(ScalarType::Int64);
    else if (o == reinterpret_cast<PyObject*>(&PyBool_Type)) out = Value(ScalarType::Bool);
    else return false;
    return true;
  case ArgType::Device: {
    Device d;
    if (!toDevice(o, d)) return false;
    out = Value(d);
    return true;
  }
  case ArgType::String:
    if (!PyUnicode_Check(o)) return false;
    out = Value(std::string(PyUnicode_AsUTF8(o)));
    return true;
  case ArgType::Layout:
  case ArgType::MemoryFormat:
  case ArgType::Generator:
    return false;
  }
  return false;
}

std::string typeText(const ArgSpec& a) {
  std::string t;
  switch (a.type) {
  case ArgType::Tensor: t = "Tensor"; break;
  case ArgType::TensorList: t = "tuple of Tensors"; break;
  case ArgType::OptionalTensorList: t = "tuple of Tensors or None"; break;
  case ArgType::Int: t = "int"; break;
  case ArgType::IntList: t = "tuple of ints"; break;
  case ArgType::Float: t = "float"; break;
  case ArgType::FloatList: t = "tuple of floats"; break;
  case ArgType::Bool: t = "bool"; break;
  case ArgType::Scalar: t = "Number"; break;
  case ArgType::ScalarType: t = "dtype"; break;
  case ArgType::Device: t = "Device"; break;
  case ArgType::String: t = "str"; break;
  default: t = argTypeName(a.type);
  }
  return t;
}

std::string signatureOf(const OpSchema& s, const std::string& name, bool method) {
  std::string out = name + "(";
  bool first = true, kwMarked = false;
  for (size_t i = method ? 1 : 0; i < s.args.size(); ++i) {
    const ArgSpec& a = s.args[i];
    if (a.kwargOnly && !kwMarked) {
      out += first ? "*" : ", *";
      kwMarked = true;
      first = false;
    }
    out += first ? "" : ", ";
    first = false;
    out += typeText(a) + (a.optional ? "?" : "") + " " + (i == 0 && a.name == "self" ? "input" : a.name);
    if (a.hasDefault) out += "=" + a.defaultValue.repr();
    else if (a.optional) out += "=None";
  }
  return out + ")";
}

} // namespace

OverloadGroup::OverloadGroup(std::string pythonName, std::vector<OpId> ops, bool isMethod)
    : name_(std::move(pythonName)), ops_(std::move(ops)), isMethod_(isMethod) {}

std::string OverloadGroup::signatures() const {
  std::string out;
  for (OpId op : ops_) out += " * " + signatureOf(Dispatcher::instance().schema(op), name_, isMethod_) + "\n";
  return out;
}

// A factory that makes a tensor from nothing (zeros, arange), not from another (zeros_like): the
// default device applies to the first kind only, as in PyTorch.
static bool hasTensorArg(const OpSchema& s) {
  for (const ArgSpec& a : s.args)
    if (a.type == ArgType::Tensor || a.type == ArgType::TensorList || a.type == ArgType::OptionalTensorList)
      return true;
  return false;
}

bool OverloadGroup::tryParse(OpId op, PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                             PyObject* kwnames, bool tensorAsScalar, ParsedCall& out,
                             std::string* why) const {
  const OpSchema& s = Dispatcher::instance().schema(op);
  size_t n = s.args.size();
  if (n > kMaxOpArgs) return false;
  out.op = op;
  out.stack.assign(n, Value());
  std::fill(out.argObjects, out.argObjects + n, nullptr);
  out.requiresGrad = false;
  bool bound[kMaxOpArgs] = {};
  size_t start = 0;
  if (self) {
    if (n == 0 || s.args[0].type != ArgType::Tensor) return false;
    out.stack[0] = Value(unwrapTensor(self));
    out.argObjects[0] = self;
    bound[0] = true;
    start = 1;
  }
  size_t positional[kMaxOpArgs];
  size_t numPositional = 0;
  for (size_t i = start; i < n; ++i)
    if (!s.args[i].kwargOnly) positional[numPositional++] = i;

  // x.view(2, 3) / kiln.zeros(2, 3): an int list that is the only positional parameter takes
  // all positional ints (as in PyTorch: x.roll(1, 0) is shifts=1, dims=0, not shifts=[1, 0]).
  bool varargs = false;
  if (nargs >= 1 && numPositional == 1 && s.args[positional[0]].type == ArgType::IntList) {
    int64_t tmp;
    bool allInts = true;
    for (Py_ssize_t k = 0; k < nargs && allInts; ++k) allInts = asInt(args[k], tmp);
    varargs = allInts;
  }
  if (varargs) {
    std::vector<int64_t> list(static_cast<size_t>(nargs));
    for (Py_ssize_t k = 0; k < nargs; ++k) asInt(args[k], list[size_t(k)]);
    size_t p = positional[0];
    out.stack[p] = Value(std::move(list));
    out.argObjects[p] = args[0];
    bound[p] = true;
  } else {
 if (size_t(nargs) > numPositional) {
      if (why) *why = strCat("takes ", numPositional, " positional arguments but ", nargs, " were given");
      return false;
    }
    for (Py_ssize_t k = 0; k < nargs; ++k) {
      size_t p = positional[size_t(k)];
      if (!convert(args[k], s.args[p], !self && p == 0, k == 0, tensorAsScalar, out.stack[p])) {
        if (why)
          *why = strCat("argument '", p == 0 && !self ? "input" : s.args[p].name, "' (position ", k + 1,
                        ") must be ", typeText(s.args[p]), ", not ", pyTypeName(args[k]));
        return false;
      }
      out.argObjects[p] = args[k];
      bound[p] = true;
    }
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k) {
    const char* key = PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k));
    PyObject* val = args[nargs + k];
    std::string name = key;
    if (name == "input") name = "self";
    size_t p = n;
    for (size_t i = 0; i < n; ++i)
      if (s.args[i].name == name) p = i;
    if (p == n) {
      if (name == "requires_grad" && s.hasTag(kTagCreation) && PyBool_Check(val)) {
        out.requiresGrad = val == Py_True;
        continue;
      }
      if (why) *why = strCat("got an unexpected keyword argument '", key, "'");
      return false;
    }
    if (bound[p]) {
      if (why) *why = strCat("got multiple values for argument '", key, "'");
      return false;
    }
    if (!convert(val, s.args[p], false, false, tensorAsScalar, out.stack[p])) {
      if (why)
        *why = strCat("argument '", key, "' must be ", typeText(s.args[p]), ", not ", pyTypeName(val));
      return false;
    }
    out.argObjects[p] = val;
    bound[p] = true;
  }
  for (size_t i = 0; i < n; ++i) {
    // device=None (given or not) of a factory that makes a tensor from nothing: the default device.
    if (s.args[i].type == ArgType::Device && (!bound[i] || out.stack[i].isNone()) &&
        s.hasTag(kTagCreation) && !hasTensorArg(s)) {
      if (std::optional<Device> d = defaultDevice()) {
        out.stack[i] = Value(*d);
        continue;
      }
    }
    if (bound[i]) continue;
    if (s.args[i].hasDefault) out.stack[i] = s.args[i].defaultValue;
    else if (!s.args[i].optional) {
      if (why) *why = strCat("missing required argument '", i == 0 ? "input" : s.args[i].name, "'");
      return false;
    }
  }
  return true;
}

ParsedCall OverloadGroup::parse(PyObject* self, PyObject* const* args, Py_ssize_t nargs,
                                PyObject* kwnames) const {
  ParsedCall call;
  for (bool tensorAsScalar : {false, true})
    for (OpId op : ops_)
      if (tryParse(op, self, args, nargs, kwnames, tensorAsScalar, call, nullptr)) return call;
  // No overload matched: explain, the way PyTorch does.
  std::string got;
  for (Py_ssize_t k = 0; k < nargs; ++k) got += std::string(k ? ", " : "") + pyTypeName(args[k]);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t k = 0; k < nkw; ++k)
    got += std::string(nargs + k ? ", " : "") + PyUnicode_AsUTF8(PyTuple_GET_ITEM(kwnames, k)) +
           "=" + pyTypeName(args[nargs + k]);
  if (ops_.size() == 1) {
    std::string why;
    tryParse(ops_[0], self, args, nargs, kwnames, true, call, &why);
    throw TypeError(strCat(name_, "(): ", why, "\nexpected: ", signatures()));
  }
  throw TypeError(strCat(name_, "() received an invalid combination of arguments - got (", got,
                         "), but expected one of:\n", signatures()));
}

} // namespace kiln::python
