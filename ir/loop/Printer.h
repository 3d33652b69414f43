// The text form of loop programs (grammar in docs/loop-ir.md):
//
//   program @f(%x: f32[64, 128], %y: f32[128]) {
//     %buf0: f32[64, 128] = pointwise [i0: 64, i1: 128] {
//       %0 = load %x[128*i0 + i1]
//       %1 = load %y[i1]
//       %2 = mul %0, %1
//       store %2
//     }
//     %buf1: f32[64] = reduction sum [i0: 64] over [r0: 128] {
//       %0 = load %buf0[128*i0 + r0]
//       reduce %0
//     }
//     output %buf1
//   }
//
// Body values are numbered %0, %1, ... in definition order. Parsing the printed text gives an
// equal program, and printing that gives the same bytes.
#pragma once
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln {

std::string printLoopProgram(const LoopProgram& p);
// Programs separated by a blank line.
std::string printLoopPrograms(const std::vector<LoopProgram>& programs);

} // namespace kiln
