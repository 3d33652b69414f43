// kiln._C._codegen.CompiledKernel (see CompiledKernelBinding.h): the per-call path of compiled
// graphs stays here in C++: check the inputs, allocate the outputs, call the entry.
#include "frontend/binding/CompiledKernelBinding.h"

#include <cstdint>
#include <omp.h>

#include <map>

#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>


#include "codegen/CppCodegen.h"
#include "codegen/KernelCache.h"
#include "frontend/binding/ProgramSignature.h"
#include "frontend/binding/PythonConvert.h"
#include "runtime/Allocator.h"
#include "runtime/Error.h"
#include "runtime/TensorImpl.h"
#include "runtime/cpu/DnnlMatmul.h"
#include "runtime/cpu/Gemm.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

// The layouts the generated source declares (codegen/CppPrelude.cpp, docs/cpp-codegen.md).
struct KilnError {
  int set;
  int64_t index, size;
  const char* message;
};

struct KilnContext {
  void* (*alloc)(size_t bytes);
  void (*free)(void* ptr);
  void (*sgemm)(int order, int transA, int transB, int m, int n, int k, float alpha, const float* a,
                int lda, const float* b, int ldb, float beta, float* c, int ldc);
  void (*dgemm)(int order, int transA, int transB, int m, int n, int k, double alpha, const double* a,
                int lda, const double* b, int ldb, double beta, double* c, int ldc);
  int numThreads;
  void (*sgemmPost)(int transA, int transB, int m, int n, int k, const float* a, int lda, const float* b,
                    int ldb, float* c, int ldc, int nops, const int* kinds, const float* scalars,
                    const float* const* tensors, const int64_t* rowStrides);
  KilnError* error;
  void (*sgemmBatched)(int transA, int transB, int64_t batch, int m, int n, int k, const float* a, int lda,
                       int64_t strideA, const float* b, int ldb, int64_t strideB, float* c, int ldc,
                       int64_t strideC);
  void (*gemm16Batched)(int bf16, int f32Out, int transA, int transB, int64_t batch, int m, int n, int k,
                        const uint16_t* a, int lda, int64_t strideA, const uint16_t* b, int ldb, int64_t strideB,
                        void* c, int ldc, int64_t strideC);
};

// The exception of an out-of-range indirect index (status 2): the indirect op's error,
// "IndexError: index {index} is out of bounds for dimension 0 with size {size}", filled in and
// raised as its type, as eager's kernel raises it.
[[noreturn]] void throwIndexError(const KilnError& e) {
  std::string text = e.message ? e.message : "IndexError: index {index} is out of bounds";
  for (auto [key, value] : {std::pair<std::string, int64_t>{"{index}", e.index}, {"{size}", e.size}})
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at))
      text.replace(at, key.size(), std::to_string(value));
  if (text.starts_with("RuntimeError: ")) throw Error(text.substr(14));
  throw IndexError(text.starts_with("IndexError: ") ? text.substr(12) : text);
}

using EntryFn = int (*)(const KilnContext*, void* const*, void* const*, const int64_t*);

// The generated code frees without a size and kiln's allocator needs one: each block carries
// its size in a header of one alignment unit, which keeps the data 64-byte aligned.
constexpr size_t kHeader = CpuAllocator::kAlignment;

void* contextAlloc(size_t bytes) noexcept {
  try {
    char* base = static_cast<char*>(CpuAllocator::instance().allocate(bytes + kHeader));
    if (base == nullptr) return nullptr;
    *reinterpret_cast<size_t*>(base) = bytes + kHeader;
    return base + kHeader;
  } catch (...) {
    return nullptr; // the entry frees what it allocated and returns 1
  }
}

void contextFree(void* ptr) noexcept {
  if (ptr == nullptr) return;
  char* base = static_cast<char*>(ptr) - kHeader;
  CpuAllocator::instance().free(base, *reinterpret_cast<size_t*>(base));
}

