// Variable trackers: what the symbolic interpreter knows about each Python value while it
// traces a frame (Dynamo's VariableTracker), and Sources: where a value from outside the frame
// came from, so guards can re-check it on later calls.
#pragma once
#include <Python.h>
#include <nanobind/nanobind.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "frontend/capture/GuardTree.h"
#include "runtime/Device.h"
#include "runtime/ScalarType.h"

namespace kiln::capture {

namespace nb = nanobind;

// A path from the frame to a value: L['x'], L['d']['a'], G['w'], C['model']._modules['0'] ...
struct Source {
  enum class Kind { Local, Closure, Global, Item, Attr, FuncGlobal, FuncClosure, FuncDefault, IterItem };
  Kind kind;
  int index = 0;     // Local / Closure / FuncClosure / FuncDefault / IterItem (the item left)
  std::string name;  // Local / Closure / Global / Attr / FuncGlobal
  nb::object key;    // Item
  std::shared_ptr<const Source> parent;

  // Rooted at a frame argument (its values can be read by the glue from the arguments).
  bool isArgument() const;
  // A Python expression over the frame's argument names (only for isArgument() sources).
  std::string expr() const;
  // A readable identifier for graph names: "d_b_0", "model_0_weight".
  std::string identifier() const;
  GuardNode& guardNode(GuardTree& tree) const;
};
using SourcePtr = std::shared_ptr<const Source>;

SourcePtr localSource(int index, std::string name);
SourcePtr closureSource(int index, std::string name);
SourcePtr globalSource(std::string name);
SourcePtr itemSource(SourcePtr parent, nb::object key);
SourcePtr attrSource(SourcePtr parent, std::string name);
SourcePtr funcGlobalSource(SourcePtr fn, std::string name);
SourcePtr funcClosureSource(SourcePtr fn, int index);
SourcePtr iterItemSource(SourcePtr iterator, int index); // of a list/tuple iterator
// A frame argument's name as the glue spells it: a comprehension's `.0` is `__dot0`
// (glue.argument_names makes the same change).
std::string argumentName(const std::string& name);

struct VT;
using VTs = std::vector<VT*>;

struct VT {
  enum class Kind {
    Null,        // the NULL PUSH_NULL / LOAD_GLOBAL push below a callable
    Constant,    // an immutable Python value: None, bool, int, float, str, tuple, dtype, Size...
    Tensor,      // a tensor: its fake (meta) kiln.Tensor stands for it in the graph
    List,
    Tuple,
    Dict,
    Iterator,    // over materialized items
    Function,    // a Python function (user code: inlined)
    NestedFunction, // made by MAKE_FUNCTION while tracing
    Cell,        // a cell made by MAKE_CELL while tracing
    RealCell,    // a closure cell of a real function
    Module,      // an nn.Module
    Object,      // any other Python object (builtins, kiln functions, classes, modules, ...)
    NewObject,   // an instance of a user class made while tracing (its attributes are tracked)
    Set,         // a set of constants made while tracing
    Method,      // self.name, bound lazily
    Super,       // super() in a method
    GradMode,    // kiln.no_grad() & co: a context manager setting grad mode
    GradModeExit,
    Autocast,    // an effective kiln.autocast(): a context manager switching autocast
    AutocastExit,
    Format,      // an f-string of a tensor, formatted after the graph (its text is data)
    Ndarray,     // a NumPy array (or scalar) computed in the graph: a tensor with NumPy's rules
    Number,      // a Python int or float that is a graph value (automatic dynamic numbers)
    Partial,     // functools.partial(f, ...) made while tracing
    GeneratorContext,     // a @contextlib.contextmanager function's call, not yet entered
    UserContextExit,      // a user context manager's exit while its `with` block runs
    Exception,            // an exception the traced code made or raised (caught by an `except`)
  };
  explicit VT(Kind k) : kind(k) {}
  virtual ~VT() = default;
  Kind kind;
  SourcePtr source; // set for values that came from outside the traced code
};

struct ConstantVT : VT {
  explicit ConstantVT(nb::object v) : VT(Kind::Constant), value(std::move(v)) {}
  nb::object value;
};

struct TensorVT : VT {
  explicit TensorVT(nb::object f) : VT(Kind::Tensor), fake(std::move(f)) {}
  nb::object fake; // a kiln.Tensor on the meta device
  // A tensor from outside the frame: the real object (its .grad is read for real; it may key
  // a dict), and whether a guard pins its identity (only then may a trace rely on it as a key).
  nb::object real;
  bool identityGuarded = false;
};

struct SequenceVT : VT {
  SequenceVT(Kind k, VTs xs) : VT(k), items(std::move(xs)) {}
  VTs items;
  nb::object namedType; // a named tuple / structseq type, or null
  nb::object original;  // the object it was made from, for inputs
  bool mutated = false;
};

struct DictVT : VT {
  DictVT() : VT(Kind::Dict) {}
  // Keys are constants or (an optimizer's state) real tensors, compared by identity; in
  // insertion order.
  std::vector<std::pair<nb::object, VT*>> entries;
  nb::object original; // the object it was made from, for inputs
  nb::object defaultFactory; // a defaultdict's default_factory (null: a dict or OrderedDict)
  // The dict's class when one made while tracing is not a plain dict (OrderedDict()); null: dict.
  nb::object madeType;
  bool mutated = false;
  int find(PyObject* key) const; // -1 when absent; raises on unhashable keys
};

struct IteratorVT : VT {
  explicit IteratorVT(VTs xs) : VT(Kind::Iterator), items(std::move(xs)) {}
  VTs items;
  size_t next = 0;
  bool libraryGenerator = false; // made by one of kiln's generator functions (Module.parameters())
};

struct FunctionVT : VT {
  explicit FunctionVT(nb::object f) : VT(Kind::Function), fn(std::move(f)) {}
  nb::object fn; // a PyFunctionObject
};

struct CellVT : VT {
  CellVT() : VT(Kind::Cell) {}
  VT* contents = nullptr; // null: empty cell
};

struct RealCellVT : VT {
  explicit RealCellVT(nb::object c) : VT(Kind::RealCell), cell(std::move(c)) {}
  nb::object cell;
  VT* contents = nullptr; // wrapped on first read
};

using GlobalSourceFn = std::function<std::shared_ptr<const Source>(const std::string&)>;
using Kwargs = std::vector<std::pair<std::string, VT*>>;

// functools.partial(func, *args, **kwargs) made while tracing: calling it calls func with the
// bound arguments first (and the call's keywords over the bound ones), as partial.__call__.
struct PartialVT : VT {
  PartialVT(VT* f, VTs a, Kwargs k) : VT(Kind::Partial), func(f), args(std::move(a)), kwargs(std::move(k)) {}
  VT* func;
  VTs args;
  Kwargs kwargs;
};

struct NestedFunctionVT : VT {
  NestedFunctionVT() : VT(Kind::NestedFunction) {}
  nb::object code;
  nb::object globals;     // the defining frame's globals dict
  VTs defaults;           // positional defaults
  VT* kwdefaults = nullptr; // DictVT or null
  VTs closure;            // CellVT / RealCellVT per free variable
  // How the defining frame reaches its globals (for guards on globals read by this function).
  GlobalSourceFn globalSourceFor;
};

struct ModuleVT : VT {
  explicit ModuleVT(nb::object m) : VT(Kind::Module), module(std::move(m)) {}
  nb::object module;
  std::string path; // for graph names: "model.0"
  // Made while tracing (`nn.Unfold(2)(x)`): a stateless kiln module, one object the trace calls;
  // it may not leave the trace (each eager call makes a new one).
  bool madeWhileTracing = false;
};

struct ObjectVT : VT {
  explicit ObjectVT(nb::object o) : VT(Kind::Object), object(std::move(o)) {}
  nb::object object;
};

struct NewObjectVT : VT {
  explicit NewObjectVT(nb::object c) : VT(Kind::NewObject), cls(std::move(c)) {}
  nb::object cls;
  std::vector<std::pair<std::string, VT*>> attrs;
  VT* find(const std::string& name) const {
    for (auto& [k, v] : attrs)
      if (k == name) return v;
    return nullptr;
  }
};

struct SetVT : VT {
  explicit SetVT(nb::object s) : VT(Kind::Set), set(std::move(s)) {}
  nb::object set; // a real set of constants, private to the trace
  // A copy of a set from outside (its contents guarded): mutating it is not traced, and where it
  // leaves the trace it is the original object again.
  bool fromOutside = false;
  nb::object original;
};

struct MethodVT : VT {
  MethodVT(VT* s, std::string n) : VT(Kind::Method), self(s), name(std::move(n)) {}
  VT* self;
  std::string name;
  nb::object function; // set when bound to a specific function (super().name): inlined with self
};

// super() inside a method: attribute lookups start after `cls` in self's MRO.
struct SuperVT : VT {
  SuperVT(VT* s, nb::object c) : VT(Kind::Super), self(s), cls(std::move(c)) {}
  VT* self;
  nb::object cls;
};

struct GradModeVT : VT {
  explicit GradModeVT(bool on) : VT(Kind::GradMode), enabled(on) {}
  bool enabled;
  std::optional<bool> previous; // set_grad_enabled(m) already switched; `with` restores this
};

// `with f(args):` over a @contextlib.contextmanager generator function f (traced, as TorchDynamo
// does): entering runs f's frame to its yield, whose value the `with` binds; the block's end
// runs the rest of the suspended frame.
struct GeneratorContextVT : VT {
  GeneratorContextVT(VT* f, VTs a, Kwargs k)
      : VT(Kind::GeneratorContext), func(f), args(std::move(a)), kwargs(std::move(k)) {}
  VT* func; // the generator function (a FunctionVT)
  VTs args;
  Kwargs kwargs;
};

class InstructionTranslator;

// The exit of a `with` block over a user context manager: a @contextmanager's generator frame
// suspended at its yield, or a user class's bound __exit__. While the block of one entered by
// the top frame runs, a graph break inside it is a break at the `with` (Tracer::userWiths).
struct UserContextExitVT : VT {
  UserContextExitVT(std::shared_ptr<InstructionTranslator> g, VT* e, bool top)
      : VT(Kind::UserContextExit), generator(std::move(g)), exit(e), topFrame(top) {}
  std::shared_ptr<InstructionTranslator> generator; // suspended at its yield, or null
  VT* exit;                                         // the bound __exit__, or null
  bool topFrame;                                    // entered by the top frame
  bool done = false;
};

struct GradModeExitVT : VT {
  explicit GradModeExitVT(bool prev) : VT(Kind::GradModeExit), restore(prev) {}
  bool restore;
};

// kiln.autocast(...) that takes effect: entered, it switches the thread's autocast state while
// tracing, so the ops traced in the block record their casts (runtime/Autocast.h).
struct AutocastVT : VT {
  AutocastVT(DeviceType d, bool on, ScalarType t, bool cache)
      : VT(Kind::Autocast), device(d), enabled(on), dtype(t), cacheEnabled(cache) {}
  DeviceType device;
  bool enabled;
  ScalarType dtype;
  bool cacheEnabled;
};

struct AutocastExitVT : VT {
  explicit AutocastExitVT(uint32_t prev) : VT(Kind::AutocastExit), restore(prev) {}
  uint32_t restore; // autocast::packedState() before the block
};

// A string formatted from tensors (`f"loss {loss:.4f}"`, `"{:.3f}".format(t)`): `format`, a
// str.format template, and its arguments, formatted where the value leaves the trace (after the
// graph has computed the tensors), as TorchDynamo's StringFormatVariable. str() and repr() of a
// tensor (`f"{t!r}"` too) stay graph breaks.
struct FormatVT : VT {
  FormatVT(std::string f, VTs a, Kwargs k = {})
      : VT(Kind::Format), format(std::move(f)), args(std::move(a)), kwargs(std::move(k)) {}
  std::string format;
  VTs args;
  Kwargs kwargs;
};

// A NumPy array inside traced code (`t.numpy()`, `np.asarray(t)`, NumPy functions of such
// arrays): its values are a graph tensor (`fake`); NumPy calls, methods and operators on it run
// kiln._traced_numpy (NumPy's dtype rules over kiln ops). Where it leaves the graph the glue makes
// it an ndarray again, or a NumPy scalar when `scalar` (what `a.sum()` gives).
struct NdarrayVT : VT {
  NdarrayVT(nb::object f, bool s) : VT(Kind::Ndarray), fake(std::move(f)), scalar(s) {}
  nb::object fake;
  bool scalar;
};

// A Python int or float that changes between calls, traced as a graph value (an argument made
// dynamic after a recompile, or arithmetic on one: kiln._traced_numbers): `fake` is a 0-d int64
// or float64 graph tensor, and operations on it follow Python's number rules. Where it leaves the
// graph the glue makes it a Python number again; `inputExpr` is the argument it is, if any.
struct NumberVT : VT {
  NumberVT(nb::object f, bool isF) : VT(Kind::Number), fake(std::move(f)), isFloat(isF) {}
  nb::object fake;
  bool isFloat;
  std::string inputExpr;
  nb::object hint; // an argument's value in the traced call
};

// Whether a value is or holds (in lists, tuples, dicts) a tensor (or an f-string of one).
bool containsTensor(const VT* v);

// Tracing cannot capture this construct; the frame runs eagerly (reason recorded).
struct Unsupported {
  std::string reason;
};
// The traced code itself raised (a user error): the frame runs eagerly this time, so the user
// sees the real exception.
struct TraceError {
  TraceError(std::string r, nb::object e = nb::object()) : reason(std::move(r)), exception(std::move(e)) {}
  std::string reason;
  nb::object exception; // the exception (or its class) when known, else its class is read from reason
  // False when no guard pins what raised it (an attribute missing from an object without a
  // source): an `except` clause does not handle it while tracing (a graph break there instead).
  bool catchable = true;
};

// An exception the traced code raised (for an `except` clause to match) or made to raise: its
// class, and the instance when the trace has it (a builtin exception made from constants).
// Nothing else of it is traced (str(e) and its attributes are a graph break).
struct ExceptionVT : VT {
  ExceptionVT(nb::object t, nb::object i, std::string r)
      : VT(Kind::Exception), type(std::move(t)), instance(std::move(i)), reason(std::move(r)) {}
  nb::object type, instance;
  std::string reason; // "KeyError: 'shift'", as a user error reports it
};
// A double backward traced on the fakes met a tensor a composite op (recorded as one node) made
// internally for autograd: the frame is traced again with composites decomposed (trace_frame).
struct RetraceDecomposed {};

} // namespace kiln::capture
