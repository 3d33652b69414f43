// empty, zeros, ones, full, fill_.
#include "generated/KernelDecls.h"
#include "runtime/cpu/Loops.h"

namespace kiln::kernels {

namespace {
void fillWith(const Tensor& t, const Scalar& value) {
  if (t.isMeta() || t.numel() == 0) return;
  TensorIteratorConfig c;
  c.opName = "fill_";
  c.outputs = {t};
  c.inputs = {};
  c.castInputs = false;
  c.checkOutputCast = false;
  c.outputDtype = t.dtype();
  c.computeDtype = t.dtype();
  c.inputs = {Tensor::scalarTensor(value, t.dtype())};
  TensorIterator iter(std::move(c));
  KILN_DISPATCH_ALL(t.dtype(), "fill_", [&]<typename scalar_t>() {
    scalar_t v = value.to<scalar_t>();
    iter.forEach([v](char** data, const int64_t* strides, int64_t n) {
      if (strides[0] == int64_t(sizeof(scalar_t))) {
        auto* out = reinterpret_cast<scalar_t*>(data[0]);
        for (int64_t i = 0; i < n; ++i) out[i] = v;
      } else {
        for (int64_t i = 0; i < n; ++i) *reinterpret_cast<scalar_t*>(data[0] + i * strides[0]) = v;
      }
    });
  });
}

// The default dtype of a factory given its fill value: Python-number rules (float -> float32).
ScalarType defaultDtypeFor(const Scalar& v) {
  if (v.isBool()) return ScalarType::Bool;
  if (v.isIntegral()) return ScalarType::Int64;
  return ScalarType::Float32;
}
} // namespace

Tensor empty(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  return Tensor::empty(size, dtype.value_or(ScalarType::Float32), device.value_or(Device()));
}

Tensor zeros(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = empty(size, dtype, device);
  fillWith(t, Scalar(int64_t(0)));
  return t;
}

Tensor ones(IntArrayRef size, std::optional<ScalarType> dtype, std::optional<Device> device) {
  Tensor t = empty(size, dtype, device);
  fillWith(t, Scalar(int64_t(1)));
  return t;
}

Tensor full(IntArrayRef size, const Scalar& fillValue, std::optional<ScalarType> dtype,
            std::optional<Device> device) {
  Tensor t = empty(size, dtype.value_or(defaultDtypeFor(fillValue)), device);
  fillWith(t, fillValue);
  return t;
}

Tensor fill_(const Tensor& self, const Scalar& value) {
  fillWith(self, value);
  self.bumpVersion();
  return self;
}

} // namespace kiln::kernels
