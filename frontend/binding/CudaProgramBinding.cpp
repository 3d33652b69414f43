// kiln._C._codegen.CudaCompiledProgram: a loop program compiled for a CUDA device and run on
// the current stream. Construction emits the CUDA program (codegen/CudaCodegen.h), compiles it
// with NVRTC for the device's architecture (compute capability from the driver; CUBINs cached
// on disk) and loads it; a call checks the inputs, evaluates the size symbols from them,
// allocates the outputs and interprets the launch list: allocations from the caching allocator,
// kernel launches, cuBLAS GEMMs, aliases, frees and device-to-device copies, all queued on the
// device's current stream (nothing waits for the GPU unless the program checks indirect indices).
//
// With `cuda_graphs` (kiln.compile(mode="reduce-overhead")) the launch list is captured once per
// set of size-symbol values as a CUDA graph over buffers of its own and then replayed: a call
// copies its inputs into the graph's input buffers, launches the graph (one driver call), copies
// inputs the program writes back, and returns the graph's output buffers. The outputs alias
// those buffers, so the next call of the same program at the same sizes overwrites them (as
// PyTorch's CUDA graphs): clone an output to keep it past the next call.
#include <cstdint>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>

#include <map>
#include <memory>
#include <set>
#include <vector>

#include "codegen/CudaCodegen.h"
#include "codegen/Nvrtc.h"
#include "frontend/binding/CudaCodegenBinding.h"
#include "frontend/binding/ProgramSignature.h"
#include "frontend/binding/PythonConvert.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"
#include "runtime/cuda/CudaBlas.h"
#include "runtime/cuda/CudaDevice.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/CudaGraph.h"
#include "runtime/cuda/CudaMemory.h"
#include "runtime/cuda/CudaModule.h"
#include "runtime/cuda/CudaTensorKernels.h"
#include "runtime/Dispatcher.h"

namespace nb = nanobind;

namespace kiln::python {
namespace {

using codegen::CudaAlias;
using codegen::CudaAlloc;
using codegen::CudaArg;
using codegen::CudaCopy;
using codegen::CudaFree;
using codegen::CudaGemm;
using codegen::CudaLaunch;

// struct KilnError of the CUDA prelude: {int set; int64_t index, size; char message[256]}.
struct DeviceKilnError {
  int set;
  int64_t index, size;
  char message[256];
};

std::vector<std::string> pythonPaths() {
  std::vector<std::string> dirs;
  for (nb::handle h : nb::module_::import_("sys").attr("path"))
    if (nb::isinstance<nb::str>(h)) dirs.push_back(nb::cast<std::string>(h));
  return dirs;
}

// Where the launch list's `alloc` steps get their memory and where `free` steps return it.
class StepMemory {
public:
  virtual ~StepMemory() = default;
  virtual void* allocate(const std::string& name, size_t bytes) = 0;
  virtual void free(const std::string& name) = 0;
};

// The device memory a call allocated and has not freed yet, freed when the call ends (a failed
// call included).
class CallMemory : public StepMemory {
public:
  explicit CallMemory(int device) : device_(device) {}
  ~CallMemory() override {
    for (auto& [name, ptr] : owned_) cuda::freeDeviceMemory(device_, ptr);
  }
  void* allocate(const std::string& name, size_t bytes) override {
    void* p = cuda::allocateDeviceMemory(device_, std::max<size_t>(bytes, 1));
    owned_.emplace_back(name, p);
    return p;
  }
  void free(const std::string& name) override {
    for (auto it = owned_.begin(); it != owned_.end(); ++it)
      if (it->first == name) {
        void* p = it->second;
        owned_.erase(it);
        cuda::freeDeviceMemory(device_, p);
        return;
      }
  }

private:
  int device_;
  std::vector<std::pair<std::string, void*>> owned_;
};

// A CUDA graph's memory: every `alloc` of the launch list reserved before the capture (a
// capturing thread may not allocate), handed out in order while it records, kept as long as the
// graph (its `free` steps free nothing: the replays use the same addresses).
class GraphMemory : public StepMemory {
public:
  explicit GraphMemory(int device) : device_(device) {}
  ~GraphMemory() override {
    for (auto& [name, ptr] : blocks_) cuda::freeDeviceMemory(device_, ptr);
  }
  void reserve(const std::string& name, size_t bytes) {
    blocks_.emplace_back(name, cuda::allocateDeviceMemory(device_, std::max<size_t>(bytes, 1)));
  }
  void* allocate(const std::string& name, size_t) override {
    KILN_CHECK(next_ < blocks_.size() && blocks_[next_].first == name,
               "CUDA graph capture: the launch list allocates %", name, " out of the reserved order");
    return blocks_[next_++].second;
  }
  void free(const std::string&) override {}

private:
  int device_;
  std::vector<std::pair<std::string, void*>> blocks_;
  size_t next_ = 0;
};

// One captured graph of a program at one set of size-symbol values, with the buffers it reads
// and writes at fixed addresses. (Members are destroyed last to first: the graph before its
// memory.)
struct GraphReplay {
  std::vector<Tensor> inputs, outputs;
  std::vector<size_t> inputBytes; // the extent copied in (and back, for inputs written)
  std::unique_ptr<GraphMemory> memory;
  void* error = nullptr; // the program's KilnError, or null
  cuda::CudaStream allocatedOn, lastLaunchedOn;
  std::unique_ptr<cuda::CudaGraph> graph;

