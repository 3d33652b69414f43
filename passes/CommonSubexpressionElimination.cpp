// Common-subexpression elimination: hash each pure node's call, merge repeats.
#include "passes/CommonSubexpressionElimination.h"

#include <algorithm>
#include <unordered_map>

#include "ir/Effects.h"

namespace kiln {

namespace {

struct CallKey {
  Opcode opcode;
  std::string target;
  std::vector<Argument> args;
  Kwargs kwargs; // sorted by name

  bool operator==(const CallKey&) const = default;
};

struct CallKeyHash {
  size_t operator()(const CallKey& k) const {
    size_t h = std::hash<std::string>()(k.target) ^ size_t(k.opcode);
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

} // namespace

void eliminateCommonSubexpressions(Graph& g) {
  std::unordered_map<CallKey, Node*, CallKeyHash> seen;
  for (Node* n : g.nodes()) {
    if (!mergeable(*n)) continue;
    CallKey key{n->opcode(), n->target(), n->args(), n->kwargs()};
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
