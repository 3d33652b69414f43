// Tracer: the state one trace shares across inlined frames. Turns outside values into variable
// trackers with guards (placeholders for argument tensors, get_attr for others), runs kiln code
// for real on fakes under the OpRecorder, and assembles the result of trace_frame.
#include <cstdint>
#include <Python.h>

#include <limits>

#include <cstring>

#include <unordered_set>

#include "frontend/binding/FxBinding.h"
#include "frontend/binding/PythonConvert.h"
#include "frontend/capture/Iterators.h"
#include "frontend/capture/SymbolicInterpreter.h"
#include "runtime/Autocast.h"
#include "runtime/DispatchKey.h"
#include "runtime/autograd/AutogradMeta.h"

namespace kiln::capture {

namespace {

// A sparse tensor reaching the trace: its frame runs eagerly, as TorchDynamo's ("Attempted to
// wrap sparse Tensor"). Fake tensors and the compiler are strided only.
const char* const kSparseTensorReason =
    "Attempted to wrap sparse Tensor (layout kiln.sparse_coo): kiln.compile does not support sparse tensors";

bool isGradLeaf(PyObject* o) {
  if (!python::isTensor(o)) return false;
  const Tensor& t = python::unwrapTensor(o);
  return t.requiresGrad() && autograd::isLeaf(t);
}

// The tensors of a call's arguments or result, one container level deep.
template <class F> void forEachTensor(PyObject* o, F&& f) {
  if (python::isTensor(o)) return f(o);
  if (!PyTuple_Check(o) && !PyList_Check(o)) return;
  for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(o); ++i) {
    PyObject* x = PySequence_Fast_GET_ITEM(o, i);
    if (python::isTensor(x)) f(x);
  }
}

bool isNnModule(nb::handle o) {
  static nb::handle cls = nb::object(nb::module_::import_("kiln.nn").attr("Module")).release();
  return PyObject_IsInstance(o.ptr(), cls.ptr()) == 1;
}

bool isSize(nb::handle o) {
  static nb::handle cls = nb::object(nb::module_::import_("kiln").attr("Size")).release();
  return PyObject_TypeCheck(o.ptr(), reinterpret_cast<PyTypeObject*>(cls.ptr()));
}

// The dict types traced as dicts: their item storage is what indexing a present key reads.
bool isTracedDict(PyObject* o) {
  static PyObject* defaultDict = nb::object(nb::module_::import_("collections").attr("defaultdict")).release().ptr();
  return PyDict_CheckExact(o) || PyODict_CheckExact(o) || Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(defaultDict);
}

// A dict's keys (borrowed) in iteration order: an OrderedDict's own order (move_to_end changes
// it, not the underlying dict's).
std::vector<PyObject*> dictKeysInOrder(PyObject* o) {
  std::vector<PyObject*> keys;
  if (PyODict_CheckExact(o)) {
    for (nb::handle k : nb::borrow(o))
      keys.push_back(k.ptr());
    return keys;
  }
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(o, &pos, &k, &v))
    keys.push_back(k);
  return keys;
}

bool isDevice(nb::handle o) {
  static nb::handle cls = nb::object(nb::module_::import_("kiln").attr("device")).release();
  return PyObject_TypeCheck(o.ptr(), reinterpret_cast<PyTypeObject*>(cls.ptr()));
}

// A frozenset whose elements are exact str/int/bytes (a GuardTree const value).
bool isConstSet(PyObject* s) {
  nb::object it = nb::steal(PyObject_GetIter(s));
  if (!it.is_valid()) throw nb::python_error();
  while (PyObject* x = PyIter_Next(it.ptr())) {
    PyTypeObject* t = Py_TYPE(x);
    Py_DECREF(x);
    if (t != &PyLong_Type && t != &PyUnicode_Type && t != &PyBytes_Type) return false;
  }
  return true;
}

// A named tuple (a tuple subclass: collections.namedtuple's, a PackedSequence) that indexes,
// iterates and measures as a tuple and holds nothing besides its items: read from outside, its
// items are guarded one by one, as a tuple's (a new one with the same items passes), instead of
// its identity.
bool isPlainNamedTuple(PyObject* o) {
  PyTypeObject* t = Py_TYPE(o);
  if (!PyTuple_Check(o) || PyTuple_CheckExact(o) || t->tp_iter != PyTuple_Type.tp_iter) return false;
  if (!t->tp_as_mapping || t->tp_as_mapping->mp_subscript != PyTuple_Type.tp_as_mapping->mp_subscript)
    return false;
  if (!t->tp_as_sequence || t->tp_as_sequence->sq_length != PyTuple_Type.tp_as_sequence->sq_length) return false;
  PyObject** dict = _PyObject_GetDictPtr(o);
  return !dict || !*dict || PyDict_GET_SIZE(*dict) == 0;
}

bool isPlainConstant(PyObject* o) {
  return o == Py_None || PyBool_Check(o) || PyLong_CheckExact(o) || PyFloat_CheckExact(o) ||
         PyUnicode_CheckExact(o) || PyBytes_CheckExact(o) || PyComplex_CheckExact(o) ||
         o == Py_Ellipsis;
}