  ~GraphReplay() {
    // The memory goes back to the pool of the stream it came from: work of a replay on another
    // stream must be finished first.
    if (graph && !(lastLaunchedOn == allocatedOn)) {
      try {
        cuda::synchronizeStream(lastLaunchedOn);
      } catch (...) {
      }
    }
  }
};

// The bytes from a strided tensor's first element to past its last one.
size_t extentBytes(const DimVector& sizes, const DimVector& strides, ScalarType dtype) {
  int64_t last = 0;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    last += (sizes[d] - 1) * strides[d];
  }
  return size_t(last + 1) * elementSize(dtype);
}

class CudaCompiledProgram {
public:
  CudaCompiledProgram(std::string_view programText, int device, const std::map<std::string, int64_t>& sizeHints,
                      const std::string& cacheDir, bool cudaGraphs)
      : device_(device), cudaGraphs_(cudaGraphs) {
    ProgramSignature sig = readProgramSignature(programText, "CudaCompiledProgram");
    const LoopProgram& p = sig.program;
    name_ = p.name;
    inputs_ = std::move(sig.inputs);
    outputs_ = std::move(sig.outputs);
    symbols_ = std::move(sig.symbols);
    // Inputs the program writes in place: a graph writes its own copy, which goes back after.
    for (const Buffer& b : p.buffers)
      if (b.writesInto())
        for (size_t i = 0; i < inputs_.size(); ++i)
          if (inputs_[i].name == p.storageRoot(b.name)) writtenInputs_.insert(i);
    codegen::CudaOptions options;
    options.sizeHints = sizeHints;
    program_ = codegen::emitCuda(p, options);
    cuda::CudaDeviceProperties props = cuda::deviceProperties(device_);
    arch_ = "sm_" + std::to_string(props.major * 10 + props.minor);
    searchDirs_ = pythonPaths();
    codegen::CachedCubin cubin = codegen::cubinFor(program_, arch_, cacheDir, searchDirs_);
    cacheHit_ = cubin.cacheHit;
    module_ = std::make_unique<cuda::CudaModule>(device_, cubin.cubin);
    for (const codegen::CudaStep& step : program_.steps)
      if (const auto* l = std::get_if<CudaLaunch>(&step); l && !kernels_.count(l->kernel))
        kernels_.emplace(l->kernel, module_->kernel(l->kernel));
  }

  nb::object call(nb::args args) {
    size_t n = args.size();
    if (n != inputs_.size())
      throw nb::type_error(("compiled CUDA program @" + name_ + " takes " + std::to_string(inputs_.size()) +
                            " tensor inputs, got " + std::to_string(n)).c_str());
    std::vector<const Tensor*> ins;
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = args[i].ptr();
      if (!isTensor(o))
        throw nb::type_error(("compiled CUDA program @" + name_ + ": input " + std::to_string(i) + " (%" +
                              inputs_[i].name + ") must be a Tensor, not " + Py_TYPE(o)->tp_name).c_str());
      ins.push_back(&unwrapTensor(o));
    }
    std::map<std::string, int64_t> values;
    for (const SymbolSource& s : symbols_)
      values[s.symbol] = symbolValue(s, *ins[s.input], inputs_, "compiled CUDA program", name_);
    checkInputs(ins, values);
    return cudaGraphs_ ? replay(ins, values) : runOnce(ins, values);
  }

