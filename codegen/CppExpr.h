// C++ text for the scalar parts of a loop program: element types, index expressions in int64
// arithmetic, and loop bodies as straight-line code (one const local per op).
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::codegen {

// The C++ type a buffer of `t` is stored as (uint16_t for f16/bf16).
const char* cppStorageType(ScalarType t);
// The C++ type values of `t` are computed in (float for f16/bf16, which hold values already
// rounded to 16 bits).
const char* cppComputeType(ScalarType t);

// `e` as a C++ int64 expression over the loop variables, simplified with `facts`; floor
// division and modulo of operands known to be nonnegative use plain / and %.
std::string cppIndex(const IndexExpr& e, const RangeFacts& facts);

// A stored element converted to its compute type (`x` read from storage) and back.
std::string cppFromStorage(ScalarType t, const std::string& x);
std::string cppToStorage(ScalarType t, const std::string& x);
// A compute-type value rounded to what `t` holds (identity except for f16/bf16).
std::string cppRoundTo(ScalarType t, const std::string& x);
// A literal of `t` (compute type): `1.5f`, `__builtin_inf()`.
std::string cppFloatLiteral(double v, ScalarType t);
std::string cppIntLiteral(int64_t v, ScalarType t);
// The least (lowest) or greatest value of `t` as a literal: -inf/inf for floating types.
std::string cppExtremeLiteral(ScalarType t, bool greatest);

// How loads are rendered: `load(buffer, index)` returns the C++ expression of the loaded
// value (compute type), or nullopt to read memory through `pointer(buffer)`.
struct BodyEnv {
  std::function<std::optional<std::string>(const std::string& buffer, const IndexExpr& index)>
      forwarded;
  std::function<std::string(const std::string& buffer)> pointer;
  RangeFacts facts;
  // The KilnError* expression indirect ops report to (and whose use the caller records); unset
  // where bodies have no indirect ops.
  std::function<std::string()> errors;
  // Where set, values equal to one already emitted into the same loop body (the same C++
  // expression of the same type) reuse its local instead: the members of one pointwise phase
  // share their loads and math (a GELU backward recomputing the forward's erf for two outputs).
  // Maps "type expr" to the local's name; indirect ops always get their own.
  std::map<std::string, std::string>* shared = nullptr;
};

// The C++ names of a body's indirect index variables: the locals of their ops (prefix + op
// index), for substituting into index expressions (loads, an in-place store's index).
std::map<std::string, IndexExpr> indirectNames(const LoopBody& body, const std::string& prefix);
// `s` as a C++ string literal.
std::string cppStringLiteral(const std::string& s);

// Appends one `const T name = expr;` line per value of `body` (locals named `prefix` + op
// index) and returns the expression of the stored or reduced value. Index expressions must
// already be in the loop variables of the emitted code.
std::string emitBody(const LoopBody& body, const std::string& prefix, const BodyEnv& env,
                     std::vector<std::string>& lines);
// The same, with the values that do not depend on `loopVars` (constants, loads at an index free
// of them, and ops of such values) appended to `hoisted` instead, for the caller to emit before
// its loops: a per-row value (log of a row sum) inside a simd loop can keep GCC from
// vectorizing it, and is computed once per row instead of once per element.
std::string emitBody(const LoopBody& body, const std::string& prefix, const BodyEnv& env,
                     std::vector<std::string>& lines, std::vector<std::string>& hoisted,
                     const std::set<std::string>& loopVars);

} // namespace kiln::codegen
