// Argument: one argument of a graph node (FX's Argument): a constant, a reference to another
// node, or a list / tuple / dict / slice of arguments. A plain value type.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/Device.h"
#include "runtime/ScalarType.h"

namespace kiln {

class Node;

class Argument {
public:
  enum class Kind : uint8_t {
    None,
    Bool,
    Int,
    Float,
    String,
    Dtype,
    Device,
    Ellipsis,
    Slice,
    Node,
    List,
    Tuple,
    Dict,
  };

  Argument() = default; // None
  Argument(bool v) : kind_(Kind::Bool), v_(v) {}
  Argument(int v) : Argument(int64_t(v)) {}
  Argument(int64_t v) : kind_(Kind::Int), v_(v) {}
  // Every nan becomes the one quiet nan, so equal texts give equal arguments.
  Argument(double v);
  Argument(std::string v) : kind_(Kind::String), v_(std::move(v)) {}
  Argument(const char* v) : Argument(std::string(v)) {}
  Argument(ScalarType v) : kind_(Kind::Dtype), v_(v) {}
  Argument(kiln::Device v) : kind_(Kind::Device), v_(v) {}
  Argument(kiln::Node* v) : kind_(Kind::Node), v_(v) {}
  static Argument ellipsis();
  // slice(start, stop, step): each None or an int / node.
  static Argument slice(Argument start, Argument stop, Argument step);
  static Argument list(std::vector<Argument> items);
  static Argument tuple(std::vector<Argument> items);
  static Argument dict(std::vector<std::pair<std::string, Argument>> entries);

  Kind kind() const { return kind_; }
  bool isNone() const { return kind_ == Kind::None; }
  bool isNode() const { return kind_ == Kind::Node; }
  // A Python number: bool, int or float.
  bool isNumber() const {
    return kind_ == Kind::Bool || kind_ == Kind::Int || kind_ == Kind::Float;
  }
  bool isSequence() const { return kind_ == Kind::List || kind_ == Kind::Tuple; }

  bool toBool() const { return std::get<bool>(v_); }
  int64_t toInt() const { return std::get<int64_t>(v_); }
  double toFloat() const { return std::get<double>(v_); }
  const std::string& toString() const { return std::get<std::string>(v_); }
  ScalarType toDtype() const { return std::get<ScalarType>(v_); }
  kiln::Device toDevice() const { return std::get<kiln::Device>(v_); }
  kiln::Node* toNode() const { return std::get<kiln::Node*>(v_); }
  // Elements of a list or tuple; start, stop, step of a slice; values of a dict.
  const std::vector<Argument>& items() const { return std::get<std::vector<Argument>>(v_); }
  // Keys of a dict, parallel to items().
  const std::vector<std::string>& keys() const { return keys_; }

  // Identity: same kind and same contents, floats compared bit for bit (so -0.0 != 0.0 and a
  // nan equals the same nan), node references by pointer.
  bool operator==(const Argument& o) const;
  size_t hash() const;

  // Calls f on every node reference, depth first in order.
  void forEachNode(const std::function<void(kiln::Node*)>& f) const;
  // A copy with every node reference passed through f (which returns the replacement argument).
  Argument mapNodes(const std::function<Argument(kiln::Node*)>& f) const;

private:
  Argument(Kind k, std::vector<Argument> items) : kind_(k), v_(std::move(items)) {}

  Kind kind_ = Kind::None;
  std::variant<std::monostate, bool, int64_t, double, std::string, ScalarType, kiln::Device,
               kiln::Node*, std::vector<Argument>>
      v_;
  std::vector<std::string> keys_;
};

// Keyword arguments in the order they were given.
using Kwargs = std::vector<std::pair<std::string, Argument>>;

} // namespace kiln
