// The twelve dtypes, their properties, PyTorch's promotion lattice and the dtype dispatch macros.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/Half.h"

namespace kiln {

enum class ScalarType : uint8_t {
  Bool, UInt8, Int8, Int16, Int32, Int64, Float16, BFloat16, Float32, Float64,
  // Interleaved (re, im) pairs of float32 / float64 (docs/complex.md): no kernel computes on
  // them; the Complex dispatch key rewrites their ops into real ops on view_as_real views.
  ComplexFloat, ComplexDouble,
};
constexpr int kNumScalarTypes = 12;

size_t elementSize(ScalarType t);
// "float32", "int64", ... (the name after "kiln." / "torch.").
const char* scalarTypeName(ScalarType t);
// PyTorch's short names used in error messages: "Float", "Long", "Bool", ...
const char* scalarTypeShortName(ScalarType t);

inline bool isFloatingType(ScalarType t) {
  return t == ScalarType::Float16 || t == ScalarType::BFloat16 || t == ScalarType::Float32 ||
         t == ScalarType::Float64;
}
inline bool isComplexType(ScalarType t) {
  return t == ScalarType::ComplexFloat || t == ScalarType::ComplexDouble;
}
// Dtypes autograd differentiates (torch's is_differentiable_type): floating and complex.
inline bool isDifferentiableType(ScalarType t) { return isFloatingType(t) || isComplexType(t); }
// complex64 -> float32, complex128 -> float64; other dtypes map to themselves.
inline ScalarType toRealValueType(ScalarType t) {
  return t == ScalarType::ComplexFloat ? ScalarType::Float32
         : t == ScalarType::ComplexDouble ? ScalarType::Float64 : t;
}
// float64 -> complex128, every other dtype -> complex64 (torch.promote_types(t, complex64)).
inline ScalarType toComplexType(ScalarType t) {
  return t == ScalarType::Float64 || t == ScalarType::ComplexDouble ? ScalarType::ComplexDouble
                                                                     : ScalarType::ComplexFloat;
}
inline bool isIntegralType(ScalarType t, bool includeBool) {
  return (t >= ScalarType::UInt8 && t <= ScalarType::Int64) || (includeBool && t == ScalarType::Bool);
}
inline bool isSignedType(ScalarType t) { return t != ScalarType::Bool && t != ScalarType::UInt8; }

// The lattice of torch.promote_types.
ScalarType promoteTypes(ScalarType a, ScalarType b);
// torch.can_cast: may a value of `from` be written into `to` by an in-place op?
bool canCast(ScalarType from, ScalarType to);

template <typename T> struct ScalarTypeOf;
template <> struct ScalarTypeOf<bool> { static constexpr ScalarType value = ScalarType::Bool; };
template <> struct ScalarTypeOf<uint8_t> { static constexpr ScalarType value = ScalarType::UInt8; };
template <> struct ScalarTypeOf<int8_t> { static constexpr ScalarType value = ScalarType::Int8; };
template <> struct ScalarTypeOf<int16_t> { static constexpr ScalarType value = ScalarType::Int16; };
template <> struct ScalarTypeOf<int32_t> { static constexpr ScalarType value = ScalarType::Int32; };
template <> struct ScalarTypeOf<int64_t> { static constexpr ScalarType value = ScalarType::Int64; };
template <> struct ScalarTypeOf<Half> { static constexpr ScalarType value = ScalarType::Float16; };
template <> struct ScalarTypeOf<BFloat16> { static constexpr ScalarType value = ScalarType::BFloat16; };
template <> struct ScalarTypeOf<float> { static constexpr ScalarType value = ScalarType::Float32; };
template <> struct ScalarTypeOf<double> { static constexpr ScalarType value = ScalarType::Float64; };

// The type arithmetic is done in: float for the 16-bit floats, the type itself otherwise.
template <typename T> struct OpMath { using type = T; };
template <> struct OpMath<Half> { using type = float; };
template <> struct OpMath<BFloat16> { using type = float; };
template <typename T> using opmath_t = typename OpMath<T>::type;

[[noreturn]] void throwUnsupportedDtype(const char* op, ScalarType t);

} // namespace kiln

// Dtype dispatch: calls a template lambda with the C++ type of TYPE, e.g.
//   KILN_DISPATCH_ALL(t.dtype(), "neg", [&]<typename scalar_t>() { ... });
// (a template, so `if constexpr` on scalar_t discards what does not apply to a type).
#define KILN_DTYPE_CASE(enumName, cppType, ...)                                                    \
  case ::kiln::ScalarType::enumName:                                                               \
    return __VA_ARGS__.template operator()<cppType>();

#define KILN_DISPATCH_FLOATING(TYPE, NAME, ...)                                                    \
  [&] {                                                                                            \
    switch (TYPE) {                                                                                \
      KILN_DTYPE_CASE(Float32, float, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Float64, double, __VA_ARGS__)                                                \
      KILN_DTYPE_CASE(Float16, ::kiln::Half, __VA_ARGS__)                                          \
      KILN_DTYPE_CASE(BFloat16, ::kiln::BFloat16, __VA_ARGS__)                                     \
    default:                                                                                       \
      ::kiln::throwUnsupportedDtype(NAME, TYPE);                                                   \
    }                                                                                              \
  }()

#define KILN_DISPATCH_INTEGRAL(TYPE, NAME, ...)                                                    \
  [&] {                                                                                            \
    switch (TYPE) {                                                                                \
      KILN_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int8, int8_t, __VA_ARGS__)                                                   \
      KILN_DTYPE_CASE(Int16, int16_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)                                                 \
    default:                                                                                       \
      ::kiln::throwUnsupportedDtype(NAME, TYPE);                                                   \
    }                                                                                              \
  }()

// Every numeric type except bool.
#define KILN_DISPATCH_NUMERIC(TYPE, NAME, ...)                                                     \
  [&] {                                                                                            \
    switch (TYPE) {                                                                                \
      KILN_DTYPE_CASE(Float32, float, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Float64, double, __VA_ARGS__)                                                \
      KILN_DTYPE_CASE(Float16, ::kiln::Half, __VA_ARGS__)                                          \
      KILN_DTYPE_CASE(BFloat16, ::kiln::BFloat16, __VA_ARGS__)                                     \
      KILN_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int8, int8_t, __VA_ARGS__)                                                   \
      KILN_DTYPE_CASE(Int16, int16_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)                                                 \
    default:                                                                                       \
      ::kiln::throwUnsupportedDtype(NAME, TYPE);                                                   \
    }                                                                                              \
  }()

#define KILN_DISPATCH_ALL(TYPE, NAME, ...)                                                         \
  [&] {                                                                                            \
    switch (TYPE) {                                                                                \
      KILN_DTYPE_CASE(Bool, bool, __VA_ARGS__)                                                     \
      KILN_DTYPE_CASE(Float32, float, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Float64, double, __VA_ARGS__)                                                \
      KILN_DTYPE_CASE(Float16, ::kiln::Half, __VA_ARGS__)                                          \
      KILN_DTYPE_CASE(BFloat16, ::kiln::BFloat16, __VA_ARGS__)                                     \
      KILN_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int8, int8_t, __VA_ARGS__)                                                   \
      KILN_DTYPE_CASE(Int16, int16_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)                                                 \
      KILN_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)                                                 \
    default:                                                                                       \
      ::kiln::throwUnsupportedDtype(NAME, TYPE);                                                   \
    }                                                                                              \
  }()
