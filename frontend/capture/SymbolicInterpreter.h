// The symbolic bytecode interpreter (Dynamo's InstructionTranslator) for CPython 3.11-3.13: it runs a
// frame's bytecode over variable trackers instead of values. Tensor operations run for real on
// fake (meta) tensors while an OpRecorder turns every dispatched op into a graph node; Python
// control flow on constants, shapes and dtypes is evaluated (specialized) and guarded.
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include "compiler/OpRecorder.h"
#include "frontend/capture/Bytecode.h"
#include "frontend/capture/Variables.h"

namespace kiln::capture {

// State shared by the frames of one trace: the graph being built and what it depends on.
class Tracer {
public:
  Tracer(nb::handle func, nb::handle code, nb::handle args, nb::handle globals,
         nb::handle builtins);
  ~Tracer();

  template <typename T, typename... A> T* make(A&&... a) {
    auto p = std::make_unique<T>(std::forward<A>(a)...);
    T* raw = p.get();
    arena_.push_back(std::move(p));
    return raw;
  }

  // A value from outside the traced code, with the guards that keep it valid (no source: an
  // unguarded value, e.g. an attribute of a Python module). `path` names module parameters.
  VT* wrap(nb::handle value, SourcePtr source, bool viaModule = false,
           const std::string& path = "");
  // A value produced while tracing (by a real call on fakes): no guards.
  VT* wrapResult(nb::handle value);
  // A key of a dict from outside: a constant, or a tensor (whose identity the dict's keys guard
  // pins) as a variable of its own.
  VT* keyVT(nb::handle key);
  // Pins tensor t from outside the frame to its object (an identity guard on its source), so it
  // can key a dict: a parameter reached through an argument (`self.param_groups[0]["params"][0]`
  // in a compiled `opt.step`) is a graph input guarded by its metadata only. False when t has
  // no real object or no source to guard.
  bool guardIdentity(TensorVT* t);
  // The Python object a variable stands for while calling real code (tensors -> fakes, NumPy
  // arrays -> kiln._traced_numpy.TracedArray over their fakes).
  nb::object toPython(VT* v);
  // NumPy arrays (Numpy.cpp): the TracedArray real code is handed for one; the variable for a
  // TracedArray real code returned (nullptr: `value` is none); the glue's expression for one that
  // leaves the graph.
  nb::object tracedArray(NdarrayVT* a);
  VT* wrapTracedArray(nb::handle value);
  std::string ndarrayOutputExpr(NdarrayVT* a, std::vector<Node*>& outputs, nb::list& constants);
  // A NumPy array from outside the frame: a graph input (kiln.from_numpy of the argument at each
  // call, its metadata guarded), or a constant of the graph sharing its memory (a global);
  // nullptr for an array kiln cannot view (a dtype it lacks: an object like any other).
  VT* wrapNdarray(nb::handle value, const SourcePtr& source, bool viaModule);
  // Calls Python code for real on fakes, recording the ops it dispatches.
  VT* callReal(nb::handle fn, const VTs& args, const Kwargs& kwargs);
  GuardTree& guards() { return *guards_; }
  // Refuses (Unsupported) a call of other code than kiln._traced_numbers' with a dynamic number.
  void checkNumberArguments(nb::handle fn, const VTs& args, const Kwargs& kwargs) const;
  // Refuses (Unsupported) as_strided with an explicit offset into a slice of a larger storage.
  void checkAsStridedOffset(nb::handle fn, nb::handle args, nb::handle kwargs) const;
  VT* constant(nb::object v) { return make<ConstantVT>(std::move(v)); }
  VT* none() { return constant(nb::none()); }

  // `t.grad` of a tensor from outside: None, or the gradient as a graph input read at each call
  // (through the tensor: grads are new objects after every backward), guarded by its metadata.
  VT* loadGrad(TensorVT* t);
  // `t.grad = value`: replayed after the graph (setattr on the real tensor); later reads see it.
  void storeGrad(TensorVT* t, VT* value);

