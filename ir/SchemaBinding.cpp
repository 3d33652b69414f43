// Binding node arguments to op schemas; argument kind checks; overload resolution.
#include "ir/SchemaBinding.h"

#include "ir/IndexExprReader.h"
#include "ir/OpTarget.h"
#include "ir/Printer.h"
#include "runtime/Dispatcher.h"

namespace kiln {

namespace {

std::string paramList(const OpSchema& s, bool positionalOnly) {
  std::string out;
  for (const ArgSpec& a : s.args)
    if (!positionalOnly || !a.kwargOnly) out += (out.empty() ? "" : ", ") + a.name;
  return out;
}

const char* kindName(const Argument& a) {
  switch (a.kind()) {
  case Argument::Kind::None:
    return "None";
  case Argument::Kind::Bool:
    return "bool";
  case Argument::Kind::Int:
    return "int";
  case Argument::Kind::Float:
    return "float";
  case Argument::Kind::String:
    return "string";
  case Argument::Kind::Dtype:
    return "dtype";
  case Argument::Kind::Device:
    return "device";
  case Argument::Kind::Ellipsis:
    return "Ellipsis";
  case Argument::Kind::Slice:
    return "slice";
  case Argument::Kind::Node:
    return "value";
  case Argument::Kind::List:
    return "list";
  case Argument::Kind::Tuple:
    return "tuple";
  case Argument::Kind::Dict:
    return "dict";
  }
  return "argument";
}

// What a node reference is known to hold, from its type annotation.
enum class Holds { Unknown, Tensor, Number, Other };

Holds holds(const Argument& a) {
  const auto& type = a.toNode()->meta.type;
  if (!type) return Holds::Unknown;
  if (type->isTensor()) return Holds::Tensor;
  if (type->isTuple()) return Holds::Other;
  return Holds::Number;
}

bool isInt(const Argument& a) { return a.kind() == Argument::Kind::Int; }
bool isNonBoolNumber(const Argument& a) {
  return a.kind() == Argument::Kind::Int || a.kind() == Argument::Kind::Float;
}
bool nodeHoldsNumber(const Argument& a) {
  return a.isNode() && (holds(a) == Holds::Unknown || holds(a) == Holds::Number);
}
bool nodeHoldsTensor(const Argument& a) {
  return a.isNode() && (holds(a) == Holds::Unknown || holds(a) == Holds::Tensor);
}

bool isSizeExpression(const Argument& a) {
  if (a.kind() != Argument::Kind::String) return false;
  try {
    Lexer lex(a.toString());
    Token tok = lex.next();
    IndexExpr e = IndexExprReader(lex, tok, "size expression").read();
    if (tok.kind != Token::Kind::End) return false;
    // Over size symbols only (s0, s1, ...): any other name is a misspelled argument.
    for (const std::string& v : e.variables())
      if (v.size() < 2 || v[0] != 's' || v.find_first_not_of("0123456789", 1) != std::string::npos) return false;
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool allItems(const Argument& a, bool (*ok)(const Argument&)) {
  if (!a.isSequence()) return false;
  for (const Argument& item : a.items())
    if (!ok(item)) return false;
  return true;
}

bool fits(const ArgSpec& spec, size_t argIndex, const Argument& a) {
  if (a.isNone() && (spec.optional || spec.type == ArgType::Layout ||
                     spec.type == ArgType::MemoryFormat || spec.type == ArgType::Generator))
    return true;
  switch (spec.type) {
  case ArgType::Tensor:
    // Python numbers stand for 0-d tensors anywhere but in the first (self) position.
    return nodeHoldsTensor(a) || (argIndex > 0 && a.isNumber());
  case ArgType::TensorList:
    return allItems(a, nodeHoldsTensor);
  case ArgType::OptionalTensorList:
    return allItems(a, [](const Argument& x) { return x.isNone() || nodeHoldsTensor(x); });
  case ArgType::Int:
    // A size expression as for Scalar below: prims.iota's start (and, in lists, prims.slice's
    // start_indices) along a symbolic dim.
    return isInt(a) || nodeHoldsNumber(a) || isSizeExpression(a);
  case ArgType::IntList:
    return isInt(a) || nodeHoldsNumber(a) ||
           allItems(a, [](const Argument& x) { return isInt(x) || nodeHoldsNumber(x) || isSizeExpression(x); });
  case ArgType::Float:
    return isNonBoolNumber(a) || nodeHoldsNumber(a);
  case ArgType::FloatList:
    return allItems(a, [](const Argument& x) { return isNonBoolNumber(x) || nodeHoldsNumber(x); });
  case ArgType::Bool:
    return a.kind() == Argument::Kind::Bool || nodeHoldsNumber(a);
  case ArgType::Scalar:
    // A string: a number over the graph's size symbols ("s0*64"), written by dynamic shapes'
    // fitting (docs/dynamic-shapes.md); lowering reads it as a size expression.
    return a.isNumber() || nodeHoldsNumber(a) || isSizeExpression(a);
  case ArgType::ScalarType:
    return a.kind() == Argument::Kind::Dtype;
  case ArgType::Device:
    return a.kind() == Argument::Kind::Device;
  case ArgType::String:
    return a.kind() == Argument::Kind::String;
  case ArgType::Layout:
  case ArgType::MemoryFormat:
  case ArgType::Generator:
    return false;
  }
  return false;
}

} // namespace

std::optional<BoundArguments> bindArguments(const OpSchema& schema,
                                            const std::vector<Argument>& args, const Kwargs& kwargs,
                                            std::string* error) {
  auto failWith = [&](std::string msg) -> std::optional<BoundArguments> {
    if (error) *error = std::move(msg);
    return std::nullopt;
  };
  size_t positional = 0;
  while (positional < schema.args.size() && !schema.args[positional].kwargOnly)
    ++positional;
  if (args.size() > positional)
    return failWith(strCat("expects at most ", positional, " positional argument",
                           positional == 1 ? "" : "s", " (", paramList(schema, true), "), got ",
                           args.size()));
  BoundArguments bound(schema.args.size(), nullptr);
  for (size_t i = 0; i < args.size(); ++i)
    bound[i] = &args[i];
  for (const auto& [key, value] : kwargs) {
    size_t i = 0;
    while (i < schema.args.size() && schema.args[i].name != key)
      ++i;
    if (i == schema.args.size())
      return failWith(
          strCat("has no argument named '", key, "' (arguments: ", paramList(schema, false), ")"));
    if (bound[i])
      return failWith(strCat("got argument '", key, "' both positionally and as a keyword"));
    bound[i] = &value;
  }
  for (size_t i = 0; i < schema.args.size(); ++i)
    if (!bound[i] && !schema.args[i].hasDefault && !schema.args[i].optional)
      return failWith(strCat("missing required argument '", schema.args[i].name, "'"));
  return bound;
}

std::string checkArgumentType(const ArgSpec& spec, size_t argIndex, const Argument& a) {
  if (fits(spec, argIndex, a)) return "";
  std::string expected = argTypeName(spec.type);
  if (spec.optional) expected += "?";
  std::string got =
      a.isNode() ? "%" + a.toNode()->name() +
                       (a.toNode()->meta.type ? " of type " + a.toNode()->meta.type->str() : "")
                 : std::string(kindName(a)) + " " + printArgument(a);
  return strCat("argument '", spec.name, "' expects ", expected, ", got ", got);
}

std::string checkCall(const OpSchema& schema, const std::vector<Argument>& args,
                      const Kwargs& kwargs) {
  std::string error;
  auto bound = bindArguments(schema, args, kwargs, &error);
  if (!bound) return error;
  for (size_t i = 0; i < bound->size(); ++i) {
    if (!(*bound)[i]) continue;
    std::string msg = checkArgumentType(schema.args[i], i, *(*bound)[i]);
    if (!msg.empty()) return msg;
  }
  return "";
}

std::string torchFunctionName(const std::string& target) {
  for (std::string prefix : {"kiln.", "torch."}) {
    if (target.starts_with(prefix) && target.find('.', prefix.size()) == std::string::npos)
      return target.substr(prefix.size());
  }
  return "";
}

OpId resolveCall(const Node& n) {
  if (n.isOp()) return n.op();
  bool method = n.opcode() == Opcode::CallMethod;
  std::string name = method                               ? n.target()
                     : n.opcode() == Opcode::CallFunction ? torchFunctionName(n.target())
                                                          : "";
  if (name.empty()) return OpId::NumOps;
  for (OpId op : Dispatcher::instance().overloadsOf(name)) {
    const OpSchema& s = opSchema(op);
    if ((method ? s.isMethod : s.isFunction) && checkCall(s, n.args(), n.kwargs()).empty())
      return op;
  }
  return OpId::NumOps;
}

namespace {

Scalar constantScalar(const Argument& a) {
  if (a.kind() == Argument::Kind::Bool) return Scalar(a.toBool());
  if (a.kind() == Argument::Kind::Int) return Scalar(a.toInt());
  return Scalar(a.toFloat());
}

Scalar numberArgument(const Node& user, const Argument& a, const ArgumentValues& values) {
  return a.isNode() ? values.number(user, *a.toNode()).toScalar() : constantScalar(a);
}

Tensor tensorArgument(const Node& user, const Argument& a, const ArgumentValues& values) {
  if (a.isNumber()) return Tensor::wrapScalar(constantScalar(a));
  if (!a.isNode())
    values.fail(user, std::string("expected a tensor argument, got ") +
                          (a.isNone() ? "None" : "a constant"));
  return values.tensor(user, *a.toNode());
}

Value tensorListArgument(const Node& user, const ArgSpec& spec, const Argument& a,
                         const ArgumentValues& values) {
  std::vector<std::optional<Tensor>> list;
  if (a.isNode()) { // a tuple-valued node, such as the result of a multi-output op
    for (Tensor& t : values.tensors(user, *a.toNode()))
      list.emplace_back(std::move(t));
  } else {
    for (const Argument& item : a.items())
      list.push_back(item.isNone() ? std::nullopt
                                   : std::optional<Tensor>(tensorArgument(user, item, values)));
  }
  if (spec.type == ArgType::OptionalTensorList) return list;
  std::vector<Tensor> tensors;
  for (auto& t : list) {
    if (!t) values.fail(user, "argument '" + spec.name + "' does not accept None elements");
    tensors.push_back(std::move(*t));
  }
  return tensors;
}

} // namespace

Value argumentValue(const Node& user, const ArgSpec& spec, const Argument& a,
                    const ArgumentValues& values) {
  if (a.isNone()) return Value();
  auto number = [&](const Argument& item) { return numberArgument(user, item, values); };
  switch (spec.type) {
  case ArgType::Tensor:
    return tensorArgument(user, a, values);
  case ArgType::TensorList:
  case ArgType::OptionalTensorList:
    return tensorListArgument(user, spec, a, values);
  case ArgType::Int:
    return Value(number(a).toInt());
  case ArgType::IntList: {
    if (!a.isSequence()) // an int for every entry, as in kernel_size=3
      return std::vector<int64_t>(size_t(std::max(spec.fixedLength, 1)), number(a).toInt());
    std::vector<int64_t> list;
    for (const Argument& item : a.items())
      list.push_back(number(item).toInt());
    return list;
  }
  case ArgType::Float:
    return Value(number(a).toDouble());
  case ArgType::FloatList: {
    std::vector<double> list;
    for (const Argument& item : a.items())
      list.push_back(number(item).toDouble());
    return list;
  }
  case ArgType::Bool:
    return Value(number(a).toBool());
  case ArgType::Scalar:
    return Value(number(a));
  case ArgType::ScalarType:
    return Value(a.toDtype());
  case ArgType::Device:
    return Value(a.toDevice());
  case ArgType::String:
    return Value(a.toString());
  default: // layouts, memory formats and generators: only None passes the verifier
    values.fail(user, "argument '" + spec.name + "' takes a value a graph cannot give");
  }
  return Value(); // not reached: fail throws
}

} // namespace kiln