std::string sanitize(const std::string& s) {
  std::string out;
  for (char c : s)
    out += (isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  if (out.empty() || isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

} // namespace

nb::handle gradModeRestorer(bool mode) {
  static nb::handle on = nb::object(nb::module_::import_("kiln._compiling").attr("RESTORE_GRAD_ENABLED")).release();
  static nb::handle off = nb::object(nb::module_::import_("kiln._compiling").attr("RESTORE_GRAD_DISABLED")).release();
  return mode ? on : off;
}

nb::object autocastRestorer(uint32_t packed) {
  static nb::handle cls = nb::object(nb::module_::import_("kiln._compiling").attr("_RestoreAutocast")).release();
  return cls(packed);
}

int DictVT::find(PyObject* key) const {
  const bool byIdentity = python::isTensor(key);
  for (size_t i = 0; i < entries.size(); ++i) {
    if (byIdentity || python::isTensor(entries[i].first.ptr())) {
      if (entries[i].first.ptr() == key) return int(i);
      continue;
    }
    int eq = PyObject_RichCompareBool(entries[i].first.ptr(), key, Py_EQ);
    if (eq < 0) throw nb::python_error();
    if (eq) return int(i);
  }
  return -1;
}

bool containsTensor(const VT* v) {
  switch (v->kind) {
  case VT::Kind::Tensor:
  case VT::Kind::Ndarray:
  case VT::Kind::Format: return true;
  case VT::Kind::List:
  case VT::Kind::Tuple:
    for (VT* x : static_cast<const SequenceVT*>(v)->items)
      if (containsTensor(x)) return true;
    return false;
  case VT::Kind::Dict:
    for (auto& e : static_cast<const DictVT*>(v)->entries)
      if (containsTensor(e.second)) return true;
    return false;
  default: return false;
  }
}

Tracer::Tracer(nb::handle func, nb::handle code, nb::handle args, nb::handle globals,
               nb::handle builtins)
    : func_(nb::borrow(func)), code_(nb::borrow(code)), args_(nb::borrow(args)),
      globals_(nb::borrow(globals)), builtins_(nb::borrow(builtins)),
      graph_(sanitize(nb::cast<std::string>(code.attr("co_name")))), recorder_(graph_),
      guards_(std::make_shared<GuardTree>()), gradMode_(GradMode::isEnabled()),
      initialGradMode_(gradMode_), initialAutocast_(autocast::packedState()) {
  // kiln.autograd.grad / backward inside the traced code run the engine on the fakes, which
  // turns grad mode off while it records the backward's ops: the graph says so, so that those
  // results do not require grad when the graph runs (as eagerly) and are not differentiated by
  // AOT autograd.
  recorder_.beforeRecord = [this] {
    if (GradMode::isEnabled() == gradMode_) return;
    gradMode_ = GradMode::isEnabled();
    Node* n = graph_.callFunction("kiln._C._set_grad_enabled", {Argument(gradMode_)});
    n->meta.loc = location();
  };
  recorder_.valuesOf = [this](const Tensor& fake) { return valuesOf(fake); };
  recorder_.liftTensor = [this](const Tensor& real) -> Node* {
    auto it = knownParams_.find(real.impl());
    if (it != knownParams_.end()) {
      // One node per parameter: the one the traced code read (and maybe wrote in place:
      // `lin.weight.mul_(2)` under no_grad) is the one the module's forward reads after it. A
      // second get_attr was a separate input to functionalization, so it read the old value.
      VT* v = knownTensor(it->second.second.ptr());
      if (!v) v = wrapTensor(it->second.second, nullptr, true, it->second.first);
      return recorder_.nodeOf(python::unwrapTensor(static_cast<TensorVT*>(v)->fake.ptr()));
    }
    // A custom autograd.Function's code, traced for its capture (CustomFunctionBinding.h),
    // reading for real a tensor the traced code holds as a graph value: a user module's
    // parameter, handed to CheckpointFunction.apply from `self.parameters()` and read again by
    // the module's forward that the Function calls. The same node (its guards are the value's).
    const compiler::OpRecorder* active = compiler::OpRecorder::current();
    if (active && active->tracesCustomFunctions)
      for (auto& [object, vt] : byId_)
        if (vt->kind == VT::Kind::Tensor && python::isTensor(object) &&
            python::unwrapTensor(object).impl() == real.impl())
          return recorder_.nodeOf(python::unwrapTensor(static_cast<TensorVT*>(vt)->fake.ptr()));
    // A real tensor kiln's library code made while it ran on the fakes (kiln.from_numpy of data
    // computed in Python - a mask drawn with numpy inside a patched nn.functional.dropout):
    // baked into the graph it would be the same on every call. The frame runs eagerly instead.
    // Thrown inside an op called from Python code running for real: it must reach callReal as a
    // Python exception (NotImplementedError: callReal makes it Unsupported), never as a C++ one
    // unwinding through CPython's frames.
    throw NotImplementedError("a tensor made from Python data while kiln library code ran (" + real.describe() +
                              "), or one it reached by itself (an optimizer's parameters): its value "
                              "could differ on the next call");
  };
}

Tracer::~Tracer() {
  GradMode::setEnabled(initialGradMode_);
  autocast::setPackedState(initialAutocast_);
}

void Tracer::setPosition(nb::handle code, int instruction) {
  failCode = nb::borrow(code);
  failInstruction = instruction;
  if (!unwoundCallers_.empty()) unwoundCallers_.clear(); // an exception was handled
}

SourceLoc Tracer::location() const {
  SourceLoc loc;
  if (!failCode.is_valid()) return loc;
  auto* co = reinterpret_cast<PyCodeObject*>(failCode.ptr());
  loc.file = nb::cast<std::string>(failCode.attr("co_filename"));
  loc.line = PyCode_Addr2Line(co, failInstruction * 2);
  loc.function = nb::cast<std::string>(failCode.attr("co_name"));
  return loc;
}

Node* Tracer::placeholder(const std::string& hint) {
  Graph::InsertionGuard keep(graph_);
  for (Node* n : graph_.nodes())
    if (n->opcode() != Opcode::Placeholder) {
      graph_.setInsertionPointBefore(n);
      break;
    }
  return graph_.placeholder(graph_.uniqueName(sanitize(hint)));
}

Node* Tracer::getAttr(nb::handle tensor, const std::string& hint) {
  std::string name = sanitize(hint);
  std::string unique = name;
  for (int i = 1; attrs_.contains(unique.c_str()); ++i)
    unique = name + std::to_string(i);
  attrs_[unique.c_str()] = tensor;
  Node* n = graph_.getAttr(unique);
  const Tensor& t = python::unwrapTensor(tensor.ptr());
  TensorType tt;
  tt.dtype = t.dtype();
  for (int64_t s : t.sizes())
    tt.sizes.emplace_back(s);
  tt.device = t.device();
  n->meta.type = Type(std::move(tt));
  return n;
}

VT* Tracer::wrapTensor(nb::handle value, const SourcePtr& source, bool viaModule,
                       const std::string& path) {
  const Tensor& real = python::unwrapTensor(value.ptr());
  GuardNode* g = source ? &source->guardNode(*guards_) : nullptr;
  TensorCheck check;
  check.type = Py_TYPE(value.ptr());
  check.dtype = real.dtype();
  check.device = real.device();
  check.sizes = DimVector(real.sizes());
  check.strides = DimVector(real.strides());
  check.requiresGrad = real.requiresGrad();
  Node* node;
  bool input = source && source->isArgument() && !viaModule;
  std::optional<std::vector<int64_t>> probe;
  if (input) {
    std::string expr = source->expr();
    auto dyn = dynamicDims.find(expr);
    if (dyn != dynamicDims.end()) {
      KILN_CHECK_VALUE(dyn->second.size() == check.sizes.size() && real.isContiguous(),
                       "trace_frame: dynamic dims of ", expr, " given for a ", check.sizes.size(),
                       "-d or non-contiguous tensor");
      check.symbols = dyn->second;
      check.maxDynamicSize = maxDynamicSize;
    }
    auto p = probeSizes.find(expr);
    if (p != probeSizes.end()) probe = p->second;
    if (dyn != dynamicDims.end())
      for (size_t d = 0; d < dyn->second.size(); ++d)
        if (dyn->second[d] >= 0) {
          symbolOfSize_[probe ? (*probe)[d] : real.sizes()[d]] = dyn->second[d];
          symbolExpr_.emplace(dyn->second[d], expr + ".shape[" + std::to_string(d) + "]");
        }
    node = placeholder(source->identifier());
    inputExprs_.push_back(expr);
    inputExprOf_[node] = expr;
    if (real.requiresGrad() && !autograd::isLeaf(real)) historyInputs_ = true;
    g->checkTensor(check);
  } else {
    auto it = byId_.find(value.ptr());
    if (it != byId_.end()) return it->second;
    if (g) {
      g->checkId(value.ptr());
      if (!viaModule) g->checkTensor(check);
    }
    node = getAttr(value, !path.empty() ? path : source ? source->identifier() : "_tensor_constant");
  }
  Tensor fake = compiler::makeFake(real);
  if (probe) {
    KILN_CHECK_VALUE(probe->size() == size_t(real.dim()), "trace_frame: probe sizes of rank ",
                     probe->size(), " for a ", real.dim(), "-d input");
    fake = Tensor::empty(IntArrayRef(*probe), real.dtype(), Device(DeviceType::Meta));
    fake.impl()->requiresGrad = real.requiresGrad();
  }
  // An input with autograd history (a graph output before a break, `h = w * 2`) is no leaf:
  // nor is its fake, so that an in-place write into it (`h[mask] = ...`) traces as it runs
  // (a leaf that requires grad refuses in-place ops). Its history is only stood for: no
  // backward runs through it while tracing (historyInputs_).
  if (input && real.requiresGrad() && !autograd::isLeaf(real))
    autograd::setHistory(fake, makeIntrusive<autograd::NotImplementedNode>("the history of a graph input"));
  node->meta.type = Type(TensorType{real.dtype(), {}, std::nullopt, real.device()});
  for (int64_t s : fake.sizes())
    node->meta.type->tensor().sizes.emplace_back(s);
  recorder_.bind(fake, node, real.device());
  if (!probe && !viaModule) noteReadableValues(fake, value, g);
  if (real.storageOffset() != 0) offsetStorages_.insert(fake.storage().get());
  auto* vt = make<TensorVT>(nb::steal(python::wrapTensor(fake)));
  vt->source = source;
  vt->real = nb::borrow(value);
  vt->identityGuarded = !(source && source->isArgument() && !viaModule) && g;
  if (!(source && source->isArgument() && !viaModule)) byId_[value.ptr()] = vt;
  return vt;
}

void Tracer::noteReadableValues(const Tensor& fake, nb::handle real, GuardNode* guard) {
  constexpr int64_t kMaxReadableValues = 256; // a batch's lengths, not data
  std::vector<int64_t> values;
  const Tensor& t = python::unwrapTensor(real.ptr());
  if (guard && opaqueValues.count(guard->name())) return;
  if (t.numel() <= kMaxReadableValues && !t.requiresGrad() && readIntValues(t, values))
    readableValues_[fake.impl()] = ReadableValues{nb::borrow(real), guard, false, int64_t(fake.storage()->version())};
}

Tensor Tracer::valuesOf(const Tensor& fake) {
  auto it = readableValues_.find(fake.impl());
  if (it == readableValues_.end() || int64_t(fake.storage()->version()) != it->second.version) return Tensor();
  ReadableValues& r = it->second;
  const Tensor& real = python::unwrapTensor(r.real.ptr());
  if (r.guard && !r.guarded) {
    std::vector<int64_t> values;
    readIntValues(real, values);
    r.guard->checkIntValues(values);
    r.guarded = true;
  }
  return real;
}

VT* Tracer::wrapDynamicFloat(const SourcePtr& source, const std::string& expr) {
  // A float that changes between calls (an lr a scheduler sets): a graph input, as TorchDynamo
  // makes such a float after its first recompile; any float passes the guard.
  static nb::handle toTensor =
      nb::object(nb::module_::import_("kiln._compiling").attr("float_input")).release();
  source->guardNode(*guards_).checkType(&PyFloat_Type);
  Node* node = placeholder(source->identifier());
  inputExprs_.push_back(constantRef(toTensor) + "(" + expr + ")");
  std::vector<int64_t> scalar;
  Tensor fake = Tensor::empty(IntArrayRef(scalar), ScalarType::Float64, Device(DeviceType::Meta));
  node->meta.type = Type(TensorType{ScalarType::Float64, {}, std::nullopt, Device(DeviceType::CPU)});
  recorder_.bind(fake, node, Device(DeviceType::CPU));
  return make<TensorVT>(nb::steal(python::wrapTensor(fake)));
}

VT* Tracer::wrapDynamicNumber(nb::handle value, const SourcePtr& source, const std::string& expr) {
  // An int or float argument that changed between compiles: a graph input whatever its value
  // (the guard checks its type), as TorchDynamo's automatic dynamic SymInt / SymFloat inputs.
  static nb::handle numberInput =
      nb::object(nb::module_::import_("kiln._traced_numbers").attr("number_input")).release();
  bool isFloat = PyFloat_CheckExact(value.ptr());
  GuardNode& g = source->guardNode(*guards_);
  g.checkType(Py_TYPE(value.ptr()));
  if (!isFloat) { // it must fit the graph's int64
    int overflow = 0;
    PyLong_AsLongAndOverflow(value.ptr(), &overflow);
    if (overflow) throw Unsupported{"a dynamic int that does not fit 64 bits"};
    g.checkIntRange(std::numeric_limits<long>::min(), std::numeric_limits<long>::max());
  }
  Node* node = placeholder(source->identifier());
  inputExprs_.push_back(constantRef(numberInput) + "(" + expr + ")");
  ScalarType dtype = isFloat ? ScalarType::Float64 : ScalarType::Int64;
  std::vector<int64_t> scalar;
  Tensor fake = Tensor::empty(IntArrayRef(scalar), dtype, Device(DeviceType::Meta));
  node->meta.type = Type(TensorType{dtype, {}, std::nullopt, Device(DeviceType::CPU)});
  recorder_.bind(fake, node, Device(DeviceType::CPU));
  auto* n = make<NumberVT>(nb::steal(python::wrapTensor(fake)), isFloat);
  n->source = source;
  n->inputExpr = expr;
  n->hint = nb::borrow(value);
  return n;
}

nb::object Tracer::tracedNumber(NumberVT* n) {
  static nb::handle cls =
      nb::object(nb::module_::import_("kiln._traced_numbers").attr("TracedNumber")).release();
  return cls(n->fake, nb::bool_(n->isFloat));
}

VT* Tracer::wrapTracedNumber(nb::handle value) {
  static nb::handle cls =
      nb::object(nb::module_::import_("kiln._traced_numbers").attr("TracedNumber")).release();
  if (Py_TYPE(value.ptr()) != reinterpret_cast<PyTypeObject*>(cls.ptr())) return nullptr;
  nb::object fake = value.attr("tensor");
  if (!python::isTensor(fake.ptr()) || !recorder_.nodeOf(python::unwrapTensor(fake.ptr())))
    throw Unsupported{"internal: a traced number without a graph tensor"};
  return make<NumberVT>(fake, nb::cast<bool>(value.attr("is_float")));
}

VT* Tracer::wrap(nb::handle value, SourcePtr source, bool viaModule, const std::string& path) {
  PyObject* o = value.ptr();
  if (python::isSparseTensor(o)) throw Unsupported{kSparseTensorReason};
  if (python::isTensor(o)) {
    // A Tensor subclass's __init__ (nn.Parameter(t) run by a module built inside a compiled
    // function) sees `self` before TensorBase.__init__ gave it a tensor: there is nothing to
    // read yet, so its frame runs eagerly.
    if (!nb::inst_ready(value))
      throw Unsupported{std::string("a ") + Py_TYPE(o)->tp_name + " under construction (its __init__)"};
    return wrapTensor(value, source, viaModule, path);
  }
  if (std::strcmp(Py_TYPE(o)->tp_name, "numpy.ndarray") == 0 ||
      (source && source->isArgument() && !viaModule && isNumpyScalar(value)))
    if (VT* a = wrapNdarray(value, source, viaModule)) return a;
  GuardNode* g = source ? &source->guardNode(*guards_) : nullptr;
  // The exit of a grad-mode block a break cut (on a resume function's stack): the block goes on.
  for (bool mode : {true, false})
    if (o == gradModeRestorer(mode).ptr()) {
      if (g) g->checkId(o);
      return make<GradModeExitVT>(mode);
    }
  // Likewise the exit of an autocast block.
  static nb::handle restoreAutocast =
      nb::object(nb::module_::import_("kiln._compiling").attr("_RestoreAutocast")).release();
  if (Py_TYPE(o) == reinterpret_cast<PyTypeObject*>(restoreAutocast.ptr())) {
    if (g) g->checkId(o);
    return make<AutocastExitVT>(nb::cast<uint32_t>(value.attr("packed")));
  }
  // An autocast made outside the trace (`@autocast("cuda", enabled=False)` on a function, whose
  // wrapper runs `with self:`) is what the same autocast made inside is (Calls.cpp), guarded
  // by identity and by whether it is enabled.
  static nb::handle autocastType =
      nb::object(nb::module_::import_("kiln.amp.autocast_mode").attr("autocast")).release();
  if (PyObject_TypeCheck(o, reinterpret_cast<PyTypeObject*>(autocastType.ptr()))) {
    nb::object enabled = value.attr("_enabled");
    if (g) {
      g->checkId(o);
      g->attr("_enabled").checkConst(enabled.ptr());
    }
    if (PyObject_IsTrue(value.attr("_kiln_trace_noop_context").ptr())) return make<GradModeVT>(gradMode());
    nb::tuple state = nb::borrow<nb::tuple>(value.attr("_kiln_trace_state"));
    bool cuda = nb::cast<std::string>(state[0]) == "cuda";
    return make<AutocastVT>(cuda ? DeviceType::CUDA : DeviceType::CPU, nb::cast<bool>(state[1]),
                            python::dtypeFromObject(state[2].ptr()), nb::cast<bool>(state[3]));
  }
  if (isPlainConstant(o)) {
    if (PyFloat_CheckExact(o) && source && source->isArgument() && !viaModule) {
      std::string expr = source->expr();
      floatsRead[expr.c_str()] = value;
      if (dynamicFloats.count(expr)) return wrapDynamicFloat(source, expr);
      if (dynamicNumbers.count(expr)) return wrapDynamicNumber(value, source, expr);
    }
    if (PyLong_CheckExact(o) && source && source->isArgument() && !viaModule) {
      std::string expr = source->expr();
      intsRead[expr.c_str()] = value;
      if (dynamicNumbers.count(expr)) return wrapDynamicNumber(value, source, expr);
    }
    if (g) g->checkConst(o);
    return constant(nb::borrow(value));
  }
  // A set of str/int from outside (a module's _non_persistent_buffers_set) is read as a copy,
  // its contents guarded; a mutation of it is not traced (SetVT::fromOutside).
  if (PyAnySet_CheckExact(o) && source) {
    nb::object snapshot = nb::steal(PyFrozenSet_New(o));
    if (!snapshot.is_valid()) throw nb::python_error();
    if (isConstSet(snapshot.ptr())) {
      if (g) g->checkConst(snapshot.ptr());
      auto* s = make<SetVT>(nb::steal(PySet_New(o)));
      s->fromOutside = true;
      s->original = nb::borrow(value);
      return s;
    }
  }
  // A list or dict reached twice (an optimizer's `self.state` read in each of its methods) is
  // one variable, so that a mutation through one path is seen through the other and replayed
  // once; the second path is guarded to reach the same object.
  if (PyList_CheckExact(o) || isTracedDict(o)) {
    auto known = containers_.find(o);
    if (known != containers_.end()) {
      if (g) g->checkId(o);
      return known->second;
    }
  }
  const bool namedTuple = source && isPlainNamedTuple(o);
  if (PyTuple_CheckExact(o) || PyList_CheckExact(o) || namedTuple) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    if (g) {
      g->checkType(Py_TYPE(o));
      g->checkLength(n);
    }
    VTs items;
    for (Py_ssize_t i = 0; i < n; ++i)
      items.push_back(wrap(PySequence_Fast_GET_ITEM(o, i),
                           source ? itemSource(source, nb::int_(i)) : nullptr, viaModule,
                           path.empty() ? "" : path + "." + std::to_string(i)));
    auto* s = make<SequenceVT>(PyList_CheckExact(o) ? VT::Kind::List : VT::Kind::Tuple, items);
    s->source = source;
    s->original = nb::borrow(value);
    if (namedTuple) s->namedType = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
    if (PyList_CheckExact(o)) containers_[o] = s;
    return s;
  }
  if (isTracedDict(o)) {
    // dict, OrderedDict (nn.Module's registries, hook tables) and defaultdict (an optimizer's
    // state): their keys and type are guarded; tensor keys are compared by identity.
    auto* d = make<DictVT>();
    std::vector<PyObject*> keys;
    for (PyObject* k : dictKeysInOrder(o)) {
      // Classes key registries (einops' backend per tensor type), modules key caches (Whisper's
      // kv cache); like tensors, they are compared by identity.
      if (!PyUnicode_CheckExact(k) && !PyLong_CheckExact(k) && !python::isTensor(k) && !isIdentityKeyed(k))
        throw Unsupported{"a dict input with keys that are not str, int, tensors or objects compared by identity"};
      keys.push_back(k);
    }
    if (g) {
      g->checkType(Py_TYPE(o));
      g->checkDictKeys(keys);
    }
    if (!PyDict_CheckExact(o) && !PyODict_CheckExact(o))
      d->defaultFactory = nb::borrow(value.attr("default_factory"));
    for (PyObject* key : keys) {
      if (python::isTensor(key)) keyVT(nb::borrow(key)); // pinned by the keys guard
      d->entries.emplace_back(nb::borrow(key),
                              wrap(PyDict_GetItem(o, key),
                                   source ? itemSource(source, nb::borrow(key)) : nullptr,
                                   viaModule));
    }
    d->source = source;
    d->original = nb::borrow(value);
    containers_[o] = d;
    return d;
  }
  if ((iterators::isSeqIter(o) || iterators::isRangeIter(o)) && source &&
      source->kind == Source::Kind::Local && source->name == ".0")
    if (VT* it = wrapIterator(o, source, viaModule)) return it;
  if (python::isDtypeObject(o) || isSize(o) || isDevice(o)) {
    if (g) {
      if (isSize(o)) {
        g->checkType(Py_TYPE(o));
        g->checkLength(PyTuple_GET_SIZE(o));
        for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(o); ++i)
          g->item(nb::int_(i).ptr()).checkConst(PyTuple_GET_ITEM(o, i));
      } else if (isDevice(o)) {
        g->checkType(Py_TYPE(o));
      } else {
        g->checkId(o);
      }
    }
    return constant(nb::borrow(value));
  }
  if (isNnModule(value)) {
    if (g) g->checkId(o);
    auto* m = make<ModuleVT>(nb::borrow(value));
    m->source = source;
    m->path = path;
    return m;
  }
  if (PyFunction_Check(o)) {
    if (g) g->checkId(o);
    auto* f = make<FunctionVT>(nb::borrow(value));
    f->source = source;
    return f;
  }
  if (PyCFunction_Check(o)) {
    // A list's or dict's bound method (`res.append` on a resume function's stack, cut by a break
    // inside the call whose result it appends): a method of the traced container, as TorchDynamo
    // wraps it. Called for real, it put the fake result into the caller's list and the graph
    // never replayed the append (the compiled function returned a meta tensor, one item short).
    PyObject* owner = PyCFunction_GET_SELF(o);
    if (owner && (PyList_CheckExact(owner) || isTracedDict(owner))) {
      // Its owner is usually a local of the frame too (`res`), already wrapped: that variable,
      // with no identity guard (the list is new each call; the glue binds the method from the
      // same local, so the two are one object whenever the resume function runs).
      bool known = containers_.count(owner) != 0;
      VT* self = wrap(owner, source && !known ? attrSource(source, "__self__") : nullptr, viaModule);
      return make<MethodVT>(self, reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name);
    }
  }
  if (PyType_Check(o) || PyModule_Check(o) || PyCFunction_Check(o)) {
    if (g && !PyModule_Check(o)) g->checkId(o);
    return make<ObjectVT>(nb::borrow(value));
  }
  if (PyTuple_Check(o)) { // named tuples
    if (g) g->checkId(o);
    return wrapResult(value);
  }
  if (g) g->checkId(o);
  auto* obj = make<ObjectVT>(nb::borrow(value));
  obj->source = source;
  return obj;
}

