// C++ text for element types, index expressions and loop bodies (see CppExpr.h). Every
// helper called here (kiln_h2f, kiln_add, ...) is defined by the prelude (CppPrelude.cpp).
#include "codegen/CppExpr.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "runtime/Error.h"
#include "runtime/Half.h"

namespace kiln::codegen {

namespace {

bool isHalfLike(ScalarType t) { return t == ScalarType::Float16 || t == ScalarType::BFloat16; }

std::string renderIndex(const IndexExpr& e, const RangeFacts& facts);

// An operand of *, / or %: bare when it is a variable or a constant, else parenthesized.
std::string atom(const IndexExpr& e, const RangeFacts& facts) {
  std::string s = renderIndex(e, facts);
  if (e.kind() == IndexExpr::Kind::Var || (e.isConstant() && *e.constant() >= 0) ||
      e.kind() == IndexExpr::Kind::FloorDiv || e.kind() == IndexExpr::Kind::Mod ||
      e.kind() == IndexExpr::Kind::Min || e.kind() == IndexExpr::Kind::Max)
    return s;
  return "(" + s + ")";
}

std::string renderConst(int64_t v) {
  if (v == std::numeric_limits<int64_t>::min()) return "(-9223372036854775807 - 1)";
  return std::to_string(v);
}

// Division and modulo by a positive constant of a dividend that is never negative are C's / and
// %; anything else goes through the floor-semantics helpers.
std::string renderDivMod(const IndexExpr& e, const RangeFacts& facts, bool isDiv) {
  const IndexExpr& a = e.operands()[0];
  const IndexExpr& b = e.operands()[1];
  std::optional<int64_t> lo = bounds(a, facts).lo;
  if (b.isConstant() && *b.constant() > 0 && lo && *lo >= 0)
    return "(" + atom(a, facts) + (isDiv ? " / " : " % ") + renderConst(*b.constant()) + ")";
  return std::string(isDiv ? "kiln_floordiv(" : "kiln_mod(") + renderIndex(a, facts) + ", " +
         renderIndex(b, facts) + ")";
}

std::string renderProduct(const IndexExpr& e, const RangeFacts& facts) {
  std::string factors;
  for (const IndexExpr& f : e.operands()) {
    if (!factors.empty()) factors += "*";
    factors += atom(f, facts);
  }
  int64_t c = e.scalar();
  if (c == 1) return factors;
  if (c == -1) return "-" + factors;
  return renderConst(c) + "*" + factors;
}

std::string renderIndex(const IndexExpr& e, const RangeFacts& facts) {
  switch (e.kind()) {
  case IndexExpr::Kind::Const:
    return renderConst(*e.constant());
  case IndexExpr::Kind::Var:
    return e.name();
  case IndexExpr::Kind::Mul:
    return renderProduct(e, facts);
  case IndexExpr::Kind::FloorDiv:
    return renderDivMod(e, facts, true);
  case IndexExpr::Kind::Mod:
    return renderDivMod(e, facts, false);
  case IndexExpr::Kind::Min:
  case IndexExpr::Kind::Max:
    return std::string(e.kind() == IndexExpr::Kind::Min ? "kiln_min<int64_t>(" : "kiln_max<int64_t>(") +
           renderIndex(e.operands()[0], facts) + ", " + renderIndex(e.operands()[1], facts) + ")";
  case IndexExpr::Kind::Add: {
    std::string s;
    for (const IndexExpr& t : e.operands()) {
      bool negative = t.kind() == IndexExpr::Kind::Mul && t.scalar() < 0;
      if (s.empty())
        s = renderIndex(t, facts);
      else
        s += negative ? " - " + renderIndex(-t, facts) : " + " + renderIndex(t, facts);
    }
    int64_t c = e.scalar();
    if (c > 0) s += " + " + renderConst(c);
    if (c < 0) s += c == std::numeric_limits<int64_t>::min() ? " + " + renderConst(c)
                                                              : " - " + renderConst(-c);
    return s;
  }
  }
  return "0";
}

std::string call(const char* f, const std::string& a) { return std::string(f) + "(" + a + ")"; }
std::string call(const char* f, const std::string& a, const std::string& b) {
  return std::string(f) + "(" + a + ", " + b + ")";
}

// The name of a float/double function pair (`kiln_tanh` / `kiln_tanhf`, `__builtin_floor` /
// `__builtin_floorf`) for compute type `t` (f16/bf16 compute in float).
std::string mathFn(const char* base, ScalarType t) {
  return std::string(base) + (t == ScalarType::Float64 ? "" : "f");
}

// A unary op on a value of dtype `t`. Math on floating values calls the prelude's vectorizable
// kiln_* helpers or libmvec-backed kiln_v* declarations (runtime/cpu/KilnMath.inc), or GCC builtins
// that compile to instructions.
std::string unaryExpr(LoopOpCode c, ScalarType t, const std::string& a) {
  const std::string T = cppComputeType(t);
  bool fp = isFloatingType(t), b8 = t == ScalarType::Bool;
  auto inexact = [&](const std::string& x) { return cppRoundTo(t, x); };
  auto math = [&](const char* base) { return inexact(call(mathFn(base, t).c_str(), a)); };
  switch (c) {
  case LoopOpCode::Neg:
    return fp ? "-" + a : "kiln_sub<" + T + ">(0, " + a + ")";
  case LoopOpCode::Abs:
    if (fp) return call(mathFn("__builtin_fabs", t).c_str(), a);
    if (!isSignedType(t)) return a;
    return "(" + a + " < 0 ? kiln_sub<" + T + ">(0, " + a + ") : " + a + ")";
  case LoopOpCode::Sign:
    if (!isSignedType(t)) return T + "(" + T + "(0) < " + a + ")";
    return T + "((" + T + "(0) < " + a + ") - (" + a + " < " + T + "(0)))";
  case LoopOpCode::Floor: return fp ? call(mathFn("__builtin_floor", t).c_str(), a) : a;
  case LoopOpCode::Ceil: return fp ? call(mathFn("__builtin_ceil", t).c_str(), a) : a;
  case LoopOpCode::Trunc: return fp ? call(mathFn("__builtin_trunc", t).c_str(), a) : a;
  case LoopOpCode::Round: // half to even
    return fp ? call(mathFn("__builtin_nearbyint", t).c_str(), a) : a;
  case LoopOpCode::Reciprocal: return inexact(T + "(1) / " + a);
  case LoopOpCode::Exp: return math("kiln_exp");
  case LoopOpCode::Exp2: return math("kiln_vexp2");
  case LoopOpCode::Expm1: return math("kiln_expm1");
  case LoopOpCode::Log: return math("kiln_log");
  case LoopOpCode::Log2: return math("kiln_vlog2");
  case LoopOpCode::Log1p: return math("kiln_log1p");
  case LoopOpCode::Sqrt: return math("__builtin_sqrt");
  case LoopOpCode::Rsqrt: return inexact(T + "(1) / " + call(mathFn("__builtin_sqrt", t).c_str(), a));
  case LoopOpCode::Sin: return math("kiln_vsin");
  case LoopOpCode::Cos: return math("kiln_vcos");
  case LoopOpCode::Tan: return math("kiln_vtan");
  case LoopOpCode::Asin: return math("kiln_vasin");
  case LoopOpCode::Acos: return math("kiln_vacos");
  case LoopOpCode::Atan: return math("kiln_vatan");
  case LoopOpCode::Sinh: return math("kiln_vsinh");
  case LoopOpCode::Cosh: return math("kiln_vcosh");
  case LoopOpCode::Tanh: return math("kiln_tanh");
  case LoopOpCode::Erf: return math("kiln_verf");
  case LoopOpCode::BitwiseNot: return b8 ? "!" + a : T + "(~" + a + ")";
  case LoopOpCode::IsFinite: return fp ? call("__builtin_isfinite", a) : "((void)" + a + ", true)";
  default: break;
  }
  throw Error(strCat("C++ codegen: ", loopOpName(c), " is not a unary op"));
}

// A binary op on two values of dtype `t`.
std::string binaryExpr(LoopOpCode c, ScalarType t, const std::string& a, const std::string& b) {
  const std::string T = cppComputeType(t);
  bool fp = isFloatingType(t), b8 = t == ScalarType::Bool;
  auto inexact = [&](const std::string& x) { return cppRoundTo(t, x); };
  auto infix = [&](const char* op) { return a + " " + op + " " + b; };
  auto wrapped = [&](const char* f) { return std::string(f) + "<" + T + ">(" + a + ", " + b + ")"; };
  switch (c) {
  case LoopOpCode::Add: return fp ? inexact(infix("+")) : b8 ? infix("||") : wrapped("kiln_add");
  case LoopOpCode::Sub: return fp ? inexact(infix("-")) : wrapped("kiln_sub");
  case LoopOpCode::Mul: return fp ? inexact(infix("*")) : b8 ? infix("&&") : wrapped("kiln_mul");
  case LoopOpCode::Div: return fp ? inexact(infix("/")) : wrapped("kiln_div");
  case LoopOpCode::Maximum: return b8 ? infix("||") : wrapped("kiln_maximum");
  case LoopOpCode::Minimum: return b8 ? infix("&&") : wrapped("kiln_minimum");
  case LoopOpCode::Pow: return fp ? inexact(call(mathFn("kiln_vpow", t).c_str(), a, b)) : wrapped("kiln_ipow");
  case LoopOpCode::Fmod:
    return fp ? inexact(call(mathFn("__builtin_fmod", t).c_str(), a, b)) : wrapped("kiln_ifmod");
  case LoopOpCode::Remainder:
    return fp ? inexact(call("kiln_fremainder", a, b)) : wrapped("kiln_iremainder");
  case LoopOpCode::Atan2: return inexact(call(mathFn("kiln_vatan2", t).c_str(), a, b));
  case LoopOpCode::BitwiseAnd: return b8 ? infix("&&") : T + "(" + infix("&") + ")";
  case LoopOpCode::BitwiseOr: return b8 ? infix("||") : T + "(" + infix("|") + ")";
  case LoopOpCode::BitwiseXor: return b8 ? infix("!=") : T + "(" + infix("^") + ")";
  case LoopOpCode::Eq: return infix("==");
  case LoopOpCode::Ne: return infix("!=");
  case LoopOpCode::Lt: return infix("<");
  case LoopOpCode::Le: return infix("<=");
  case LoopOpCode::Gt: return infix(">");
  case LoopOpCode::Ge: return infix(">=");
  default: break;
  }
  throw Error(strCat("C++ codegen: ", loopOpName(c), " is not a binary op"));
}

// A value of dtype `from` converted to `to` as PyTorch's casts do.
std::string castExpr(ScalarType from, ScalarType to, const std::string& a) {
  if (from == to) return a;
  if (to == ScalarType::Bool) return "(" + a + " != 0)";
  // An integer converted to floating point is never -0.0, but GCC (-march=native with
  // -fno-trapping-math) folds float(int(x)) into trunc(x), which is -0.0 for x in (-1, 0)
  // (and drops a `+ 0.0`, which it assumes cannot matter); an explicit zero survives.
  if (isFloatingType(to) && !isFloatingType(from)) {
    std::string T = isHalfLike(to) ? "float" : cppComputeType(to);
    std::string f = "(" + a + " == 0 ? " + T + "(0) : static_cast<" + T + ">(" + a + "))";
    return isHalfLike(to) ? cppRoundTo(to, f) : f;
  }
  if (isHalfLike(to)) return cppRoundTo(to, "static_cast<float>(" + a + ")");
  // c10 casts floating values to uint8 through int64 (a negative value wraps around).
  if (to == ScalarType::UInt8 && isFloatingType(from))
    return "static_cast<uint8_t>(static_cast<int64_t>(" + a + "))";
  return "static_cast<" + std::string(cppComputeType(to)) + ">(" + a + ")";
}

// pow with a constant exponent of 2, 3, -1 or -2 as eager PyTorch computes it (pow_tensor_scalar's
// special cases x*x, x*x*x, 1/x, 1/(x*x)), which are exact for every dtype; nullopt for other
// ops and exponents. (torch's float32 x ** 0.5 is sqrt but its float16 one is pow, and a float16
// pow is computed on float32 values here, so 0.5 stays pow.)
std::optional<std::string> constantPow(const LoopBody& body, const LoopOp& op, const std::string& a) {
  if (op.code != LoopOpCode::Pow || !isFloatingType(op.dtype)) return std::nullopt;
  const LoopOp& e = body.ops[op.operands[1]];
  if (e.code != LoopOpCode::Constant) return std::nullopt;
  const ScalarType t = op.dtype;
  const std::string T = cppComputeType(t);
  const double v = e.floatValue;
  if (v == 2.0) return cppRoundTo(t, a + " * " + a);
  if (v == 3.0) return cppRoundTo(t, a + " * " + a + " * " + a);
  if (v == -1.0) return cppRoundTo(t, T + "(1) / " + a);
  if (v == -2.0) return cppRoundTo(t, T + "(1) / (" + a + " * " + a + ")");
  return std::nullopt;
}

} // namespace

const char* cppStorageType(ScalarType t) {
  switch (t) {
  case ScalarType::Bool: return "bool";
  case ScalarType::UInt8: return "uint8_t";
  case ScalarType::Int8: return "int8_t";
  case ScalarType::Int16: return "int16_t";
  case ScalarType::Int32: return "int32_t";
  case ScalarType::Int64: return "int64_t";
  case ScalarType::Float16: return "uint16_t";
  case ScalarType::BFloat16: return "uint16_t";
  case ScalarType::Float32: return "float";
  case ScalarType::Float64: return "double";
  default: break;
  }
  throw Error(strCat("C++ codegen: unsupported dtype ", scalarTypeShortName(t)));
}

const char* cppComputeType(ScalarType t) {
  return isHalfLike(t) ? "float" : cppStorageType(t);
}

std::string cppIndex(const IndexExpr& e, const RangeFacts& facts) {
  return renderIndex(simplify(e, facts), facts);
}

std::string cppFromStorage(ScalarType t, const std::string& x) {
  if (t == ScalarType::Float16) return call("kiln_h2f", x);
  if (t == ScalarType::BFloat16) return call("kiln_bf2f", x);
  // A bool read as a bool keeps GCC 12 from vectorizing a loop that mixes it with floats under
  // AVX-512 ("no vectype"), and so does bool(int(x)) where the bool picks between floats (the
  // backward of a masked softmax: its select ran as a scalar loop with a branch, 7x slower):
  // its byte is read as a number and compared with 0.
  if (t == ScalarType::Bool) return "(reinterpret_cast<const unsigned char&>(" + x + ") != 0)";
  return x;
}

std::string cppToStorage(ScalarType t, const std::string& x) {
  if (t == ScalarType::Float16) return call("kiln_f2h", x);
  if (t == ScalarType::BFloat16) return call("kiln_f2bf", x);
  return x;
}

std::string cppRoundTo(ScalarType t, const std::string& x) {
  if (t == ScalarType::Float16) return call("kiln_round_h", x);
  if (t == ScalarType::BFloat16) return call("kiln_round_bf", x);
  return x;
}

std::string cppFloatLiteral(double v, ScalarType t) {
  bool isDouble = t == ScalarType::Float64;
  const std::string inf = isDouble ? "__builtin_inf()" : "__builtin_inff()";
  if (std::isnan(v)) return isDouble ? "__builtin_nan(\"\")" : "__builtin_nanf(\"\")";
  if (std::isinf(v)) return (v < 0 ? "-" : "") + inf;
  char text[64];
  if (isDouble) {
    std::snprintf(text, sizeof text, "%.17g", v);
  } else {
    float f = static_cast<float>(v);
    if (t == ScalarType::Float16) f = float(Half(f));
    if (t == ScalarType::BFloat16) f = float(BFloat16(f));
    if (std::isinf(f)) return (f < 0 ? "-" : "") + inf;
    std::snprintf(text, sizeof text, "%.9g", static_cast<double>(f));
  }
  std::string s = text;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return isDouble ? s : s + "f";
}

std::string cppIntLiteral(int64_t v, ScalarType t) {
  if (t == ScalarType::Bool) return v ? "true" : "false";
  if (isFloatingType(t)) return cppFloatLiteral(double(v), t);
  return renderConst(v);
}

std::string cppExtremeLiteral(ScalarType t, bool greatest) {
  switch (t) {
  case ScalarType::Bool: return greatest ? "true" : "false";
  case ScalarType::UInt8: return greatest ? "255" : "0";
  case ScalarType::Int8: return cppIntLiteral(greatest ? INT8_MAX : INT8_MIN, t);
  case ScalarType::Int16: return cppIntLiteral(greatest ? INT16_MAX : INT16_MIN, t);
  case ScalarType::Int32: return cppIntLiteral(greatest ? INT32_MAX : INT32_MIN, t);
  case ScalarType::Int64: return cppIntLiteral(greatest ? INT64_MAX : INT64_MIN, t);
  default:
    return cppFloatLiteral(greatest ? std::numeric_limits<double>::infinity()
                                    : -std::numeric_limits<double>::infinity(), t);
  }
}

std::string emitBody(const LoopBody& body, const std::string& prefix, const BodyEnv& env,
                     std::vector<std::string>& lines) {
  std::vector<std::string> none;
  return emitBody(body, prefix, env, lines, none, {});
}

std::map<std::string, IndexExpr> indirectNames(const LoopBody& body, const std::string& prefix) {
  std::map<std::string, IndexExpr> names;
  for (size_t i = 0; i < body.ops.size(); ++i)
    if (body.ops[i].code == LoopOpCode::Indirect)
      names[body.ops[i].var] = IndexExpr::var(prefix + std::to_string(i));
  return names;
}

std::string cppStringLiteral(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c < 32 || c >= 127) {
      const char* digits = "01234567";
      out += '\\';
      out += digits[(c >> 6) & 7];
      out += digits[(c >> 3) & 7];
      out += digits[c & 7];
    } else {
      out += char(c);
    }
  }
  return out + "\"";
}

