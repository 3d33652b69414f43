// Shape propagation: an abstract interpretation of the graph on meta tensors.
#include "passes/ShapePropagation.h"

#include <cstdint>
#include <unordered_map>

#include "ir/OpTarget.h"
#include "ir/SchemaBinding.h"
#include "runtime/Dispatcher.h"

namespace kiln {

namespace {

// What a node evaluates to: a meta tensor (with the device the program would use), a number,
// a tuple of those, or a value only its type is known of (an int parameter).
struct Abstract {
  Value value;
  Device device;
  std::vector<Abstract> elements;
  bool isTuple = false;
  bool known = true;
  Type::Kind numberKind = Type::Kind::Int; // the type of an unknown number
};

class ShapePropagation final : public ArgumentValues {
public:
  explicit ShapePropagation(Graph& g) : g_(g) {}

  // Types one node from the types its inputs already carry.
  void runOne(Node& n) {
    for (Node* in : n.inputs()) {
      if (!in->meta.type) fail(n, "uses %" + in->name() + ", which has no type; run shape-prop first");
      env_[in] = fromType(*in, *in->meta.type);
    }
    n.meta.type = typeOf(n, evaluate(n));
  }

  void run() {
    for (Node* n : g_.nodes()) {
      if (n->opcode() == Opcode::Output) continue;
      Abstract result = evaluate(*n);
      n->meta.type = typeOf(*n, result);
      env_[n] = std::move(result);
    }
  }

private:
  [[noreturn]] void fail(const Node& n, const std::string& msg) const override {
    throw IRError(n.parsedAt, "%" + n.name() + ": " + msg);
  }

  Abstract evaluate(const Node& n) {
    if (n.opcode() == Opcode::Placeholder || n.opcode() == Opcode::GetAttr) {
      if (!n.meta.type)
        fail(n, std::string(opcodeName(n.opcode())) + " has no type annotation; shape-prop needs "
                                                      "the type of every input and attribute");
      return fromType(n, *n.meta.type);
    }
    OpId op = resolveCall(n);
    if (op != OpId::NumOps) return runOp(n, op);
    if (n.target() == "operator.getitem" && n.args().size() == 2 && n.args()[0].isNode() &&
        n.args()[1].kind() == Argument::Kind::Int) {
      const Abstract& seq = computed(n, n.args()[0].toNode());
      int64_t i = n.args()[1].toInt(), size = int64_t(seq.elements.size());
      if (seq.isTuple && i >= -size && i < size) return seq.elements[size_t(i < 0 ? i + size : i)];
    }
    if (n.meta.type) return fromType(n, *n.meta.type);
    fail(n, std::string("cannot compute the type of ") + opcodeName(n.opcode()) + " " + n.target() +
                " (not an op of the table); annotate its type");
  }

  Abstract fromType(const Node& n, const Type& t) {
    Abstract a;
    if (t.isTuple()) {
      a.isTuple = true;
      for (const Type& e : t.elements())
        a.elements.push_back(fromType(n, e));
      return a;
    }
    if (!t.isTensor()) {
      a.known = false;
      a.numberKind = t.kind();
      return a;
    }
    const TensorType& tt = t.tensor();
    if (!tt.isStatic())
      fail(n, "type " + tt.str() + " has symbolic sizes; shape-prop handles static sizes only");
    std::vector<int64_t> sizes, strides;
    int64_t numel = 1;
    for (const IndexExpr& s : tt.sizes) {
      sizes.push_back(*s.constant());
      if (__builtin_mul_overflow(numel, sizes.back(), &numel))
        fail(n, "type " + tt.str() + " has more elements than int64 can count");
    }
    Device meta(DeviceType::Meta);
    if (tt.strides) {
      for (const IndexExpr& s : *tt.strides)
        strides.push_back(*s.constant());
      a.value = Tensor::emptyStrided(sizes, strides, tt.dtype, meta);
    } else {
      a.value = Tensor::empty(sizes, tt.dtype, meta);
    }
    a.device = tt.device;
    return a;
  }

  Type typeOf(const Node& n, const Abstract& a) const {
    if (a.isTuple) {
      std::vector<Type> elems;
      for (const Abstract& e : a.elements)
        elems.push_back(typeOf(n, e));
      return Type::tuple(std::move(elems));
    }
    if (!a.known) return Type::number(a.numberKind);
    const Value& v = a.value;
    if (v.isTensor()) return Type(TensorType::of(v.toTensor(), a.device));
    if (v.isBool()) return Type::number(Type::Kind::Bool);
    if (v.isInt()) return Type::number(Type::Kind::Int);
    if (v.isDouble()) return Type::number(Type::Kind::Float);
    if (v.isScalar())
      return Type::number(v.toScalar().isBool()       ? Type::Kind::Bool
                          : v.toScalar().isIntegral() ? Type::Kind::Int
                                                      : Type::Kind::Float);
    fail(n, "the op returned a value shape-prop cannot describe: " + v.repr());
  }

