// A Python-number-like value: bool, integer or floating, with its kind kept for type promotion.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/ScalarType.h"

namespace kiln {

class Scalar {
public:
  enum class Kind : uint8_t { Bool, Int, Double };

  Scalar() : Scalar(int64_t(0)) {}
  Scalar(bool v) : kind_(Kind::Bool) { i_ = v; }
  Scalar(int v) : Scalar(int64_t(v)) {}
  Scalar(int64_t v) : kind_(Kind::Int) { i_ = v; }
  Scalar(double v) : kind_(Kind::Double) { d_ = v; }
  Scalar(float v) : Scalar(double(v)) {}

  Kind kind() const { return kind_; }
  bool isBool() const { return kind_ == Kind::Bool; }
  bool isIntegral() const { return kind_ == Kind::Int; }
  bool isFloating() const { return kind_ == Kind::Double; }

  double toDouble() const { return kind_ == Kind::Double ? d_ : double(i_); }
  int64_t toInt() const { return kind_ == Kind::Double ? int64_t(d_) : i_; }
  bool toBool() const { return kind_ == Kind::Double ? d_ != 0.0 : i_ != 0; }
  template <typename T> T to() const {
    if constexpr (std::is_same_v<T, bool>) return toBool();
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(toInt());
    else return static_cast<T>(toDouble());
  }

  // The dtype a Python number of this kind gets as a tensor: bool, int64 or float64.
  ScalarType naturalType() const {
    return kind_ == Kind::Bool ? ScalarType::Bool
           : kind_ == Kind::Int ? ScalarType::Int64
                                : ScalarType::Float64;
  }
  std::string toString() const;
  bool operator==(const Scalar& o) const {
    return kind_ == o.kind_ && (kind_ == Kind::Double ? d_ == o.d_ : i_ == o.i_);
  }

private:
  Kind kind_;
  union {
    int64_t i_;
    double d_;
  };
};

} // namespace kiln
