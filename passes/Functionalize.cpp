// Functionalization: one walk in program order keeping, for every tensor written so far, the
// node holding its current value, and for every view its base and the views leading to it.
#include "passes/Functionalize.h"

#include <algorithm>
#include <cstdint>
#include <unordered_map>

#include "ir/Effects.h"
#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"
#include "passes/ShapePropagation.h"

namespace kiln {

namespace {

[[noreturn]] void fail(const Node& n, const std::string& msg) {
  throw IRError(n.parsedAt, "%" + n.name() + ": " + msg);
}

const TensorType& tensorTypeOf(const Node& n) {
  if (!n.meta.type || !n.meta.type->isTensor())
    fail(n, "needs a tensor type (run shape-prop first), has " +
                (n.meta.type ? n.meta.type->str() : std::string("none")));
  return n.meta.type->tensor();
}

// The functional twin of an in-place op: "add_.Tensor" -> "add.Tensor"; NumOps when none.
OpId functionalTwin(const OpSchema& s) {
  if (!s.name.ends_with("_")) return OpId::NumOps;
  std::string name = s.ns + "." + s.name.substr(0, s.name.size() - 1);
  return resolveOpTarget(s.overload.empty() ? name : name + "." + s.overload);
}

// Where a view stands: the tensor owning the storage and the views from it (base excluded,
// the view itself last), and the base's version its node's value was taken at.
struct ViewInfo {
  Node* base;
  std::vector<Node*> chain;
  int seen;
};

class Functionalizer {
public:
  explicit Functionalizer(Graph& g) : g_(g) {}

  void run() {
    std::vector<Node*> nodes;
    for (Node* n : g_.nodes())
      nodes.push_back(n);
    for (Node* n : nodes) {
      Graph::InsertionGuard guard(g_);
      g_.setInsertionPointBefore(n);
      visit(n);
    }
  }

private:
  void visit(Node* n) {
    switch (n->opcode()) {
    case Opcode::Placeholder:
    case Opcode::GetAttr:
      return;
    case Opcode::Output:
      copyBackIntoInputs();
      readArguments(n);
      return;
    case Opcode::CallFunction:
      break;
    default:
      fail(*n, std::string(opcodeName(n->opcode())) + " " + n->target() +
                   " has unknown effects; functionalize works on ATen-level graphs (retrace first)");
    }
    if (n->target() == "operator.getitem") return getitem(n);
    if (!n->isOp()) {
      // A custom autograd.Function's application reads its inputs only (the capture breaks at
      // one that writes them).
      if (n->target() != "kiln._C._set_grad_enabled" && n->target() != "kiln.autograd.function.apply_captured" &&
          hasSideEffects(*n))
        fail(*n, n->target() + " has unknown effects; functionalize works on ATen-level graphs "
                               "(retrace first)");
      return readArguments(n);
    }
    if (n->op() == OpId::native_batch_norm) return batchNorm(n);
    const OpSchema& s = opSchema(n->op());
    bool writes = false;
    for (const ArgSpec& a : s.args)
      writes |= a.mutated;
    if (writes) return writeInPlace(n, s);
    Node* parent = n->args().empty() || !n->args()[0].isNode() ? nullptr : n->args()[0].toNode();
    readArguments(n);
    if (parent && s.hasTag(kTagView)) recordView(n, parent);
  }

  // -- values ----------------------------------------------------------------------------------

  // The node holding x's value at this point of the program: x itself, the last value written
  // into it, or (a view whose base was written since) the view taken again from the base.
  Node* read(Node* x) {
    auto v = views_.find(x);
    if (v != views_.end() && v->second.seen != versions_[v->second.base]) {
      ViewInfo& info = v->second;
      Node* parent = info.chain.size() > 1 ? info.chain[info.chain.size() - 2] : info.base;
      current_[x] = retake(x, read(parent));
      info.seen = versions_[info.base];
    }
    auto c = current_.find(x);
    return c == current_.end() ? x : c->second;
  }