  const std::string& name() const { return name_; }
  const std::string& arch() const { return arch_; }
  const std::string& source() const { return program_.source; }
  std::string launchList() const { return codegen::printLaunchList(program_); }
  bool cacheHit() const { return cacheHit_; }
  int device() const { return device_; }
  bool cudaGraphs() const { return cudaGraphs_; }
  size_t graphCount() const { return graphs_.size(); }

private:
  // The graphs kept per program (one per set of size-symbol values; the oldest goes first).
  static constexpr size_t kMaxGraphs = 8;

  // A call without a graph: fresh outputs, the launch list interpreted on the current stream.
  nb::object runOnce(const std::vector<const Tensor*>& ins, const std::map<std::string, int64_t>& values) const {
    std::map<std::string, void*> storage;
    for (size_t i = 0; i < ins.size(); ++i) storage[inputs_[i].name] = ins[i]->rawData();
    Device dev(DeviceType::CUDA, int8_t(device_));
    std::vector<Tensor> outs;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      outs.push_back(Tensor::empty(evaluated(outputs_[i].sizes, values), outputs_[i].dtype, dev));
      storage["output:" + std::to_string(i)] = outs.back().rawData();
      if (!program_.outputBuffers[i].empty()) storage[program_.outputBuffers[i]] = outs.back().rawData();
    }
    run(storage, values);
    return tupleOf(outs);
  }

  void checkInputs(const std::vector<const Tensor*>& ins, const std::map<std::string, int64_t>& values) const {
    for (size_t i = 0; i < ins.size(); ++i) {
      const Tensor& t = *ins[i];
      const TensorMeta& m = inputs_[i];
      KILN_CHECK(t.device().isCuda() && t.device().index == device_, "compiled CUDA program @", name_, ": input ",
                 i, " (%", m.name, ") is on ", t.device().str(), ", but the program was compiled for cuda:",
                 device_);
      DimVector sizes = evaluated(m.sizes, values), strides = evaluated(m.strides, values);
      KILN_CHECK(t.dtype() == m.dtype && t.sizes() == IntArrayRef(sizes) && sameLayout(t, sizes, strides),
                 "compiled CUDA program @", name_, ": input ", i, " (%", m.name, ") is ", scalarTypeName(t.dtype()),
                 shapeString(t.sizes()), " with strides ", shapeString(t.strides()),
                 ", but the program was compiled for ", scalarTypeName(m.dtype), shapeString(sizes), " with strides ",
                 shapeString(strides));
    }
  }

  static nb::object tupleOf(std::vector<Tensor>& outs) {
    PyObject* tuple = PyTuple_New(Py_ssize_t(outs.size()));
    if (tuple == nullptr) throw nb::python_error();
    for (size_t i = 0; i < outs.size(); ++i) PyTuple_SET_ITEM(tuple, Py_ssize_t(i), wrapTensor(std::move(outs[i])));
    return nb::steal(tuple);
  }

  // -- reduce-overhead: the first call at a set of sizes runs as usual (a warm-up: cuBLAS's
  // handle and anything else created lazily exist before a capture, which may not create them);
  // the second captures the graph; every later call replays it.
  nb::object replay(const std::vector<const Tensor*>& ins, const std::map<std::string, int64_t>& values) {
    std::vector<int64_t> key;
    for (const SymbolSource& s : symbols_) key.push_back(values.at(s.symbol));
    auto it = graphs_.find(key);
    if (it == graphs_.end()) {
      if (warmedUp_.insert(key).second) return runOnce(ins, values);
      if (graphs_.size() >= kMaxGraphs) {
        graphs_.erase(graphOrder_.front());
        graphOrder_.erase(graphOrder_.begin());
      }
      it = graphs_.emplace(key, capture(values)).first;
      graphOrder_.push_back(key);
    }
    GraphReplay& g = *it->second;
    cuda::CudaDeviceGuard guard(device_);
    cuda::CudaStream stream = cuda::currentStream(device_);
    for (size_t i = 0; i < ins.size(); ++i)
      if (ins[i]->rawData() != g.inputs[i].rawData())
        cuda::copyDeviceToDevice(g.inputs[i].rawData(), ins[i]->rawData(), g.inputBytes[i], stream);
    g.graph->launch(stream);
    g.lastLaunchedOn = stream;
    for (size_t i : writtenInputs_)
      if (ins[i]->rawData() != g.inputs[i].rawData())
        cuda::copyDeviceToDevice(ins[i]->rawData(), g.inputs[i].rawData(), g.inputBytes[i], stream);
    if (g.error) raiseIndexError(g.error, stream);
    // Fresh tensors over the graph's output buffers (a caller's metadata changes stay its own).
    std::vector<Tensor> outs;
    for (const Tensor& o : g.outputs) outs.push_back(o.asStrided(o.sizes(), o.strides(), o.storageOffset()));
    return tupleOf(outs);
  }

  // Buffers for every input, output and intermediate at these sizes, then the launch list
  // recorded on a pool stream (the default stream cannot be captured).
  std::unique_ptr<GraphReplay> capture(const std::map<std::string, int64_t>& values) const {
    auto g = std::make_unique<GraphReplay>();
    Device dev(DeviceType::CUDA, int8_t(device_));
    std::map<std::string, void*> storage;
    for (const TensorMeta& m : inputs_) {
      DimVector sizes = evaluated(m.sizes, values), strides = evaluated(m.strides, values);
      g->inputs.push_back(Tensor::emptyStrided(sizes, strides, m.dtype, dev));
      g->inputBytes.push_back(extentBytes(sizes, strides, m.dtype));
      storage[m.name] = g->inputs.back().rawData();
    }
    for (size_t i = 0; i < outputs_.size(); ++i) {
      g->outputs.push_back(Tensor::empty(evaluated(outputs_[i].sizes, values), outputs_[i].dtype, dev));
      storage["output:" + std::to_string(i)] = g->outputs.back().rawData();
      if (!program_.outputBuffers[i].empty()) storage[program_.outputBuffers[i]] = g->outputs.back().rawData();
    }
    g->memory = std::make_unique<GraphMemory>(device_);
    if (program_.usesErrors) {
      g->memory->reserve("kiln.error", sizeof(DeviceKilnError));
      g->error = g->memory->allocate("kiln.error", 0);
    }
    for (const codegen::CudaStep& step : program_.steps)
      if (const auto* a = std::get_if<CudaAlloc>(&step)) g->memory->reserve(a->name, size_t(eval(a->bytes, values)));
    cuda::CudaDeviceGuard guard(device_);
    g->allocatedOn = g->lastLaunchedOn = cuda::currentStream(device_);
    cuda::CudaStream captureStream = cuda::streamFromPool(device_);
    g->graph = cuda::CudaGraph::capture(captureStream,
                                        [&] { queueSteps(storage, values, *g->memory, g->error, captureStream); });
    return g;
  }

  static int64_t eval(const IndexExpr& e, const std::map<std::string, int64_t>& values) {
    return e.isConstant() ? *e.constant() : e.evaluate(values);
  }

  void* at(const std::map<std::string, void*>& storage, const std::string& name) const {
    auto it = storage.find(name);
    KILN_CHECK(it != storage.end(), "compiled CUDA program @", name_, ": the launch list uses storage %", name,
               " before it exists");
    return it->second;
  }

  // Interprets the launch list on the current stream.
  void run(std::map<std::string, void*>& storage, const std::map<std::string, int64_t>& values) const {
    cuda::CudaDeviceGuard guard(device_);
    cuda::CudaStream stream = cuda::currentStream(device_);
    CallMemory memory(device_);
    void* error = program_.usesErrors ? memory.allocate("kiln.error", sizeof(DeviceKilnError)) : nullptr;
    queueSteps(storage, values, memory, error, stream);
    if (error) raiseIndexError(error, stream);
  }

  // Queues the launch list's work on `stream`, the KilnError (when the program has one) zeroed
  // first; waits for nothing.
  void queueSteps(std::map<std::string, void*>& storage, const std::map<std::string, int64_t>& values,
                  StepMemory& memory, void* error, cuda::CudaStream stream) const {
    if (error) cuda::fillDevice(error, 0, 1, sizeof(DeviceKilnError), stream);
    for (const codegen::CudaStep& step : program_.steps) {
      if (const auto* a = std::get_if<CudaAlloc>(&step)) {
        storage[a->name] = memory.allocate(a->name, size_t(eval(a->bytes, values)));
      } else if (const auto* a = std::get_if<CudaAlias>(&step)) {
        storage[a->name] = at(storage, a->of);
      } else if (const auto* f = std::get_if<CudaFree>(&step)) {
        memory.free(f->name);
      } else if (const auto* c = std::get_if<CudaCopy>(&step)) {
        int64_t bytes = eval(c->bytes, values);
        if (bytes > 0) cuda::copyDeviceToDevice(at(storage, c->dst), at(storage, c->src), size_t(bytes), stream);
      } else if (const auto* l = std::get_if<CudaLaunch>(&step)) {
        launch(*l, storage, values, error, stream);
      } else if (const auto* g = std::get_if<CudaGemm>(&step)) {
        gemm(*g, storage, values, stream);
      }
    }
  }

  void launch(const CudaLaunch& l, const std::map<std::string, void*>& storage,
              const std::map<std::string, int64_t>& values, void* error, cuda::CudaStream stream) const {
    std::vector<uint64_t> slots(l.args.size());
    std::vector<void*> params(l.args.size());
    for (size_t i = 0; i < l.args.size(); ++i) {
      const CudaArg& a = l.args[i];
      if (a.kind == CudaArg::Kind::Pointer) slots[i] = reinterpret_cast<uint64_t>(at(storage, a.name));
      else if (a.kind == CudaArg::Kind::Size) slots[i] = uint64_t(values.at(a.name));
      else slots[i] = reinterpret_cast<uint64_t>(error);
      params[i] = &slots[i];
    }
    int64_t grid = eval(l.grid, values);
    if (grid == 0) return;  // a kernel over no elements (an empty output): nothing to launch
    KILN_CHECK(grid >= 1 && grid <= 0x7fffffff, "compiled CUDA program @", name_, ": kernel ", l.kernel,
               " has a grid of ", grid, " blocks");
    cuda::LaunchConfig config;
    config.grid.x = unsigned(grid);
    config.block.x = unsigned(l.block);
    config.sharedMemBytes = unsigned(l.sharedBytes);
    config.stream = stream;
    kernels_.at(l.kernel).launch(config, params.data());
  }

  void gemm(const CudaGemm& g, const std::map<std::string, void*>& storage,
            const std::map<std::string, int64_t>& values, cuda::CudaStream stream) const {
    size_t item = elementSize(g.dtype);
    cuda::RowMajorGemm r;
    r.dtype = g.dtype;
    r.outDtype = g.outDtype;
    r.transA = g.transA;
    r.transB = g.transB;
    r.m = eval(g.m, values);
    r.n = eval(g.n, values);
    r.k = eval(g.k, values);
    r.lda = eval(g.lda, values);
    r.ldb = eval(g.ldb, values);
    r.ldc = eval(g.ldc, values);
    r.batch = eval(g.batch, values);
    r.strideA = eval(g.strideA, values);
    r.strideB = eval(g.strideB, values);
    r.strideC = eval(g.strideC, values);
    r.a = static_cast<char*>(at(storage, g.a)) + g.offsetA * int64_t(item);
    r.b = static_cast<char*>(at(storage, g.b)) + g.offsetB * int64_t(item);
    r.c = at(storage, g.c);
    r.alpha = g.alpha;
    r.beta = g.beta;
    if (r.m == 0 || r.n == 0 || r.batch == 0) return;
    cuda::gemm(r, stream, searchDirs_);
  }

  // Reads the call's KilnError back (waiting for the stream) and raises it as the CPU program
  // does: "{index}"/"{size}" filled in, the exception type from the message's prefix.
  void raiseIndexError(void* error, cuda::CudaStream stream) const {
    DeviceKilnError e{};
    cuda::copyDeviceToHost(&e, error, sizeof e, stream);
    if (!e.set) return;
    e.message[255] = 0;
    std::string text = e.message[0] ? e.message : "IndexError: index {index} is out of bounds";
    for (auto [key, value] : {std::pair<std::string, int64_t>{"{index}", e.index}, {"{size}", e.size}})
      for (size_t pos = text.find(key); pos != std::string::npos; pos = text.find(key, pos))
        text.replace(pos, key.size(), std::to_string(value));
    if (text.starts_with("RuntimeError: ")) throw Error(text.substr(14));
    throw IndexError(text.starts_with("IndexError: ") ? text.substr(12) : text);
  }

  int device_;
  bool cudaGraphs_;
  std::string name_, arch_;
  bool cacheHit_ = false;
  std::set<size_t> writtenInputs_;
  std::set<std::vector<int64_t>> warmedUp_;
  std::map<std::vector<int64_t>, std::unique_ptr<GraphReplay>> graphs_;
  std::vector<std::vector<int64_t>> graphOrder_;
  std::vector<TensorMeta> inputs_, outputs_;
  std::vector<SymbolSource> symbols_;
  std::vector<std::string> searchDirs_;
  codegen::CudaProgram program_;
  std::unique_ptr<cuda::CudaModule> module_;
  std::map<std::string, cuda::CudaKernel> kernels_;
};

