// Nodes: opcode names, argument updates that keep users in sync, neighbours.
#include "ir/Node.h"

#include <algorithm>

#include "ir/Graph.h"

namespace kiln {

namespace {
constexpr const char* kOpcodeNames[] = {"placeholder", "get_attr",    "call_function",
                                        "call_method", "call_module", "output"};
} // namespace

const char* opcodeName(Opcode op) { return kOpcodeNames[int(op)]; }

std::optional<Opcode> opcodeFromName(std::string_view name) {
  for (int i = 0; i < 6; ++i)
    if (name == kOpcodeNames[i]) return Opcode(i);
  return std::nullopt;
}

Node::Node(Graph* graph, Opcode opcode, std::string target, OpId op, std::string name)
    : graph_(graph), opcode_(opcode), target_(std::move(target)), op_(op), name_(std::move(name)) {}

const Argument* Node::kwarg(std::string_view name) const {
  for (const auto& [k, v] : kwargs_)
    if (k == name) return &v;
  return nullptr;
}

std::vector<Node*> Node::inputs() const {
  std::vector<Node*> out;
  auto add = [&](Node* n) {
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(n);
  };
  for (const Argument& a : args_)
    a.forEachNode(add);
  for (const auto& kv : kwargs_)
    kv.second.forEachNode(add);
  return out;
}

void Node::detachInputs() {
  for (Node* in : inputs())
    std::erase(in->users_, this);
}

void Node::attachInputs() {
  // inputs() lists each node once, and a node being attached is no user yet (new, or detached
  // by reset): no search through the users (a value read by thousands of nodes made building a
  // graph quadratic).
  for (Node* in : inputs())
    in->users_.push_back(this);
}

void Node::reset(std::vector<Argument> args, Kwargs kwargs) {
  graph_->checkReferences(args, kwargs);
  detachInputs();
  args_ = std::move(args);
  kwargs_ = std::move(kwargs);
  attachInputs();
}

void Node::setArgs(std::vector<Argument> args) { reset(std::move(args), kwargs_); }
void Node::setKwargs(Kwargs kwargs) { reset(args_, std::move(kwargs)); }

void Node::setArg(size_t index, Argument value) {
  if (index >= args_.size())
    throw IRError(parsedAt,
                  strCat("%", name_, " has ", args_.size(), " args; cannot set arg ", index));
  std::vector<Argument> args = args_;
  args[index] = std::move(value);
  reset(std::move(args), kwargs_);
}

void Node::replaceInput(Node* from, const Argument& to) {
  auto swap = [&](Node* n) { return n == from ? to : Argument(n); };
  std::vector<Argument> args;
  for (const Argument& a : args_)
    args.push_back(a.mapNodes(swap));
  Kwargs kwargs;
  for (const auto& [k, v] : kwargs_)
    kwargs.emplace_back(k, v.mapNodes(swap));
  reset(std::move(args), std::move(kwargs));
}

Node* Node::prev() const { return prev_ == graph_->root_.get() ? nullptr : prev_; }
Node* Node::next() const { return next_ == graph_->root_.get() ? nullptr : next_; }

} // namespace kiln