  // The grad mode traced code runs under (recorded as nodes when it changes).
  void setGradMode(bool on);
  bool gradMode() const { return gradMode_; }
  // The instruction being traced (for node locations and failure reports).
  void setPosition(nb::handle code, int instruction);
  SourceLoc location() const;
  // While an exception unwinds out of an inlined call: the caller's call instruction (innermost
  // caller first), so a failure reports its user stack; cleared when tracing goes on.
  void noteUnwoundCaller(nb::handle code, int instruction) {
    unwoundCallers_.emplace_back(nb::borrow(code), instruction);
  }
  // The logical device of a fake tensor (fakes live on meta).
  nb::object deviceOf(TensorVT* tensor);
  // A kiln module about to run for real: names its parameters, guards its training flags.
  void registerModule(nb::handle module, const std::string& path, const SourcePtr& source);
  // The variable a tensor from outside (a parameter, a buffer) was read as, or nullptr.
  VT* knownTensor(PyObject* real) const {
    auto it = byId_.find(real);
    return it == byId_.end() ? nullptr : it->second;
  }

  // Runs the top frame; returns the result dict of kiln._C._capture.trace_frame.
  nb::dict run();
  nb::dict failure(const char* kind, const std::string& reason);
  // Counts a start of the top frame's instruction `here`; true when the trace must stop there.
  bool visitRoot(int here, int op, int arg);

  int instructionBudget = 200000;
  int maxInlineDepth = 24;

  // Graph breaks (docs/capture.md). A first trace that fails records where the top frame was:
  // the instruction it was running and how many times it had started it (loops run one
  // instruction many times). trace_frame's caller then traces again with stopAt set to that
  // instruction and occurrence: the top frame stops *before* running it (so nothing the failing
  // instruction began, e.g. an inlined call's first ops, is in the graph) and `stopped` holds its
  // locals, stack and pending keyword names. `live` says which locals the code after the break
  // reads (the others are not rebuilt, so their tensors need not be graph outputs).
  struct RootPosition {
    int instruction = -1, occurrence = 0, op = 0, arg = 0;
  };
  // The top frame's `with` statements over user context managers whose block runs now
  // (outermost first), each where its BEFORE_WITH is: a failure inside one is reported there, so
  // the graph break is at the statement (the block cannot be resumed inside).
  std::vector<RootPosition> userWiths;
  struct StopState {
    VTs locals, stack;
    nb::object kwNames;
  };
  // Side effects on objects that existed before the frame: recorded while tracing, replayed by
  // the glue after the graph runs, in program order (a container's final contents at its
  // first mutation's place; attribute, global and closure-cell stores as they happened).
  struct SideEffect {
    enum class Kind { Container, Attr, Global, Cell, Call } kind;
    VT* container = nullptr; // Container
    nb::object object;       // Attr: the object; Global: the globals dict; Cell: the cell;
                             // Call: a callable of no arguments
    std::string name;        // Attr, Global
    VT* value = nullptr;
  };
  std::vector<SideEffect> sideEffects;
  void recordContainer(VT* container);
  bool replayed(VT* container) const;
  void recordStore(SideEffect::Kind kind, nb::handle object, const std::string& name, VT* value);
  // The value last stored while tracing (nullptr: none).
  VT* storedValue(SideEffect::Kind kind, PyObject* object, const std::string& name) const;
  // Whether an f-string of a tensor (a FormatVT, formatted by the glue) was made so far.
  bool madeFormat() const;
  // Whether the trace stored an attribute of `object`.
  bool hasStoredAttr(PyObject* object) const;

