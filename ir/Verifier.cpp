// Graph verification: structure, references, users, op schemas and type annotations.
#include "ir/Verifier.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "ir/Identifier.h"
#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"

namespace kiln {

namespace {

class Verifier {
public:
  Verifier(const Graph& g, const VerifyOptions& options) : g_(g), options_(options) {}

  std::vector<Diagnostic> run() {
    size_t index = 0;
    for (Node* n : g_.nodes())
      order_[n] = index++;
    checkLayout();
    for (Node* n : g_.nodes())
      checkNode(*n);
    return std::move(diags_);
  }

private:
  void report(const Node& n, const std::string& msg) {
    std::string who = n.opcode() == Opcode::Output ? "output" : "%" + n.name();
    diags_.push_back({n.parsedAt, who + ": " + msg});
  }

  void checkLayout() {
    std::unordered_set<std::string> names;
    const Node* firstOther = nullptr;
    const Node* output = nullptr;
    for (Node* n : g_.nodes()) {
      if (!names.insert(n->name()).second) report(*n, "duplicate node name");
      if (n->graph() != &g_ || g_.findNode(n->name()) != n)
        report(*n, "the node is not registered in graph @" + g_.name());
      if (output) report(*n, "comes after the output node (the output must be the last node)");
      if (n->opcode() == Opcode::Placeholder && firstOther)
        report(*n, "placeholder after %" + firstOther->name() +
                       " (placeholders must come before every other node)");
      if (n->opcode() != Opcode::Placeholder && !firstOther) firstOther = n;
      if (n->opcode() == Opcode::Output) {
        if (output) report(*n, "a second output node (a graph has exactly one)");
        output = n;
      }
    }
    if (!output) diags_.push_back({g_.parsedAt, "graph @" + g_.name() + " has no output node"});
  }

  void checkNode(const Node& n) {
    checkReferences(n);
    switch (n.opcode()) {
    case Opcode::Placeholder:
    case Opcode::GetAttr:
      if (!n.args().empty() || !n.kwargs().empty())
        report(n, std::string(opcodeName(n.opcode())) + " takes no arguments");
      break;
    case Opcode::Output:
      if (n.args().size() != 1 || !n.kwargs().empty())
        report(n, "output takes exactly one argument (use a tuple for several results)");
      break;
    default:
      break;
    }
    if (n.target().empty()) report(n, "empty target");
    for (size_t i = 0; i < n.kwargs().size(); ++i) {
      const std::string& key = n.kwargs()[i].first;
      if (!isIdentifier(key)) report(n, "keyword argument name '" + key + "' is not an identifier");
      for (size_t j = 0; j < i; ++j)
        if (n.kwargs()[j].first == key) report(n, "duplicate keyword argument '" + key + "'");
    }
    if (n.isOp()) checkSchema(n);
    if (n.meta.type) checkType(n, *n.meta.type);
    if (options_.requireTypes && !n.meta.type && n.opcode() != Opcode::Output)
      report(n, "missing type annotation (every value needs a type at this stage)");
  }

  void checkReferences(const Node& n) {
    for (Node* in : n.inputs()) {
      auto it = order_.find(in);
      if (it == order_.end() || in->graph() != &g_) {
        report(n, "refers to a node that is not in graph @" + g_.name() + " (dangling reference)");
        continue;
      }
      if (it->second >= order_.at(&n)) report(n, "uses %" + in->name() + " before its definition");
      const auto& users = in->users();
      if (std::find(users.begin(), users.end(), &n) == users.end())
        report(n, "is missing from the users of %" + in->name());
    }
    for (Node* u : n.users()) {
      auto inputs = order_.count(u) ? u->inputs() : std::vector<Node*>{};
      if (std::find(inputs.begin(), inputs.end(), &n) == inputs.end())
        report(n, "lists %" + u->name() + " as a user, but %" + u->name() + " does not use it");
    }
  }

  void checkSchema(const Node& n) {
    const OpSchema& s = opSchema(n.op());
    std::string msg = checkCall(s, n.args(), n.kwargs());
    if (!msg.empty()) report(n, n.target() + " " + msg);
    if (!n.meta.type) return;
    size_t returns = s.returns.size();
    const Type& t = *n.meta.type;
    if (returns != 1 && (!t.isTuple() || t.elements().size() != returns))
      report(n, strCat(n.target(), " returns ", returns, " values, but the node is annotated with ",
                       t.str()));
    else if (returns == 1 && s.returns[0].type == ArgType::Tensor && !t.isTensor())
      report(n, strCat(n.target(), " returns a Tensor, but the node is annotated with ", t.str()));
  }

  void checkType(const Node& n, const Type& t) {
    if (t.isTuple()) {
      for (const Type& e : t.elements())
        checkType(n, e);
      return;
    }
    if (!t.isTensor()) return;
    for (const IndexExpr& s : t.tensor().sizes)
      if (auto c = s.constant(); c && *c < 0)
        report(n, "negative size " + std::to_string(*c) + " in type " + t.str());
  }

  const Graph& g_;
  const VerifyOptions& options_;
  std::unordered_map<const Node*, size_t> order_;
  std::vector<Diagnostic> diags_;
};

} // namespace

std::vector<Diagnostic> verify(const Graph& g, const VerifyOptions& options) {
  return Verifier(g, options).run();
}

void verifyOrThrow(const Graph& g, const VerifyOptions& options) {
  std::vector<Diagnostic> diags = verify(g, options);
  if (!diags.empty()) throw IRError(diags.front());
}

} // namespace kiln
