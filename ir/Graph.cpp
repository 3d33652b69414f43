// Graph: node list maintenance, naming, creation, erasure, use replacement and deep copy.
#include "ir/Graph.h"

#include <algorithm>
#include <atomic>

#include "ir/GraphGeneration.h"
#include "ir/Identifier.h"
#include "ir/OpTarget.h"

namespace kiln {

namespace {

// The part of a target a fresh node name is derived from: "aten.add.Tensor" -> "add",
// "operator.getitem" -> "getitem", "layers.0.weight" -> "layers_0_weight".
std::string nameHint(Opcode opcode, const std::string& target, OpId op) {
  if (op != OpId::NumOps) return opSchema(op).name;
  if (opcode == Opcode::CallFunction) {
    auto dot = target.rfind('.');
    return dot == std::string::npos ? target : target.substr(dot + 1);
  }
  return target;
}

std::atomic<uint64_t> gNodeFreeGeneration{1};

void nodesMayBeFreed() { gNodeFreeGeneration.fetch_add(1, std::memory_order_relaxed); }

} // namespace

uint64_t nodeFreeGeneration() { return gNodeFreeGeneration.load(std::memory_order_relaxed); }

Graph::Graph(std::string name) : name_(std::move(name)) {
  root_.reset(new Node(this, Opcode::Output, "", OpId::NumOps, ""));
  root_->next_ = root_->prev_ = root_.get();
  insertBefore_ = root_.get();
}

Graph::~Graph() {
  if (!root_) return;
  if (size_) nodesMayBeFreed();
  for (Node* n = root_->next_; n != root_.get();) {
    Node* next = n->next_;
    delete n;
    n = next;
  }
}

Graph::Graph(Graph&& other) noexcept : Graph(std::string()) { *this = std::move(other); }

Graph& Graph::operator=(Graph&& other) noexcept {
  if (this == &other) return *this;
  nodesMayBeFreed(); // the nodes change graphs (and `other`'s go when it does)
  std::swap(name_, other.name_);
  std::swap(parsedAt, other.parsedAt);
  std::swap(root_, other.root_);
  std::swap(insertBefore_, other.insertBefore_);
  std::swap(size_, other.size_);
  std::swap(byName_, other.byName_);
  std::swap(nameCounters_, other.nameCounters_);
  for (Graph* g : {this, &other}) {
    g->root_->graph_ = g;
    for (Node* n : g->nodes())
      n->graph_ = g;
  }
  return *this;
}

Graph::NodeRange Graph::nodes() const {
  return {Iterator(root_->next_, root_.get()), Iterator(root_.get(), root_.get())};
}

Node* Graph::first() const { return size_ ? root_->next_ : nullptr; }
Node* Graph::last() const { return size_ ? root_->prev_ : nullptr; }

Node* Graph::findNode(std::string_view name) const {
  auto it = byName_.find(std::string(name));
  return it == byName_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::placeholders() const {
  std::vector<Node*> out;
  for (Node* n : nodes())
    if (n->opcode() == Opcode::Placeholder) out.push_back(n);
  return out;
}

Node* Graph::outputNode() const {
  for (Node* n = last(); n; n = n->prev())
    if (n->opcode() == Opcode::Output) return n;
  return nullptr;
}

std::string Graph::uniqueName(std::string_view hint) {
  std::string base;
  for (char c : hint)
    base += isNameChar(c) ? c : '_';
  if (base.empty()) base = "_";
  if (!byName_.count(base) && !nameCounters_.count(base)) {
    nameCounters_[base] = 0;
    return base;
  }
  int& counter = nameCounters_[base];
  std::string candidate;
  do {
    candidate = base + "_" + std::to_string(++counter);
  } while (byName_.count(candidate));
  return candidate;
}

void Graph::checkReferences(const std::vector<Argument>& args, const Kwargs& kwargs) const {
  auto check = [&](Node* n) {
    if (!n) throw IRError(TextPos{}, "null node reference in the arguments of a node");
    if (n->graph_ != this)
      throw IRError(n->parsedAt, strCat("%", n->name(), " belongs to graph @", n->graph_->name(),
                                        ", not to @", name_));
  };
  for (const Argument& a : args)
    a.forEachNode(check);
  for (const auto& kv : kwargs)
    kv.second.forEachNode(check);
}

Node* Graph::create(Opcode opcode, std::string target, std::vector<Argument> args, Kwargs kwargs,
                    std::string name) {
  OpId op = OpId::NumOps;
  if (opcode == Opcode::CallFunction && isOpTarget(target)) {
    op = resolveOpTarget(target);
    if (op == OpId::NumOps) throw IRError(TextPos{}, unknownOpMessage(target));
    target = opTarget(op);
  }
  if (opcode == Opcode::Output) target = "output";
  // A placeholder's target is its parameter name, which is the node's name.
  if (opcode == Opcode::Placeholder) {
    if (name.empty()) name = uniqueName(target);
    target = name;
  }
  if (target.empty())
    throw IRError(TextPos{}, strCat(opcodeName(opcode), " node needs a non-empty target"));
  checkReferences(args, kwargs);
  if (name.empty()) {
    name = uniqueName(opcode == Opcode::Output ? "output" : nameHint(opcode, target, op));
  } else {
    if (!std::all_of(name.begin(), name.end(), isNameChar))
      throw IRError(TextPos{}, strCat("invalid node name '", name, "': use letters, digits and _"));
    if (byName_.count(name))
      throw IRError(TextPos{}, strCat("a node named %", name, " already exists in @", name_));
  }
  Node* n = new Node(this, opcode, std::move(target), op, std::move(name));
  n->args_ = std::move(args);
  n->kwargs_ = std::move(kwargs);
  byName_[n->name_] = n;
  link(n, insertBefore_);
  n->attachInputs();
  return n;
}

Node* Graph::placeholder(std::string name, std::optional<Type> type) {
  Node* n = create(Opcode::Placeholder, "", {}, {}, std::move(name));
  n->meta.type = std::move(type);
  return n;
}

Node* Graph::getAttr(std::string path) { return create(Opcode::GetAttr, std::move(path)); }

Node* Graph::callFunction(OpId op, std::vector<Argument> args, Kwargs kwargs) {
  return create(Opcode::CallFunction, opTarget(op), std::move(args), std::move(kwargs));
}

Node* Graph::callFunction(std::string target, std::vector<Argument> args, Kwargs kwargs) {
  return create(Opcode::CallFunction, std::move(target), std::move(args), std::move(kwargs));
}

Node* Graph::callMethod(std::string method, std::vector<Argument> args, Kwargs kwargs) {
  return create(Opcode::CallMethod, std::move(method), std::move(args), std::move(kwargs));
}

Node* Graph::callModule(std::string path, std::vector<Argument> args, Kwargs kwargs) {
  return create(Opcode::CallModule, std::move(path), std::move(args), std::move(kwargs));
}

Node* Graph::output(Argument result) {
  return create(Opcode::Output, "output", {std::move(result)});
}

static void checkMember(const Graph& g, const Node* n, const char* what) {
  if (!n || n->graph() != &g)
    throw IRError(TextPos{}, strCat(what, ": the node is not in graph @", g.name()));
}

void Graph::setInsertionPointBefore(Node* n) {
  checkMember(*this, n, "setInsertionPointBefore");
  insertBefore_ = n;
}

void Graph::setInsertionPointAfter(Node* n) {
  checkMember(*this, n, "setInsertionPointAfter");
  insertBefore_ = n->next_;
}

void Graph::setInsertionPointToEnd() { insertBefore_ = root_.get(); }

void Graph::link(Node* n, Node* before) {
  n->prev_ = before->prev_;
  n->next_ = before;
  before->prev_->next_ = n;
  before->prev_ = n;
  ++size_;
}

void Graph::unlink(Node* n) {
  if (insertBefore_ == n) insertBefore_ = n->next_;
  n->prev_->next_ = n->next_;
  n->next_->prev_ = n->prev_;
  n->prev_ = n->next_ = nullptr;
  --size_;
}

void Graph::moveBefore(Node* n, Node* before) {
  checkMember(*this, n, "moveBefore");
  checkMember(*this, before, "moveBefore");
  if (n == before) return;
  unlink(n);
  link(n, before);
}

void Graph::moveAfter(Node* n, Node* after) {
  checkMember(*this, n, "moveAfter");
  checkMember(*this, after, "moveAfter");
  if (n == after) return;
  unlink(n);
  link(n, after->next_);
}

void Graph::erase(Node* n) {
  checkMember(*this, n, "erase");
  if (!n->users_.empty()) {
    std::string users;
    for (Node* u : n->users_)
      users += (users.empty() ? "%" : ", %") + u->name();
    throw IRError(n->parsedAt, strCat("cannot erase %", n->name(), ": it still has ",
                                      n->users_.size(), " user(s): ", users));
  }
  n->detachInputs();
  unlink(n);
  byName_.erase(n->name_);
  delete n;
  nodesMayBeFreed();
}

void Graph::replaceAllUsesWith(Node* from, const Argument& to) {
  checkMember(*this, from, "replaceAllUsesWith");
  if (to.isNode() && to.toNode() == from) return;
  std::vector<Node*> users = from->users_;
  for (Node* u : users)
    u->replaceInput(from, to);
}

Graph Graph::clone() const {
  Graph copy(name_);
  copy.parsedAt = parsedAt;
  std::unordered_map<const Node*, Node*> mapping;
  mapping.reserve(size_);
  copy.byName_.reserve(size_);
  auto remap = [&](Node* n) {
    auto it = mapping.find(n);
    if (it == mapping.end())
      throw IRError(n->parsedAt, strCat("cannot copy @", name_, ": %", n->name(),
                                        " is used before its definition"));
    return Argument(it->second);
  };
  for (Node* n : nodes()) {
    std::vector<Argument> args;
    for (const Argument& a : n->args_)
      args.push_back(a.mapNodes(remap));
    Kwargs kwargs;
    for (const auto& [k, v] : n->kwargs_)
      kwargs.emplace_back(k, v.mapNodes(remap));
    // The nodes of a graph are valid already (targets resolved, names unique, arguments
    // defined before use): copied without create()'s checks and target lookups.
    Node* c = new Node(&copy, n->opcode_, n->target_, n->op_, n->name_);
    c->args_ = std::move(args);
    c->kwargs_ = std::move(kwargs);
    copy.byName_[c->name_] = c;
    copy.link(c, copy.insertBefore_);
    c->attachInputs();
    c->meta = n->meta;
    c->parsedAt = n->parsedAt;
    mapping[n] = c;
  }
  copy.nameCounters_ = nameCounters_;
  return copy;
}

namespace {

bool sameArgument(const Argument& a, const Argument& b) {
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
  case Argument::Kind::Node:
    return a.toNode()->name() == b.toNode()->name();
  case Argument::Kind::Slice:
  case Argument::Kind::List:
  case Argument::Kind::Tuple:
  case Argument::Kind::Dict:
    if (a.keys() != b.keys() || a.items().size() != b.items().size()) return false;
    for (size_t i = 0; i < a.items().size(); ++i)
      if (!sameArgument(a.items()[i], b.items()[i])) return false;
    return true;
  default:
    return a == b;
  }
}

bool sameNode(const Node& a, const Node& b) {
  if (a.name() != b.name() || a.opcode() != b.opcode() || a.target() != b.target() ||
      a.op() != b.op() || !(a.meta == b.meta) || a.args().size() != b.args().size() ||
      a.kwargs().size() != b.kwargs().size())
    return false;
  for (size_t i = 0; i < a.args().size(); ++i)
    if (!sameArgument(a.args()[i], b.args()[i])) return false;
  for (size_t i = 0; i < a.kwargs().size(); ++i)
    if (a.kwargs()[i].first != b.kwargs()[i].first ||
        !sameArgument(a.kwargs()[i].second, b.kwargs()[i].second))
      return false;
  return true;
}

} // namespace

bool structurallyEqual(const Graph& a, const Graph& b) {
  if (a.name() != b.name() || a.size() != b.size()) return false;
  for (Node *x = a.first(), *y = b.first(); x && y; x = x->next(), y = y->next())
    if (!sameNode(*x, *y)) return false;
  return true;
}

} // namespace kiln