  void readArguments(Node* n) {
    auto current = [this](Node* x) { return Argument(read(x)); };
    std::vector<Argument> args;
    for (const Argument& a : n->args())
      args.push_back(a.mapNodes(current));
    Kwargs kwargs;
    for (const auto& [k, a] : n->kwargs())
      kwargs.emplace_back(k, a.mapNodes(current));
    n->setArgs(std::move(args));
    n->setKwargs(std::move(kwargs));
  }

  // The view `view` (already reading current values) taken again over `parent`.
  Node* retake(Node* view, Node* parent) {
    std::vector<Argument> args{Argument(parent)};
    args.insert(args.end(), view->args().begin() + 1, view->args().end());
    Node* copy = g_.create(view->opcode(), view->target(), std::move(args), view->kwargs());
    if (view->target() == "operator.getitem") copy->meta = view->meta;
    else propagateShape(*copy);
    return copy;
  }

  Node* call(OpId op, std::vector<Argument> args, Kwargs kwargs = {}) {
    Node* n = g_.callFunction(op, std::move(args), std::move(kwargs));
    propagateShape(*n);
    return n;
  }

  // -- views -----------------------------------------------------------------------------------

  void recordView(Node* view, Node* parent) {
    auto p = views_.find(parent);
    ViewInfo info = p == views_.end() ? ViewInfo{parent, {}, 0} : p->second;
    info.chain.push_back(view);
    info.seen = versions_[info.base];
    views_[view] = std::move(info);
  }

  // An element of a multi-result view (split) is a view too; others are plain values.
  void getitem(Node* n) {
    Node* parent = n->args().empty() || !n->args()[0].isNode() ? nullptr : n->args()[0].toNode();
    readArguments(n);
    if (parent && views_.count(parent)) recordView(n, parent);
  }

  // The value of `parent` with `value` written where `view` (of parent) looks (as_strided:
  // asStridedInverse, from write()).
  Node* inverse(Node* view, Node* parent, Node* value) {
    std::vector<Argument> rest(view->args().begin() + 1, view->args().end());
    auto scatter = [&](OpId op) {
      std::vector<Argument> args{Argument(parent), Argument(value)};
      args.insert(args.end(), rest.begin(), rest.end());
      return call(op, std::move(args), view->kwargs());
    };
    auto sizesOf = [&](Node* n) {
      std::vector<Argument> sizes;
      for (const IndexExpr& s : tensorTypeOf(*n).sizes) {
        if (!s.constant()) fail(*view, "writes through a view of symbolic size");
        sizes.emplace_back(*s.constant());
      }
      return Argument::list(std::move(sizes));
    };
    switch (view->isOp() ? view->op() : OpId::NumOps) {
    case OpId::slice_Tensor:
      return scatter(OpId::slice_scatter);
    case OpId::select_int:
      return scatter(OpId::select_scatter);
    case OpId::view:
    case OpId::squeeze:
    case OpId::squeeze_dim:
    case OpId::squeeze_dims:
    case OpId::unsqueeze:
      return call(OpId::reshape, {Argument(value), sizesOf(parent)});
    case OpId::permute:
      return call(OpId::permute, {Argument(value), inversePermutation(view)});
    case OpId::transpose_int:
    case OpId::t:
      return retake(view, value);
    case OpId::alias:
    case OpId::detach:
      return value;
    default:
      fail(*view, "a write through " + view->target() +
                      " (functionalize knows the inverses of select, slice, view, squeeze, "
                      "unsqueeze, permute, transpose, t, as_strided, alias and detach)");
    }
  }