// The list/tuple/range iterator a comprehension's frame (3.11) gets as its argument `.0`: an
// iterator over the items it has left, each guarded (a range's values by its state), as
// TorchDynamo's tuple_iterator/range_iterator. Only `.0`: the caller made it for this call and
// never sees it again, so the compiled code need not advance it (an iterator another frame
// holds would have to be). Null when a range's values do not fit a C long (then it is an
// opaque object).
VT* Tracer::wrapIterator(PyObject* o, const SourcePtr& source, bool viaModule) {
  GuardNode& g = source->guardNode(*guards_);
  VTs items;
  if (iterators::isRangeIter(o)) {
    long next = 0, step = 0, left = 0;
    if (!iterators::rangeIterState(o, &next, &step, &left)) return nullptr;
    g.checkType(Py_TYPE(o));
    g.checkRangeIter(next, step, left);
    for (long i = 0; i < left; ++i)
      items.push_back(constant(nb::int_(next + i * step)));
  } else {
    Py_ssize_t n = iterators::seqIterRemaining(o);
    g.checkType(Py_TYPE(o));
    g.checkIterRemaining(n);
    for (Py_ssize_t i = 0; i < n; ++i)
      items.push_back(wrap(iterators::seqIterItem(o, i), iterItemSource(source, int(i)), viaModule));
  }
  auto* it = make<IteratorVT>(items);
  it->source = source;
  return it;
}

