// Text that the C++ and CUDA emitters (codegen/CppCodegen.cpp, codegen/CudaCodegen.cpp) both
// write: an indented line buffer, sizes and loops as C expressions, and a reduction's
// accumulator (declaration, update, final value), which is plain C++ in both languages.
#pragma once
#include <cstdint>
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "codegen/CppExpr.h"
#include "codegen/KernelPlan.h"
#include "runtime/Error.h"

namespace kiln::codegen {

class Code {
public:
  void line(const std::string& s) { lines_.push_back(std::string(indent_ * 2, ' ') + s); }
  void open(const std::string& s) {
    line(s);
    ++indent_;
  }
  void close(const std::string& s = "}") {
    --indent_;
    line(s);
  }
  void lines(const std::vector<std::string>& ls) {
    for (const std::string& s : ls) line(s);
  }
  std::string str() const {
    std::string out;
    for (const std::string& s : lines_) out += s + "\n";
    return out;
  }
  int indent_ = 0;

private:
  std::vector<std::string> lines_;
};

// C++ for an extent or size: a constant, or an expression over the size symbols.
inline std::string sizeText(const IndexExpr& e) {
  if (std::optional<int64_t> c = e.constant()) return std::to_string(*c);
  std::string s = cppIndex(e, symbolFacts(e));
  return e.kind() == IndexExpr::Kind::Var ? s : "(" + s + ")";
}

// The bytes of `count` elements of `elementBytes` each, at least 1 (what ctx->alloc gets).
inline std::string allocBytes(const IndexExpr& count, int64_t elementBytes) {
  if (std::optional<int64_t> c = count.constant())
    return std::to_string(std::max<int64_t>(*c * elementBytes, 1));
  return "kiln_max<int64_t>(" + sizeText(count) + " * " + std::to_string(elementBytes) + ", 1)";
}

inline std::string forLoop(const Loop& l) {
  return "for (int64_t " + l.var + " = 0; " + l.var + " < " + sizeText(l.extent) + "; ++" +
         l.var + ") {";
}

// The accumulator of one reduction in a reduction phase.
struct Accumulator {
  ReductionKind kind;   // sum/prod/max/min of bools are any/all
  ScalarType value;     // the reduced values' dtype
  ScalarType result;    // the buffer's dtype
  std::string name;     // a<id>
  std::string type;     // C++ type of the accumulator
  bool shared = false;  // uses an earlier member's welford state

  bool floating() const { return isFloatingType(value); }
  // Sums and products of floats are blocked: a partial per block, added to the total after.
  bool usesPart() const {
    return floating() && (kind == ReductionKind::Sum || kind == ReductionKind::Prod);
  }
  bool simd() const {
    return kind != ReductionKind::ArgMax && kind != ReductionKind::ArgMin &&
           kind != ReductionKind::WelfordMean && kind != ReductionKind::WelfordVar;
  }

  // Kinds whose state is one value updated independently per element (no position, no Welford).
  bool elementwise() const { return simd(); }
  // The initial value of the accumulator (sum, prod, max, min, any, all).
  std::string initValue() const {
    switch (kind) {
    case ReductionKind::Sum: return "0";
    case ReductionKind::Prod: return "1";
    case ReductionKind::Max: return cppExtremeLiteral(value, false);
    case ReductionKind::Min: return cppExtremeLiteral(value, true);
    case ReductionKind::Any: return "0";
    case ReductionKind::All: return "1";
    default: return "0";
    }
  }

  std::vector<std::string> declare() const {
    if (shared) return {};
    switch (kind) {
    case ReductionKind::Sum: return {type + " " + name + " = 0;"};
    case ReductionKind::Prod: return {type + " " + name + " = 1;"};
    case ReductionKind::Max:
    case ReductionKind::Min: {
      bool max = kind == ReductionKind::Max;
      std::string init = type + " " + name + " = " + cppExtremeLiteral(value, !max) + ";";
      if (!floating()) return {init};
      // An int OR-ed with `|`: GCC vectorizes int OR reductions, not bool || ones (a scalar max
      // loop made softmax 3.6x slower).
      return {init, "int " + name + "_nan = 0;"};
    }
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: {
      bool max = kind == ReductionKind::ArgMax;
      std::string init = cppExtremeLiteral(value, !max);
      return {type + " " + name + " = " + init + ";", "int64_t " + name + "_i = 0;"};
    }
    // any/all accumulate in an int with | and & (vectorizable, unlike bool || and &&).
    case ReductionKind::Any: return {"int " + name + " = 0;"};
    case ReductionKind::All: return {"int " + name + " = 1;"};
    case ReductionKind::WelfordMean:
    case ReductionKind::WelfordVar:
      return {"double " + name + "_mean = 0, " + name + "_m2 = 0, " + name + "_n = 0;"};
    }
    return {};
  }