  // The value of the storage's owner `base` with `value` written through the as_strided view
  // `view` (diagonal(), and every as_strided view's gradient: zeros, then a copy_ into their
  // as_strided view): the positions the view reads, as_strided over arange(numel) standing for
  // the storage, are where index_put writes the value into the flattened base. Needs the
  // storage's row-major layout, which a base computed in the graph (offset 0) with default
  // strides has, and the view's storage offset (implied only when taken of the base itself).
  Node* asStridedInverse(Node* view, Node* base, Node* value, bool ofBase) {
    const TensorType& t = tensorTypeOf(*base);
    const bool explicitOffset = (view->args().size() > 3 && !view->args()[3].isNone()) ||
                                std::any_of(view->kwargs().begin(), view->kwargs().end(), [](const auto& kw) {
                                  return kw.first == "storage_offset" && !kw.second.isNone();
                                });
    if (!ofBase && !explicitOffset) fail(*view, "a write through as_strided of a view, with no storage offset");

    int64_t numel = 1;
    bool rowMajor = true;
    std::vector<Argument> sizes;
    for (size_t d = t.sizes.size(); d-- > 0;) {
      if (!t.sizes[d].constant()) fail(*view, "writes through a view of symbolic size");
      // A stride only matters where the size is above 1.
      if (t.strides && *t.sizes[d].constant() > 1 && (*t.strides)[d] != IndexExpr(numel)) rowMajor = false;
      numel *= *t.sizes[d].constant();
      sizes.insert(sizes.begin(), Argument(*t.sizes[d].constant()));
    }
    if (!rowMajor) fail(*view, "a write through as_strided of a tensor that is not contiguous");
    std::vector<Argument> rest(view->args().begin() + 1, view->args().end());
    Node* storage = call(OpId::arange, {Argument(numel)}, {{"dtype", Argument(ScalarType::Int64)},
                                                             {"device", Argument(t.device)}});
    std::vector<Argument> args{Argument(storage)};
    args.insert(args.end(), rest.begin(), rest.end());
    Node* positions = call(OpId::as_strided, std::move(args), view->kwargs());
    Argument flat = Argument::list(std::vector<Argument>{Argument(int64_t(-1))});
    Node* index = call(OpId::reshape, {Argument(positions), flat});
    Node* flatBase = call(OpId::reshape, {Argument(base), flat});
    Node* written = call(OpId::index_put, {Argument(flatBase), Argument::list(std::vector<Argument>{Argument(index)}),
                                           Argument(call(OpId::reshape, {Argument(value), flat})), Argument(false)});
    return call(OpId::reshape, {Argument(written), Argument::list(std::move(sizes))});
  }

  Argument inversePermutation(Node* view) {
    const Argument& dims = view->args().size() > 1 ? view->args()[1] : Argument();
    if (!dims.isSequence()) fail(*view, "permute without a constant list of dims");
    int64_t rank = int64_t(dims.items().size());
    std::vector<Argument> inverse(dims.items().size());
    for (int64_t i = 0; i < rank; ++i) {
      int64_t d = dims.items()[size_t(i)].toInt();
      inverse[size_t(d < 0 ? d + rank : d)] = Argument(i);
    }
    return Argument::list(std::move(inverse));
  }

  // -- batch norm ------------------------------------------------------------------------------

  // native_batch_norm in training updates running_mean and running_var in place (its schema does
  // not say so): the op without them, then their updates as values (PyTorch's
  // _native_batch_norm_legit_functional), written back like any other write.
  void batchNorm(Node* n) {
    const OpSchema& s = opSchema(n->op());
    std::string error;
    auto bound = bindArguments(s, n->args(), n->kwargs(), &error);
    if (!bound) fail(*n, n->target() + " " + error);
    std::vector<Argument> args;
    for (size_t i = 0; i < s.args.size(); ++i)
      args.push_back((*bound)[i] ? *(*bound)[i] : Argument());
    Node* runningMean = args[3].isNode() ? args[3].toNode() : nullptr;
    Node* runningVar = args[4].isNode() ? args[4].toNode() : nullptr;
    const bool training = args[5].kind() == Argument::Kind::Bool && args[5].toBool();
    if (!training || (!runningMean && !runningVar)) return readArguments(n);
    if (!args[6].isNumber()) fail(*n, "native_batch_norm with a computed momentum");
    const double momentum = args[6].kind() == Argument::Kind::Float ? args[6].toFloat()
                                                                    : double(args[6].toInt());
    auto current = [this](Node* x) { return Argument(read(x)); };
    for (Argument& a : args)
      a = a.mapNodes(current);
    Node* input = args[0].toNode();
    args[3] = args[4] = Argument();
    n->setArgs(args);
    n->setKwargs({});

    Graph::InsertionGuard guard(g_);
    g_.setInsertionPointAfter(n);
    auto update = [&](Node* stat, Node* batchValue) {
      Node* old = read(stat);
      Node* blended = call(OpId::add_Tensor,
                           {Argument(call(OpId::mul_Scalar, {Argument(batchValue), Argument(momentum)})),
                            Argument(call(OpId::mul_Scalar, {Argument(old), Argument(1 - momentum)}))});
      write(stat, castTo(blended, tensorTypeOf(*stat)));
    };
    if (runningMean) {
      Node* saveMean = g_.callFunction("operator.getitem", {Argument(n), Argument(int64_t(1))});
      if (n->meta.type && n->meta.type->isTuple()) saveMean->meta.type = n->meta.type->elements()[1];
      update(runningMean, saveMean);
    }
    if (runningVar) update(runningVar, unbiasedBatchVariance(n, input));
  }