VT* Tracer::tagSizes(VT* v) {
  if (symbolOfSize_.empty() || v->kind != VT::Kind::Constant) return v;
  static nb::handle tag = nb::object(nb::module_::import_("kiln.compiler.dynamic").attr("tag_sizes")).release();
  nb::dict table;
  for (auto [size, id] : symbolOfSize_) table[nb::int_(size)] = nb::int_(id);
  return constant(tag(static_cast<ConstantVT*>(v)->value, table));
}

VT* Tracer::loadGrad(TensorVT* t) {
  if (t->real.is_valid())
    if (VT* stored = storedValue(SideEffect::Kind::Attr, t->real.ptr(), "grad")) return stored;
  auto known = grads_.find(t);
  if (known != grads_.end()) return known->second;
  // The glue reads the grad through the tensor at each call: through the argument it came from,
  // or through the very object (its identity guarded).
  std::string through;
  if (t->real.is_valid() && t->identityGuarded && t->source) through = constantRef(t->real);
  else if (t->source && t->source->isArgument()) through = t->source->expr();
  else throw Unsupported{"Tensor.grad of a tensor computed inside the compiled code"};
  GuardNode& g = t->source->guardNode(*guards_);
  nb::object grad = t->real.attr("grad");
  VT* result;
  if (grad.is_none()) {
    g.checkGrad(nullptr);
    result = none();
  } else {
    const Tensor& real = python::unwrapTensor(grad.ptr());
    TensorCheck check;
    check.type = Py_TYPE(grad.ptr());
    check.dtype = real.dtype();
    check.device = real.device();
    check.sizes = DimVector(real.sizes());
    check.strides = DimVector(real.strides());
    check.requiresGrad = real.requiresGrad();
    g.checkGrad(&check);
    Node* node = placeholder((t->source ? t->source->identifier() : std::string("tensor")) + "_grad");
    inputExprs_.push_back(through + ".grad");
    Tensor fake = compiler::makeFake(real);
    node->meta.type = Type(TensorType{real.dtype(), {}, std::nullopt, real.device()});
    for (int64_t s : real.sizes())
      node->meta.type->tensor().sizes.emplace_back(s);
    recorder_.bind(fake, node, real.device());
    auto* vt = make<TensorVT>(nb::steal(python::wrapTensor(fake)));
    vt->real = grad;
    result = vt;
  }
  grads_[t] = result;
  return result;
}