// -- Eager ops on CUDA: the dispatcher's CUDA fallback asks kiln.compiler.cuda_eager (the handler
// set by _set_cuda_eager_handler) to run the op with a program generated from its decomposition.

nb::object* eagerHandler = nullptr; // a Python callable, never released

nb::object listOf(const auto& items, auto convert) {
  nb::list out;
  for (const auto& item : items) out.append(convert(item));
  return out;
}

// A boxed argument as the Python value the op function would have been called with.
nb::object stackValue(const Value& v) {
  if (v.isNone()) return nb::none();
  if (v.isTensor()) return nb::steal(wrapTensor(v.toTensor()));
  if (v.isBool()) return nb::bool_(v.toBool());
  if (v.isInt()) return nb::int_(v.toInt());
  if (v.isDouble()) return nb::float_(v.toDouble());
  if (v.isScalar()) {
    Scalar x = v.toScalar();
    if (x.isBool()) return nb::bool_(x.toBool());
    if (x.isIntegral()) return nb::int_(x.toInt());
    return nb::float_(x.toDouble());
  }
  if (v.isIntList()) return listOf(v.toIntList(), [](int64_t i) { return nb::int_(i); });
  if (v.isTensorList()) return listOf(v.toTensorList(), [](const Tensor& t) { return nb::steal(wrapTensor(t)); });
  if (v.isOptionalTensorList())
    return listOf(v.toOptionalTensorList(), [](const std::optional<Tensor>& t) -> nb::object {
      return t ? nb::steal(wrapTensor(*t)) : nb::none();
    });
  // The rest has no is*() test (Value.h, included everywhere, stays as it is): the accessor of
  // the wrong alternative throws std::bad_variant_access.
  try {
    return nb::borrow(dtypeObject(v.toScalarType()));
  } catch (const std::bad_variant_access&) {
  }
  try {
    return nb::steal(deviceObject(v.toDevice()));
  } catch (const std::bad_variant_access&) {
  }
  try {
    return listOf(v.toDoubleList(), [](double d) { return nb::float_(d); });
  } catch (const std::bad_variant_access&) {
  }
  return nb::str(v.toStringRef().c_str());
}

