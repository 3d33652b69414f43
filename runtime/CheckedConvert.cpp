// The limits behind checkScalarFits, per dtype, with PyTorch's C++ type names for the message.
#include "runtime/CheckedConvert.h"

#include <cmath>
#include <limits>

#include "runtime/Error.h"

namespace kiln {

namespace {

struct Limits {
  double lowest, max;
  int64_t intLowest, intMax; // integer types only
  bool isIntegral, isUnsigned;
  const char* name;
};

template <typename T> Limits limitsFor(const char* name) {
  using L = std::numeric_limits<T>;
  if constexpr (std::is_integral_v<T>)
    return {double(L::lowest()),
            double(L::max()),
            int64_t(L::lowest()),
            int64_t(L::max()),
            true,
            !L::is_signed,
            name};
  else
    return {double(L::lowest()), double(L::max()), 0, 0, false, false, name};
}

Limits limitsOf(ScalarType t) {
  switch (t) {
  case ScalarType::UInt8:
    return limitsFor<uint8_t>("uint8_t");
  case ScalarType::Int8:
    return limitsFor<int8_t>("int8_t");
  case ScalarType::Int16:
    return limitsFor<int16_t>("int16_t");
  case ScalarType::Int32:
    return limitsFor<int32_t>("int");
  case ScalarType::Int64:
    return limitsFor<int64_t>("int64_t");
  case ScalarType::Float16:
    return {-65504.0, 65504.0, 0, 0, false, false, "c10::Half"};
  case ScalarType::BFloat16:
    return {-3.3895313892515355e38, 3.3895313892515355e38, 0, 0, false, false, "c10::BFloat16"};
  case ScalarType::Float32:
    return limitsFor<float>("float");
  case ScalarType::Float64:
    return limitsFor<double>("double");
  case ScalarType::Bool:
    break;
  }
  return limitsFor<bool>("bool");
}

bool overflows(const Scalar& value, const Limits& l) {
  if (value.isIntegral()) {
    int64_t i = value.toInt();
    if (!l.isIntegral) return double(i) < l.lowest || double(i) > l.max;
    if (l.isUnsigned)
      return i > l.intMax || (i < 0 && -static_cast<uint64_t>(i) > static_cast<uint64_t>(l.intMax));
    return i < l.intLowest || i > l.intMax;
  }
  double d = value.toDouble();
  if (std::isinf(d) && !l.isIntegral) return false;
  if (std::isnan(d)) return l.isIntegral;
  return d < l.lowest || d > l.max;
}

} // namespace

void checkScalarFits(const Scalar& value, ScalarType dtype) {
  if (dtype == ScalarType::Bool || value.isBool()) return;
  Limits l = limitsOf(dtype);
  KILN_CHECK(!overflows(value, l), "value cannot be converted to type ", l.name,
             " without overflow");
}

} // namespace kiln