void Tracer::storeGrad(TensorVT* t, VT* value) {
  if (!t->real.is_valid() || !t->identityGuarded)
    throw Unsupported{"assigning Tensor.grad of a tensor that is not a guarded object from outside "
                      "the frame (a parameter)"};
  if (value->kind != VT::Kind::Tensor && !(value->kind == VT::Kind::Constant &&
                                           static_cast<ConstantVT*>(value)->value.is_none()))
    throw TraceError{"TypeError: assigned grad expected to be a Tensor or None"};
  recordStore(SideEffect::Kind::Attr, t->real, "grad", value);
}

bool Tracer::guardIdentity(TensorVT* t) {
  if (t->identityGuarded) return true;
  if (!t->real.is_valid() || !t->source) return false;
  t->source->guardNode(*guards_).checkId(t->real.ptr());
  t->identityGuarded = true;
  return true;
}

VT* Tracer::keyVT(nb::handle key) {
  if (!python::isTensor(key.ptr())) return constant(nb::borrow(key));
  VT* v = wrap(key, nullptr);
  if (v->kind == VT::Kind::Tensor) static_cast<TensorVT*>(v)->identityGuarded = true;
  return v;
}

VT* Tracer::wrapResult(nb::handle value) {
  PyObject* o = value.ptr();
  if (VT* a = wrapTracedArray(value)) return a;
  if (VT* n = wrapTracedNumber(value)) return n;
  if (python::isSparseTensor(o)) throw Unsupported{kSparseTensorReason};
  if (python::isTensor(o)) {
    const Tensor& t = python::unwrapTensor(o);
    if (!t.isMeta()) return wrapTensor(value, nullptr, false, "_tensor_constant");
    if (!recorder_.nodeOf(t))
      throw Unsupported{"internal: an op returned a tensor that is not part of the graph"};
    return make<TensorVT>(nb::borrow(value));
  }
  // (PyLong_Check: int subclasses too, such as the SizeInts of traces over size symbols.)
  if (isPlainConstant(o) || PyLong_Check(o) || PySlice_Check(o) || PyRange_Check(o) ||
      python::isDtypeObject(o) || isSize(o) || isDevice(o) || PyType_Check(o))
    return constant(nb::borrow(value));
  if (PyTuple_Check(o) || PyList_Check(o)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
    VTs items;
    for (Py_ssize_t i = 0; i < n; ++i)
      items.push_back(wrapResult(PySequence_Fast_GET_ITEM(o, i)));
    auto* s = make<SequenceVT>(PyList_Check(o) ? VT::Kind::List : VT::Kind::Tuple, items);
    if (PyTuple_Check(o) && !PyTuple_CheckExact(o))
      s->namedType = nb::borrow(reinterpret_cast<PyObject*>(Py_TYPE(o)));
    return s;
  }
  if (PyDict_Check(o)) {
    auto* d = make<DictVT>();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(o, &pos, &k, &v))
      d->entries.emplace_back(nb::borrow(k), wrapResult(v));
    return d;
  }
  if (isNnModule(value)) return make<ModuleVT>(nb::borrow(value));
  if (PyFunction_Check(o)) return make<FunctionVT>(nb::borrow(value));
  return make<ObjectVT>(nb::borrow(value));
}