  // The per-channel variance of `input` over every dim but 1, with Bessel's correction, in the
  // computation dtype (float for 16-bit inputs), as the running variance takes it.
  Node* unbiasedBatchVariance(Node* n, Node* input) {
    const TensorType& t = tensorTypeOf(*input);
    std::vector<Argument> dims{Argument(int64_t(0))};
    for (size_t d = 2; d < t.sizes.size(); ++d)
      dims.emplace_back(int64_t(d));
    if (t.sizes.size() < 2) fail(*n, "native_batch_norm of an input with fewer than 2 dims");
    Node* x = input;
    if (t.dtype == ScalarType::Float16 || t.dtype == ScalarType::BFloat16)
      x = call(OpId::_to_copy, {Argument(input)}, {{"dtype", Argument(ScalarType::Float32)}});
    return call(OpId::var_correction, {Argument(x), Argument::list(std::move(dims))},
                {{"correction", Argument(int64_t(1))}});
  }

  // -- writes ----------------------------------------------------------------------------------

  void writeInPlace(Node* n, const OpSchema& s) {
    if (s.hasTag(kTagView))
      fail(*n, n->target() + " changes a tensor's shape in place (an in-place view op), which "
                             "functionalize does not handle");
    for (size_t i = 1; i < s.args.size(); ++i)
      if (s.args[i].mutated)
        fail(*n, n->target() + " writes into its argument '" + s.args[i].name +
                     "', which has no functional form");
    if (n->args().empty() || !n->args()[0].isNode())
      fail(*n, n->target() + " writes into a value that is not a tensor node");
    Node* self = n->args()[0].toNode();
    Node* value = functionalValue(n, s, tensorTypeOf(*self));
    write(self, value);
    // The in-place op returns its destination: its readers read the destination's new value.
    g_.replaceAllUsesWith(n, Argument(self));
    g_.erase(n);
  }

  // The value the in-place op `n` leaves in self, computed without writing.
  Node* functionalValue(Node* n, const OpSchema& s, const TensorType& selfType) {
    auto current = [this](Node* x) { return Argument(read(x)); };
    std::vector<Argument> args;
    for (const Argument& a : n->args())
      args.push_back(a.mapNodes(current));
    Kwargs kwargs;
    for (const auto& [k, a] : n->kwargs())
      kwargs.emplace_back(k, a.mapNodes(current));
    switch (n->op()) {
    case OpId::copy_:
      if (args.size() < 2 || !args[1].isNode()) fail(*n, "copy_ of a value that is not a tensor node");
      return fitTo(n, args[1].toNode(), selfType);
    case OpId::zero_:
      return call(OpId::zeros_like, {args[0]});
    case OpId::fill__Scalar:
      return call(OpId::full_like, args, kwargs);
    default:
      break;
    }
    OpId twin = functionalTwin(s);
    if (twin == OpId::NumOps)
      fail(*n, n->target() + " writes into '" + s.args[0].name + "' and has no functional twin (" +
                   s.name.substr(0, s.name.size() - 1) + ") in the op table");
    return castTo(call(twin, std::move(args), std::move(kwargs)), selfType);
  }

