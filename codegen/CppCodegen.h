// C++ code generation: a LoopProgram -> one self-contained C++17 translation unit with a loop
// nest per kernel group and the entry point
//
//   extern "C" int kiln_entry(const KilnContext* ctx, void* const* inputs, void* const* outputs,
//                             const int64_t* sizes);
//
// `inputs` are the data pointers of the program's inputs (laid out as their sizes and strides
// declare), `outputs` caller-allocated contiguous buffers in output order; intermediates come
// from ctx->alloc and go back to ctx->free after their last use. `sizes` holds the values of the
// program's size symbols (LoopProgram::sizeSymbols, in that order; unused without symbols),
// each at least kMinSizeSymbol (ir/loop/LoopIR.h): loop extents, buffer sizes and extern GEMM
// shapes may be expressions over them, so one compiled program serves every size. It returns
// 0, or 1 when an allocation failed. KilnContext (allocator, cblas_sgemm/dgemm, thread count) is declared by the
// source itself (codegen/CppPrelude.cpp); only standard headers are included.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::codegen {

struct CppOptions {
  // Loops run in parallel (OpenMP) when a nest does at least this many elements of work.
  int64_t parallelThreshold = 32768;
  // The name of the extern "C" entry point.
  std::string entryName = "kiln_entry";
  // Begin with the prelude (headers, KilnContext, helpers); without it the text is the kernels
  // and entry only, to follow one prelude in a source holding several programs (each inside its
  // own namespace, with its own entry name).
  bool prelude = true;
  // How many translation units the kernels are spread over (with a prelude only): 0 (default)
  // splits a program with 64 KB of kernel source or more over min(cores, 4, KB / 32); 1 never splits;
  // n > 1 always (at most one per kernel). The parts are separated by kTranslationUnitMarker
  // lines, the prelude ends with kEndOfPreludeMarker: Toolchain::compileSharedObject compiles
  // each part (the prelude and its kernels) in parallel and links them.
  int translationUnits = 0;
  // The values size symbols are expected to take (the sizes of the first call): decisions that
  // depend on a size (parallel or not) take a symbolic one at its hint; symbols without a hint
  // count as 1024. Only speed depends on hints, never results.
  std::map<std::string, int64_t> sizeHints;
};


inline constexpr const char* kEndOfPreludeMarker = "// kiln: end of prelude";
inline constexpr const char* kTranslationUnitMarker = "// kiln: translation unit";

// The C++ source of `p`. Throws kiln::Error for what the code generator does not handle:
// extern kernels other than mm/bmm/addmm on f32/f64, size symbols not named s0, s1, ...
std::string emitCpp(const LoopProgram& p, const CppOptions& options = {});

} // namespace kiln::codegen