  // The OpenMP reduction clauses over the total (part = false) or the block partial.
  std::string clauses(bool part) const {
    std::string target = part && usesPart() ? name + "_p" : name;
    switch (kind) {
    case ReductionKind::Sum: return " reduction(+:" + target + ")";
    case ReductionKind::Prod: return " reduction(*:" + target + ")";
    case ReductionKind::Max:
    case ReductionKind::Min: {
      std::string c = std::string(" reduction(") + (kind == ReductionKind::Max ? "max" : "min") +
                      ":" + name + ")";
      return floating() ? c + " reduction(|:" + name + "_nan)" : c;
    }
    case ReductionKind::Any: return " reduction(|:" + name + ")";
    case ReductionKind::All: return " reduction(&:" + name + ")";
    default: return "";
    }
  }

  // Accumulates the value `v` at flat reduction position `pos`.
  std::vector<std::string> update(const std::string& v, const std::string& pos, bool part) const {
    if (shared) return {};
    std::string target = part && usesPart() ? name + "_p" : name;
    switch (kind) {
    case ReductionKind::Sum: return {target + " += " + v + ";"};
    case ReductionKind::Prod: return {target + " *= " + v + ";"};
    case ReductionKind::Max:
    case ReductionKind::Min: {
      std::string f = kind == ReductionKind::Max ? "kiln_max" : "kiln_min";
      std::string s = name + " = " + f + "(" + name + ", " + v + ");";
      if (!floating()) return {s};
      return {s, name + "_nan |= int(" + v + " != " + v + ");"};
    }
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: {
      // The first position of the extremum; a NaN is the extremum (the first one wins).
      std::string cmp = kind == ReductionKind::ArgMax ? " > " : " < ";
      std::string cond = floating() ? "!(" + name + " != " + name + ") && (" + v + cmp + name +
                                          " || " + v + " != " + v + ")"
                                    : v + cmp + name;
      return {"if (" + cond + ") {", "  " + name + " = " + v + ";", "  " + name + "_i = " + pos + ";",
              "}"};
    }
    case ReductionKind::Any:
      return {name + " |= int(" + (value == ScalarType::Bool ? v : v + " != 0") + ");"};
    case ReductionKind::All:
      return {name + " &= int(" + (value == ScalarType::Bool ? v : v + " != 0") + ");"};
    case ReductionKind::WelfordMean:
    case ReductionKind::WelfordVar: {
      std::string x = "static_cast<double>(" + v + ")";
      return {"{", "  " + name + "_n += 1;", "  const double d = " + x + " - " + name + "_mean;",
              "  " + name + "_mean += d / " + name + "_n;",
              "  " + name + "_m2 += d * (" + x + " - " + name + "_mean);", "}"};
    }
    }
    return {};
  }

  std::vector<std::string> declarePart() const {
    if (!usesPart()) return {};
    return {type + " " + name + "_p = " + (kind == ReductionKind::Sum ? "0;" : "1;")};
  }
  std::vector<std::string> combinePart() const {
    if (!usesPart()) return {};
    return {name + (kind == ReductionKind::Sum ? " += " : " *= ") + name + "_p;"};
  }

