// An op's schema as data: argument names, types, defaults; returns and their aliasing. The
// op table generator emits one OpSchema per op overload.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/Value.h"

namespace kiln {

enum class ArgType : uint8_t {
  Tensor, TensorList, OptionalTensorList, Int, IntList, Float, FloatList, Bool, Scalar,
  ScalarType, Device, Layout, MemoryFormat, String, Generator,
};

struct ArgSpec {
  std::string name;
  ArgType type;
  bool optional = false;  // "T?": accepts None
  bool kwargOnly = false; // after "*"
  bool mutated = false;   // "Tensor(a!)"
  int fixedLength = 0;    // "int[2]": a single int is repeated this many times
  bool hasDefault = false;
  Value defaultValue;
};

struct ReturnSpec {
  std::string name; // "" unless the schema names it (values, indices)
  ArgType type;
  int aliasOf = -1; // index of the argument this return is a view of / the same tensor as
};

enum OpTag : uint32_t {
  kTagCore = 1u << 0,
  kTagPrims = 1u << 1,
  kTagPointwise = 1u << 2,
  kTagReduction = 1u << 3,
  kTagView = 1u << 4,
  kTagInplace = 1u << 5,
  kTagRandom = 1u << 6,
  kTagNondeterministic = 1u << 7,
  kTagCreation = 1u << 8,
};

// How a pointwise op picks its result dtype from its inputs (PyTorch's ELEMENTWISE_TYPE_PROMOTION_KIND).
enum class PromotionKind : uint8_t { None, Default, IntToFloat, AlwaysBool, NoOpMath };

// How autograd treats an op: a derivative formula of the table, no gradient at all, its
// composite decomposition, its functional twin (in-place ops), or nothing yet (an error at
// backward when a gradient must flow through it).
enum class DerivativeKind : uint8_t { None, Formula, NonDifferentiable, Composite, Inplace };

struct OpSchema {
  std::string ns = "aten"; // the namespace: "aten", or "prims" for the Prims IR
  std::string name;        // "add"
  std::string overload; // "Tensor", or "" for the default overload
  std::vector<ArgSpec> args;
  std::vector<ReturnSpec> returns;
  uint32_t tags = 0;
  PromotionKind promotion = PromotionKind::None;
  DerivativeKind derivative = DerivativeKind::None;
  bool isFunction = true; // kiln.add(...)
  bool isMethod = false;  // Tensor.add(...)
  std::string pythonName; // name exposed to Python ("" to hide)
  std::string text;       // the schema as written in the table

  std::string qualifiedName() const { return overload.empty() ? name : name + "." + overload; }
  bool hasTag(OpTag t) const { return (tags & t) != 0; }
};

const char* argTypeName(ArgType t);

} // namespace kiln