// The handler's Python exception as the kiln exception of the same kind (the op call turns it
// back into that Python type).
[[noreturn]] void rethrow(nb::python_error& e) {
  std::string message = nb::cast<std::string>(nb::str(e.value()));
  if (e.matches(PyExc_NotImplementedError)) throw NotImplementedError(message);
  if (e.matches(PyExc_IndexError)) throw IndexError(message);
  if (e.matches(PyExc_TypeError)) throw TypeError(message);
  if (e.matches(PyExc_ValueError)) throw ValueError(message);
  throw Error(message);
}

// One result of the CUDA eager handler as a stack value of the return's type: a tensor, None (an
// undefined tensor: a gradient convolution_backward was not asked for), a bool/int/float (allclose,
// _local_scalar_dense...) or a list of tensors.
Value eagerResult(nb::handle item, const OpSchema& s, const ReturnSpec& r) {
  if (isTensor(item.ptr())) return Value(unwrapTensor(item.ptr()));
  if (item.is_none() && r.type == ArgType::Tensor) return Value(Tensor()); // undefined, as kernels return it
  PyObject* p = item.ptr();
  switch (r.type) {
    case ArgType::Bool:
      if (PyBool_Check(p)) return Value(p == Py_True);
      break;
    case ArgType::Int:
      if (PyLong_Check(p)) return Value(int64_t(nb::cast<int64_t>(item)));
      break;
    case ArgType::Float:
      if (PyFloat_Check(p) || PyLong_Check(p)) return Value(nb::cast<double>(item));
      break;
    case ArgType::Scalar:
      if (PyBool_Check(p)) return Value(Scalar(p == Py_True));
      if (PyLong_Check(p)) return Value(Scalar(nb::cast<int64_t>(item)));
      if (PyFloat_Check(p)) return Value(Scalar(nb::cast<double>(item)));
      break;
    case ArgType::TensorList:
      if (PyList_Check(p) || PyTuple_Check(p)) {
        std::vector<Tensor> tensors;
        for (nb::handle t : item) {
          KILN_CHECK(isTensor(t.ptr()), "kiln.", s.qualifiedName(), ": the CUDA eager handler returned a list "
                     "holding a ", Py_TYPE(t.ptr())->tp_name, ", not a Tensor");
          tensors.push_back(unwrapTensor(t.ptr()));
        }
        return Value(std::move(tensors));
      }
      break;
    default:
      break;
  }
  KILN_CHECK(false, "kiln.", s.qualifiedName(), ": the CUDA eager handler returned a ", Py_TYPE(p)->tp_name,
             " where the op returns a ", r.type == ArgType::Tensor ? "Tensor" : "value of another type");
  return Value();
}

