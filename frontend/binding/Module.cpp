// The extension module kiln._C: types, op functions (one per Python name), runtime state.
#include <cstdint>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <map>
#include <omp.h>

#include "frontend/binding/AutogradBinding.h"
#include "runtime/autograd/Engine.h"
#include "frontend/binding/CustomFunctionBinding.h"
#include "frontend/binding/CompiledKernelBinding.h"
#include "frontend/binding/CppCodegenBinding.h"
#include "frontend/binding/CudaBinding.h"
#include "frontend/binding/FxBinding.h"
#include "frontend/binding/GeneratorBinding.h"
#include "frontend/binding/Indexing.h"
#include "frontend/binding/Interop.h"
#include "frontend/binding/KernelCacheBinding.h"
#include "frontend/binding/OpFunction.h"
#include "frontend/binding/PythonConvert.h"
#include "frontend/binding/StorageBinding.h"
#include "frontend/binding/TensorBinding.h"
#include "frontend/binding/TensorData.h"
#include "frontend/capture/CaptureBinding.h"
#include "frontend/capture/TraceFrame.h"
#include "runtime/Allocator.h"
#include "runtime/Autocast.h"
#include "runtime/Dispatcher.h"
#include "runtime/Error.h"

namespace nb = nanobind;
using namespace kiln;
using namespace kiln::python;

namespace {

// Every op the table exposes: functions into kiln._C._ops, methods onto TensorBase.
void registerOps(nb::module_& m, TensorClass& tensorClass) {
  const Dispatcher& d = Dispatcher::instance();
  std::map<std::string, std::vector<OpId>> functions, methods;
  for (size_t i = 0; i < d.numOps(); ++i) {
    const OpSchema& s = d.schema(OpId(i));
    if (s.pythonName.empty()) continue;
    if (s.isFunction) functions[s.pythonName].push_back(OpId(i));
    if (s.isMethod) methods[s.pythonName].push_back(OpId(i));
  }
  nb::module_ opsModule = m.def_submodule("_ops", "every op of the table, as a function");
  for (auto& [name, ops] : functions) {
    PyObject* f = makeOpFunction(std::make_unique<OverloadGroup>(name, ops, false));
    opsModule.attr(name.c_str()) = nb::steal(f);
  }
  for (auto& [name, ops] : methods) {
    PyObject* f = makeOpFunction(std::make_unique<OverloadGroup>(name, ops, true));
    if (PyObject_SetAttrString(tensorClass.ptr(), name.c_str(), f) < 0) throw nb::python_error();
    Py_DECREF(f);
  }
}

} // namespace

