// GEMM epilogues: reading a pointwise body as a chain of post-ops (see GemmEpilogue.h).
//
// The body is matched from its store back to the load of the product. Activations are matched
// as the op trees kiln's decompositions produce for them (gelu's erf form is
// 0.5 * v * (1 + erf(v * 0.7071...)), relu is where(v <= 0, 0, v)), with the operands of
// commutative ops in either order; arithmetic with a constant becomes a linear step when the
// result is bitwise the same (v + c, v - c, c - v, v * c; not v / c, which rounds differently
// from v * (1 / c)); arithmetic with a loaded tensor becomes a binary step. relu, maximum and
// minimum are not matched: oneDNN computes them with max/min instructions that turn a NaN into
// the other operand, where PyTorch's propagate it.
#include "ir/loop/GemmEpilogue.h"

#include <cstdint>
#include <algorithm>
#include <cmath>
#include <functional>

#include "runtime/Error.h"

namespace kiln {

const char* gemmPostOpName(GemmPostOp::Kind k) {
  using K = GemmPostOp::Kind;
  switch (k) {
  case K::Linear: return "linear";
  case K::Relu: return "relu";
  case K::GeluErf: return "gelu_erf";
  case K::GeluTanh: return "gelu_tanh";
  case K::Tanh: return "tanh";
  case K::Sigmoid: return "sigmoid";
  case K::Silu: return "silu";
  case K::Exp: return "exp";
  case K::Abs: return "abs";
  case K::Sqrt: return "sqrt";
  case K::Add: return "add";
  case K::Sub: return "sub";
  case K::Mul: return "mul";
  case K::Div: return "div";
  case K::Max: return "max";
  case K::Min: return "min";
  }
  return "?";
}

namespace {

using Kind = GemmPostOp::Kind;

// A pattern over body ops: the running value X, a floating constant, or an op with operands.
struct Pat {
  enum class Tag : uint8_t { X, Const, Op } tag;
  LoopOpCode code = LoopOpCode::Constant;
  double value = 0;
  std::vector<Pat> kids = {};
};

Pat X() { return {Pat::Tag::X}; }
Pat C(double v) { return {Pat::Tag::Const, LoopOpCode::Constant, v, {}}; }
Pat P(LoopOpCode code, std::vector<Pat> kids) { return {Pat::Tag::Op, code, 0, std::move(kids)}; }

bool commutative(LoopOpCode c) {
  return c == LoopOpCode::Add || c == LoopOpCode::Mul || c == LoopOpCode::Maximum ||
         c == LoopOpCode::Minimum;
}

// The activations, largest first (silu contains sigmoid).
const std::vector<std::pair<Kind, Pat>>& activations() {
  using O = LoopOpCode;
  static const std::vector<std::pair<Kind, Pat>> table = [] {
    Pat sigmoid = P(O::Div, {C(1), P(O::Add, {C(1), P(O::Exp, {P(O::Neg, {X()})})})});
    Pat cube = P(O::Mul, {P(O::Mul, {X(), X()}), X()});
    return std::vector<std::pair<Kind, Pat>>{
        {Kind::GeluTanh,
         P(O::Mul, {P(O::Mul, {C(0.5), X()}),
                    P(O::Add, {C(1), P(O::Tanh, {P(O::Mul, {C(0.7978845608028654),
                                                            P(O::Add, {X(), P(O::Mul, {C(0.044715), cube})})})})})})},
        {Kind::GeluErf,
         P(O::Mul, {P(O::Mul, {C(0.5), X()}),
                    P(O::Add, {C(1), P(O::Erf, {P(O::Mul, {X(), C(0.7071067811865476)})})})})},
        {Kind::Silu, P(O::Mul, {X(), sigmoid})},
        {Kind::Sigmoid, sigmoid},
        {Kind::Tanh, P(O::Tanh, {X()})},
        {Kind::Exp, P(O::Exp, {X()})},
        {Kind::Abs, P(O::Abs, {X()})},
        {Kind::Sqrt, P(O::Sqrt, {X()})},
    };
  }();
  return table;
}

class Matcher {
public:
  Matcher(const LoopProgram& p, const Buffer& gemm, const Buffer& consumer, const Pointwise& pw,
          int64_t n)
      : p_(p), gemm_(gemm), body_(pw.body), n_(n) {
    i0_ = IndexExpr::var(pw.ranges[0].name);
    i1_ = IndexExpr::var(pw.ranges[1].name);
    (void)consumer;
    dependent_.resize(body_.ops.size());
    for (size_t i = 0; i < body_.ops.size(); ++i) {
      const LoopOp& op = body_.ops[i];
      bool d = op.code == LoopOpCode::Load && op.buffer == gemm_.name;
      for (int o : op.operands) d = d || dependent_[size_t(o)];
      dependent_[i] = d;
    }
  }

