// The kernel planner: what every back end renders, decided once for a loop program
// (docs/cuda-codegen.md). A program becomes a list of units run in order: loop nests (a kernel
// group fused into one nest when its ranges allow, every other buffer alone) and extern GEMM
// calls; the plan says which buffers each unit defines, which live only in locals (never
// written to memory), whose storage an in-place write uses, and the identifiers the emitters
// give inputs and buffers.
//
// A nest is a set of outer loops (its rows) around phases: a pointwise phase loops over the
// inner ranges of pointwise buffers, a reduction phase over the reduction ranges of reductions
// sharing them. Softmax over the last dim is one nest: per row, a max phase, a sum phase, then
// the pointwise phase, with the row's max and sum kept in locals.
//
// What the plan does not decide is per target: loop order inside a row, parallelism (OpenMP
// threads or a CUDA grid), vectorization, blocking of sums (codegen/CppCodegen.cpp,
// codegen/CudaCodegen.cpp). The loop scheduler (passes/loop/FusionGroups.h) asks the planner,
// not an emitter, which groups form one nest.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ir/loop/GemmEpilogue.h"
#include "ir/loop/LoopIR.h"

namespace kiln::codegen {

// A loop from 0 to `extent`, an expression over the program's size symbols (a constant for
// static sizes). Size symbols are in scope in every generated function.
struct Loop {
  std::string var;
  IndexExpr extent;
};

IndexExpr tripCount(const std::vector<Loop>& loops);
std::vector<IndexExpr> extents(const std::vector<Loop>& loops);
// Row-major flat offset of a point of `loops`.
IndexExpr flatIndex(const std::vector<Loop>& loops);
IndexExpr numel(const std::vector<IndexExpr>& sizes);
// Loops named prefix0, prefix1, ... over `extents`.
std::vector<Loop> named(const std::vector<IndexExpr>& extents, const std::string& prefix);
// What the loop variables range over; a symbolic extent bounds its variable below only (facts
// are constant intervals). Size symbols are at least kMinSizeSymbol (ir/loop/LoopIR.h).
RangeFacts factsOf(const std::vector<Loop>& outer, const std::vector<Loop>& inner);
// The facts about the size symbols of `e`.
RangeFacts symbolFacts(const IndexExpr& e);

// Decisions that depend on sizes (run in parallel, block a sum, launch shape) take a symbolic
// size at its hint: the value `hints` gives its symbols (kDefaultSizeHint for the others).
inline constexpr int64_t kDefaultSizeHint = 1024;
int64_t hinted(const IndexExpr& e, const std::map<std::string, int64_t>& hints);

struct Member {
  const Buffer* buffer = nullptr;
  LoopBody body;   // in the nest's loop variables
  IndexExpr flat;  // the flat offset of the element it computes, in the nest's variables
  bool materialize = true; // written to memory (false: only ever read through locals)
  int id = 0;      // numbers its locals
};

struct Phase {
  bool isReduction = false;
  std::vector<Loop> loops; // the inner (pointwise) or reduction loops
  std::vector<Member> members;
};

struct Nest {
  std::vector<Loop> outer;
  std::vector<Phase> phases;
  std::set<std::string> memoryReads; // members read from memory inside the nest
};

struct Unit {
  std::variant<Nest, const Buffer*> work; // a loop nest or an extern call
  std::string label;
  std::vector<const Buffer*> defines;
  // An extern mm with a fused epilogue (passes/loop/FuseGemmEpilogue.h): the pointwise buffer
  // the GEMM's post-ops compute (what the unit defines); the product itself is never stored.
  const Buffer* epilogue = nullptr;
  std::vector<GemmPostOp> postOps = {};
};

// The loop nest computing `bufs` (pointwise and reductions, in order), or nullopt when their
// ranges or the elements they read of each other do not allow one nest.
std::optional<Nest> buildNest(const std::vector<const Buffer*>& bufs);

// Whether these pointwise and reduction buffers (in program order), grouped in one kernel, are
// planned as one loop nest rather than a nest per buffer. The scheduler fuses only such groups.
bool fusesIntoOneNest(const std::vector<const Buffer*>& bufs);

// What fusesIntoOneNest decides for a group of pointwise buffers only (none written in place),
// kept per buffer so a scheduler can decide without building the nest: such a group is one nest
// exactly when every member has the same `extents` and every load of one member by another is
// `Element` or `Row`. `extents`: the ranges without extent-1 ones; per load of the body, the
// buffer read and how: `Element` the element being computed, `Row` another element of the
// current row (the last range) of the same extents, `Other` anything else.
struct PointwiseNestFacts {
  enum class Read { Element, Row, Other };
  std::vector<IndexExpr> extents;
  std::vector<std::pair<std::string, Read>> loads;
};
// nullopt for buffers that are not pointwise or written in place. (Over a symbolic row length,
// a `Row` read needs an index affine in the row's loop variable.)
std::optional<PointwiseNestFacts> pointwiseNestFacts(const Buffer& b);

struct PlanOptions {
  // An mm and the pointwise epilogue fused into its kernel become one unit (a GEMM with
  // post-ops, the product never stored). Off: the mm is an extern unit of its own and the
  // epilogue a nest reading the stored product (a target without post-op GEMMs).
  bool gemmEpilogues = true;
  // Names the emitter in error messages ("C++ codegen").
  std::string what = "C++ codegen";
};

// The plan of a whole program.
struct KernelPlan {
  const LoopProgram* program = nullptr;
  std::vector<std::string> symbols;           // the program's size symbols, in order
  std::vector<Unit> units;
  std::vector<std::string> outputs;           // the program's outputs, versions as roots
  std::map<std::string, std::string> roots;   // in-place buffer -> the storage's root
  std::map<std::string, std::string> names;   // input or buffer -> identifier (in_x, b_y)
  std::map<std::string, ScalarType> dtypes;   // of inputs and buffers with storage
  std::set<std::string> materialized;         // buffers with storage of their own in memory

  // The input or buffer owning the storage of `name`.
  std::string rootOf(const std::string& name) const;
};

// How a row-major (CBLAS-convention) GEMM reads a [rows, cols] matrix with strides (s0, s1):
// transposed or not and its leading dimension, or a contiguous copy first. Both emitters' GEMM
// steps use it.
struct MatrixLayout {
  bool transposed = false, copy = false;
  IndexExpr ld = 1;
};
MatrixLayout matrixLayout(const IndexExpr& rows, const IndexExpr& cols, IndexExpr s0, IndexExpr s1);

// An extern kernel's numeric keyword argument `key` (alpha, beta), or `dflt` when absent; `what`
// names the emitter in the error for a non-number.
double externScalar(const Extern& x, const std::string& key, double dflt, const std::string& what);

// Plans `p`. Throws kiln::Error for size symbols not named s0, s1, ... (they become
// identifiers of the generated code).
KernelPlan planKernels(const LoopProgram& p, const PlanOptions& options = {});

} // namespace kiln::codegen
