// The calling convention a compiled loop program declares, shared by the C++ programs
// (CompiledKernelBinding) and the CUDA ones (CudaProgramBinding): its inputs' and outputs'
// dtypes, sizes and strides (expressions over its size symbols) and where each size symbol is
// read at a call.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ir/IndexExpr.h"
#include "ir/loop/LoopIR.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"

namespace kiln::python {

// An input's or output's declared sizes and strides: expressions over the size symbols.
struct TensorMeta {
  std::string name;
  ScalarType dtype;
  std::vector<IndexExpr> sizes, strides;
};

// Where a size symbol's value is read at each call: the size of dim `dim` of input `input`.
struct SymbolSource {
  std::string symbol;
  size_t input, dim;
};

struct ProgramSignature {
  LoopProgram program;
  std::vector<TensorMeta> inputs, outputs; // an output written in place stands for its storage
  std::vector<SymbolSource> symbols;       // in LoopProgram::sizeSymbols order
};

// Parses and verifies `text` (one loop program) and reads its signature; each size symbol is
// read from the first input dim that is exactly that symbol. `who` names the caller in errors.
ProgramSignature readProgramSignature(std::string_view text, const char* who);

inline DimVector evaluated(const std::vector<IndexExpr>& exprs, const std::map<std::string, int64_t>& values) {
  DimVector out;
  for (const IndexExpr& e : exprs) out.push_back(e.isConstant() ? *e.constant() : e.evaluate(values));
  return out;
}

// Strides matter only along dims of size > 1, and not at all for an empty tensor.
inline bool sameLayout(const Tensor& t, const DimVector& sizes, const DimVector& strides) {
  if (t.numel() == 0) return true;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1 && t.strides()[d] != strides[d]) return false;
  return true;
}

// The value of size symbol `s` at a call whose input `s.input` is `t`, checked: the input has
// the declared rank and the value is one the program was compiled for (>= kMinSizeSymbol).
// Errors name the program: "<kind> @<name>" ("compiled program @mlp"); nothing is formatted
// unless a check fails (this runs on every call of a symbolic program).
inline int64_t symbolValue(const SymbolSource& s, const Tensor& t, const std::vector<TensorMeta>& inputs,
                           const char* kind, const std::string& name) {
  const TensorMeta& m = inputs[s.input];
  KILN_CHECK(t.dim() == int64_t(m.sizes.size()), kind, " @", name, ": input ", s.input, " (%", m.name, ") has ",
             t.dim(), " dims, expected ", m.sizes.size());
  int64_t v = t.sizes()[s.dim];
  KILN_CHECK(v >= kMinSizeSymbol, kind, " @", name, ": size symbol ", s.symbol, " (dim ", s.dim, " of input ",
             s.input, ", %", m.name, ") is ", v, ", but the program was compiled for ", s.symbol, " >= ",
             kMinSizeSymbol);
  return v;
}

} // namespace kiln::python