bool pythonEagerHook(OpId op, Stack& stack) {
  if (!eagerHandler) return false;
  nb::gil_scoped_acquire gil;
  const OpSchema& s = Dispatcher::instance().schema(op);
  nb::list args;
  nb::dict kwargs;
  for (size_t i = 0; i < s.args.size() && i < stack.size(); ++i) {
    nb::object v = stackValue(stack[i]);
    if (s.args[i].kwargOnly) kwargs[s.args[i].name.c_str()] = v;
    else args.append(v);
  }
  nb::object result;
  try {
    // (A prims op's name carries its namespace: "prims.sum", not "sum", which is aten's.)
    std::string name = s.ns == "aten" ? s.qualifiedName() : s.ns + "." + s.qualifiedName();
    result = (*eagerHandler)(name, nb::tuple(args), kwargs, s.returns.size());
  } catch (nb::python_error& e) {
    rethrow(e);
  }
  Stack in = std::move(stack);
  stack.clear();
  for (size_t i = 0; i < s.returns.size(); ++i) {
    const ReturnSpec& r = s.returns[i];
    // An in-place op returns the tensor it wrote (the same object, as eager kernels do).
    if (r.aliasOf >= 0 && s.args[size_t(r.aliasOf)].mutated) {
      stack.push_back(in[size_t(r.aliasOf)]);
      continue;
    }
    nb::handle item = s.returns.size() == 1 ? nb::handle(result) : nb::handle(result[i]);
    stack.push_back(eagerResult(item, s, r));
  }
  return true;
}

} // namespace

