// Side-effect and determinism analysis of nodes from the op table.
#include "ir/Effects.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"
#include "runtime/Dispatcher.h"

namespace kiln {

namespace {

constexpr std::array<std::string_view, 23> kPureOperators = {
    "add", "sub", "mul",    "truediv", "floordiv", "mod",    "pow",    "neg",
    "pos", "abs", "invert", "not_",    "eq",       "ne",     "lt",     "le",
    "gt",  "ge",  "and_",   "or_",     "xor",      "matmul", "getitem"};
// Tensor methods outside the op table that only read metadata.
constexpr std::array<std::string_view, 4> kPureMethods = {"size", "dim", "numel", "stride"};

bool opHasSideEffects(OpId op) {
  const OpSchema& s = opSchema(op);
  if (s.hasTag(kTagRandom)) return true;
  return std::any_of(s.args.begin(), s.args.end(), [](const ArgSpec& a) { return a.mutated; });
}

// The op-table overloads a torch-level name stands for (call_method "add", "kiln.add").
std::vector<OpId> overloadsFor(const std::string& name, bool method) {
  std::vector<OpId> out;
  for (OpId op : Dispatcher::instance().overloadsOf(name))
    if (method ? opSchema(op).isMethod : opSchema(op).isFunction) out.push_back(op);
  return out;
}

// Side effects of a torch-level name: the table's verdict when it knows the name, else
// `fallback`; in-place names ("add_") always have them.
bool nameHasSideEffects(const std::string& name, bool method, bool fallback) {
  if (name.ends_with('_')) return true;
  std::vector<OpId> ops = overloadsFor(name, method);
  if (ops.empty()) return fallback;
  return std::any_of(ops.begin(), ops.end(), opHasSideEffects);
}

bool isPurePythonCallable(const std::string& target) {
  if (target.starts_with("math.")) return true;
  if (!target.starts_with("operator.")) return false;
  std::string_view name = std::string_view(target).substr(9);
  return std::find(kPureOperators.begin(), kPureOperators.end(), name) != kPureOperators.end();
}

} // namespace

bool hasSideEffects(const Node& n) {
  switch (n.opcode()) {
  case Opcode::Placeholder:
  case Opcode::Output:
  case Opcode::CallModule:
    return true;
  case Opcode::GetAttr:
    return false;
  case Opcode::CallMethod: {
    bool known =
        std::find(kPureMethods.begin(), kPureMethods.end(), n.target()) != kPureMethods.end();
    return nameHasSideEffects(n.target(), true, !known);
  }
  case Opcode::CallFunction:
    if (n.isOp()) return opHasSideEffects(n.op());
    if (std::string name = torchFunctionName(n.target()); !name.empty())
      return nameHasSideEffects(name, false, true);
    return !isPurePythonCallable(n.target());
  }
  return true;
}

bool isDeterministic(const Node& n) {
  auto deterministic = [](OpId op) {
    return !opSchema(op).hasTag(kTagRandom) && !opSchema(op).hasTag(kTagNondeterministic);
  };
  if (n.isOp()) return deterministic(n.op());
  bool method = n.opcode() == Opcode::CallMethod;
  std::string name = method                               ? n.target()
                     : n.opcode() == Opcode::CallFunction ? torchFunctionName(n.target())
                                                          : "";
  if (name.empty()) return n.opcode() != Opcode::CallModule;
  std::vector<OpId> ops = overloadsFor(name, method);
  return std::all_of(ops.begin(), ops.end(), deterministic);
}

} // namespace kiln