  // Appends the steps computing op `v` to `out`, or returns why they cannot be.
  std::optional<std::string> chain(int v, std::vector<GemmPostOp>& out) {
    const LoopOp& op = body_.ops[size_t(v)];
    if (op.dtype != ScalarType::Float32) return "%" + std::to_string(v) + " is not f32";
    if (op.code == LoopOpCode::Load && op.buffer == gemm_.name) {
      if (op.index != IndexExpr(n_) * i0_ + i1_)
        return "the product is read at " + op.index.str() + ", not at the consumer's own point";
      return std::nullopt;
    }
    for (const auto& [kind, pat] : activations()) {
      int x = -1;
      if (match(pat, v, x)) {
        if (auto why = chain(x, out)) return why;
        out.push_back({kind});
        return std::nullopt;
      }
    }
    if (op.code == LoopOpCode::Neg) {
      if (auto why = chain(op.operands[0], out)) return why;
      out.push_back({Kind::Linear, -1.0, 0.0});
      return std::nullopt;
    }
    if (op.operands.size() == 2 && op.code != LoopOpCode::Where) return binary(v, out);
    return "%" + std::to_string(v) + " = " + loopOpName(op.code) + " is not a GEMM post-op";
  }

private:
  std::optional<std::string> binary(int v, std::vector<GemmPostOp>& out) {
    const LoopOp& op = body_.ops[size_t(v)];
    int a = op.operands[0], b = op.operands[1];
    bool da = dependent_[size_t(a)], db = dependent_[size_t(b)];
    std::string at = "%" + std::to_string(v) + " = " + loopOpName(op.code);
    if (da == db) return at + ": " + (da ? "both operands depend" : "neither operand depends") + " on the product";
    bool swapped = db; // the product's side is the second operand
    int dep = swapped ? b : a, other = swapped ? a : b;
    const LoopOp& o = body_.ops[size_t(other)];
    LoopOpCode c = op.code;
    if (o.code == LoopOpCode::Constant) {
      double k = o.floatValue;
      std::optional<GemmPostOp> step;
      if (c == LoopOpCode::Add) step = GemmPostOp{Kind::Linear, 1.0, k};
      else if (c == LoopOpCode::Mul) step = GemmPostOp{Kind::Linear, k, 0.0};
      else if (c == LoopOpCode::Sub) step = swapped ? GemmPostOp{Kind::Linear, -1.0, k} : GemmPostOp{Kind::Linear, 1.0, -k};
      if (!step) return at + " with a constant is not a GEMM post-op";
      if (auto why = chain(dep, out)) return why;
      out.push_back(*step);
      return std::nullopt;
    }
    if (o.code != LoopOpCode::Load || o.dtype != ScalarType::Float32)
      return at + ": the other operand is not an f32 load";
    std::optional<std::pair<int64_t, int64_t>> layout = rowLayout(o.index);
    if (!layout) return at + ": the other operand is read at " + o.index.str() + ", not at [row, col] or [col]";
    std::optional<Kind> kind;
    switch (c) {
    case LoopOpCode::Add: kind = Kind::Add; break;
    case LoopOpCode::Mul: kind = Kind::Mul; break;
    case LoopOpCode::Sub: kind = swapped ? Kind::Add : Kind::Sub; break; // t - v = -v + t
    case LoopOpCode::Div: if (!swapped) kind = Kind::Div; break;
    default: break;
    }
    if (!kind) return at + " with a tensor is not a GEMM post-op";
    if (auto why = chain(dep, out)) return why;
    if (c == LoopOpCode::Sub && swapped) out.push_back({Kind::Linear, -1.0, 0.0});
    GemmPostOp step{*kind};
    step.tensor = o.buffer;
    step.rowStride = layout->first;
    step.offset = layout->second;
    out.push_back(step);
    return std::nullopt;
  }

