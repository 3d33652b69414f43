// Matching a node's args and kwargs against an op schema, by Python's calling rules: which
// parameter each argument binds to, whether its kind fits the parameter's type, and which
// overload a torch-level call (call_method "add", call_function "kiln.add") resolves to.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/Node.h"
#include "runtime/OpSchema.h"

namespace kiln {

// One entry per schema argument: the Argument given for it, or null (the default applies).
using BoundArguments = std::vector<const Argument*>;

// Binds args/kwargs to the schema's parameters. On failure returns nullopt and, when `error`
// is given, an actionable message ("expects at most 2 positional arguments (self, other), got 3",
// "has no argument named 'beta'", "missing required argument 'other'").
std::optional<BoundArguments> bindArguments(const OpSchema& schema,
                                            const std::vector<Argument>& args, const Kwargs& kwargs,
                                            std::string* error = nullptr);

// Whether `a` can be passed for parameter `spec` (index `argIndex` in the schema): constants of
// the right kind, node references whose type (when known) fits. Empty when it fits, else a
// message such as "argument 'alpha' expects Scalar, got string \"x\"".
std::string checkArgumentType(const ArgSpec& spec, size_t argIndex, const Argument& a);

// Binding and every argument type check together; empty on success.
std::string checkCall(const OpSchema& schema, const std::vector<Argument>& args,
                      const Kwargs& kwargs);

// Where the values behind a node's arguments come from when its op is run (shape propagation
// runs it on meta tensors, the retracer on real ones). Each answer concerns the argument node
// `in` of node `user`; a source that cannot answer calls fail(user, ...).
class ArgumentValues {
public:
  virtual ~ArgumentValues() = default;
  // The tensor a tensor-valued node holds.
  virtual Tensor tensor(const Node& user, const Node& in) const = 0;
  // The tensors of a tuple-valued node, such as a multi-output op's result.
  virtual std::vector<Tensor> tensors(const Node& user, const Node& in) const = 0;
  // The number (bool, int or float) a computed-number node holds.
  virtual Value number(const Node& user, const Node& in) const = 0;
  [[noreturn]] virtual void fail(const Node& user, const std::string& message) const = 0;
};

// The stack value for parameter `spec` of node `user`'s op from its argument `a` (already
// checked by the verifier): constants converted to the parameter's type, node references looked
// up in `values`.
Value argumentValue(const Node& user, const ArgSpec& spec, const Argument& a,
                    const ArgumentValues& values);

// The op a node calls: its aten op, or for call_method "X" / call_function "kiln.X" or
// "torch.X" the first overload of X (method or function variant) whose schema accepts the
// node's arguments. OpId::NumOps when there is none.
OpId resolveCall(const Node& n);
// "X" for call_function targets "kiln.X" / "torch.X", empty otherwise.
std::string torchFunctionName(const std::string& target);

} // namespace kiln
