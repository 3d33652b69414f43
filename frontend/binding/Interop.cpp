// Zero-copy exchange with other array libraries: numpy (from_numpy, Tensor.numpy) and DLPack
// both ways (Tensor.__dlpack__/__dlpack_device__, kiln._C._from_dlpack). Either side keeps the
// other's memory alive for as long as it views it.
#include "frontend/binding/Interop.h"

#include <cstdint>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>

#include <cstring>
#include <functional>
#include <vector>

#include "frontend/binding/DLPack.h"
#include "frontend/binding/PythonConvert.h"
#include "generated/Ops.h"

namespace kiln::python {

namespace {

// kiln's dtype for a DLPack (code, bits) pair; nullopt when kiln has no such dtype.
std::optional<ScalarType> dtypeFromDlpack(uint8_t code, uint8_t bits) {
  switch (code) {
  case dlpack::kDLBool:
    return bits == 8 ? std::optional(ScalarType::Bool) : std::nullopt;
  case dlpack::kDLUInt:
    return bits == 8 ? std::optional(ScalarType::UInt8) : std::nullopt;
  case dlpack::kDLInt:
    if (bits == 8) return ScalarType::Int8;
    if (bits == 16) return ScalarType::Int16;
    if (bits == 32) return ScalarType::Int32;
    if (bits == 64) return ScalarType::Int64;
    return std::nullopt;
  case dlpack::kDLFloat:
    if (bits == 16) return ScalarType::Float16;
    if (bits == 32) return ScalarType::Float32;
    if (bits == 64) return ScalarType::Float64;
    return std::nullopt;
  case dlpack::kDLBfloat:
    return bits == 16 ? std::optional(ScalarType::BFloat16) : std::nullopt;
  case dlpack::kDLComplex:
    if (bits == 64) return ScalarType::ComplexFloat;
    if (bits == 128) return ScalarType::ComplexDouble;
    return std::nullopt;
  default:
    return std::nullopt;
  }
}

dlpack::DataType dlpackType(ScalarType t) {
  static constexpr uint8_t codes[] = {
      dlpack::kDLBool, dlpack::kDLUInt,  dlpack::kDLInt,    dlpack::kDLInt,   dlpack::kDLInt,
      dlpack::kDLInt,  dlpack::kDLFloat, dlpack::kDLBfloat, dlpack::kDLFloat, dlpack::kDLFloat,
      dlpack::kDLComplex, dlpack::kDLComplex};
  return {codes[int(t)], uint8_t(elementSize(t) * 8), 1};
}

// A tensor over memory owned elsewhere; release runs (with the GIL) when the storage dies.
Tensor wrapForeign(void* data, ScalarType dt, IntArrayRef sizes, IntArrayRef strides,
                   std::function<void()> release) {
  int64_t extent = 1;
  bool empty = false;
  for (size_t d = 0; d < sizes.size(); ++d) {
    KILN_CHECK_VALUE(strides[d] >= 0,
                     "At least one stride in the given numpy array is negative, and tensors with "
                     "negative strides are not currently supported. (You can probably work around "
                     "this by making a copy of your array with array.copy().)");
    if (sizes[d] == 0) empty = true;
    extent += (sizes[d] - 1) * strides[d];
  }
  size_t nbytes = empty ? 0 : size_t(extent) * elementSize(dt);
  Storage storage = StorageImpl::wrap(data, nbytes, Device(), [release = std::move(release)] {
    nb::gil_scoped_acquire gil;
    release();
  });
  return Tensor(
      makeIntrusive<TensorImpl>(std::move(storage), dt, DimVector(sizes), DimVector(strides), 0));
}

[[noreturn]] void throwBufferError(const std::string& message) {
  PyErr_SetString(PyExc_BufferError, message.c_str());
  throw nb::python_error();
}

// What a DLPack capsule exported from kiln owns: a handle on the tensor (keeping its storage
// alive) and the shape/stride arrays the DLTensor points into.
struct ExportedTensor {
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  dlpack::ManagedTensor legacy{};
  dlpack::ManagedTensorVersioned versioned{};

  dlpack::Tensor describe() {
    return {tensor.rawData(),
            {dlpack::kDLCPU, 0},
            int32_t(tensor.dim()),
            dlpackType(tensor.dtype()),
            shape.data(),
            strides.data(),
            0};
  }
};

constexpr const char* kCapsule = "dltensor";
constexpr const char* kCapsuleVersioned = "dltensor_versioned";
constexpr const char* kUsedCapsule = "used_dltensor";
constexpr const char* kUsedCapsuleVersioned = "used_dltensor_versioned";

// A capsule nobody consumed still owns its tensor (a consumer renames it to "used_...").
void destroyCapsule(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsule)) {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsule));
    if (m->deleter) m->deleter(m);
  }
}