  const Abstract& computed(const Node& n, const Node* in) const {
    auto it = env_.find(in);
    if (it == env_.end()) fail(n, "uses %" + in->name() + ", which has no value before this node");
    return it->second;
  }

  const Abstract& input(const Node& n, const Node& in) const {
    const Abstract& a = computed(n, &in);
    if (!a.known) fail(n, "needs the value of %" + in.name() + ", which is not known before running");
    return a;
  }

  // ArgumentValues: what the nodes an op reads computed, known before running.
  Tensor tensor(const Node& n, const Node& in) const override {
    const Abstract& a = input(n, in);
    if (a.isTuple || !a.value.isTensor()) fail(n, "%" + in.name() + " is not a tensor");
    return a.value.toTensor();
  }
  std::vector<Tensor> tensors(const Node& n, const Node& in) const override {
    const Abstract& a = input(n, in);
    if (!a.isTuple) fail(n, "%" + in.name() + " is not a tuple of tensors");
    std::vector<Tensor> list;
    for (const Abstract& e : a.elements) {
      if (e.isTuple || !e.value.isTensor()) fail(n, "%" + in.name() + " is not a tuple of tensors");
      list.push_back(e.value.toTensor());
    }
    return list;
  }
  Value number(const Node& n, const Node& in) const override {
    const Abstract& a = input(n, in);
    if (a.isTuple || a.value.isTensor()) fail(n, "%" + in.name() + " is not a number");
    return a.value;
  }

  Abstract runOp(const Node& n, OpId op) {
    const OpSchema& s = opSchema(op);
    Dispatcher& d = Dispatcher::instance();
    if (!d.hasKernel(op, DispatchKey::Meta) && !d.hasKernel(op, DispatchKey::CompositeImplicit))
      fail(n, opTarget(op) + " has no meta kernel, so shape-prop cannot run it");
    std::string error;
    auto bound = bindArguments(s, n.args(), n.kwargs(), &error);
    if (!bound) fail(n, opTarget(op) + " " + error);
    Stack stack;
    std::optional<Device> resultDevice;
    for (size_t i = 0; i < s.args.size(); ++i) {
      const ArgSpec& spec = s.args[i];
      const Argument* a = (*bound)[i];
      Value v = a ? argumentValue(n, spec, *a, *this) : spec.hasDefault ? spec.defaultValue : Value();
      if (spec.type == ArgType::Device) {
        // Compute on meta whatever device the program names; the type records the real one.
        if (!v.isNone()) resultDevice = v.toDevice();
        v = Value(Device(DeviceType::Meta));
      }
      if (!resultDevice && a && a->isNode() && spec.type == ArgType::Tensor)
        resultDevice = computed(n, a->toNode()).device;
      stack.push_back(std::move(v));
    }
    try {
      d.call(op, stack);
    } catch (const std::exception& e) {
      // Kernel messages usually start with the op's name already ("add: The size of ...",
      // "prims.add: operands must ...").
      std::string what = e.what(), target = opTarget(op);
      if (what.starts_with(target + ":")) fail(n, what);
      fail(n, what.starts_with(s.name + ":") ? s.ns + "." + what : target + ": " + what);
    }
    Device device = resultDevice.value_or(Device());
    auto single = [&](Value v) {
      Abstract r;
      if (v.isTensorList()) {
        r.isTuple = true;
        for (const Tensor& t : v.toTensorList())
          r.elements.push_back(Abstract{t, device, {}, false, true});
        return r;
      }
      r.value = std::move(v);
      r.device = device;
      return r;
    };
    if (s.returns.size() == 1 && !stack.empty()) return single(std::move(stack[0]));
    Abstract tuple;
    tuple.isTuple = true;
    for (Value& v : stack)
      tuple.elements.push_back(single(std::move(v)));
    return tuple;
  }

  Graph& g_;
  std::unordered_map<const Node*, Abstract> env_;
};

} // namespace

void propagateShapes(Graph& g) { ShapePropagation(g).run(); }

void propagateShape(Node& n) { ShapePropagation(*n.graph()).runOne(n); }

} // namespace kiln
