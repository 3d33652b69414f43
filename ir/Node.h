// Node: one operation of a Graph (FX's Node): an opcode, a target, args and kwargs, the nodes
// that use its value, and meta (type, source location). Nodes are created and owned by a Graph.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "generated/OpId.h"
#include "ir/Argument.h"
#include "ir/Diagnostic.h"
#include "ir/Type.h"

namespace kiln {

class Graph;

enum class Opcode : uint8_t { Placeholder, GetAttr, CallFunction, CallMethod, CallModule, Output };

// "placeholder", "get_attr", "call_function", "call_method", "call_module", "output".
const char* opcodeName(Opcode op);
std::optional<Opcode> opcodeFromName(std::string_view name);

// Where in the user's Python program a node came from.
struct SourceLoc {
  std::string file;
  int line = 0;
  std::string function;
  bool operator==(const SourceLoc&) const = default;
};

struct NodeMeta {
  std::optional<Type> type;
  std::optional<SourceLoc> loc;
  bool operator==(const NodeMeta&) const = default;
};

class Node {
public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  Graph* graph() const { return graph_; }
  const std::string& name() const { return name_; }
  Opcode opcode() const { return opcode_; }
  // call_function: "aten.add.Tensor" (an op of the table) or a qualified callable such as
  // "operator.getitem"; call_method: the method name; call_module / get_attr: a dotted path;
  // placeholder: the parameter name; output: "output".
  const std::string& target() const { return target_; }
  // The op table entry of an "aten.*" call_function target; OpId::NumOps otherwise.
  OpId op() const { return op_; }
  bool isOp() const { return op_ != OpId::NumOps; }

  const std::vector<Argument>& args() const { return args_; }
  const Kwargs& kwargs() const { return kwargs_; }
  // The kwarg's value, or null.
  const Argument* kwarg(std::string_view name) const;
  // Setting args or kwargs keeps every node's users in sync.
  void setArgs(std::vector<Argument> args);
  void setKwargs(Kwargs kwargs);
  void setArg(size_t index, Argument value);
  // Replaces every reference to `from` in args and kwargs.
  void replaceInput(Node* from, const Argument& to);

  // The nodes args and kwargs refer to, each once, in order of first appearance.
  std::vector<Node*> inputs() const;
  // The nodes whose args or kwargs refer to this one, in the order they started to.
  const std::vector<Node*>& users() const { return users_; }

  // Neighbours in the graph's order; null at either end.
  Node* prev() const;
  Node* next() const;

  NodeMeta meta;
  // Where the node was written when the graph was parsed from text (for diagnostics).
  TextPos parsedAt;

private:
  friend class Graph;
  Node(Graph* graph, Opcode opcode, std::string target, OpId op, std::string name);
  void reset(std::vector<Argument> args, Kwargs kwargs);
  void attachInputs();
  void detachInputs();

  Graph* graph_;
  Opcode opcode_;
  std::string target_;
  OpId op_;
  std::string name_;
  std::vector<Argument> args_;
  Kwargs kwargs_;
  std::vector<Node*> users_;
  Node* prev_ = nullptr;
  Node* next_ = nullptr;
};

} // namespace kiln