NB_MODULE(_C, m) {
  nb::set_leak_warnings(false); // dtype singletons and op objects live as long as the process
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (...) {
      setPythonErrorFromException(nullptr);
    }
  });
  registerDtypes(m);
  registerLinAlgError(m);
  registerDevice(m);
  TensorClass tensorClass = registerTensor(m);
  registerOpFunctionType(m.ptr());
  registerOps(m, tensorClass);
  registerInterop(m, tensorClass);
  registerStorage(m);
  registerTensorData(m, tensorClass);
  registerGenerator(m);
  registerIndexing(tensorClass);
  registerAutograd(m, tensorClass);
  registerCustomFunctionCapture(m);
  registerFx(m);
  kiln::capture::registerCapture(m);
  kiln::capture::registerTraceFrame(m);
  registerCppCodegen(m);
  registerKernelCache(m);
  registerCompiledKernel(m);
  registerCuda(m);

  m.def("memory_stats", [] {
    MemoryStats s = CpuAllocator::instance().stats();
    std::map<std::string, int64_t> out;
    out["allocated_bytes.all.current"] = s.allocatedBytes;
    out["allocated_bytes.all.peak"] = s.peakAllocatedBytes;
    out["reserved_bytes.all.current"] = s.reservedBytes;
    out["num_alloc_retries"] = 0;
    out["allocation.all.allocated"] = s.allocations;
    out["allocation.all.cache_hits"] = s.cacheHits;
    return out;
  });
  // The OpenMP team size of kiln's CPU kernels, compiled kernels and GEMMs (they share one
  // OpenMP runtime: docs/runtime.md), as torch.get_num_threads / set_num_threads.
  m.def("get_num_threads", [] { return omp_get_max_threads(); });
  m.def("set_num_threads", [](int n) {
    KILN_CHECK(n > 0, "set_num_threads expects a positive integer, got ", n);
    omp_set_num_threads(n);
  });
  m.def("reset_peak_memory_stats", [] { CpuAllocator::instance().resetPeak(); });
  m.def("empty_cache", [] { CpuAllocator::instance().emptyCache(); });
  m.def("is_grad_enabled", [] { return GradMode::isEnabled(); });
  m.def("_set_grad_enabled", [](bool on) { GradMode::setEnabled(on); });
  m.def("_set_anomaly_mode", [](bool enabled, bool checkNan) { autograd::AnomalyMode::set(enabled, checkNan); });
  m.def("_is_anomaly_enabled", [] { return autograd::AnomalyMode::enabled(); });
  m.def("_is_anomaly_check_nan_enabled", [] { return autograd::AnomalyMode::checkNan(); });
  // Autocast state (kiln.amp.autocast sets it), per thread and device type ("cpu", "cuda").
  auto autocastDevice = [](const std::string& type) {
    KILN_CHECK_VALUE(type == "cpu" || type == "cuda",
                     "autocast: unsupported device_type '", type, "' (kiln autocasts 'cpu' and 'cuda')");
    return type == "cuda" ? DeviceType::CUDA : DeviceType::CPU;
  };
  m.def("_is_autocast_enabled", [=](const std::string& t) { return autocast::isEnabled(autocastDevice(t)); });
  m.def("_set_autocast_enabled", [=](const std::string& t, bool on) { autocast::setEnabled(autocastDevice(t), on); });
  m.def("_get_autocast_dtype", [=](const std::string& t) {
    return nb::borrow(dtypeObject(autocast::dtype(autocastDevice(t))));
  });
  m.def("_set_autocast_dtype", [=](const std::string& t, nb::handle dtype) {
    autocast::setDtype(autocastDevice(t), dtypeFromObject(dtype.ptr()));
  });
  m.def("_is_autocast_cache_enabled", [] { return autocast::isCacheEnabled(); });
  m.def("_set_autocast_cache_enabled", [](bool on) { autocast::setCacheEnabled(on); });
  m.def("_clear_autocast_cache", [] { autocast::clearCache(); });
  m.def("_autocast_increment_nesting", [] { return autocast::incrementNesting(); });
  m.def("_autocast_decrement_nesting", [] { return autocast::decrementNesting(); });
  // The whole state as one number (what a compiled frame guards on): a graph break inside an
  // autocast block hands it to the code after the break (kiln._compiling._RestoreAutocast).
  m.def("_autocast_packed_state", [] { return autocast::packedState(); });
  m.def("_set_autocast_packed_state", [](uint32_t packed) { autocast::setPackedState(packed); });
  m.def("is_inference_mode_enabled", [] { return InferenceMode::isEnabled(); });
  m.def("_set_inference_mode", [](bool on) { InferenceMode::setEnabled(on); });
  m.def("_op_table", [] {
    // One dict per op overload: what the table declares and which kernels are registered.
    const Dispatcher& d = Dispatcher::instance();
    static const std::pair<OpTag, const char*> tagNames[] = {
        {kTagCore, "core"}, {kTagPrims, "prims"}, {kTagPointwise, "pointwise"},
        {kTagReduction, "reduction"}, {kTagView, "view"}, {kTagInplace, "inplace"},
        {kTagRandom, "random"}, {kTagNondeterministic, "nondeterministic"}, {kTagCreation, "creation"}};
    static const char* promotions[] = {"none", "default", "int_to_float", "always_bool", "no_opmath"};
    nb::list out;
    for (size_t i = 0; i < d.numOps(); ++i) {
      const OpSchema& s = d.schema(OpId(i));
      nb::dict e;
      e["schema"] = s.text;
      e["name"] = s.qualifiedName();
      nb::list tags, kernels;
      for (auto& [tag, name] : tagNames)
        if (s.hasTag(tag)) tags.append(name);
      for (int k = 0; k < kNumDispatchKeys; ++k)
        if (d.hasKernel(OpId(i), DispatchKey(k))) kernels.append(dispatchKeyName(DispatchKey(k)));
      nb::list mutated; // positions of the arguments the op writes ("Tensor(a!)")
      for (size_t a = 0; a < s.args.size(); ++a)
        if (s.args[a].mutated) mutated.append(a);
      e["tags"] = tags;
      e["mutated"] = mutated;
      e["kernels"] = kernels;
      e["promotion"] = promotions[int(s.promotion)];
      static const char* derivatives[] = {"none", "formula", "non_differentiable", "composite", "inplace"};
      e["derivative"] = derivatives[int(s.derivative)];
      e["python"] = s.pythonName;
      e["function"] = s.isFunction;
      e["method"] = s.isMethod;
      out.append(e);
    }
    return out;
  });
}
