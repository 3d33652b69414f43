// Scalar -> element value with PyTorch's overflow check (c10::checked_convert): factories and
// fills reject a value the dtype cannot hold instead of silently wrapping or saturating.
#pragma once
#include <cstdint>
#include <cmath>
#include <limits>

#include "runtime/Error.h"
#include "runtime/Scalar.h"

namespace kiln {

namespace detail {
// The largest finite value of T, as a double (Half/BFloat16 have no numeric_limits).
template <typename T> constexpr double maxFinite() {
  if constexpr (std::is_same_v<T, Half>)
    return 65504.0;
  else if constexpr (std::is_same_v<T, BFloat16>)
    return 3.3895313892515355e38;
  else
    return double(std::numeric_limits<T>::max());
}
} // namespace detail

// Would `v` overflow T? Integers into unsigned types may be negative down to -max (they wrap,
// as PyTorch allows for uint8); floating values into floating types may be inf or nan.
template <typename T> bool overflows(const Scalar& v) {
  if (v.isBool() || std::is_same_v<T, bool>) return false;
  if constexpr (std::is_integral_v<T>) {
    if (v.isIntegral()) {
      int64_t i = v.toInt();
      if constexpr (std::is_unsigned_v<T>)
        return i > int64_t(std::numeric_limits<T>::max()) ||
               (i < 0 && -i > int64_t(std::numeric_limits<T>::max()));
      else
        return i < int64_t(std::numeric_limits<T>::lowest()) ||
               i > int64_t(std::numeric_limits<T>::max());
    }
    double d = v.toDouble();
    // PyTorch compares against the limits themselves (so -0.5 overflows uint8); 2^63, which
    // int64's max rounds to, is past int64's range.
    if (std::is_same_v<T, int64_t> && d >= 9223372036854775808.0) return true;
    return std::isnan(d) || d < double(std::numeric_limits<T>::lowest()) ||
           d > double(std::numeric_limits<T>::max());
  } else {
    double d = v.toDouble();
    if (std::isinf(d) || std::isnan(d)) return false;
    return std::fabs(d) > detail::maxFinite<T>();
  }
}

// v as a T; RuntimeError "value cannot be converted to type <dtype> without overflow".
template <typename T> T checkedConvert(const Scalar& v) {
  KILN_CHECK(!overflows<T>(v), "value cannot be converted to type ",
             scalarTypeName(ScalarTypeOf<T>::value), " without overflow");
  return v.to<T>();
}

} // namespace kiln
