// GuardTree: the checks a cached graph needs before it may run for a frame, as a tree of value
// accessors (frame local -> dict item -> ...) with checks on each value, evaluated in C++
// without calling back into Python (no __eq__, __getattr__ or __hash__ of user types runs).
#pragma once
#include <cstdint>
#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "runtime/Device.h"
#include "runtime/DimVector.h"
#include "runtime/ScalarType.h"

namespace kiln {
class Tensor;
}

namespace kiln::capture {

// What the checks read: a frame before its first instruction ran (locals hold the arguments).
struct FrameView {
  PyObject* const* locals = nullptr; // the frame's localsplus; arguments first
  PyObject* globals = nullptr;       // dict
  PyObject* builtins = nullptr;      // dict
  PyObject* closure = nullptr;       // the function's __closure__ tuple, or null
};

// An object whose hash and equality are its identity: a class whose metaclass keeps type's
// (einops keys its backends by tensor type), or an instance of a class that keeps object's (an
// nn.Module keying a cache: Whisper's kv-cache dict). It can key a guarded dict and is compared
// as `is`.
bool isIdentityKeyed(PyObject* o);

// A tensor's metadata as a guard compares it.
struct TensorCheck {
  PyTypeObject* type = nullptr; // exact Python type (kiln.Tensor, kiln.nn.Parameter, ...)
  ScalarType dtype;
  Device device;
  DimVector sizes, strides;
  bool requiresGrad = false;
  // Dynamic shapes: per dim, -1 for a static size (equal to sizes[d]) or the id of the size
  // symbol the dim is (empty: every dim static). A symbolic dim passes with any size in
  // [kMinDynamicSize, maxDynamicSize]; dims of one symbol (in this tensor or another checked
  // by the same tree: duck sizing) must have equal sizes. A tensor with a symbolic dim must be
  // contiguous (its strides follow its sizes) instead of having `strides`.
  std::vector<int> symbols;
  int64_t maxDynamicSize = 0;
};
// Sizes 0 and 1 are specialized (as in PyTorch): a size symbol stands for sizes >= 2.
inline constexpr int64_t kMinDynamicSize = 2;

// The values of `t` when it holds at most one dim of int64 or int32 on the CPU; false otherwise.
bool readIntValues(const Tensor& t, std::vector<int64_t>& out);

// A NumPy array's metadata as a guard compares it (read through the buffer protocol: its
// struct-module format, item size, shape and strides in bytes).
struct NdarrayCheck {
  std::string format;
  Py_ssize_t itemsize = 0;
  DimVector sizes, strides;
};

class GuardNode;

class GuardTree {
public:
  GuardTree();
  ~GuardTree();
  GuardTree(const GuardTree&) = delete;
  GuardTree& operator=(const GuardTree&) = delete;

  // Accessors from the frame. `name` is how the value prints: L['x'], G['w'], ...
  // Asking twice for the same accessor returns the same node.
  GuardNode& local(int index, const std::string& name);
  GuardNode& closureCell(int index, const std::string& name); // contents of __closure__[index]
  GuardNode& closureCellObject(int index, const std::string& name); // the cell __closure__[index]
  GuardNode& global(const std::string& name); // frame globals, else builtins (absent: fails)

  // Global state.
  void checkGradMode(bool enabled);
  // kiln.autocast's state (runtime/Autocast.h packedState): the casts traced into a graph
  // depend on it.
  void checkAutocast(uint32_t packed);
  // kiln.set_default_dtype's value: factories in the graph made their dtype from it.
  void checkDefaultDtype(ScalarType t);
  // kiln.set_default_device / `with kiln.device(...)`: factories in the graph made their device
  // from it (the value now is the one checked).
  void checkDefaultDevice();

  // True when every check passes. On failure, when failure is non-null, it gets the first
  // failing check, e.g. "L['x'].size()[0] == 8 (got 16)".
  bool check(const FrameView& frame, std::string* failure = nullptr) const;
  size_t numChecks() const;
  // One line per check (KILN_LOGS=guards).
  std::string str() const;
  // 1 + the highest local index read (0 when none): the frame must have that many slots.
  int numLocals() const;

private:
  std::unique_ptr<GuardNode> root_;
  int gradMode_ = -1; // -1: not checked
  int64_t autocast_ = -1; // -1: not checked
  int defaultDtype_ = -1; // -1: not checked
  int64_t defaultDevice_ = -1; // -1: not checked
};

class GuardNode {
public:
  // Child accessors (deduplicated, like the tree's).
  // dict, OrderedDict, defaultdict (str/int keys by value, tensor keys by identity), list/tuple
  // (int key)
  GuardNode& item(PyObject* key);
  GuardNode& attr(const std::string& name); // instance __dict__ entry (module dict for modules)
  GuardNode& funcGlobal(const std::string& name);  // function: __globals__[name], else builtins
  GuardNode& funcClosureCell(int index);           // function: __closure__[index] contents
  GuardNode& funcDefault(int index);               // function: __defaults__[index]
  // list_iterator / tuple_iterator (checkType first): the index-th item it has left
  GuardNode& iterItem(int index);

  void checkType(PyTypeObject* type);  // exact type
  void checkId(PyObject* object);      // the same object (a strong reference is kept)
  void checkConst(PyObject* value);    // same exact type and value: None, bool, int, float
                                       // (NaN equals NaN), str, bytes, and tuples of these
  void checkLength(Py_ssize_t n);      // list/tuple/dict length
  void checkIterRemaining(Py_ssize_t n); // list_iterator / tuple_iterator: n items left
  // range_iterator: the values it has left are next, next + step, ... (remaining of them)
  void checkRangeIter(long next, long step, long remaining);
  // An int (not a bool) with low <= value <= high: a dynamic int's bounds (it fits the graph's
  // int64, and the comparisons the traced code made on it keep their results).
  void checkIntRange(long low, long high);
  // A dict, OrderedDict or defaultdict (checkType tells them apart) with these keys, in order;
  // str/int keys compare by value, tensor keys by identity.
  void checkDictKeys(const std::vector<PyObject*>& keys);
  void checkTensor(const TensorCheck& t);
  void checkNdarray(const NdarrayCheck& a); // type checked separately (checkType)
  // The tensor's .grad: None (grad null) or a tensor matching *grad (its type not checked).
  void checkGrad(const TensorCheck* grad);
  // The values of a tensor of at most one dim of int64 or int32 on the CPU (after its
  // checkTensor): a graph specialized to them (a PackedSequence's lengths).
  void checkIntValues(const std::vector<int64_t>& values);

  const std::string& name() const;

private:
  friend class GuardTree;
  struct Impl;
  std::unique_ptr<Impl> impl_;
  GuardNode();
public:
  ~GuardNode();
};

} // namespace kiln::capture