void destroyCapsuleVersioned(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kCapsuleVersioned)) {
    auto* m = static_cast<dlpack::ManagedTensorVersioned*>(
        PyCapsule_GetPointer(capsule, kCapsuleVersioned));
    if (m->deleter) m->deleter(m);
  }
}

nb::object exportDlpack(const Tensor& t, bool versioned, bool copied) {
  auto* e = new ExportedTensor{t, t.sizes().vec(), t.strides().vec()};
  PyObject* capsule;
  if (versioned) {
    e->versioned = {{1, 0},
                    e,
                    [](dlpack::ManagedTensorVersioned* self) {
                      delete static_cast<ExportedTensor*>(self->managerCtx);
                    },
                    copied ? dlpack::kFlagIsCopied : 0,
                    e->describe()};
    capsule = PyCapsule_New(&e->versioned, kCapsuleVersioned, destroyCapsuleVersioned);
  } else {
    e->legacy = {e->describe(), e, [](dlpack::ManagedTensor* self) {
                   delete static_cast<ExportedTensor*>(self->managerCtx);
                 }};
    capsule = PyCapsule_New(&e->legacy, kCapsule, destroyCapsule);
  }
  if (!capsule) {
    delete e;
    throw nb::python_error();
  }
  return nb::steal(capsule);
}

// Tensor.__dlpack__ (the array API's signature): a capsule viewing t, or a copy with copy=True.
nb::object tensorDlpack(const Tensor& t, nb::handle stream, nb::handle maxVersion,
                        nb::handle dlDevice, nb::handle copy) {
  if (t.requiresGrad())
    throwBufferError("Can't export tensors that require gradient, use tensor.detach()");
  if (!t.device().isCpu())
    throwBufferError(strCat("Cannot export a ", t.device().str(), " tensor through DLPack"));
  KILN_CHECK_VALUE(stream.is_none(), "stream should be None on cpu.");
  if (!dlDevice.is_none()) {
    auto dev = nb::cast<std::pair<int, int>>(dlDevice);
    if (dev.first != dlpack::kDLCPU)
      throwBufferError("unsupported dl_device: kiln tensors here are on the CPU");
  }
  bool versioned = !maxVersion.is_none() && nb::cast<std::pair<int, int>>(maxVersion).first >= 1;
  bool copied = !copy.is_none() && nb::cast<bool>(copy);
  return exportDlpack(copied ? ops::clone(t) : t, versioned, copied);
}

// A tensor viewing a DLPack capsule's memory; the capsule is marked used, and the producer's
// deleter runs when the tensor's storage dies.
Tensor importDlpack(nb::handle capsule) {
  PyObject* cap = capsule.ptr();
  KILN_CHECK_TYPE(PyCapsule_CheckExact(cap),
                  "from_dlpack: expected an object with __dlpack__ or a DLPack capsule, got ",
                  Py_TYPE(cap)->tp_name);
  bool versioned = PyCapsule_IsValid(cap, kCapsuleVersioned);
  KILN_CHECK(
      versioned || PyCapsule_IsValid(cap, kCapsule),
      "from_dlpack received an invalid capsule. Note that DLTensor capsules can be consumed only "
      "once, so you might have already constructed a tensor from it once.");
  dlpack::Tensor* dl;
  std::function<void()> release;
  if (versioned) {
    auto* m =
        static_cast<dlpack::ManagedTensorVersioned*>(PyCapsule_GetPointer(cap, kCapsuleVersioned));
    if (m->version.major != 1)
      throwBufferError(strCat("from_dlpack: unsupported DLPack version ", m->version.major, ".",
                              m->version.minor));
    dl = &m->dlTensor;
    release = [m] {
      if (m->deleter) m->deleter(m);
    };
  } else {
    auto* m = static_cast<dlpack::ManagedTensor*>(PyCapsule_GetPointer(cap, kCapsule));
    dl = &m->dlTensor;
    release = [m] {
      if (m->deleter) m->deleter(m);
    };
  }
  KILN_CHECK(dl->device.deviceType == dlpack::kDLCPU ||
                 dl->device.deviceType == dlpack::kDLCUDAHost,
             "from_dlpack: only CPU memory can be imported (DLPack device type ",
             dl->device.deviceType, ")");
  std::optional<ScalarType> dt =
      dl->dtype.lanes == 1 ? dtypeFromDlpack(dl->dtype.code, dl->dtype.bits) : std::nullopt;
  KILN_CHECK_TYPE(dt.has_value(), "from_dlpack: unsupported DLPack dtype (code ",
                  int(dl->dtype.code), ", ", int(dl->dtype.bits), " bits, ", dl->dtype.lanes,
                  " lanes)");
  KILN_CHECK(dl->ndim >= 0, "from_dlpack: negative ndim");
  IntArrayRef sizes(dl->shape, size_t(dl->ndim));
  DimVector strides = dl->strides ? DimVector(IntArrayRef(dl->strides, size_t(dl->ndim)))
                                  : contiguousStrides(sizes);
  char* data = static_cast<char*>(dl->data) + dl->byteOffset;
  Tensor t = wrapForeign(data, *dt, sizes, strides, std::move(release));
  // From here the tensor owns the producer's memory: the capsule must not free it too.
  PyCapsule_SetName(cap, versioned ? kUsedCapsuleVersioned : kUsedCapsule);
  return t;
}