  // `value` as the destination keeps it: its dtype and device (in-place ops round into self).
  Node* castTo(Node* value, const TensorType& type) {
    const TensorType& t = tensorTypeOf(*value);
    Kwargs kwargs;
    if (t.dtype != type.dtype) kwargs.emplace_back("dtype", Argument(type.dtype));
    if (t.device != type.device) kwargs.emplace_back("device", Argument(type.device));
    return kwargs.empty() ? value : call(OpId::_to_copy, {Argument(value)}, std::move(kwargs));
  }

  // copy_'s source as the destination holds it: cast, then broadcast to its shape.
  Node* fitTo(Node* n, Node* src, const TensorType& type) {
    Node* value = castTo(src, type);
    if (tensorTypeOf(*value).sizes == type.sizes) return value;
    std::vector<Argument> sizes;
    for (const IndexExpr& s : type.sizes) {
      if (!s.constant()) fail(*n, "copy_ into a tensor of symbolic size");
      sizes.emplace_back(*s.constant());
    }
    return call(OpId::expand, {Argument(value), Argument::list(std::move(sizes))});
  }

  // `target` (an original node) holds `value` from here on; a view's base gets the value
  // written through the view's chain.
  void write(Node* target, Node* value) {
    auto v = views_.find(target);
    if (v == views_.end()) {
      current_[target] = value;
      ++versions_[target];
      return;
    }
    ViewInfo& info = v->second;
    Node* base = value;
    for (size_t i = info.chain.size(); i-- > 0;) {
      if (info.chain[i]->isOp() && info.chain[i]->op() == OpId::as_strided) {
        // as_strided addresses the storage, whatever views lead to it: write into the base. A
        // graph input's storage may start before its data (an input that is a slice): the
        // view's offset then counts from a point the graph does not know.
        if (info.base->opcode() == Opcode::Placeholder || info.base->opcode() == Opcode::GetAttr)
          fail(*info.chain[i], "a write through as_strided of a graph input (its storage offset is not known)");
        base = asStridedInverse(info.chain[i], read(info.base), base, i == 0);
        break;
      }
      Node* parent = i ? info.chain[i - 1] : info.base;
      base = inverse(info.chain[i], read(parent), base);
    }
    // The inverses give the base's values, not always its layout (t() of a select_scatter of
    // t(base) is transposed): a contiguous base stays contiguous, so that the views taken of it
    // later (view(-1)) see the strides they were traced with.
    if (!tensorTypeOf(*info.base).strides && tensorTypeOf(*base).strides)
      base = call(OpId::contiguous, {Argument(base)});
    current_[info.base] = base;
    info.seen = ++versions_[info.base];
    current_[target] = value;
  }

  // Inputs written in place get their final values copied into them, which the outputs then
  // read (an output that is such an input, or a view of it, aliases it as in eager mode).
  void copyBackIntoInputs() {
    std::vector<Node*> inputs;
    for (Node* in : g_.nodes())
      if (in->opcode() == Opcode::Placeholder || in->opcode() == Opcode::GetAttr) inputs.push_back(in);
    for (Node* in : inputs) {
      auto c = current_.find(in);
      if (c == current_.end() || c->second == in) continue;
      Node* copy = g_.callFunction(OpId::copy_, {Argument(in), Argument(c->second)});
      copy->meta.type = in->meta.type;
      c->second = copy;
      ++versions_[in];
    }
  }

  Graph& g_;
  std::unordered_map<Node*, Node*> current_; // an original node -> the node of its value now
  std::unordered_map<Node*, int> versions_;  // a base -> the number of writes into it so far
  std::unordered_map<Node*, ViewInfo> views_;
};

} // namespace

void functionalize(Graph& g) { Functionalizer(g).run(); }

} // namespace kiln