  // The reduction's result (compute type of the buffer's dtype).
  std::string finalValue() const {
    const std::string R = cppComputeType(result);
    switch (kind) {
    case ReductionKind::Sum:
    case ReductionKind::Prod:
      return cppRoundTo(result, type == R ? name : "static_cast<" + R + ">(" + name + ")");
    case ReductionKind::Max:
    case ReductionKind::Min:
      if (!floating()) return name;
      return "(" + name + "_nan ? " + cppFloatLiteral(std::nan(""), result) + " : " + name + ")";
    case ReductionKind::ArgMax:
    case ReductionKind::ArgMin: return name + "_i";
    case ReductionKind::Any:
    case ReductionKind::All: return name;
    case ReductionKind::WelfordMean:
      return cppRoundTo(result, "static_cast<" + R + ">(" + name + "_n > 0 ? " + name +
                                    "_mean : __builtin_nan(\"\"))");
    case ReductionKind::WelfordVar:
      return cppRoundTo(result, "static_cast<" + R + ">(" + name + "_m2 / " + name + "_n)");
    }
    return name;
  }
};

// An extern scan (cumsum, cumprod: compiler/lowering/Indexing.cpp) of one contiguous operand of the
// buffer's shape: `rows` blocks of `length` x `inner` elements, each scanned along `length`.
// The running value is kept as eager's CPU kernel keeps it (double for floats, wrapping uint64_t
// for integers), and each output is that value converted to the element type.
struct ScanShape {
  bool prod = false;
  IndexExpr rows, length, inner;
  std::string T, A; // the element and running value C++ types
  std::string init() const { return A + "(" + (prod ? "1" : "0") + ")"; }
  // The running value `acc` after the element `x` (an expression of type T).
  std::string step(const std::string& acc, const std::string& x) const {
    return acc + " = " + acc + (prod ? " * " : " + ") + A + "(" + x + ");";
  }
};

inline ScanShape scanShape(const Buffer& b, const std::vector<IndexExpr>& inputSizes, ScalarType input,
                           const std::string& what) {
  const Extern& x = std::get<Extern>(b.computation);
  ScanShape s;
  s.prod = x.kernel == "cumprod";
  KILN_CHECK(x.inputs.size() == 1, what, ": expected 1 input, got ", x.inputs.size());
  KILN_CHECK(input == b.dtype, what, ": a ", scalarTypeShortName(input), " operand and a ",
             scalarTypeShortName(b.dtype), " result");
  KILN_CHECK(b.dtype == ScalarType::Float32 || b.dtype == ScalarType::Float64 ||
                 (isIntegralType(b.dtype, false)),
             what, ": scans of ", scalarTypeShortName(b.dtype), " are not supported (f32, f64 and integers are)");
  int64_t dim = -1;
  for (const auto& [key, v] : x.args) {
    const int64_t* d = std::get_if<int64_t>(&v);
    KILN_CHECK(key == "dim" && d, what, ": unknown argument ", key, " (dim=<int> is the only one)");
    dim = *d;
  }
  KILN_CHECK(dim >= 0 && size_t(dim) < inputSizes.size(), what, ": dim=", dim, " is not a dim of the ",
             inputSizes.size(), "-d operand");
  KILN_CHECK(numel(inputSizes) == numel(b.sizes), what, ": operand and result sizes do not match");
  s.rows = numel({inputSizes.begin(), inputSizes.begin() + dim});
  s.length = inputSizes[size_t(dim)];
  s.inner = numel({inputSizes.begin() + dim + 1, inputSizes.end()});
  s.T = cppStorageType(b.dtype);
  s.A = isFloatingType(b.dtype) ? "double" : "uint64_t";
  return s;
}

inline Accumulator makeAccumulator(const Member& m) {
  const Reduction& r = std::get<Reduction>(m.buffer->computation);
  Accumulator a;
  a.value = m.body.ops.back().dtype;
  a.result = m.buffer->dtype;
  a.kind = r.kind;
  if (a.value == ScalarType::Bool) {
    if (a.kind == ReductionKind::Sum || a.kind == ReductionKind::Max) a.kind = ReductionKind::Any;
    if (a.kind == ReductionKind::Prod || a.kind == ReductionKind::Min) a.kind = ReductionKind::All;
  }
  a.name = "a" + std::to_string(m.id);
  a.type = isFloatingType(a.value) && (a.kind == ReductionKind::Sum || a.kind == ReductionKind::Prod)
               ? (a.value == ScalarType::Float64 ? "double" : "float")
               : a.kind == ReductionKind::Any || a.kind == ReductionKind::All ? "int"
                                                                                 : cppComputeType(a.value);
  return a;
}

} // namespace kiln::codegen
