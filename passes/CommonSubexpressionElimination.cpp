// Common-subexpression elimination: hash each pure node's call, merge repeats.
#include "passes/CommonSubexpressionElimination.h"

#include <cstdint>
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/Effects.h"
#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"

namespace kiln {

namespace {

struct CallKey {
  Opcode opcode;
  std::string target;
  std::vector<Argument> args;
  Kwargs kwargs; // sorted by name
  // For a call reading a tensor whose storage is written in place somewhere in the graph: the
  // number of in-place writes before it, so reads on either side of a write stay apart.
  int64_t writesBefore = -1;

  bool operator==(const CallKey&) const = default;
};

struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    size_t h = (std::hash<std::string>()(k.target) ^ size_t(k.opcode)) * 31 + size_t(k.writesBefore);
    for (const Argument& a : k.args)
      h = h * 31 + a.hash();
    for (const auto& [name, v] : k.kwargs)
      h = h * 31 + (std::hash<std::string>()(name) ^ v.hash());
    return h;
  }
};

bool mergeable(const Node& n) {
  switch (n.opcode()) {
  case Opcode::GetAttr:
    return true;
  case Opcode::CallFunction:
  case Opcode::CallMethod:
    return !hasSideEffects(n) && isDeterministic(n);
  default:
    return false;
  }
}

// The node whose tensor `n`'s result views (the schema's alias of its first return), or null.
const Node* aliasedInput(const Node& n) {
  if (n.opcode() != Opcode::CallFunction) return nullptr;
  OpId op = resolveCall(n);
  if (op == OpId::NumOps) return nullptr;
  const OpSchema& s = opSchema(op);
  // prims.reshape makes a view when the strides allow it (a copy otherwise), though its schema
  // declares a new tensor: a write through it may reach its input's storage.
  int aliasOf = op == OpId::prims_reshape ? 0 : s.returns.empty() ? -1 : s.returns[0].aliasOf;
  if (aliasOf < 0 || size_t(aliasOf) >= n.args().size()) return nullptr;
  const Argument& a = n.args()[size_t(aliasOf)];
  return a.isNode() ? a.toNode() : nullptr;
}

// Nodes whose tensors an op with side effects takes (an in-place write, directly or through
// views of them): two equal calls making such tensors are two storages, not one (three
// `zeros` each written through a slice in a backward graph).
std::unordered_set<const Node*> possiblyWritten(const Graph& g) {
  std::unordered_set<const Node*> out;
  auto mark = [&](const Argument& a, auto& self) -> void {
    if (a.isNode()) {
      for (const Node* x = a.toNode(); x && out.insert(x).second;)
        x = aliasedInput(*x);
    } else if (a.isSequence()) {
      for (const Argument& item : a.items())
        self(item, self);
    }
  };
  for (Node* n : g.nodes()) {
    if (n->opcode() == Opcode::Output || !hasSideEffects(*n)) continue;
    for (const Argument& a : n->args())
      mark(a, mark);
    for (const auto& [name, a] : n->kwargs())
      mark(a, mark);
  }
  return out;
}

// Whether `a` holds a tensor whose storage some in-place write touches: a node of `written` or
// a view of one (a view taken before its base was written reads the new values after).
bool readsWritten(const Argument& a, const std::unordered_set<const Node*>& written) {
  if (a.isSequence())
    return std::any_of(a.items().begin(), a.items().end(),
                       [&](const Argument& item) { return readsWritten(item, written); });
  for (const Node* x = a.isNode() ? a.toNode() : nullptr; x; x = aliasedInput(*x))
    if (written.count(x)) return true;
  return false;
}

} // namespace

void eliminateCommonSubexpressions(Graph& g) {
  std::unordered_map<CallKey, Node*, CallKeyHash> seen;
  const std::unordered_set<const Node*> written = possiblyWritten(g);
  int64_t writes = 0;
  for (Node* n : g.nodes()) {
    if (n->opcode() != Opcode::Output && hasSideEffects(*n)) ++writes;
    if (!mergeable(*n) || written.count(n)) continue;
    CallKey key{n->opcode(), n->target(), n->args(), n->kwargs()};
    bool reads = std::any_of(n->args().begin(), n->args().end(),
                             [&](const Argument& a) { return readsWritten(a, written); }) ||
                 std::any_of(n->kwargs().begin(), n->kwargs().end(),
                             [&](const auto& kv) { return readsWritten(kv.second, written); });
    if (reads) key.writesBefore = writes;
    std::sort(key.kwargs.begin(), key.kwargs.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    auto [it, inserted] = seen.emplace(std::move(key), n);
    if (inserted) continue;
    Node* earlier = it->second;
    if (!earlier->meta.type) earlier->meta.type = n->meta.type;
    g.replaceAllUsesWith(n, Argument(earlier));
    g.erase(n);
  }
}

} // namespace kiln