  RootPosition rootPosition;
  std::map<int64_t, int> symbolOfSize_; // a symbol's value in this trace -> its id
  // Per symbol id, an expression over the frame's arguments reading its size at each call
  // (`x.shape[0]`, of the first input dim bound to it): a size returned or handed to a resume
  // function is read from the inputs, not baked in as the traced value.
  std::map<int, std::string> symbolExpr_;
  // `v`'s expression over the arguments when it is a size computed from symbols (a SizeInt:
  // `x.shape[0] * 2`), else empty.
  std::string symbolicSizeExpr(PyObject* v) const;
  int stopAt = -1, stopOccurrence = 0;
  // Composite ops (no derivative formula of their own: linear, ...) recorded as their parts, so
  // that what autograd saved inside them is part of the graph (a traced double backward).
  void decomposeComposites() { recorder_.decomposeOpsWithoutFormula = true; }
  std::vector<bool> live;
  // Dynamic shapes (trace_frame options, docs/capture.md): per input expression, the sizes its
  // fake takes instead of the real tensor's (contiguous; a probe trace at other sizes), and the
  // size symbol of each dim (-1: static) its guard checks instead of the exact size.
  std::map<std::string, std::vector<int64_t>> probeSizes;
  std::map<std::string, std::vector<int>> dynamicDims;
  int64_t maxDynamicSize = 0;
  // Python floats read from the frame's arguments (their input expressions) that are graph
  // inputs rather than constants (trace_frame option `dynamic_floats`): an optimizer's lr that a
  // scheduler changes at every step. Each is a 0-d float64 tensor to the traced code; the glue
  // converts the float at each call, and its guard checks the type only.
  std::set<std::string> dynamicFloats;
  // Every float read from the frame's arguments: input expression -> value (the callback
  // compares them across compiles to find the floats that change).
  nb::dict floatsRead;
  // Likewise for ints (not bools), and the ints and floats of the frame's arguments that are
  // graph values rather than constants (trace_frame option `dynamic_numbers`: automatic dynamic
  // numbers, NumberVT), guarded by their type only.
  nb::dict intsRead;
  std::set<std::string> dynamicNumbers;
  // Tensors (by guard name, "L['lengths']") whose values changed between compiles (trace_frame
  // option `opaque_values`): kiln's library code does not read them while tracing (a graph
  // break there, as before, rather than a recompile for every new value).
  std::set<std::string> opaqueValues;
  // kiln._traced_numbers.TracedNumber for a NumberVT, and back.
  nb::object tracedNumber(NumberVT* n);
  VT* wrapTracedNumber(nb::handle value);
  // Sizes read from tensors (`x.shape`, `x.size()`) while tracing over size symbols: each
  // element equal to a symbol's value becomes a kiln.compiler.dynamic.SizeInt, which records
  // the comparisons the traced code makes on it (the symbol is then specialized).
  VT* tagSizes(VT* v);
  std::unique_ptr<StopState> stopped;
  std::unordered_map<int, int> rootVisits;

private:
  Node* placeholder(const std::string& hint);
  Node* getAttr(nb::handle tensor, const std::string& hint);
  VT* wrapTensor(nb::handle value, const SourcePtr& source, bool viaModule, const std::string& path);
  VT* wrapDynamicFloat(const SourcePtr& source, const std::string& expr);
  VT* wrapDynamicNumber(nb::handle value, const SourcePtr& source, const std::string& expr);
  std::string outputExpr(VT* v, std::vector<Node*>& outputs, nb::list& constants);
  nb::dict breakState(std::vector<Node*>& outputs, nb::list& constants);
  nb::list sideEffectLines(std::vector<Node*>& outputs, nb::list& constants);
  // New lists, dicts and sets the glue rebuilds get one name each (`__vN`, bound by `lets_` in
  // order), so two locals holding one list still hold one list after the glue.
  std::string memoized(VT* v, const std::string& expr);
  std::string originalExpr(VT* container, nb::handle original);
  std::unordered_map<VT*, std::string> memo_;
  std::vector<std::string> lets_;
  void guardTraining(nb::handle module, const SourcePtr& source);

