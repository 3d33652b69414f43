// Graph: a named function as a doubly linked, topologically ordered list of Nodes (FX's Graph).
// The graph owns its nodes; creation, insertion, moves, erasure and use replacement keep names
// unique and users in sync. Inputs are placeholder nodes, the result is the output node.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ir/Node.h"

namespace kiln {

class Graph {
public:
  explicit Graph(std::string name = "graph");
  ~Graph();
  Graph(Graph&& other) noexcept;
  Graph& operator=(Graph&& other) noexcept;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  const std::string& name() const { return name_; }
  void setName(std::string name) { name_ = std::move(name); }
  // Where the graph's header was when it was parsed from text (for diagnostics).
  TextPos parsedAt;

  // Iteration in order: `for (Node* n : graph.nodes())`. Erasing the current node while
  // iterating is safe (the iterator has already read its successor).
  class Iterator;
  struct NodeRange;
  NodeRange nodes() const;
  Node* first() const;
  Node* last() const;
  size_t size() const { return size_; }
  Node* findNode(std::string_view name) const;
  std::vector<Node*> placeholders() const;
  // The output node, or null when there is none yet.
  Node* outputNode() const;

  // New nodes go before the insertion point (by default: at the end). `name` must be unused;
  // empty picks a fresh one derived from the target ("add", "add_1", ...). References to nodes
  // of another graph are rejected; "aten.*" call_function targets must name an op of the table.
  Node* create(Opcode opcode, std::string target, std::vector<Argument> args = {},
               Kwargs kwargs = {}, std::string name = "");
  Node* placeholder(std::string name, std::optional<Type> type = std::nullopt);
  Node* getAttr(std::string path);
  Node* callFunction(OpId op, std::vector<Argument> args, Kwargs kwargs = {});
  Node* callFunction(std::string target, std::vector<Argument> args, Kwargs kwargs = {});
  Node* callMethod(std::string method, std::vector<Argument> args, Kwargs kwargs = {});
  Node* callModule(std::string path, std::vector<Argument> args, Kwargs kwargs = {});
  Node* output(Argument result);

  void setInsertionPointBefore(Node* n);
  void setInsertionPointAfter(Node* n);
  void setInsertionPointToEnd();
  // Restores the insertion point when it goes out of scope (FX's `with graph.inserting_before`).
  class InsertionGuard;

  void moveBefore(Node* n, Node* before);
  void moveAfter(Node* n, Node* after);
  // Unlinks and destroys n; throws IRError while n still has users.
  void erase(Node* n);
  // Makes every user of `from` refer to `to` instead (a node or a constant).
  void replaceAllUsesWith(Node* from, const Argument& to);

  // A fresh name derived from hint that no node of this graph has.
  std::string uniqueName(std::string_view hint);
  // A deep copy: same names, targets, args, kwargs and meta; references point into the copy.
  Graph clone() const;

private:
  friend class Node;
  void link(Node* n, Node* before);
  void unlink(Node* n);
  // Throws unless every node the arguments refer to belongs to this graph.
  void checkReferences(const std::vector<Argument>& args, const Kwargs& kwargs) const;

  std::string name_;
  std::unique_ptr<Node> root_; // sentinel: root_->next_ is the first node, root_->prev_ the last
  Node* insertBefore_;
  size_t size_ = 0;
  std::unordered_map<std::string, Node*> byName_;
  std::unordered_map<std::string, int> nameCounters_;
};

// Same name, and node for node the same names, opcodes, targets, args, kwargs (references
// compared by node name) and meta; what parse(print(g)) must preserve. Text positions are not
// compared.
bool structurallyEqual(const Graph& a, const Graph& b);

class Graph::Iterator {
public:
  Iterator(Node* n, const Node* end) : n_(n), next_(n == end ? nullptr : n->next_), end_(end) {}
  Node* operator*() const { return n_; }
  Iterator& operator++() {
    n_ = next_ ? next_ : const_cast<Node*>(end_);
    next_ = n_ == end_ ? nullptr : n_->next_;
    return *this;
  }
  bool operator!=(const Iterator& o) const { return n_ != o.n_; }

private:
  Node* n_;
  Node* next_;
  const Node* end_;
};

struct Graph::NodeRange {
  Iterator b, e;
  Iterator begin() const { return b; }
  Iterator end() const { return e; }
};

class Graph::InsertionGuard {
public:
  explicit InsertionGuard(Graph& g) : g_(g), saved_(g.insertBefore_) {}
  ~InsertionGuard() { g_.insertBefore_ = saved_; }
  InsertionGuard(const InsertionGuard&) = delete;
  InsertionGuard& operator=(const InsertionGuard&) = delete;

private:
  Graph& g_;
  Node* saved_;
};

} // namespace kiln
