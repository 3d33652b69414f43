// Tensor.__getitem__ / __setitem__ with PyTorch's semantics (python_variable_indexing.cpp and
// ATen/TensorIndexing.h): ints, slices, None, Ellipsis and bools become view ops (select, slice,
// unsqueeze); integer/bool tensors and lists are collected for one advanced-indexing op.
#include "frontend/binding/Indexing.h"

#include <cstdint>
#include <cmath>
#include <cstring>

#include "frontend/binding/PythonConvert.h"
#include "generated/Ops.h"
#include "runtime/CheckedConvert.h"
#include "runtime/MaskIndex.h"

namespace kiln::python {

namespace {

using IndexList = std::vector<std::optional<Tensor>>;

struct SliceBounds {
  int64_t start, stop, step;
};

[[noreturn]] void throwPythonError() { throw nb::python_error(); }

bool isNumpyInstance(PyObject* o, const char* prefix) {
  const char* name = Py_TYPE(o)->tp_name;
  return std::strncmp(name, "numpy.", 6) == 0 &&
         std::strncmp(name + 6, prefix, std::strlen(prefix)) == 0;
}

bool isNumpyInteger(PyObject* o) {
  for (const char* p : {"int", "uint", "long", "ulong", "short", "ushort", "byte", "ubyte"})
    if (isNumpyInstance(o, p)) return true;
  return false;
}

bool isNdarray(PyObject* o) { return std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0; }

// Python ints (bool excluded) and numpy integers: PyTorch's THPUtils_checkLong.
bool isIntIndex(PyObject* o) { return isPyInt(o) || isNumpyInteger(o); }

int64_t unpackInt(PyObject* o) {
  nb::object idx = nb::steal(PyNumber_Index(o));
  if (!idx.is_valid()) throwPythonError();
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(idx.ptr(), &overflow);
  if (overflow) throw ValueError("Overflow when unpacking long long");
  if (v == -1 && PyErr_Occurred()) throwPythonError();
  return v;
}

// A slice bound: None, an integer, a one-element integer tensor or anything with __index__
// (out-of-range values clamp, as Python's own slices do).
std::optional<int64_t> sliceBound(PyObject* o) {
  if (o == Py_None) return std::nullopt;
  const char* bad = "slice indices must be integers or None or have an __index__ method";
  if (isTensor(o)) {
    const Tensor& t = unwrapTensor(o);
    KILN_CHECK_TYPE(t.numel() == 1 && isIntegralType(t.dtype(), true), bad);
    return t.item().toInt();
  }
  KILN_CHECK_TYPE(PyIndex_Check(o), bad);
  Py_ssize_t v = PyNumber_AsSsize_t(o, nullptr);
  if (v == -1 && PyErr_Occurred()) throwPythonError();
  return int64_t(v);
}

SliceBounds unpackSlice(PyObject* o) {
  auto* s = reinterpret_cast<PySliceObject*>(o);
  int64_t step = sliceBound(s->step).value_or(1);
  KILN_CHECK_VALUE(step != 0, "slice step cannot be zero");
  return {sliceBound(s->start).value_or(0), sliceBound(s->stop).value_or(INT64_MAX), step};
}

bool isMaskDtype(ScalarType t) { return t == ScalarType::Bool || t == ScalarType::UInt8; }

// --- index lists and arrays as tensors ---------------------------------------------------------

bool isNestedSequence(PyObject* o) {
  return !PyUnicode_Check(o) && !PyBytes_Check(o) && !isTensor(o) && PySequence_Check(o);
}

struct NestedValues {
  DimVector sizes;
  std::vector<int64_t> values;
  bool allBool = true;
};

void collectScalar(PyObject* o, NestedValues& nv) {
  if (PyBool_Check(o) || isNumpyInstance(o, "bool")) {
    nv.values.push_back(PyObject_IsTrue(o));
    return;
  }
  if (isTensor(o)) {
    const Tensor& t = unwrapTensor(o);
    KILN_CHECK_VALUE(t.numel() == 1 && !t.isMeta(),
                     "only one element tensors can be converted to Python scalars");
    Scalar s = t.item();
    nv.allBool &= s.isBool();
    KILN_CHECK_VALUE(!s.isFloating() || std::isfinite(s.toDouble()),
                     "cannot convert a non-finite float to an index");
    nv.values.push_back(s.toInt());
    return;
  }
  nv.allBool = false;
  if (PyFloat_Check(o) || isNumpyInstance(o, "float")) {
    double d = PyFloat_AsDouble(o);
    if (d == -1.0 && PyErr_Occurred()) throwPythonError();
    KILN_CHECK_VALUE(std::isfinite(d), "cannot convert a non-finite float to an index");
    nv.values.push_back(int64_t(d)); // PyTorch converts float index lists to int64 by truncation
    return;
  }
  KILN_CHECK_TYPE(isIntIndex(o) || PyIndex_Check(o), "new(): invalid data type '",
                  Py_TYPE(o)->tp_name, "'");
  nv.values.push_back(unpackInt(o));
}

void collectNested(PyObject* o, size_t depth, NestedValues& nv) {
  if (depth == nv.sizes.size()) {
    KILN_CHECK_VALUE(!isNestedSequence(o), "expected a number at dim ", depth,
                     " of the index (got ", Py_TYPE(o)->tp_name, ")");
    collectScalar(o, nv);
    return;
  }
  KILN_CHECK_VALUE(isNestedSequence(o), "expected sequence of length ", nv.sizes[depth], " at dim ",
                   depth, " (got ", Py_TYPE(o)->tp_name, ")");
  nb::object seq = nb::steal(PySequence_Fast(o, "an index list must be a sequence"));
  if (!seq.is_valid()) throwPythonError();
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
  KILN_CHECK_VALUE(n == nv.sizes[depth], "expected sequence of length ", nv.sizes[depth],
                   " at dim ", depth, " (got ", n, ")");
  PyObject** items = PySequence_Fast_ITEMS(seq.ptr());
  for (Py_ssize_t i = 0; i < n; ++i)
    collectNested(items[i], depth + 1, nv);
}

// A (nested) Python sequence as an index tensor: bool when every element is a bool, int64
// otherwise (PyTorch's indexing_tensor_from_data).
Tensor sequenceToIndexTensor(PyObject* o) {
  NestedValues nv;
  nb::object cur = nb::borrow(o);
  while (isNestedSequence(cur.ptr())) {
    nb::object seq = nb::steal(PySequence_Fast(cur.ptr(), "an index list must be a sequence"));
    if (!seq.is_valid()) throwPythonError();
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq.ptr());
    nv.sizes.push_back(n);
    if (n == 0) break;
    cur = nb::borrow(PySequence_Fast_ITEMS(seq.ptr())[0]);
  }
  collectNested(o, 0, nv);
  bool isBool = nv.allBool && !nv.values.empty();
  Tensor t = Tensor::empty(nv.sizes, isBool ? ScalarType::Bool : ScalarType::Int64);
  if (isBool) {
    bool* p = t.data<bool>();
    for (size_t i = 0; i < nv.values.size(); ++i)
      p[i] = nv.values[i] != 0;
  } else {
    std::copy(nv.values.begin(), nv.values.end(), t.data<int64_t>());
  }
  return t;
}

// A numpy array index: bool/uint8 arrays stay masks, others become int64 (via from_numpy).
std::optional<Tensor> ndarrayToIndexTensor(PyObject* o) {
  nb::object fromNumpy = nb::module_::import_("kiln._C").attr("from_numpy");
  nb::object result = nb::steal(PyObject_CallOneArg(fromNumpy.ptr(), o));
  if (!result.is_valid()) {
    PyErr_Clear(); // unsupported dtype or negative strides: read it as a sequence instead
    return std::nullopt;
  }
  Tensor t = unwrapTensor(result.ptr());
  return isMaskDtype(t.dtype()) ? t : ops::_to_copy(t, ScalarType::Int64, std::nullopt);
}

Tensor sequenceOrArrayToIndexTensor(PyObject* o) {
  if (isNdarray(o)) {
    if (auto t = ndarrayToIndexTensor(o)) return *t;
  }
  return sequenceToIndexTensor(o);
}

// --- basic indexing ----------------------------------------------------------------------------

Tensor applySelect(const Tensor& self, int64_t dim, int64_t index, int64_t realDim) {
  KILN_CHECK_INDEX(!(index == 0 && dim == 0 && self.dim() == 0),
                   "invalid index of a 0-dim tensor. ",
                   "Use `tensor.item()` in Python or `tensor.item<T>()` in C++ to convert a 0-dim "
                   "tensor to a number");
  int64_t size = dim < self.dim() ? self.sizes()[size_t(dim)] : 0;
  KILN_CHECK_INDEX(size > -1 - index && size > index, "index ", index,
                   " is out of bounds for dimension ", realDim, " with size ", size);
  return ops::select(self, dim, index);
}

// `keepWhole`: x[:] and x[0:n] still make a new view (PyTorch disables its no-op shortcut for a
// lone slice so that x[:] is never x itself).
Tensor applySlice(const Tensor& self, int64_t dim, const SliceBounds& b, bool keepWhole) {
  KILN_CHECK_VALUE(b.step > 0, "step must be greater than zero");
  if (!keepWhole && self.dim() > 0 && b.start == 0 && b.step == 1 &&
      b.stop >= self.sizes()[size_t(dim)])
    return self;
  return ops::slice(self, dim, b.start, b.stop, b.step);
}

// A bool index adds a dim of size 1 and takes all of it (True) or none of it (False).
Tensor boolIndexTensor(bool value, Device device) {
  Tensor t = Tensor::empty({value ? 1 : 0}, ScalarType::Int64, device);
  if (value && !t.isMeta()) *t.data<int64_t>() = 0;
  return t;
}

void recordTensorIndex(const Tensor& t, IndexList& out, int64_t& dim) {
  if (out.empty()) {
    out.resize(size_t(dim) + 1);
    out[size_t(dim)] = t;
  } else {
    out.push_back(t);
  }
  dim += isMaskDtype(t.dtype()) ? t.dim() : 1;
}

// Non-tuple sequences that hold slices, tensors, sequences, None or Ellipsis are read as
// tuples (NumPy's old heuristic, which PyTorch keeps with a deprecation warning).
bool treatSequenceAsTuple(PyObject* o) {
  if (PyTuple_Check(o)) return true;
  if (isTensor(o) || isNdarray(o) || !PySequence_Check(o)) return false;
  Py_ssize_t n = PySequence_Size(o);
  if (n < 0) {
    PyErr_Clear();
    return false;
  }
  if (n >= 32) return false;
  for (Py_ssize_t i = 0; i < n; ++i) {
    nb::object item = nb::steal(PySequence_GetItem(o, i));
    if (!item.is_valid()) {
      PyErr_Clear();
      return false;
    }
    PyObject* p = item.ptr();
    if (isTensor(p) || PySequence_Check(p) || PySlice_Check(p) || p == Py_Ellipsis || p == Py_None)
      return true;
  }
  return false;
}

nb::tuple wrapTuple(PyObject* index) {
  if (!treatSequenceAsTuple(index)) return nb::make_tuple(nb::handle(index));
  if (!PyTuple_Check(index)) {
    int rc = PyErr_WarnEx(
        PyExc_UserWarning,
        "Using a non-tuple sequence for multidimensional indexing is deprecated; use "
        "x[tuple(seq)] instead of x[seq]. A future version will read it as a tensor index, "
        "x[kiln.tensor(seq)].",
        1);
    if (rc < 0) throwPythonError();
  }
  nb::object t = nb::steal(PySequence_Tuple(index));
  if (!t.is_valid()) throwPythonError();
  return nb::borrow<nb::tuple>(t);
}

// Dims the index names: everything but None, Ellipsis and bools; a mask names all its dims.
int64_t countSpecifiedDims(const nb::tuple& index) {
  int64_t count = 0;
  for (nb::handle h : index) {
    PyObject* o = h.ptr();
    if (isTensor(o)) {
      const Tensor& t = unwrapTensor(o);
      count += isMaskDtype(t.dtype()) ? t.dim() : 1;
    } else if (o != Py_None && o != Py_Ellipsis && o != Py_True && o != Py_False) {
      ++count;
    }
  }
  return count;
}

// Applies the view parts of a tuple index to self; tensor parts go to `indices`, aligned with
// the dims of the result (PyTorch's applySlicing).
Tensor applySlicing(const Tensor& self, const nb::tuple& index, IndexList& indices) {
  int64_t specified = countSpecifiedDims(index);
  KILN_CHECK_INDEX(specified <= self.dim(), "too many indices for tensor of dimension ",
                   self.dim());
  Tensor result = self;
  int64_t dim = 0;
  int64_t realDim = 0;
  for (nb::handle h : index) {
    PyObject* o = h.ptr();
    if (isIntIndex(o)) {
      result = applySelect(result, dim, unpackInt(o), realDim);
    } else if (PySlice_Check(o)) {
      result = applySlice(result, dim, unpackSlice(o), false);
      ++dim;
      if (!indices.empty()) indices.emplace_back();
    } else if (o == Py_Ellipsis) {
      int64_t skipped = self.dim() - specified;
      dim += skipped;
      if (!indices.empty()) indices.resize(indices.size() + size_t(skipped));
    } else if (o == Py_None) {
      result = ops::unsqueeze(result, dim);
      ++dim;
      if (!indices.empty()) indices.emplace_back();
    } else if (PyBool_Check(o)) {
      result = ops::unsqueeze(result, dim);
      recordTensorIndex(boolIndexTensor(o == Py_True, self.device()), indices, dim);
    } else {
      Tensor t;
      if (isTensor(o)) {
        t = unwrapTensor(o);
      } else if (PyUnicode_Check(o) || PyBytes_Check(o)) {
        throw TypeError(strCat("new(): invalid data type '", Py_TYPE(o)->tp_name, "'"));
      } else if (PySequence_Check(o)) {
        t = sequenceOrArrayToIndexTensor(o);
      } else {
        nb::object asIndex = nb::steal(PyNumber_Index(o));
        if (!asIndex.is_valid()) {
          PyErr_Clear();
          throw IndexError(strCat("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables "
                                  "are valid indices (got ", Py_TYPE(o)->tp_name, ")"));
        }
        result = applySelect(result, dim, unpackInt(asIndex.ptr()), realDim);
        ++realDim;
        continue;
      }
      if (t.dim() == 0 && isIntegralType(t.dtype(), true)) {
        // A 0-d integer tensor is an int (a view); a 0-d bool is a Python bool.
        if (!isMaskDtype(t.dtype())) {
          result = applySelect(result, dim, t.item().toInt(), realDim);
        } else {
          result = ops::unsqueeze(result, dim);
          recordTensorIndex(boolIndexTensor(t.item().toBool(), self.device()), indices, dim);
        }
      } else {
        recordTensorIndex(t, indices, dim);
      }
    }
    ++realDim;
  }
  return result;
}

void trimTrailingNones(IndexList& indices) {
  while (!indices.empty() && !indices.back())
    indices.pop_back();
}

Tensor getItem(const Tensor& self, PyObject* index) {
  if (index == Py_None) return ops::unsqueeze(self, 0);
  if (index == Py_Ellipsis) return ops::alias(self);
  if (isIntIndex(index)) return applySelect(self, 0, unpackInt(index), 0);
  if (PySlice_Check(index)) return applySlice(self, 0, unpackSlice(index), true);
  if (index == Py_True || index == Py_False) {
    Tensor result = ops::unsqueeze(self, 0);
    return ops::index(result, {boolIndexTensor(index == Py_True, self.device())});
  }
  IndexList indices;
  Tensor sliced = applySlicing(self, wrapTuple(index), indices);
  if (indices.empty())
    return sliced.isSame(self) ? ops::alias(sliced) : sliced; // x[...] is a new tensor
  trimTrailingNones(indices);
  return ops::index(sliced, indices);
}

// --- assignment ----------------------------------------------------------------------------------

// The assigned value as a tensor: tensors as they are, Python numbers in self's dtype.
Tensor valueToTensor(const Tensor& self, PyObject* value) {
  if (isTensor(value)) return unwrapTensor(value);
  KILN_CHECK_TYPE(isNumberLike(value) || PyBool_Check(value), "can't assign a ",
                  Py_TYPE(value)->tp_name, " to a kiln.", scalarTypeShortName(self.dtype()),
                  "Tensor");
  if (PyLong_Check(value)) {
    int overflow = 0;
    PyLong_AsLongLongAndOverflow(value, &overflow);
    KILN_CHECK_VALUE(!overflow, "Overflow when unpacking long long");
  }
  Scalar s = toScalarFromNumber(value);
  // PyTorch range-checks assigned numbers, except for the 16-bit floats (they round to inf).
  if (self.dtype() != ScalarType::Float16 && self.dtype() != ScalarType::BFloat16)
    KILN_DISPATCH_ALL(self.dtype(), "__setitem__", [&]<typename T>() { checkedConvert<T>(s); });
  return Tensor::scalarTensor(s, self.dtype());
}

// The value without its leading size-1 dims (NumPy lets x[0] = ones(1, 1, 3) fill a row).
Tensor stripLeadingOnes(const Tensor& value) {
  IntArrayRef sizes = value.sizes();
  size_t first = 0;
  while (first < sizes.size() && sizes[first] == 1)
    ++first;
  if (first == 0) return value;
  return ops::view(value, IntArrayRef(sizes.data() + first, sizes.size() - first));
}

void copyTo(const Tensor& dst, const Tensor& src) {
  if (dst.sizes() == src.sizes()) {
    ops::copy_(dst, src, false);
  } else if (src.dim() == 0 && src.device().isCpu()) {
    ops::fill_(dst, src.item());
  } else {
    ops::copy_(dst, ops::expand(stripLeadingOnes(src), dst.sizes(), false), false);
  }
}

// x[mask] = v with one boolean mask (after any untouched dims) and a value that broadcasts over
// the selected elements (a number, one element, or a tensor of the dims around the mask): a
// masked_fill_, or where(mask, v, x) written back, as PyTorch's compiler rewrites it. Both keep
// the shape static: index_put_ with a mask needs the mask's true count, which a fake tensor under
// capture does not have.
bool maskFill(const Tensor& self, const IndexList& indices, const Tensor& value, bool fromNumber) {
  std::optional<MaskIndex> m = singleMaskIndex(indices);
  if (!m || m->mask.device() != self.device()) return false;
  const Tensor& mask = m->mask;
  const int64_t first = m->first, after = self.dim() - first - mask.dim();
  if (after < 0) return false;
  for (int64_t d = 0; d < mask.dim(); ++d)
    if (mask.size(d) != self.size(first + d)) return false;
  DimVector maskShape(size_t(first), 1);
  for (int64_t s : mask.sizes()) maskShape.push_back(s);
  maskShape.resize(size_t(self.dim()), 1);
  Tensor maskView = ops::view(mask, IntArrayRef(maskShape));
  if (value.numel() == 1 && (fromNumber || value.dtype() == self.dtype())) {
    if (fromNumber) ops::masked_fill_(self, maskView, value.item());
    else ops::masked_fill_(self, maskView, ops::view(value, IntArrayRef{}));
    return true;
  }
  // The value right-aligned to the indexed shape self[:first] + [count] + self[first + mask
  // dims:]; it broadcasts when its dim facing the count is 1 (or absent).
  Tensor v = stripLeadingOnes(value);
  if (v.device() != self.device()) return false;
  const int64_t rank = first + 1 + after;
  if (v.dim() > rank) return false;
  DimVector padded(size_t(rank - v.dim()), 1);
  for (int64_t s : v.sizes()) padded.push_back(s);
  if (padded[size_t(first)] != 1) return false;
  for (int64_t d = 0; d < rank; ++d) {
    if (d == first) continue;
    int64_t want = d < first ? self.size(d) : self.size(d - 1 + mask.dim());
    if (padded[size_t(d)] != 1 && padded[size_t(d)] != want) return false;
  }
  DimVector valueShape; // padded with the count's dim widened to the mask's dims, all 1
  for (int64_t d = 0; d < rank; ++d) {
    if (d != first) valueShape.push_back(padded[size_t(d)]);
    else
      for (int64_t j = 0; j < mask.dim(); ++j) valueShape.push_back(1);
  }
  if (v.dtype() != self.dtype()) v = ops::_to_copy(v, self.dtype(), std::nullopt);
  ops::copy_(self, ops::where(maskView, ops::reshape(v, IntArrayRef(valueShape)), self), false);
  return true;
}

void setItem(const Tensor& self, PyObject* index, PyObject* pyValue) {
  Tensor value = valueToTensor(self, pyValue);
  // A number fills (PyTorch's copy_to does the same): no tensor of it reaches an op, which under
  // capture would be a real tensor made from Python data in the middle of the op, refused by the
  // tracer (`b[0, 0] = 42` ran its frame eagerly).
  bool number = !isTensor(pyValue);
  auto assign = [&](const Tensor& dst) {
    if (number) ops::fill_(dst, value.item());
    else copyTo(dst, value);
  };
  if (index == Py_False) return; // selects nothing
  if (index == Py_Ellipsis) return assign(self);
  if (index == Py_None || index == Py_True) return assign(ops::unsqueeze(self, 0));
  if (isIntIndex(index)) return assign(applySelect(self, 0, unpackInt(index), 0));
  if (PySlice_Check(index)) return assign(applySlice(self, 0, unpackSlice(index), false));
  IndexList indices;
  Tensor sliced = applySlicing(self, wrapTuple(index), indices);
  if (indices.empty()) return assign(sliced);
  trimTrailingNones(indices);
  if (maskFill(sliced, indices, value, !isTensor(pyValue))) return;
  // A number assigned through tensor indices becomes a tensor on self's device made by an op:
  // under capture self is a fake, and a real CPU tensor made here would be a constant the graph
  // cannot take (x[idx] = 0.0 would break the graph).
  if (!isTensor(pyValue)) value = ops::scalar_tensor(value.item(), self.dtype(), self.device());
  ops::index_put_(sliced, indices, stripLeadingOnes(value), false);
}

nb::object wrap(Tensor t) { return nb::steal(wrapTensor(std::move(t))); }

// A sparse tensor as an index or a value (kiln.sparse's own class handles indexing a sparse
// tensor): its placeholder has no data.
void rejectSparse(const char* what, PyObject* index, PyObject* value = nullptr) {
  if (holdsSparseTensor(index) || (value && holdsSparseTensor(value)))
    throw NotImplementedError(std::string(what) + ": sparse tensors (layout kiln.sparse_coo) are not supported "
                              "as an index or a value; call .to_dense() first");
}

} // namespace