  nb::object func_, code_, args_, globals_, builtins_;
  Graph graph_;
  compiler::OpRecorder recorder_;
  std::shared_ptr<GuardTree> guards_;
  std::vector<std::unique_ptr<VT>> arena_;
  nb::dict attrs_;                          // get_attr name -> real object
  std::unordered_map<PyObject*, VT*> byId_; // get_attr'd tensors, deduplicated
  std::unordered_map<const void*, std::pair<std::string, nb::object>> knownParams_;
  std::vector<std::string> inputExprs_;
  std::unordered_map<TensorVT*, VT*> grads_; // loadGrad's answers
  std::unordered_map<PyObject*, VT*> containers_; // lists and dicts from outside, by identity
  VT* wrapIterator(PyObject* o, const SourcePtr& source, bool viaModule);
  // Small integer tensors from outside (not parameters or buffers) whose values kiln's library
  // code may read while it runs on their fakes (a PackedSequence's lengths: they shape its
  // data): per fake, the real tensor and the guard node that pins the values once they are read
  // (null: a constant the graph holds itself), and the fake's version then (written in place by
  // the traced code, its values are no longer the real tensor's).
  struct ReadableValues {
    nb::object real;
    GuardNode* guard = nullptr;
    bool guarded = false;
    int64_t version = 0;
  };
  std::unordered_map<const void*, ReadableValues> readableValues_;
  void noteReadableValues(const Tensor& fake, nb::handle real, GuardNode* guard);
  Tensor valuesOf(const Tensor& fake);
  bool historyInputs_ = false; // an input tensor is a non-leaf that requires grad
  // The fakes' storages of tensors from outside whose data starts inside their storage (a
  // slice): fakes start at offset 0, so an explicit as_strided offset into one is refused.
  std::unordered_set<const void*> offsetStorages_;
  // Tensor inputs' placeholders and their expressions: an input handed on unchanged is the
  // argument itself, not a graph output (which AOT autograd makes an alias with its own grad_fn:
  // autograd.grad(y, (x, unused)) after the graph gave zeros for `unused`, not None).
  std::unordered_map<Node*, std::string> inputExprOf_;
  // Objects the input, output and side-effect expressions name as __c[i].
  nb::list constants_;
  std::string constantRef(nb::handle o);
  bool gradMode_, initialGradMode_;
  uint32_t initialAutocast_; // kiln.autocast's state when tracing began (restored at the end)
  nb::object failCode;
  int failInstruction = 0;
  std::vector<std::pair<nb::object, int>> unwoundCallers_;
  // [(filename, lineno, function, line)] from the top frame to the failing instruction.
  nb::list userStack() const;
};

// `obj.__module__` when it is a string, else "" (Calls.cpp).
std::string moduleOf(nb::handle obj);
inline bool startsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// A NumPy scalar of a dtype kiln has (np.float32(1.0), np.int64(3)): a frame argument that is one
// is a graph input (Numpy.cpp).
bool isNumpyScalar(nb::handle value);

// One frame being traced (the top frame or an inlined call).
class InstructionTranslator {
public:
  InstructionTranslator(Tracer& t, nb::handle code, nb::handle globals,
                        GlobalSourceFn globalSource, int depth);
  // Runs the frame from its first instruction with `locals` (localsplus, arguments first) and
  // the cells of its free variables; returns what it returns.
  VT* run(VTs locals, const VTs& closure);
  // A generator frame suspended at its yield (a @contextmanager's, see suspendInline_): runs
  // the rest of it; Unsupported when it yields again.
  void resumeToEnd();

private:
  void step(size_t here);
  // step(), with an exception the traced code raises inside one of this frame's try blocks
  // made a graph break (Unsupported) instead of a user error.
  void stepCatching(size_t here);
  VT* loadFast(int slot);
  void storeFast(int slot, VT* v);
  void pushCallable(VT* v, bool withNull);
  void callWithStack(int argc, nb::object kwNames);
  VT* makeSlice(const VTs& parts);
  void callIntrinsic1(int which);
  void setFunctionAttribute(NestedFunctionVT* f, int flag, VT* value);
  void jumpTo(size_t target);
  VT* pop();
  VT* top(int n = 1) { return stack_[stack_.size() - size_t(n)]; }
  void push(VT* v) { stack_.push_back(v); }
  VTs popN(int n);
  std::string localName(int index) const;
  static const char* kindName(VT* v);
  nb::object exceptionClasses(VT* v);

  // Values.
  bool truthy(VT* v);
  bool isNone(VT* v);
  bool isSame(VT* a, VT* b);
  nb::handle identityOf(VT* v);
  static bool allConstant(const VTs& xs);
  bool contains(VT* container, VT* item);
  nb::object constantValue(VT* v, const char* what);
  SequenceVT* listOf(VT* v);
  SetVT* setOf(VT* v);
  DictVT* dictOf(VT* v);
  void mutateList(SequenceVT* l);
  void mutateDict(DictVT* d);
  void dictSet(DictVT* d, VT* key, VT* value);
  nb::object dictKey(VT* key); // a constant, or a guarded tensor's real object
  VT* loadCell(VT* cell, int index);
  VT* loadGlobal(const std::string& name);
  VT* makeFunction(int flags);
  VT* formatValue(VT* v, int conversion, VT* spec);
  VT* buildString(const VTs& parts);

  // Operators (Attributes.cpp / InstructionTranslator.cpp).
  VT* applyOperator(const char* name, VTs args);
  VT* binaryOp(int nbOp, VT* a, VT* b);
  static bool isSequenceOf(VT* v, VT::Kind kind);
  VT* compareOp(int cmp, VT* a, VT* b);
  VT* compareNumber(int cmp, VT* a, VT* b);
  VT* loadAttr(VT* obj, const std::string& name);
  VT* loadClassAttr(VT* obj, nb::handle x, const std::string& name);
  VT* wrapSubmodule(ModuleVT* parent, nb::handle sub);
  void storeAttr(VT* obj, const std::string& name, VT* value);
  bool replayableStore(VT* obj, const std::string& name, VT* value);
  VT* getItem(VT* obj, VT* key);
  VT* tensorIndexKey(VT* key);
  void setItem(VT* obj, VT* key, VT* value);
  void setListSlice(SequenceVT* s, nb::handle slice, VT* value);
  void deleteItem(VT* obj, VT* key);
  VT* getIter(VT* v);
  VTs unpack(VT* v);