std::string emitBody(const LoopBody& body, const std::string& prefix, const BodyEnv& env,
                     std::vector<std::string>& lines, std::vector<std::string>& hoisted,
                     const std::set<std::string>& loopVars) {
  // Indirect index variables become the locals of their indirect ops.
  std::map<std::string, IndexExpr> indirect = indirectNames(body, prefix);
  std::map<std::string, int> indirectOp;
  for (size_t i = 0; i < body.ops.size(); ++i)
    if (body.ops[i].code == LoopOpCode::Indirect) indirectOp[body.ops[i].var] = int(i);
  // invariant[i]: value i does not depend on loopVars (nothing is hoisted without loop vars).
  std::vector<bool> invariant(body.ops.size(), false);
  auto freeOfLoop = [&](const IndexExpr& e) {
    for (const std::string& v : e.variables()) {
      if (loopVars.count(v)) return false;
      // An indirect variable varies with the loop when its op does.
      if (auto it = indirectOp.find(v); it != indirectOp.end() && !invariant[it->second]) return false;
    }
    return true;
  };
  for (size_t i = 0; i < body.ops.size() && !loopVars.empty(); ++i) {
    const LoopOp& op = body.ops[i];
    if (op.code == LoopOpCode::Store || op.code == LoopOpCode::Reduce) continue;
    if (op.code == LoopOpCode::Load || op.code == LoopOpCode::IndexExpr) {
      invariant[i] = freeOfLoop(op.index);
    } else {
      invariant[i] = std::all_of(op.operands.begin(), op.operands.end(), [&](int o) { return invariant[o]; });
    }
  }
  std::vector<std::string> reused(body.ops.size()); // the earlier local a value is equal to
  auto name = [&](int i) { return reused[size_t(i)].empty() ? prefix + std::to_string(i) : reused[size_t(i)]; };
  // Only the values the stored or reduced value depends on are emitted.
  std::vector<bool> live(body.ops.size(), false);
  if (!body.ops.empty()) live.back() = true;
  // Indirect ops are used through their index variables (and check their values): all live.
  for (size_t i = 0; i < body.ops.size(); ++i) live[i] = live[i] || body.ops[i].code == LoopOpCode::Indirect;
  for (size_t i = body.ops.size(); i-- > 0;)
    if (live[i])
      for (int o : body.ops[i].operands) live[o] = true;
  for (size_t i = 0; i < body.ops.size(); ++i) {
    const LoopOp& op = body.ops[i];
    if (!live[i]) continue;
    ScalarType t = op.dtype;
    std::string expr;
    auto operand = [&](size_t k) { return name(op.operands[k]); };
    auto operandDtype = [&](size_t k) { return body.ops[op.operands[k]].dtype; };
    switch (op.code) {
    case LoopOpCode::Store:
    case LoopOpCode::Reduce:
      return operand(0);
    case LoopOpCode::Load: {
      IndexExpr index = indirect.empty() ? op.index : op.index.substitute(indirect);
      std::optional<std::string> f = env.forwarded(op.buffer, index);
      expr = f ? *f : cppFromStorage(t, env.pointer(op.buffer) + "[" + cppIndex(index, env.facts) + "]");
      break;
    }
    case LoopOpCode::Indirect:
      KILN_CHECK(env.errors, "C++ codegen: an indirect index (", op.var, ") where no error can be reported");
      expr = "kiln_index(static_cast<int64_t>(" + operand(0) + "), " + cppIndex(op.index, env.facts) + ", " +
             (op.wrap ? "1" : "0") + ", " + env.errors() + ", " + cppStringLiteral(op.error) + ")";
      break;
    case LoopOpCode::Constant:
      expr = isFloatingType(t) ? cppFloatLiteral(op.floatValue, t) : cppIntLiteral(op.intValue, t);
      break;
    case LoopOpCode::IndexExpr:
      expr = "static_cast<" + std::string(cppComputeType(t)) + ">(" +
             cppIndex(indirect.empty() ? op.index : op.index.substitute(indirect), env.facts) + ")";
      break;
    case LoopOpCode::Cast:
      expr = castExpr(operandDtype(0), t, operand(0));
      break;
    case LoopOpCode::Where:
      expr = operand(0) + " ? " + operand(1) + " : " + operand(2);
      break;
    default:
      if (std::optional<std::string> p = constantPow(body, op, operand(0))) {
        expr = *p;
      } else if (loopOpArity(op.code) == 1)
        expr = unaryExpr(op.code, operandDtype(0), operand(0));
      else
        expr = binaryExpr(op.code, operandDtype(0), operand(0), operand(1));
    }
    std::string type = cppComputeType(t);
    if (env.shared && op.code != LoopOpCode::Indirect) {
      auto [it, fresh] = env.shared->emplace(type + " " + expr, name(int(i)));
      if (!fresh) {
        reused[i] = it->second;
        continue;
      }
    }
    (invariant[i] ? hoisted : lines).push_back("const " + type + " " + name(int(i)) + " = " + expr + ";");
  }
  throw Error("C++ codegen: a loop body without store or reduce");
}

} // namespace kiln::codegen