nb::object Tracer::toPython(VT* v) {
  switch (v->kind) {
  case VT::Kind::Constant: return static_cast<ConstantVT*>(v)->value;
  case VT::Kind::Tensor: return static_cast<TensorVT*>(v)->fake;
  case VT::Kind::Ndarray: return tracedArray(static_cast<NdarrayVT*>(v));
  case VT::Kind::Number: return tracedNumber(static_cast<NumberVT*>(v));
  case VT::Kind::List:
  case VT::Kind::Tuple: {
    auto* s = static_cast<SequenceVT*>(v);
    nb::list items;
    for (VT* x : s->items)
      items.append(toPython(x));
    if (v->kind == VT::Kind::List) return items;
    nb::object t = nb::tuple(items);
    if (s->namedType.is_valid()) {
      if (PyObject_HasAttrString(s->namedType.ptr(), "_make")) return s->namedType.attr("_make")(t);
      return s->namedType(t);
    }
    return t;
  }
  case VT::Kind::Dict: {
    nb::dict d;
    for (auto& [k, x] : static_cast<DictVT*>(v)->entries)
      d[k] = toPython(x);
    if (static_cast<DictVT*>(v)->madeType.is_valid()) return static_cast<DictVT*>(v)->madeType(d);
    return d;
  }
  case VT::Kind::Iterator: {
    auto* it = static_cast<IteratorVT*>(v);
    nb::list items;
    for (size_t i = it->next; i < it->items.size(); ++i)
      items.append(toPython(it->items[i]));
    it->next = it->items.size();
    return nb::iter(items);
  }
  case VT::Kind::Function: return static_cast<FunctionVT*>(v)->fn;
  case VT::Kind::Set: return nb::steal(PySet_New(static_cast<SetVT*>(v)->set.ptr()));
  case VT::Kind::Module: return static_cast<ModuleVT*>(v)->module;
  case VT::Kind::Object: return static_cast<ObjectVT*>(v)->object;
  case VT::Kind::Method: {
    auto* m = static_cast<MethodVT*>(v);
    return toPython(m->self).attr(m->name.c_str());
  }
  case VT::Kind::Format:
    throw Unsupported{"an f-string of a tensor passed to a library function (its text is data)"};
  default:
    throw Unsupported{"passing a function defined inside the compiled code (or an internal value) "
                      "to a library function"};
  }
}