// The generated code calls these with CBLAS's row-major convention (order 101; 111 = no
// transpose, 112 = transpose): kiln's own GEMMs (runtime/cpu/Gemm.h), on kiln's OpenMP threads.
void contextSgemm(int order, int transA, int transB, int m, int n, int k, float alpha, const float* a,
                  int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  KILN_CHECK(order == 101, "compiled sgemm: only the row-major order (101) is supported");
  cpu::sgemm(transA == 112, transB == 112, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

void contextDgemm(int order, int transA, int transB, int m, int n, int k, double alpha, const double* a,
                  int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  KILN_CHECK(order == 101, "compiled dgemm: only the row-major order (101) is supported");
  cpu::dgemm(transA == 112, transB == 112, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

// A GEMM with post-ops (runtime/cpu/DnnlMatmul.h), transposes as in contextSgemm.
void contextSgemmPost(int transA, int transB, int m, int n, int k, const float* a, int lda, const float* b,
                      int ldb, float* c, int ldc, int nops, const int* kinds, const float* scalars,
                      const float* const* tensors, const int64_t* rowStrides) {
  std::vector<cpu::PostOp> ops(size_t(std::max(nops, 0)));
  for (int i = 0; i < nops; ++i)
    ops[size_t(i)] = {cpu::PostOpKind(kinds[i]), scalars[2 * i], scalars[2 * i + 1], tensors[i], rowStrides[i]};
  cpu::sgemmPostOps(transA == 112, transB == 112, m, n, k, a, lda, b, ldb, c, ldc, ops.data(), nops);
}

// A batch of GEMMs as one product (runtime/cpu/DnnlMatmul.h), transposes as in contextSgemm.
void contextSgemmBatched(int transA, int transB, int64_t batch, int m, int n, int k, const float* a, int lda,
                         int64_t strideA, const float* b, int ldb, int64_t strideB, float* c, int ldc,
                         int64_t strideC) {
  cpu::sgemmBatched(transA == 112, transB == 112, batch, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc,
                    strideC);
}

// A batch of 16-bit float GEMMs (runtime/cpu/DnnlMatmul.h).
void contextGemm16Batched(int bf16, int f32Out, int transA, int transB, int64_t batch, int m, int n, int k,
                          const uint16_t* a, int lda, int64_t strideA, const uint16_t* b, int ldb, int64_t strideB,
                          void* c, int ldc, int64_t strideC) {
  cpu::gemm16Batched(bf16 != 0, f32Out != 0, transA == 112, transB == 112, batch, m, n, k, a, lda, strideA, b, ldb,
                     strideB, c, ldc, strideC);
}

class CompiledKernel {
public:
  CompiledKernel(std::string path, std::string entry, std::string_view programText)
      : path_(std::move(path)), entry_(std::move(entry)) {
    ProgramSignature sig = readProgramSignature(programText, "CompiledKernel");
    name_ = sig.program.name;
    inputs_ = std::move(sig.inputs);
    outputs_ = std::move(sig.outputs);
    symbols_ = std::move(sig.symbols);
    if (symbols_.empty()) {
      std::map<std::string, int64_t> none;
      for (TensorMeta& m : inputs_) staticInputs_.push_back({evaluated(m.sizes, none), evaluated(m.strides, none)});
      for (TensorMeta& m : outputs_) staticOutputs_.push_back(evaluated(m.sizes, none));
    }
    entryFn_ = reinterpret_cast<EntryFn>(codegen::KernelCache::load(path_, entry_));
  }

  nb::object call(nb::args args) const {
    size_t n = args.size();
    if (n != inputs_.size()) {
      throw nb::type_error(("compiled program @" + name_ + " takes " + std::to_string(inputs_.size()) +
                            " tensor inputs, got " + std::to_string(n)).c_str());
    }
    void* inPtrs[16];
    std::vector<void*> inHeap;
    void** ins = inPtrs;
    if (n > 16) {
      inHeap.resize(n);
      ins = inHeap.data();
    }
    for (size_t i = 0; i < n; ++i) {
      PyObject* o = args[i].ptr();
      if (!isTensor(o)) {
        throw nb::type_error(("compiled program @" + name_ + ": input " + std::to_string(i) + " (%" +
                              inputs_[i].name + ") must be a Tensor, not " + Py_TYPE(o)->tp_name).c_str());
      }
    }
    // The size symbols' values, read from the inputs; then every input must match the sizes
    // and strides the program declares at those values.
    std::map<std::string, int64_t> values;
    std::vector<int64_t> sizeArgs;
    for (const SymbolSource& s : symbols_) {
      int64_t v = symbolValue(s, unwrapTensor(args[s.input].ptr()), inputs_, "compiled program", name_);
      values[s.symbol] = v;
      sizeArgs.push_back(v);
    }
    for (size_t i = 0; i < n; ++i) {
      const Tensor& t = unwrapTensor(args[i].ptr());
      const TensorMeta& m = inputs_[i];
      KILN_CHECK(t.device().isCpu(), "compiled program @", name_, ": input ", i, " (%", m.name,
                 ") must be a CPU tensor");
      DimVector symbolicSizes, symbolicStrides;
      if (!symbols_.empty()) {
        symbolicSizes = evaluated(m.sizes, values);
        symbolicStrides = evaluated(m.strides, values);
      }
      const DimVector& sizes = symbols_.empty() ? staticInputs_[i].first : symbolicSizes;
      const DimVector& strides = symbols_.empty() ? staticInputs_[i].second : symbolicStrides;
      KILN_CHECK(t.dtype() == m.dtype && t.sizes() == IntArrayRef(sizes) && sameLayout(t, sizes, strides),
                 "compiled program @", name_, ": input ", i, " (%", m.name, ") is ", scalarTypeName(t.dtype()),
                 shapeString(t.sizes()), " with strides ", shapeString(t.strides()), ", but the program was "
                 "compiled for ", scalarTypeName(m.dtype), shapeString(sizes), " with strides ",
                 shapeString(strides), symbols_.empty() ? "" : " (at these values of its size symbols)");
      ins[i] = t.rawData();
    }
    size_t nOut = outputs_.size();
    std::vector<Tensor> outs;
    outs.reserve(nOut);
    void* outPtrs[16];
    std::vector<void*> outHeap;
    void** outp = outPtrs;
    if (nOut > 16) {
      outHeap.resize(nOut);
      outp = outHeap.data();
    }
    for (size_t i = 0; i < nOut; ++i) {
      outs.push_back(Tensor::empty(symbols_.empty() ? staticOutputs_[i] : evaluated(outputs_[i].sizes, values),
                                   outputs_[i].dtype));
      outp[i] = outs.back().rawData();
    }
    KilnError error{0, 0, 0, nullptr};
    KilnContext ctx{contextAlloc, contextFree, contextSgemm, contextDgemm, omp_get_max_threads(), contextSgemmPost,
                    &error, contextSgemmBatched, contextGemm16Batched};
    int status;
    {
      nb::gil_scoped_release release;
      status = entryFn_(&ctx, ins, outp, sizeArgs.data());
    }
    if (status == 2) throwIndexError(error);
    KILN_CHECK(status == 0, "compiled program @", name_, " failed (status ", status,
               "): out of memory allocating its intermediates");
    PyObject* tuple = PyTuple_New(Py_ssize_t(nOut));
    if (tuple == nullptr) throw nb::python_error();
    for (size_t i = 0; i < nOut; ++i) PyTuple_SET_ITEM(tuple, Py_ssize_t(i), wrapTensor(std::move(outs[i])));
    return nb::steal(tuple);
  }

  const std::string& path() const { return path_; }
  const std::string& entry() const { return entry_; }
  const std::string& name() const { return name_; }
  size_t numInputs() const { return inputs_.size(); }
  size_t numOutputs() const { return outputs_.size(); }

private:
  std::string path_;
  std::string entry_;
  std::string name_;
  std::vector<TensorMeta> inputs_;
  std::vector<TensorMeta> outputs_;
  std::vector<SymbolSource> symbols_; // in LoopProgram::sizeSymbols order, the entry's `sizes`
  // Without size symbols: the inputs' sizes and strides and the outputs' sizes, evaluated once.
  std::vector<std::pair<DimVector, DimVector>> staticInputs_;
  std::vector<DimVector> staticOutputs_;
  EntryFn entryFn_ = nullptr;
};

} // namespace

void registerCompiledKernel(nb::module_& m) {
  // def_submodule returns the existing kiln._C._codegen when another part defined it first.
  nb::module_ c = m.def_submodule("_codegen", "generated C++: code generation and compilation");
  nb::class_<CompiledKernel>(c, "CompiledKernel",
                             "a compiled loop program: call it with the program's input tensors, get "
                             "a tuple of its outputs (allocated by kiln, contiguous)")
      .def(nb::init<std::string, std::string, std::string_view>(), nb::arg("path"), nb::arg("entry"),
           nb::arg("program_text"))
      .def("__call__", &CompiledKernel::call)
      .def_prop_ro("path", &CompiledKernel::path)
      .def_prop_ro("entry", &CompiledKernel::entry)
      .def_prop_ro("name", &CompiledKernel::name)
      .def_prop_ro("num_inputs", &CompiledKernel::numInputs)
      .def_prop_ro("num_outputs", &CompiledKernel::numOutputs)
      .def("__repr__", [](const CompiledKernel& k) {
        return "<kiln compiled program @" + k.name() + " " + k.entry() + " from " + k.path() + ">";
      });
}

} // namespace kiln::python
