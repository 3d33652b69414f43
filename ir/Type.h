// The type a graph node's value has: a tensor type (dtype, symbolic sizes, strides, device),
// a tuple of types (multi-output nodes), or a Python number (int, float, bool).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/IndexExpr.h"
#include "runtime/Device.h"
#include "runtime/ScalarType.h"

namespace kiln {

// Short dtype names of the text form: b8 u8 i8 i16 i32 i64 f16 bf16 f32 f64.
const char* dtypeShortName(ScalarType t);
std::optional<ScalarType> dtypeFromShortName(const std::string& name);

class Tensor;

struct TensorType {
  // The type of a (real or fake) tensor living on `device`: strides only when not contiguous.
  static TensorType of(const Tensor& t, Device device);

  ScalarType dtype = ScalarType::Float32;
  std::vector<IndexExpr> sizes;
  // Absent: contiguous (producers such as shape propagation store strides only for other layouts).
  std::optional<std::vector<IndexExpr>> strides;
  Device device; // cpu unless said otherwise

  bool operator==(const TensorType& o) const = default;
  // True when every size (and stride) is a constant.
  bool isStatic() const;
  // "f32[8, s0]{strides=[1, 8], device=cuda:0}"; the braces only when not default.
  std::string str() const;
};

class Type {
public:
  enum class Kind : uint8_t { Tensor, Tuple, Int, Float, Bool };

  Type(TensorType t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}
  static Type tuple(std::vector<Type> elements);
  static Type number(Kind k); // Int, Float or Bool

  Kind kind() const { return kind_; }
  bool isTensor() const { return kind_ == Kind::Tensor; }
  bool isTuple() const { return kind_ == Kind::Tuple; }
  const TensorType& tensor() const { return tensor_; }
  TensorType& tensor() { return tensor_; }
  const std::vector<Type>& elements() const { return elements_; }

  bool operator==(const Type& o) const;
  // Tensor types as above, "(f32[2], i64[2])", "int", "float", "bool".
  std::string str() const;

private:
  explicit Type(Kind k) : kind_(k) {}
  Kind kind_;
  TensorType tensor_;
  std::vector<Type> elements_;
};

} // namespace kiln
