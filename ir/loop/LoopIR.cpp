// Loop IR: op and reduction tables, dtype rules, body builders, program lookups, equality.
#include "ir/loop/LoopIR.h"

#include <cstdint>
#include <algorithm>
#include <cstring>

#include "ir/Type.h"

namespace kiln {

namespace {

// How an op's operand dtypes are checked and its result dtype derived.
enum class DtypeRule : uint8_t {
  None,        // load, constant, index_expr, cast: the dtype is given
  Passthrough, // store, reduce: the operand's
  Float,       // floating operands
  Signed,      // numeric, not bool (neg, abs, sign, floor, ..., sub, div)
  Any,         // every dtype (add, mul, maximum, minimum)
  Bits,        // integral or bool
  Predicate,   // any operands, b8 result
  Where,       // b8 condition, two operands of one dtype
};

struct OpInfo {
  LoopOpCode code;
  const char* name;
  int arity;
  DtypeRule rule;
};

constexpr OpInfo kOps[] = {
    {LoopOpCode::Load, "load", 0, DtypeRule::None},
    {LoopOpCode::Constant, "constant", 0, DtypeRule::None},
    {LoopOpCode::IndexExpr, "index_expr", 0, DtypeRule::None},
    {LoopOpCode::Cast, "cast", 1, DtypeRule::None},
    {LoopOpCode::Reduce, "reduce", 1, DtypeRule::Passthrough},
    {LoopOpCode::Indirect, "indirect", 1, DtypeRule::None},
    {LoopOpCode::Store, "store", 1, DtypeRule::Passthrough},
    {LoopOpCode::Neg, "neg", 1, DtypeRule::Signed},
    {LoopOpCode::Abs, "abs", 1, DtypeRule::Signed},
    {LoopOpCode::Sign, "sign", 1, DtypeRule::Signed},
    {LoopOpCode::Floor, "floor", 1, DtypeRule::Signed},
    {LoopOpCode::Ceil, "ceil", 1, DtypeRule::Signed},
    {LoopOpCode::Trunc, "trunc", 1, DtypeRule::Signed},
    {LoopOpCode::Round, "round", 1, DtypeRule::Signed},
    {LoopOpCode::Reciprocal, "reciprocal", 1, DtypeRule::Float},
    {LoopOpCode::Exp, "exp", 1, DtypeRule::Float},
    {LoopOpCode::Exp2, "exp2", 1, DtypeRule::Float},
    {LoopOpCode::Expm1, "expm1", 1, DtypeRule::Float},
    {LoopOpCode::Log, "log", 1, DtypeRule::Float},
    {LoopOpCode::Log2, "log2", 1, DtypeRule::Float},
    {LoopOpCode::Log1p, "log1p", 1, DtypeRule::Float},
    {LoopOpCode::Sqrt, "sqrt", 1, DtypeRule::Float},
    {LoopOpCode::Rsqrt, "rsqrt", 1, DtypeRule::Float},
    {LoopOpCode::Sin, "sin", 1, DtypeRule::Float},
    {LoopOpCode::Cos, "cos", 1, DtypeRule::Float},
    {LoopOpCode::Tan, "tan", 1, DtypeRule::Float},
    {LoopOpCode::Asin, "asin", 1, DtypeRule::Float},
    {LoopOpCode::Acos, "acos", 1, DtypeRule::Float},
    {LoopOpCode::Atan, "atan", 1, DtypeRule::Float},
    {LoopOpCode::Sinh, "sinh", 1, DtypeRule::Float},
    {LoopOpCode::Cosh, "cosh", 1, DtypeRule::Float},
    {LoopOpCode::Tanh, "tanh", 1, DtypeRule::Float},
    {LoopOpCode::Erf, "erf", 1, DtypeRule::Float},
    {LoopOpCode::BitwiseNot, "bitwise_not", 1, DtypeRule::Bits},
    {LoopOpCode::IsFinite, "isfinite", 1, DtypeRule::Predicate},
    {LoopOpCode::Add, "add", 2, DtypeRule::Any},
    {LoopOpCode::Sub, "sub", 2, DtypeRule::Signed},
    {LoopOpCode::Mul, "mul", 2, DtypeRule::Any},
    {LoopOpCode::Div, "div", 2, DtypeRule::Signed},
    {LoopOpCode::Maximum, "maximum", 2, DtypeRule::Any},
    {LoopOpCode::Minimum, "minimum", 2, DtypeRule::Any},
    {LoopOpCode::Pow, "pow", 2, DtypeRule::Signed},
    {LoopOpCode::Fmod, "fmod", 2, DtypeRule::Signed},
    {LoopOpCode::Remainder, "remainder", 2, DtypeRule::Signed},
    {LoopOpCode::Atan2, "atan2", 2, DtypeRule::Float},
    {LoopOpCode::BitwiseAnd, "bitwise_and", 2, DtypeRule::Bits},
    {LoopOpCode::BitwiseOr, "bitwise_or", 2, DtypeRule::Bits},
    {LoopOpCode::BitwiseXor, "bitwise_xor", 2, DtypeRule::Bits},
    {LoopOpCode::Eq, "eq", 2, DtypeRule::Predicate},
    {LoopOpCode::Ne, "ne", 2, DtypeRule::Predicate},
    {LoopOpCode::Lt, "lt", 2, DtypeRule::Predicate},
    {LoopOpCode::Le, "le", 2, DtypeRule::Predicate},
    {LoopOpCode::Gt, "gt", 2, DtypeRule::Predicate},
    {LoopOpCode::Ge, "ge", 2, DtypeRule::Predicate},
    {LoopOpCode::Where, "where", 3, DtypeRule::Where},
};

const OpInfo& info(LoopOpCode c) {
  for (const OpInfo& i : kOps)
    if (i.code == c) return i;
  return kOps[0];
}

constexpr std::pair<ReductionKind, const char*> kReductions[] = {
    {ReductionKind::Sum, "sum"},       {ReductionKind::Prod, "prod"},
    {ReductionKind::Max, "max"},       {ReductionKind::Min, "min"},
    {ReductionKind::ArgMax, "argmax"}, {ReductionKind::ArgMin, "argmin"},
    {ReductionKind::Any, "any"},       {ReductionKind::All, "all"},
    {ReductionKind::WelfordMean, "welford_mean"}, {ReductionKind::WelfordVar, "welford_var"},
};

std::string dtypeText(ScalarType t) { return dtypeShortName(t); }

bool sameBits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

bool equalOps(const LoopOp& a, const LoopOp& b) {
  if (a.code != b.code || a.dtype != b.dtype || a.operands != b.operands) return false;
  switch (a.code) {
  case LoopOpCode::Load:
    return a.buffer == b.buffer && a.index == b.index;
  case LoopOpCode::IndexExpr:
    return a.index == b.index;
  case LoopOpCode::Indirect:
    return a.index == b.index && a.var == b.var && a.wrap == b.wrap && a.error == b.error;
  case LoopOpCode::Constant:
    return isFloatingType(a.dtype) ? sameBits(a.floatValue, b.floatValue)
                                   : a.intValue == b.intValue;
  default:
    return true;
  }
}

bool equalArgs(const ExternArg& a, const ExternArg& b) {
  if (a.index() != b.index()) return false;
  if (auto* d = std::get_if<double>(&a)) return sameBits(*d, std::get<double>(b));
  return a == b;
}

} // namespace

const char* reductionKindName(ReductionKind k) {
  for (auto [kind, name] : kReductions)
    if (kind == k) return name;
  return "?";
}

std::optional<ReductionKind> reductionKindFromName(std::string_view name) {
  for (auto [kind, n] : kReductions)
    if (name == n) return kind;
  return std::nullopt;
}

const char* loopOpName(LoopOpCode c) { return info(c).name; }

std::optional<LoopOpCode> loopOpFromName(std::string_view name) {
  for (const OpInfo& i : kOps)
    if (name == i.name) return i.code;
  return std::nullopt;
}

int loopOpArity(LoopOpCode c) { return info(c).arity; }

bool definesValue(LoopOpCode c) { return c != LoopOpCode::Store && c != LoopOpCode::Reduce; }

ScalarType inferLoopOpDtype(LoopOpCode code, const std::vector<ScalarType>& operands) {
  DtypeRule rule = info(code).rule;
  if (rule == DtypeRule::Predicate) return ScalarType::Bool;
  if (rule == DtypeRule::Where) return operands.size() > 1 ? operands[1] : ScalarType::Bool;
  return operands.empty() ? ScalarType::Float32 : operands[0];
}

std::optional<std::string> checkLoopOpDtypes(LoopOpCode code,
                                             const std::vector<ScalarType>& operands) {
  const OpInfo& i = info(code);
  if (int(operands.size()) != i.arity)
    return std::string(i.name) + " takes " + std::to_string(i.arity) + " operand" +
           (i.arity == 1 ? "" : "s") + ", got " + std::to_string(operands.size());
  if (operands.empty() || i.rule == DtypeRule::None || i.rule == DtypeRule::Passthrough)
    return std::nullopt;
  size_t first = 0;
  if (i.rule == DtypeRule::Where) {
    if (operands[0] != ScalarType::Bool)
      return std::string("where needs a bool condition, got ") + dtypeText(operands[0]);
    first = 1;
  }
  for (size_t k = first + 1; k < operands.size(); ++k)
    if (operands[k] != operands[first])
      return std::string(i.name) + " needs operands of one dtype, got " +
             dtypeText(operands[first]) + " and " + dtypeText(operands[k]);
  ScalarType t = operands[first];
  switch (i.rule) {
  case DtypeRule::Float:
    if (!isFloatingType(t))
      return std::string(i.name) + " needs a floating dtype, got " + dtypeText(t);
    break;
  case DtypeRule::Signed:
    if (t == ScalarType::Bool) return std::string(i.name) + " does not accept bool";
    break;
  case DtypeRule::Bits:
    if (isFloatingType(t))
      return std::string(i.name) + " needs an integral or bool dtype, got " + dtypeText(t);
    break;
  default:
    break;
  }
  return std::nullopt;
}

ScalarType reductionResultDtype(ReductionKind kind, ScalarType value) {
  switch (kind) {
  case ReductionKind::ArgMax:
  case ReductionKind::ArgMin:
    return ScalarType::Int64;
  case ReductionKind::Any:
  case ReductionKind::All:
    return ScalarType::Bool;
  default:
    return value;
  }
}

int LoopBody::load(std::string buffer, kiln::IndexExpr index, ScalarType dtype) {
  LoopOp op;
  op.code = LoopOpCode::Load;
  op.dtype = dtype;
  op.buffer = std::move(buffer);
  op.index = std::move(index);
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

int LoopBody::constantInt(int64_t value, ScalarType dtype) {
  LoopOp op;
  op.code = LoopOpCode::Constant;
  op.dtype = dtype;
  op.intValue = value;
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

int LoopBody::constantFloat(double value, ScalarType dtype) {
  LoopOp op;
  op.code = LoopOpCode::Constant;
  op.dtype = dtype;
  op.floatValue = value;
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

int LoopBody::indexExpr(kiln::IndexExpr value, ScalarType dtype) {
  LoopOp op;
  op.code = LoopOpCode::IndexExpr;
  op.dtype = dtype;
  op.index = std::move(value);
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

int LoopBody::indirect(int value, kiln::IndexExpr size, std::string var, bool wrap,
                       std::string error) {
  LoopOp op;
  op.code = LoopOpCode::Indirect;
  op.dtype = ScalarType::Int64;
  op.operands = {value};
  op.index = std::move(size);
  op.var = std::move(var);
  op.wrap = wrap;
  op.error = std::move(error);
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

std::vector<std::string> indirectVars(const LoopBody& body) {
  std::vector<std::string> vars;
  for (const LoopOp& op : body.ops)
    if (op.code == LoopOpCode::Indirect) vars.push_back(op.var);
  return vars;
}

int LoopBody::cast(int value, ScalarType dtype) {
  LoopOp op;
  op.code = LoopOpCode::Cast;
  op.dtype = dtype;
  op.operands = {value};
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

int LoopBody::math(LoopOpCode code, std::vector<int> operands) {
  std::vector<ScalarType> dtypes;
  for (int o : operands)
    dtypes.push_back(o >= 0 && o < int(ops.size()) ? ops[o].dtype : ScalarType::Float32);
  LoopOp op;
  op.code = code;
  op.dtype = inferLoopOpDtype(code, dtypes);
  op.operands = std::move(operands);
  ops.push_back(std::move(op));
  return int(ops.size()) - 1;
}

void LoopBody::store(int value) {
  math(LoopOpCode::Store, {value});
}

void LoopBody::reduce(int value) {
  math(LoopOpCode::Reduce, {value});
}

const LoopInput* LoopProgram::findInput(std::string_view n) const {
  for (const LoopInput& i : inputs)
    if (i.name == n) return &i;
  return nullptr;
}

const Buffer* LoopProgram::findBuffer(std::string_view n) const {
  for (const Buffer& b : buffers)
    if (b.name == n) return &b;
  return nullptr;
}

std::optional<ScalarType> LoopProgram::dtypeOf(std::string_view n) const {
  if (const LoopInput* i = findInput(n)) return i->dtype;
  if (const Buffer* b = findBuffer(n)) return b->dtype;
  return std::nullopt;
}

const std::string* Buffer::writesInto() const {
  const auto* pw = std::get_if<Pointwise>(&computation);
  return pw && !pw->into.empty() ? &pw->into : nullptr;
}

std::string LoopProgram::storageRoot(std::string_view n) const {
  std::string name(n);
  // Bases are defined earlier, so the chain ends; the bound guards malformed programs.
  for (size_t steps = 0; steps <= buffers.size(); ++steps) {
    const Buffer* b = findBuffer(name);
    const std::string* base = b ? b->writesInto() : nullptr;
    if (!base || *base == name) return name;
    name = *base;
  }
  return name;
}

std::vector<std::string> LoopProgram::sizeSymbols() const {
  std::vector<std::string> out;
  for (const LoopInput& in : inputs) {
    for (const IndexExpr& e : in.sizes)
      for (const std::string& v : e.variables())
        out.push_back(v);
    for (const IndexExpr& e : in.strides)
      for (const std::string& v : e.variables())
        out.push_back(v);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<kiln::IndexExpr> contiguousStrides(const std::vector<kiln::IndexExpr>& sizes) {
  std::vector<kiln::IndexExpr> strides(sizes.size(), kiln::IndexExpr(1));
  for (size_t d = sizes.size(); d-- > 1;)
    strides[d - 1] = strides[d] * sizes[d];
  return strides;
}

bool operator==(const LoopBody& a, const LoopBody& b) {
  return a.ops.size() == b.ops.size() &&
         std::equal(a.ops.begin(), a.ops.end(), b.ops.begin(), equalOps);
}

bool operator==(const Pointwise& a, const Pointwise& b) {
  return a.ranges == b.ranges && a.body == b.body && a.into == b.into &&
         (a.into.empty() || (a.intoIndex == b.intoIndex && a.accumulate == b.accumulate));
}

bool operator==(const Reduction& a, const Reduction& b) {
  return a.kind == b.kind && a.ranges == b.ranges && a.reductionRanges == b.reductionRanges &&
         a.body == b.body;
}

const std::optional<StridedView>& Extern::viewOf(size_t input) const {
  static const std::optional<StridedView> none;
  return input < views.size() ? views[input] : none;
}

bool operator==(const Extern& a, const Extern& b) {
  if (a.kernel != b.kernel || a.inputs != b.inputs || a.args.size() != b.args.size())
    return false;
  for (size_t i = 0; i < a.inputs.size(); ++i)
    if (a.viewOf(i) != b.viewOf(i)) return false;
  for (size_t i = 0; i < a.args.size(); ++i)
    if (a.args[i].first != b.args[i].first || !equalArgs(a.args[i].second, b.args[i].second))
      return false;
  return true;
}

bool operator==(const Buffer& a, const Buffer& b) {
  return a.name == b.name && a.dtype == b.dtype && a.sizes == b.sizes && a.kernel == b.kernel &&
         a.reuses == b.reuses && a.computation == b.computation;
}

bool operator==(const LoopProgram& a, const LoopProgram& b) {
  if (a.name != b.name || a.outputs != b.outputs || a.buffers != b.buffers ||
      a.inputs.size() != b.inputs.size())
    return false;
  for (size_t i = 0; i < a.inputs.size(); ++i) {
    const LoopInput &x = a.inputs[i], &y = b.inputs[i];
    if (x.name != y.name || x.dtype != y.dtype || x.sizes != y.sizes || x.strides != y.strides)
      return false;
  }
  return true;
}

} // namespace kiln