  // (row stride, offset) of an index `r * i0 + i1 + offset` (r >= 0), or nullopt.
  std::optional<std::pair<int64_t, int64_t>> rowLayout(const IndexExpr& index) const {
    for (const std::string& v : index.variables())
      if (v != i0_.name() && v != i1_.name()) return std::nullopt;
    std::map<std::string, int64_t> at0{{i0_.name(), 0}, {i1_.name(), 0}}, at1{{i0_.name(), 1}, {i1_.name(), 0}};
    int64_t offset = index.evaluate(at0), row = index.evaluate(at1) - offset;
    if (row < 0 || offset < 0 || index != IndexExpr(row) * i0_ + i1_ + IndexExpr(offset)) return std::nullopt;
    return std::pair{row, offset};
  }

  bool match(const Pat& pat, int v, int& x) {
    const LoopOp& op = body_.ops[size_t(v)];
    switch (pat.tag) {
    case Pat::Tag::X:
      if (x >= 0) return x == v;
      if (!dependent_[size_t(v)]) return false;
      x = v;
      return true;
    case Pat::Tag::Const:
      return op.code == LoopOpCode::Constant && isFloatingType(op.dtype) &&
             std::fabs(op.floatValue - pat.value) <= 1e-7 * std::max(1.0, std::fabs(pat.value));
    case Pat::Tag::Op:
      break;
    }
    if (op.code != pat.code || op.operands.size() != pat.kids.size()) return false;
    int saved = x;
    auto all = [&](bool swap) {
      x = saved;
      for (size_t i = 0; i < pat.kids.size(); ++i) {
        size_t k = swap ? 1 - i : i;
        if (!match(pat.kids[k], op.operands[i], x)) return false;
      }
      return true;
    };
    if (all(false)) return true;
    if (commutative(op.code) && all(true)) return true;
    x = saved;
    return false;
  }

  const LoopProgram& p_;
  const Buffer& gemm_;
  const LoopBody& body_;
  int64_t n_;
  IndexExpr i0_, i1_;
  std::vector<bool> dependent_;
};

} // namespace

std::variant<std::vector<GemmPostOp>, std::string> gemmEpilogueOf(const LoopProgram& p,
                                                                  const Buffer& gemm,
                                                                  const Buffer& consumer) {
  const Extern* x = std::get_if<Extern>(&gemm.computation);
  if (!x || x->kernel != "mm" || x->inputs.size() != 2) return std::string("not an extern mm");
  for (const auto& [key, value] : x->args) {
    const double* alpha = std::get_if<double>(&value);
    if (key != "alpha" || !alpha || *alpha != 1.0) return "argument " + key + " of the mm";
  }
  if (gemm.dtype != ScalarType::Float32 || consumer.dtype != ScalarType::Float32)
    return std::string("not f32");
  // The row count may be symbolic (a dynamic batch); the row length is part of every tensor
  // step's static layout.
  if (gemm.sizes.size() != 2 || !gemm.sizes[1].constant())
    return std::string("the product is not a 2-D matrix with a static row length");
  IndexExpr m = gemm.sizes[0];
  int64_t n = *gemm.sizes[1].constant();
  const Pointwise* pw = std::get_if<Pointwise>(&consumer.computation);
  if (!pw || !pw->into.empty()) return std::string("the consumer is not a pointwise buffer of its own");
  if (pw->ranges.size() != 2 || pw->ranges[0].extent != m || pw->ranges[1].extent != IndexExpr(n))
    return std::string("the consumer does not run over the product's [m, n]");
  if (consumer.sizes.size() != 2 || consumer.sizes[0] != m || consumer.sizes[1] != IndexExpr(n))
    return std::string("the consumer is not an [m, n] matrix");
  const LoopBody& body = pw->body;
  if (body.ops.empty() || body.ops.back().code != LoopOpCode::Store) return std::string("no store");
  Matcher matcher(p, gemm, consumer, *pw, n);
  std::vector<GemmPostOp> steps;
  if (auto why = matcher.chain(body.ops.back().operands[0], steps)) return *why;
  // oneDNN 2.6's post-op kernels give every linear step of a chain the first one's constants
  // (v * 2 + 1 computed as (v * 2) * 2): one linear step at most.
  if (std::count_if(steps.begin(), steps.end(), [](const GemmPostOp& s) { return s.kind == Kind::Linear; }) > 1)
    return std::string("more than one linear step (x * c, x + c, -x)");
  return steps;
}

} // namespace kiln