// as_strided(x, size, stride, storage_offset) counts the offset from the start of x's storage.
// The fakes of the frame's tensors start at offset 0 (so that diagonal() of a slice records an
// offset relative to the slice, which the compiled code adds the slice's own to), so an explicit
// offset into a tensor that is a slice of a larger storage would be read relative to the slice:
// such a call runs eagerly instead.
void Tracer::checkAsStridedOffset(nb::handle fn, nb::handle args, nb::handle kwargs) const {
  if (offsetStorages_.empty() || !nb::hasattr(fn, "__name__")) return;
  if (nb::cast<std::string>(fn.attr("__name__")) != "as_strided") return;
  nb::list a = nb::borrow<nb::list>(args);
  nb::dict kw = nb::borrow<nb::dict>(kwargs);
  bool method = nb::hasattr(fn, "__self__") && python::isTensor(fn.attr("__self__").ptr());
  nb::object self = method ? nb::object(fn.attr("__self__")) : a.size() > 0 ? nb::object(a[0]) : nb::object();
  size_t offsetPosition = method ? 2 : 3;
  bool offsetGiven = (a.size() > offsetPosition && !a[offsetPosition].is_none()) ||
                     (kw.contains("storage_offset") && !nb::object(kw["storage_offset"]).is_none());
  if (!self.is_valid() || !python::isTensor(self.ptr()) || !offsetGiven) return;
  const Tensor& t = python::unwrapTensor(self.ptr());
  if (offsetStorages_.count(t.storage().get()))
    throw Unsupported{"as_strided with a storage_offset into a tensor that is a slice of a larger "
                      "storage (the offset counts from the storage's start: it runs eagerly)"};
}

// One of kiln.func's autograd steps (kiln._compiling.transform_step): run for real, the engine's
// backward ops it runs are recorded like any others.
static bool isTransformStep(nb::handle fn) {
  static nb::handle isStep = nb::object(nb::module_::import_("kiln._compiling").attr("is_transform_step")).release();
  return PyObject_IsTrue(isStep(fn).ptr()) == 1;
}

namespace {

bool holdsNumber(const VT* v) {
  if (v->kind == VT::Kind::Number) return true;
  if (v->kind == VT::Kind::List || v->kind == VT::Kind::Tuple)
    for (VT* x : static_cast<const SequenceVT*>(v)->items)
      if (holdsNumber(x)) return true;
  if (v->kind == VT::Kind::Dict)
    for (auto& e : static_cast<const DictVT*>(v)->entries)
      if (holdsNumber(e.second)) return true;
  return false;
}

} // namespace

// A dynamic number reaches only kiln._traced_numbers' own code and the unary operators (which
// call its methods): library code run for real would see a TracedNumber where it tests for an int
// or a float (`isinstance(p, float)`) and could take another branch than eager code. Anything else
// makes the trace fail, and the number stays a constant (frame_callback._number_inputs).
void Tracer::checkNumberArguments(nb::handle fn, const VTs& args, const Kwargs& kwargs) const {
  bool any = false;
  for (VT* a : args)
    any = any || holdsNumber(a);
  for (auto& kv : kwargs)
    any = any || holdsNumber(kv.second);
  if (!any) return;
  static nb::handle op = nb::module_::import_("operator").release();
  static nb::handle builtins = nb::module_::import_("builtins").release();
  for (const char* name : {"neg", "pos", "abs"})
    if (fn.ptr() == op.attr(name).ptr()) return;
  if (fn.ptr() == builtins.attr("abs").ptr()) return;
  nb::object module = nb::getattr(fn, "__module__", nb::none());
  if (!module.is_none() && nb::cast<std::string>(nb::str(module)) == "kiln._traced_numbers") return;
  throw Unsupported{"a dynamic number passed to " + nb::cast<std::string>(nb::repr(fn)) +
                    " (its value is specialized)"};
}