nb::dlpack::dtype numpyType(ScalarType t) {
  dlpack::DataType d = dlpackType(t);
  return {d.code, d.bits, d.lanes};
}

} // namespace

Tensor tensorFromArray(nb::ndarray<nb::ro> a, nb::handle owner) {
  std::optional<ScalarType> dt = dtypeFromDlpack(a.dtype().code, a.dtype().bits);
  KILN_CHECK_TYPE(dt && a.dtype().lanes == 1, "can't convert array of this dtype (code ",
                  int(a.dtype().code), ", ", int(a.dtype().bits),
                  " bits); the only supported types are: complex64, complex128, float64, float32, "
                  "float16, int64, int32, int16, int8, uint8, and bool");
  DimVector sizes(a.ndim()), strides(a.ndim());
  for (size_t d = 0; d < a.ndim(); ++d) {
    sizes[d] = int64_t(a.shape(d));
    strides[d] = int64_t(a.stride(d));
  }
  PyObject* keep = owner.ptr();
  Py_INCREF(keep);
  return wrapForeign(const_cast<void*>(a.data()), *dt, sizes, strides, [keep] { Py_DECREF(keep); });
}

void registerInterop(nb::module_& m, TensorClass& cls) {
  m.def("from_numpy", [](nb::handle obj) {
    KILN_CHECK_TYPE(std::strcmp(Py_TYPE(obj.ptr())->tp_name, "numpy.ndarray") == 0,
                    "expected np.ndarray (got ", Py_TYPE(obj.ptr())->tp_name, ")");
    auto a = nb::cast<nb::ndarray<nb::ro>>(obj);
    return nb::steal(wrapTensor(tensorFromArray(a, obj)));
  });
  cls.def(
      "numpy",
      [](const Tensor& t, bool force) {
        KILN_CHECK(!t.requiresGrad() || force, "Can't call numpy() on Tensor that requires grad. "
                                               "Use tensor.detach().numpy() instead.");
        KILN_CHECK_TYPE(t.device().isCpu(), "can't convert ", t.device().str(),
                        " device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host "
                        "memory first.");
        KILN_CHECK_TYPE(t.dtype() != ScalarType::BFloat16, "Got unsupported ScalarType BFloat16");
        std::vector<size_t> shape(t.sizes().begin(), t.sizes().end());
        std::vector<int64_t> strides(t.strides().begin(), t.strides().end());
        // The capsule owns a handle on the tensor: the array keeps the memory alive.
        auto* keep = new Tensor(t);
        nb::capsule owner(keep, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
        nb::ndarray<nb::numpy> arr(t.rawData(), t.dim(), shape.data(), owner, strides.data(),
                                   numpyType(t.dtype()));
        nb::object out = arr.cast();
        // nanobind spells int64 'q' (long long); numpy's int64 (and torch's arrays) are 'l' where
        // long is 64 bits: the same dtype, but its items were np.longlong, not np.int64.
        if (t.dtype() == ScalarType::Int64 && sizeof(long) == 8) {
          static nb::handle int64 = nb::object(nb::module_::import_("numpy").attr("int64")).release();
          out = out.attr("view")(int64);
        }
        return out;
      },
      nb::arg("force") = false);

  cls.def("__dlpack__", &tensorDlpack, nb::kw_only(), nb::arg("stream").none() = nb::none(),
          nb::arg("max_version").none() = nb::none(), nb::arg("dl_device").none() = nb::none(),
          nb::arg("copy").none() = nb::none());
  cls.def("__dlpack_device__", [](const Tensor& t) {
    KILN_CHECK_VALUE(t.device().isCpu(), "Unknown device type ", t.device().str(), " for Dlpack");
    return std::make_pair(int(dlpack::kDLCPU), 0);
  });
  m.def("_from_dlpack",
        [](nb::handle capsule) { return nb::steal(wrapTensor(importDlpack(capsule))); });
}

} // namespace kiln::python