  // NumPy inside traced code (Numpy.cpp): a call that involves NumPy (a NumPy function, or a
  // builtin / kiln conversion of a traced array), or nullptr when `fn` is none of those.
  VT* callWithNumpy(VT* fn, VTs& args, Kwargs& kwargs);
  VT* callNumpy(nb::handle fn, VTs& args, Kwargs& kwargs);
  VT* tensorNumpy(TensorVT* t, const VTs& args, const Kwargs& kwargs); // t.numpy()
  VT* loadNdarrayAttr(NdarrayVT* a, const std::string& name);
  VT* callNdarrayMethod(NdarrayVT* a, const std::string& name, VTs args, Kwargs kwargs);

  // Calls (Calls.cpp).
  VT* call(VT* fn, VTs args, Kwargs kwargs);
  VT* callUserObject(VT* self, PyTypeObject* type, VTs& args, Kwargs& kwargs);
  VT* callMethod(MethodVT* m, VTs args, Kwargs kwargs);
  VT* callSequenceMethod(SequenceVT* s, const std::string& name, VTs& args, Kwargs& kwargs);
  VT* callDictMethod(DictVT* d, const std::string& name, VTs& args, Kwargs& kwargs);
  VT* callSetMethod(SetVT* s, const std::string& name, VTs& args);
  VT* construct(nb::handle cls, VTs args, Kwargs kwargs);
  // functools.partial: its type, and the arguments of a call through one (bound ones first, the
  // call's keywords over the bound).
  static PyTypeObject* partialType();
  static VTs boundArgs(const VTs& bound, VTs args);
  static Kwargs boundKwargs(const Kwargs& bound, Kwargs kwargs);
  // cls(*args, **kwargs) called for real, every argument a constant of the trace (`what` names them
  // in the error otherwise); a Python exception becomes a TraceError.
  nb::object constructFromConstants(nb::handle cls, const VTs& args, const Kwargs& kwargs, const char* what);
  VT* constructModule(nb::handle cls, const VTs& args, const Kwargs& kwargs);
  VT* constructNamedTuple(nb::handle cls, VTs args, Kwargs kwargs);
  VT* zeroArgSuper();
  VT* callBuiltin(nb::handle fn, VTs& args, Kwargs& kwargs, bool& handled);
  VT* callModule(ModuleVT* m, VTs args, Kwargs kwargs);
  void initializeLazyModule(ModuleVT* m, const VTs& args, const Kwargs& kwargs);
  VT* callHook(VT* hook, VTs args);
  bool replaysPrintOptions(VT* fn, const VTs& args, const Kwargs& kwargs);
  VT* callForward(ModuleVT* m, VTs args, Kwargs kwargs, bool hooked);
  DictVT* moduleHooks(ModuleVT* m, const char* table);
  bool storesItself(VT* obj, const std::string& name, VT* value);
  // traceLibrary: trace a kiln library function too instead of running it for real on fakes.
  VT* inlineFunction(FunctionVT* f, VTs args, Kwargs kwargs, bool traceLibrary = false);
  VT* inlineCall(nb::handle code, nb::handle globals, GlobalSourceFn globalSource, VTs closure,
                 VTs defaults, VT* kwdefaults, VTs args, Kwargs kwargs);

  Tracer& t_;
  nb::object code_, globals_;
  GlobalSourceFn globalSource_;
  int depth_;
  VTs locals_, closure_, stack_;
  DecodedCode bc_; // the code's instructions, one per code unit
  size_t pc_ = 0;
  bool returned_ = false;
  VT* result_ = nullptr;
  nb::object kwNames_;
  bool isGenerator_ = false;
  VTs yielded_;
  // Set just before inlining a @contextmanager's generator function: inlineCall runs the new
  // frame up to its first yield only and hands the suspended frame over here.
  std::shared_ptr<InstructionTranslator>* suspendInline_ = nullptr;
  bool suspendAtYield_ = false, suspended_ = false;
  VT* handledException_ = nullptr; // the exception an `except` clause of this frame handles now
  // The exception a TraceError stands for, or nullptr when its class is not known.
  VT* exceptionOf(const TraceError& e);
  void runLoop();
};

} // namespace kiln::capture