VT* Tracer::callReal(nb::handle fn, const VTs& args, const Kwargs& kwargs) {
  static nb::handle autogradGrad = nb::object(nb::module_::import_("kiln.autograd").attr("grad")).release();
  static nb::handle builtinNext = nb::object(nb::module_::import_("builtins").attr("next")).release();
  if (fn.ptr() == autogradGrad.ptr()) {
    // As torch.compile (trace_autograd_ops off): a graph break, the backward runs eagerly
    // between the graph before it and the resume function's, through the graphs' own backward.
    // Except with create_graph=True (a gradient penalty): a compiled graph's backward is not
    // differentiable itself, so the double backward is traced, as before, unless an input
    // carries history from before the graph (traced on the fakes, the backward would stop at
    // the graph's inputs, losing the part of the gradient that flows through it). Also traced:
    // a gradient with respect to a value the graph computes (`h = x * 3; grad(y, h)`): the graph
    // before the break returns h and y as outputs of one autograd node, so the backward run
    // eagerly could not stop at h ("not used in the graph"; torch.compile fails so too).
    bool createGraph = false;
    VT* inputs = args.size() > 1 ? args[1] : nullptr;
    for (auto& [k, v] : kwargs) {
      if (k == "create_graph" && v->kind == VT::Kind::Constant)
        createGraph = PyObject_IsTrue(static_cast<ConstantVT*>(v)->value.ptr()) == 1;
      if (k == "inputs") inputs = v;
    }
    bool ofGraphValue = false;
    auto computed = [&](VT* x) {
      if (x && x->kind == VT::Kind::Tensor)
        ofGraphValue |= !autograd::isLeaf(python::unwrapTensor(static_cast<TensorVT*>(x)->fake.ptr()));
    };
    computed(inputs);
    if (inputs && (inputs->kind == VT::Kind::List || inputs->kind == VT::Kind::Tuple))
      for (VT* x : static_cast<SequenceVT*>(inputs)->items)
        computed(x);
    if ((!createGraph && !ofGraphValue) || historyInputs_)
      throw Unsupported{"kiln.autograd.grad (it runs eagerly between graphs, as with torch.compile)"};
  }
  checkNumberArguments(fn, args, kwargs);
  nb::list pyArgs;
  for (VT* a : args)
    pyArgs.append(toPython(a));
  nb::dict pyKwargs;
  for (auto& [k, v] : kwargs)
    pyKwargs[k.c_str()] = toPython(v);
  checkAsStridedOffset(fn, pyArgs, pyKwargs);
  std::unordered_set<PyObject*> leavesBefore; // arguments that are grad leaves already
  auto noteLeaf = [&](PyObject* t) {
    if (isGradLeaf(t)) leavesBefore.insert(t);
  };
  for (nb::handle a : pyArgs)
    forEachTensor(a.ptr(), noteLeaf);
  if (nb::hasattr(fn, "__self__")) // a tensor method: its tensor is an argument too
    forEachTensor(nb::getattr(fn, "__self__").ptr(), noteLeaf);
  for (auto [k, v] : pyKwargs)
    forEachTensor(v.ptr(), noteLeaf);
  recorder_.location = location();
  nb::object result;
  {
    compiler::OpRecorder::Scope scope(recorder_);
    PyObject* r = PyObject_Call(fn.ptr(), nb::tuple(pyArgs).ptr(), pyKwargs.ptr());
    if (!r) {
      nb::python_error e;
      std::string what = e.what();
      // The backward reached a tensor made inside a composite op recorded as one node (linear's
      // transposed weight): trace the frame again with composites recorded as their parts.
      if ((fn.ptr() == autogradGrad.ptr() || isTransformStep(fn)) && !recorder_.decomposeOpsWithoutFormula &&
          what.find("meta tensor that is not part of the graph") != std::string::npos)
        throw RetraceDecomposed{};
      bool dataDependent = e.matches(PyExc_NotImplementedError) ||
                           what.find("meta") != std::string::npos || what.find("Meta") != std::string::npos ||
                           what.find("data-dependent") != std::string::npos;
      std::string message = nb::cast<std::string>(nb::str(e.value()));
      std::string type = Py_TYPE(e.value().ptr())->tp_name;
      if (dataDependent) throw Unsupported{type + ": " + message};
      // Run on fakes, the call may fail where the real one would not: an `except` clause of the
      // traced code does not handle it (a graph break there instead, tracing would take the
      // handler's path where eager code may not).
      TraceError error{type + ": " + message};
      error.catchable = false;
      throw error;
    }
    result = nb::steal(r);
  }
  // The engine (autograd.grad, backward) restores grad mode when it returns, after the last op
  // it recorded: the graph must switch it back too, else the frame ends with the mode the
  // backward ran under and the call leaves grad mode off for the caller.
  recorder_.beforeRecord();
  // A leaf that requires grad made by the call (a factory with requires_grad=True, or
  // requires_grad_() on a value of the graph): the graph's output would be a plain tensor
  // without that flag, so gradients would silently not reach it. As TorchDynamo, a break.
  forEachTensor(result.ptr(), [&](PyObject* t) {
    // next() hands back what an iterator yields, not a tensor it made: a module's parameter
    // from `next(model.parameters())` (init_hidden's weight.new_zeros idiom) is a leaf already.
    // A function transform's own inputs (kiln.func's aliases of the arguments it differentiates)
    // stay inside the transform: its outputs are released from them.
    bool existing = fn.ptr() == builtinNext.ptr();
    if (isGradLeaf(t) && !leavesBefore.count(t) && !existing && !isTransformStep(fn))
      throw Unsupported{"a tensor made in the graph that requires grad (a factory function with "
                        "requires_grad=True, or requires_grad_() on a graph value or input)"};
  });
  return wrapResult(result);
}

void Tracer::setGradMode(bool on) {
  if (on == gradMode_) return;
  Node* n = graph_.callFunction("kiln._C._set_grad_enabled", {Argument(on)});
  n->meta.loc = location();
  GradMode::setEnabled(on);
  gradMode_ = on;
}

nb::object Tracer::deviceOf(TensorVT* t) {
  Device d = recorder_.deviceOf(python::unwrapTensor(t->fake.ptr()));
  return nb::steal(python::deviceObject(d));
}

void Tracer::registerModule(nb::handle module, const std::string& path, const SourcePtr& source) {
  // kiln's own modules run for real: their parameters become get_attr nodes named by path,
  // and their mode (training) is guarded for them and every submodule.
  nb::object named = module.attr("named_parameters")();
  std::string prefix = path.empty() ? "" : path + ".";
  for (nb::handle item : named) {
    nb::object p = item[1];
    knownParams_[python::unwrapTensor(p.ptr()).impl()] = {prefix + nb::cast<std::string>(item[0]), nb::borrow(p)};
  }
  for (nb::handle item : module.attr("named_buffers")()) {
    nb::object b = item[1];
    knownParams_[python::unwrapTensor(b.ptr()).impl()] = {prefix + nb::cast<std::string>(item[0]), nb::borrow(b)};
  }
  if (!source) return;
  guardTraining(module, source);
}

void Tracer::guardTraining(nb::handle module, const SourcePtr& source) {
  PyObject** dictPtr = _PyObject_GetDictPtr(module.ptr());
  if (!dictPtr || !*dictPtr) return;
  // (Not for a kiln module that never reads its flag: a Linear traced in training mode serves
  // eval mode too, as with TorchDynamo, which guards the flag only where the code reads it.)
  static nb::handle independent =
      nb::object(nb::module_::import_("kiln._compiling").attr("mode_independent")).release();
  if (PyObject* training = PyDict_GetItemString(*dictPtr, "training"))
    if (!nb::cast<bool>(independent(nb::handle(reinterpret_cast<PyObject*>(Py_TYPE(module.ptr()))))))
      attrSource(source, "training")->guardNode(*guards_).checkConst(training);
  PyObject* subs = PyDict_GetItemString(*dictPtr, "_modules");
  if (!subs || !PyDict_Check(subs)) return;
  PyObject *k, *v;
  Py_ssize_t pos = 0;
  while (PyDict_Next(subs, &pos, &k, &v)) {
    if (v == Py_None) continue;
    SourcePtr s = itemSource(attrSource(source, "_modules"), nb::borrow(k));
    s->guardNode(*guards_).checkId(v);
    guardTraining(v, s);
  }
}

} // namespace kiln::capture
