// dtype properties and PyTorch's type promotion lattice.
#include "runtime/ScalarType.h"

#include "runtime/Error.h"

namespace kiln {

size_t elementSize(ScalarType t) {
  static constexpr size_t sizes[] = {1, 1, 1, 2, 4, 8, 2, 2, 4, 8, 8, 16};
  return sizes[static_cast<int>(t)];
}

const char* scalarTypeName(ScalarType t) {
  static constexpr const char* names[] = {"bool",    "uint8",    "int8",    "int16",   "int32",
                                          "int64",   "float16",  "bfloat16", "float32", "float64",
                                          "complex64", "complex128"};
  return names[static_cast<int>(t)];
}

const char* scalarTypeShortName(ScalarType t) {
  static constexpr const char* names[] = {"Bool", "Byte", "Char",     "Short", "Int",
                                          "Long", "Half", "BFloat16", "Float", "Double",
                                          "ComplexFloat", "ComplexDouble"};
  return names[static_cast<int>(t)];
}

ScalarType promoteTypes(ScalarType a, ScalarType b) {
  if (a == b) return a;
  using S = ScalarType;
  constexpr S b1 = S::Bool, u1 = S::UInt8, i1 = S::Int8, i2 = S::Int16, i4 = S::Int32,
              i8 = S::Int64, f2 = S::Float16, bf = S::BFloat16, f4 = S::Float32, f8 = S::Float64,
              c4 = S::ComplexFloat, c8 = S::ComplexDouble;
  // Rows and columns in enum order: b1 u1 i1 i2 i4 i8 f2 bf f4 f8 c4 c8 (torch/csrc's table;
  // kiln has no complex32, so half with complex64 is complex64).
  static constexpr S table[kNumScalarTypes][kNumScalarTypes] = {
      /* b1 */ {b1, u1, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* u1 */ {u1, u1, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i1 */ {i1, i2, i1, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i2 */ {i2, i2, i2, i2, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i4 */ {i4, i4, i4, i4, i4, i8, f2, bf, f4, f8, c4, c8},
      /* i8 */ {i8, i8, i8, i8, i8, i8, f2, bf, f4, f8, c4, c8},
      /* f2 */ {f2, f2, f2, f2, f2, f2, f2, f4, f4, f8, c4, c8},
      /* bf */ {bf, bf, bf, bf, bf, bf, f4, bf, f4, f8, c4, c8},
      /* f4 */ {f4, f4, f4, f4, f4, f4, f4, f4, f4, f8, c4, c8},
      /* f8 */ {f8, f8, f8, f8, f8, f8, f8, f8, f8, f8, c8, c8},
      /* c4 */ {c4, c4, c4, c4, c4, c4, c4, c4, c4, c8, c4, c8},
      /* c8 */ {c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8, c8},
  };
  return table[static_cast<int>(a)][static_cast<int>(b)];
}

bool canCast(ScalarType from, ScalarType to) {
  // Complex to real, float to integral and non-bool to bool are the disallowed directions.
  if (isComplexType(from) && !isComplexType(to)) return false;
  if (isFloatingType(from) && isIntegralType(to, true)) return false;
  if (from != ScalarType::Bool && to == ScalarType::Bool) return false;
  return true;
}

void throwUnsupportedDtype(const char* op, ScalarType t) {
  throw NotImplementedError(std::string("\"") + op + "\" not implemented for '" + scalarTypeShortName(t) + "'");
}

} // namespace kiln
