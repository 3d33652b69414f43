// GEMM epilogues: a pointwise buffer that only transforms a GEMM's result element by element
// (bias, activation, residual add) can run inside the GEMM as a chain of post-ops, the way
// oneDNN's matmul applies them while each output tile is still in registers, instead of as a
// second pass over the product in memory. This analysis reads such a buffer's body as that
// chain, or says why it cannot; the scheduler (passes/loop/FuseGemmEpilogue.h) and the code
// generators share it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln {

// One step applied to the running value v (the GEMM's result element at first). The analysis
// makes no Relu, Max or Min steps (oneDNN's lose NaNs); the kinds exist for the runtime's table.
struct GemmPostOp {
  enum class Kind : uint8_t {
    Linear,   // alpha * v + beta
    Relu,     // v > 0 ? v : 0 (NaN stays NaN)
    GeluErf,  // 0.5 * v * (1 + erf(v / sqrt(2)))
    GeluTanh, // 0.5 * v * (1 + tanh(sqrt(2 / pi) * (v + 0.044715 * v^3)))
    Tanh,
    Sigmoid,  // 1 / (1 + exp(-v))
    Silu,     // v * sigmoid(v)
    Exp,
    Abs,
    Sqrt,
    // Binary with a tensor t read at [row, col] (row stride `rowStride`, 0 when t broadcasts
    // over the rows; column stride 1; element offset `offset`): v op t.
    Add,
    Sub,
    Mul,
    Div,
    Max,
    Min,
  };
  Kind kind = Kind::Linear;
  double alpha = 1, beta = 0; // Linear
  std::string tensor = {};    // binary: the input or buffer read
  int64_t rowStride = 0, offset = 0;

  bool isBinary() const { return kind >= Kind::Add; }
};

// "linear", "gelu_erf", "add", ...
const char* gemmPostOpName(GemmPostOp::Kind k);

// The post-ops that compute pointwise buffer `consumer` from the f32 result of non-batched
// extern mm `gemm` (sizes [m, n]), in order; or why not: the consumer must run over [m, n],
// read the product only at its own point, and compute nothing but a chain of the steps above
// from it (tensor operands f32 loads at [row, col] or [col]).
std::variant<std::vector<GemmPostOp>, std::string> gemmEpilogueOf(const LoopProgram& p,
                                                                  const Buffer& gemm,
                                                                  const Buffer& consumer);

} // namespace kiln
