// The C++ type names some of PyTorch's error messages print ("float != double", "to - 1 is out
// of bounds for unsigned char"); kiln words those messages the same way.
#pragma once
#include "runtime/ScalarType.h"

namespace kiln {

inline const char* cppTypeName(ScalarType t) {
  static constexpr const char* names[] = {"bool",  "unsigned char", "signed char", "short int",
                                          "int",   "long int",      "c10::Half",   "c10::BFloat16",
                                          "float", "double",                "c10::complex<float>", "c10::complex<double>"};
  return names[int(t)];
}

} // namespace kiln