void registerCudaCompiledProgram(nb::module_& c) {
  c.def(
      "_set_cuda_eager_handler",
      [](nb::object handler) {
        eagerHandler = new nb::object(std::move(handler));
        cuda::setCudaEagerHook(pythonEagerHook);
      },
      "handler(op qualified name, args, kwargs, number of returns) -> the op's result: runs eager "
      "ops on CUDA tensors that have no CUDA kernel");
  nb::class_<CudaCompiledProgram>(c, "CudaCompiledProgram",
                                  "a loop program compiled for a CUDA device: call it with the program's "
                                  "input tensors (on that device), get a tuple of its outputs; the work "
                                  "is queued on the current stream")
      .def(nb::init<std::string_view, int, const std::map<std::string, int64_t>&, const std::string&, bool>(),
           nb::arg("program_text"), nb::arg("device"), nb::arg("size_hints") = std::map<std::string, int64_t>{},
           nb::arg("cache_dir") = "", nb::arg("cuda_graphs") = false)
      .def("__call__", &CudaCompiledProgram::call)
      .def_prop_ro("name", &CudaCompiledProgram::name)
      .def_prop_ro("arch", &CudaCompiledProgram::arch)
      .def_prop_ro("source", &CudaCompiledProgram::source)
      .def_prop_ro("launch_list", &CudaCompiledProgram::launchList)
      .def_prop_ro("cache_hit", &CudaCompiledProgram::cacheHit)
      .def_prop_ro("device", &CudaCompiledProgram::device)
      .def_prop_ro("cuda_graphs", &CudaCompiledProgram::cudaGraphs,
                   "whether calls replay CUDA graphs (mode=\"reduce-overhead\")")
      .def_prop_ro("graph_count", &CudaCompiledProgram::graphCount, "the CUDA graphs captured and kept")
      .def("__repr__", [](const CudaCompiledProgram& p) {
        return "<kiln compiled CUDA program @" + p.name() + " for " + p.arch() + " on cuda:" +
               std::to_string(p.device()) + ">";
      });
}

} // namespace kiln::python
