// Value: one boxed argument or result of an op (the IValue analogue). Stack: an op's arguments
// going in, its results coming out.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "runtime/Device.h"
#include "runtime/Scalar.h"
#include "runtime/TensorImpl.h"

namespace kiln {

class Value {
public:
  using Variant = std::variant<std::monostate, bool, int64_t, double, Tensor, std::vector<int64_t>,
                               std::vector<double>, std::vector<Tensor>, std::vector<std::optional<Tensor>>,
                               Scalar, ScalarType, Device, std::string>;

  Value() = default;
  Value(std::nullopt_t) {}
  Value(bool v) : v_(v) {}
  Value(int v) : v_(int64_t(v)) {}
  Value(int64_t v) : v_(v) {}
  Value(double v) : v_(v) {}
  Value(Tensor v) : v_(std::move(v)) {}
  Value(std::vector<int64_t> v) : v_(std::move(v)) {}
  Value(IntArrayRef v) : v_(std::vector<int64_t>(v.begin(), v.end())) {}
  Value(std::vector<double> v) : v_(std::move(v)) {}
  Value(std::vector<Tensor> v) : v_(std::move(v)) {}
  Value(std::vector<std::optional<Tensor>> v) : v_(std::move(v)) {}
  Value(Scalar v) : v_(v) {}
  Value(ScalarType v) : v_(v) {}
  Value(Device v) : v_(v) {}
  Value(std::string v) : v_(std::move(v)) {}
  Value(const char* v) : v_(std::string(v)) {}
  template <typename T> Value(const std::optional<T>& v) {
    if (v) *this = Value(*v);
  }

  bool isNone() const { return v_.index() == 0; }
  bool isTensor() const { return std::holds_alternative<Tensor>(v_); }
  bool isTensorList() const { return std::holds_alternative<std::vector<Tensor>>(v_); }
  bool isInt() const { return std::holds_alternative<int64_t>(v_); }
  bool isDouble() const { return std::holds_alternative<double>(v_); }
  bool isBool() const { return std::holds_alternative<bool>(v_); }
  bool isScalar() const { return std::holds_alternative<Scalar>(v_); }
  bool isScalarType() const { return std::holds_alternative<ScalarType>(v_); }
  bool isIntList() const { return std::holds_alternative<std::vector<int64_t>>(v_); }
  bool isOptionalTensorList() const {
    return std::holds_alternative<std::vector<std::optional<Tensor>>>(v_);
  }

  const Tensor& toTensor() const { return std::get<Tensor>(v_); }
  Tensor& toTensor() { return std::get<Tensor>(v_); }
  int64_t toInt() const { return std::get<int64_t>(v_); }
  double toDouble() const {
    return isInt() ? double(std::get<int64_t>(v_)) : std::get<double>(v_);
  }
  bool toBool() const { return std::get<bool>(v_); }
  Scalar toScalar() const;
  ScalarType toScalarType() const { return std::get<ScalarType>(v_); }
  Device toDevice() const { return std::get<Device>(v_); }
  const std::string& toStringRef() const { return std::get<std::string>(v_); }
  const std::vector<int64_t>& toIntList() const { return std::get<std::vector<int64_t>>(v_); }
  const std::vector<double>& toDoubleList() const { return std::get<std::vector<double>>(v_); }
  const std::vector<Tensor>& toTensorList() const { return std::get<std::vector<Tensor>>(v_); }
  std::vector<Tensor>& toTensorList() { return std::get<std::vector<Tensor>>(v_); }
  const std::vector<std::optional<Tensor>>& toOptionalTensorList() const {
    return std::get<std::vector<std::optional<Tensor>>>(v_);
  }

  template <typename T> std::optional<T> toOptional() const;

  const Variant& variant() const { return v_; }
  // Python-like text: 1, 2.5, True, None, [1, 2], float32, "str", f32[2, 3] for tensors.
  std::string repr() const;

private:
  Variant v_;
};

inline Scalar Value::toScalar() const {
  if (auto* s = std::get_if<Scalar>(&v_)) return *s;
  if (auto* i = std::get_if<int64_t>(&v_)) return Scalar(*i);
  if (auto* d = std::get_if<double>(&v_)) return Scalar(*d);
  if (auto* b = std::get_if<bool>(&v_)) return Scalar(*b);
  return toTensor().item();
}

template <typename T> std::optional<T> Value::toOptional() const {
  if (isNone()) return std::nullopt;
  if constexpr (std::is_same_v<T, Tensor>) return toTensor();
  else if constexpr (std::is_same_v<T, int64_t>) return toInt();
  else if constexpr (std::is_same_v<T, double>) return toDouble();
  else if constexpr (std::is_same_v<T, bool>) return toBool();
  else if constexpr (std::is_same_v<T, Scalar>) return toScalar();
  else if constexpr (std::is_same_v<T, ScalarType>) return toScalarType();
  else if constexpr (std::is_same_v<T, Device>) return toDevice();
  else if constexpr (std::is_same_v<T, std::string>) return toStringRef();
  else if constexpr (std::is_same_v<T, std::vector<int64_t>>) return toIntList();
  else static_assert(sizeof(T) == 0, "unsupported optional type");
}

using Stack = std::vector<Value>;

} // namespace kiln
