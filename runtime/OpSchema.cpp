// Schema helpers.
#include "runtime/OpSchema.h"

namespace kiln {

const char* argTypeName(ArgType t) {
  static constexpr const char* names[] = {
      "Tensor", "Tensor[]", "Tensor?[]", "int",    "int[]",        "float", "float[]", "bool",
      "Scalar", "ScalarType", "Device", "Layout", "MemoryFormat", "str",   "Generator"};
  return names[int(t)];
}

} // namespace kiln