void registerIndexing(TensorClass& cls) {
  // nb::arg(...).none(): None is a valid index (and a value to reject with PyTorch's error).
  cls.def(
         "__getitem__",
         [](nb::handle self, nb::handle index) {
           rejectSparse("__getitem__", index.ptr());
           return wrap(getItem(unwrapTensor(self.ptr()), index.ptr()));
         },
         nb::arg("index").none())
      .def(
          "__setitem__",
          [](nb::handle self, nb::handle index, nb::handle value) {
            rejectSparse("__setitem__", index.ptr(), value.ptr());
            setItem(unwrapTensor(self.ptr()), index.ptr(), value.ptr());
          },
          nb::arg("index").none(), nb::arg("value").none())
      .def(
          "__delitem__",
          [](nb::handle, nb::handle) -> void {
            throw TypeError("Tensor does not support deleting items");
          },
          nb::arg("index").none())
      .def("__len__",
           [](const Tensor& t) {
             KILN_CHECK_TYPE(t.dim() > 0, "len() of a 0-d tensor");
             return t.sizes()[0];
           })
      .def("__iter__",
           [](const Tensor& t) {
             KILN_CHECK_TYPE(t.dim() > 0, "iteration over a 0-d tensor");
             nb::list rows;
             for (Tensor& row : ops::unbind(t, 0))
               rows.append(wrap(std::move(row)));
             return nb::iter(rows);
           })
      .def("__index__",
           [](const Tensor& t) {
             KILN_CHECK_TYPE(
                 t.numel() == 1 && isIntegralType(t.dtype(), true) && !t.isMeta(),
                 "only integer tensors of a single element can be converted to an index");
             return t.item().toInt();
           })
      .def_prop_ro(
          "T",
          [](const Tensor& t) {
            const char* warning = nullptr;
            if (t.dim() == 0)
              warning = "Tensor.T is deprecated on 0-D tensors. This function is the identity in "
                        "these cases.";
            else if (t.dim() != 2)
              warning =
                  "The use of `x.T` on tensors of dimension other than 2 to reverse their shape is "
                  "deprecated and it will throw an error in a future release. Consider `x.mT` to "
                  "transpose batches of matrices or `x.permute(*range(x.ndim - 1, -1, -1))` to "
                  "reverse "
                  "the dimensions of a tensor.";
            if (warning && PyErr_WarnEx(PyExc_UserWarning, warning, 1) < 0) throwPythonError();
            std::vector<int64_t> dims(size_t(t.dim()));
            for (size_t i = 0; i < dims.size(); ++i)
              dims[i] = t.dim() - 1 - int64_t(i);
            return wrap(ops::permute(t, dims));
          })
      .def_prop_ro("H",
                   [](const Tensor& t) {
                     KILN_CHECK(t.dim() == 0 || t.dim() == 2,
                                "tensor.H is only supported on matrices (2-D tensors). Got ",
                                t.dim(), "-D tensor.",
                                t.dim() > 2 ? " For batches of matrices, consider using tensor.mH"
                                            : "");
                     return wrap(t.dim() == 0 ? ops::alias(t) : ops::transpose(t, 0, 1));
                   })
      .def_prop_ro("mT",
                   [](const Tensor& t) {
                     KILN_CHECK(
                         t.dim() >= 2,
                         "tensor.mT is only supported on matrices or batches of matrices. Got ",
                         t.dim(), "-D tensor.");
                     return wrap(ops::transpose(t, -2, -1));
                   })
      .def_prop_ro("mH", [](const Tensor& t) {
        KILN_CHECK(t.dim() >= 2,
                   "tensor.mH is only supported on matrices or batches of matrices. Got ", t.dim(),
                   "-D tensor.");
        return wrap(ops::transpose(t, -2, -1));
      });
}

} // namespace kiln::python
