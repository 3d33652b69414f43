// Internal to the lowering (compiler/lowering/*.cpp; the entry point is compiler/Lowering.h):
// the Lowerer, which turns a prims graph into a loop program, and the loop-body helpers its
// files share. Each prim becomes a "loader" (an index vector -> a loop-body value) so
// elementwise chains and views fuse into their consumer; reductions, mm/bmm (extern
// kernels), graph outputs and large shared values are realized into buffers.
// One file per op family: Lowerer.cpp (values, realization policy, views, inputs/outputs and
// the prims), Reductions.cpp, InPlace.cpp (copy_to), Indexing.cpp, Pooling.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "compiler/Lowering.h"
#include "runtime/Error.h"

namespace kiln::compiler::lowering {

using Index = std::vector<IndexExpr>;
// Sizes and strides: constants, or expressions over size symbols (each >= kMinSizeSymbol).
using Shape = std::vector<IndexExpr>;

// A shared value whose loader emits more ops than this is realized into a buffer instead of
// being recomputed by every consumer; a value this large or larger always is (bounds the
// recomputation of deep chains).
inline constexpr int64_t kSharedRecomputeLimit = 32;
inline constexpr int64_t kRecomputeLimit = 512;
// A shared value that reads more than this many elements of memory per element is realized
// too, however few ops it has (Inductor's realize_reads_threshold): a residual stream built
// by adds over many layers' outputs would otherwise be re-read from every one of them by each
// consumer, and by every pass of a row reduction (layer norm's mean, variance and output).
inline constexpr int64_t kSharedReadLimit = 4;

// The body being built, with the ranges of its loop variables (for simplifying indices).
struct BodyContext {
  LoopBody body;
  RangeFacts facts;
};

using Loader = std::function<int(BodyContext&, const Index&)>;
using IndexMap = std::function<Index(const Index&)>;

// A lowered node: its element type and shape and how to compute the element at an index.
struct Value {
  ScalarType dtype = ScalarType::Float32;
  Shape sizes;
  Loader load;
  // The input or buffer this value is exactly (input geometry, or a contiguous buffer).
  std::string storage;
  // How many ops the loader emits (counting shared subexpressions once per use).
  int64_t cost = 1;
  // A view (a chain of view prims) shares the storage of the node it views: `aliasOf`, whose
  // element at aliasMap(index) it is. An in-place write through any alias is seen by all of
  // them, so their loaders are rebuilt from the root's after every write. `aliasWhole`: the
  // view is the whole root (view_of, a reshape to the same sizes).
  const Node* aliasOf = nullptr;
  IndexMap aliasMap;
  bool aliasWhole = false;
};

// The expression of a symbolic fill value ("s0*64"): an IRError on malformed text or trailing
// tokens.
IndexExpr symbolicFill(const std::string& text);
// Identical ops are emitted once: a new op equal to an earlier one is dropped for it.
int dedupeLast(LoopBody& b);
int emitLoad(BodyContext& c, const std::string& buf, const IndexExpr& index, ScalarType dtype);
int emitIndexExpr(BodyContext& c, const IndexExpr& e);
int emitCast(BodyContext& c, int v, ScalarType dtype);
int emitMath(BodyContext& c, LoopOpCode code, std::vector<int> operands);
// A constant of `dtype` from a Python number (bool, int or float).
int emitConstant(BodyContext& c, const Argument& value, ScalarType dtype);
// Row-major strides of symbolic sizes.
Shape rowMajorStrides(const Shape& sizes);
IndexExpr flatIndex(const Index& idx, const Shape& strides);
IndexExpr product(const Shape& sizes);
// The range facts of the size symbols in `e` (each at least kMinSizeSymbol).
void addSymbolFacts(RangeFacts& facts, const IndexExpr& e);
std::string shapeString(const Shape& sizes);
Index loopVars(const char* prefix, size_t n);
// Loop variables prefix0, prefix1, ... over `extents`; a symbolic extent bounds its variable
// from below only (its symbols get their facts).
std::vector<IterVar> iterVars(const char* prefix, const Shape& extents, RangeFacts& facts);
std::vector<IndexExpr> exprs(const std::vector<int64_t>& v);
std::vector<int64_t> intList(const Argument& a, const std::string& what);
const TensorType& tensorTypeOf(const Node* n);
// The argument at `pos`, else the keyword `name`, else null.
const Argument* argOf(const Node* n, size_t pos, std::string_view name);
// The Core ATen indexing ops lowered directly (see Lowerer::lowerIndexing), without "aten.".
bool isLoweredIndexingOp(const std::string& target);

class Lowerer {
public:
  explicit Lowerer(const Graph& g) : graph_(g) {
    program_.name = g.name();
    for (Node* n : g.nodes()) {
      names_.insert(n->name());
      order_[n] = order_.size();
    }
  }
  LoopProgram run();

private:
  // ---- Values, realization, views, inputs and outputs, prims (Lowerer.cpp) ----------------
  std::string freshName();
  Value bufferValue(const std::string& name, ScalarType dtype, const std::vector<int64_t>& sizes);
  Value bufferValue(const std::string& name, ScalarType dtype, Shape sizes);
  int64_t loadsOf(const Value& v);
  std::string realize(Value& v);
  bool gathersAlongRows(const Value& v);
  void realizeTransposed(Value& v);
  std::optional<std::pair<std::string, StridedView>> stridedView(const Value& v);
  Buffer* reshapedExternResult(const Value& v);
  Buffer* transposedMmResult(const Node* t, const Value& v);
  StridedView wholeLayout(const std::string& version);
  Value& valueOf(const Node* n);
  const Node* operandNode(const Node* n, size_t pos, std::string_view name);
  Value& operand(const Node* n, size_t pos, std::string_view name);
  void lowerInput(const Node* n);
  void lowerOutput(const Node* n);
  Value derived(const Node* n, Loader load, int64_t cost);
  Value view(const Node* n, IndexMap map, bool alias = true);
  Value wholeView(const Node* n);
  void lowerCall(const Node* n);
  Value tupleItem(const Node* n);
  Value lowerPrim(const Node* n, const std::string& prim);
  Value lowerMatmulLoops(const Node* n, bool batched);
  Value lowerCat(const Node* n);
  Value lowerElementwise(const Node* n, LoopOpCode code);
  Value lowerLog10(const Node* n);
  Value lowerBroadcast(const Node* n);
  Value lowerReshape(const Node* n);
  static std::vector<std::pair<std::vector<size_t>, std::vector<size_t>>> reshapeGroups(
      const Shape& inShape, const Shape& outShape);

  // ---- Reductions (Reductions.cpp) --------------------------------------------------------
  std::vector<bool> reducedDims(const Node* n, const Value& in);

  // A Reduction buffer of `kind` over the reduced dims of n's input (the input's loader
  // inlined in its body, values cast to `valueDtype`); returns the buffer's name.
  // The element a reduction body reduces: from the input element x, the full index and the
  // index of the output element (the kept dims).
  using ReducedValue = std::function<int(BodyContext&, int x, const Index& kept)>;

  std::string reductionBuffer(const Node* n, ReductionKind kind, ScalarType valueDtype,
                              ScalarType bufferDtype, const ReducedValue& transform = {});
  static int64_t divisionsIn(const LoopBody& body);
  Value lowerReduction(const Node* n, ReductionKind kind);
  Value lowerVar(const Node* n);

  // ---- In-place writes: prims.copy_to (InPlace.cpp) ---------------------------------------
  std::string storageRoot(const std::string& version) const;
  Shape storageStrides(const std::string& root, const Shape& sizes);
  std::set<std::string> readsOf(const Value& v);
  void refreshAliases(const Node* root);
  bool usedAfter(const Node* m, const Node* now) const;
  void snapshotReaders(const std::string& root, const Node* now);
  Loader copySource(const Node* n, const Value& dst, int64_t& cost);
  Value copyResult(const Value& dst, const Node* rootNode, const IndexMap& map);
  Value lowerCopyTo(const Node* n);

  // ---- Indexing ops and scans (Indexing.cpp) ----------------------------------------------
  static IndexExpr emitIndirect(BodyContext& c, int value, const IndexExpr& size, bool wrap,
                                const std::string& error);
  static std::string boundsError(const char* type, int64_t dim);

  // The sizes of an indexing op's operand: constants or expressions over size symbols (the
  // indexing lowerings below take either; pooling needs static spatial sizes: spatialSizes).
  static const Shape& ss(const Value& v) { return v.sizes; }

  static int64_t normalizedDim(int64_t dim, size_t rank, const std::string& what);
  int64_t intArg(const Node* n, size_t pos, std::string_view name, std::optional<int64_t> dflt = {});
  bool boolArg(const Node* n, size_t pos, std::string_view name, bool dflt);
  Value lowerScan(const Node* n, bool prod);
  std::string contiguousOperand(Value& v, ScalarType dtype);
  Value lowerIndexing(const Node* n, const std::string& op);
  Value lowerGather(const Node* n);
  Value lowerIndexSelect(const Node* n);
  Value lowerEmbedding(const Node* n);

  // The index tensors of index / index_put (None for a dim taken whole) and where the
  // broadcast index dims go in the result: at the first indexed dim when the indexed dims are
  // adjacent, else first (NumPy's rule, as eager's AdvancedIndex).
  struct AdvancedIndexing {
    std::vector<const Value*> indices; // per self dim (nullptr: not indexed)
    Shape broadcast;                   // the index tensors' broadcast shape
    size_t first = 0;                  // where the broadcast dims go in the result
    std::vector<size_t> kept;          // self's dims taken whole, in order
  };

  AdvancedIndexing advancedIndexing(const Node* n, const Value& self, size_t pos);
  static Index advancedSource(BodyContext& c, const AdvancedIndexing& a, const std::vector<Loader>& loaders,
                              const std::vector<Shape>& indexSizes, const Shape& selfSizes,
                              const Index& idx);
  Value lowerAdvancedIndex(const Node* n);
  std::string freshCopy(const Value& v);
  Value scatterInto(const std::string& base, ScalarType dtype, const Shape& sizes, const Shape& ranges,
                    bool accumulate,
                    const std::function<IndexExpr(BodyContext&, const Index&)>& dst,
                    const std::function<int(BodyContext&, const Index&)>& value);
  Value lowerIndexPut(const Node* n);
  Value lowerScatter(const Node* n, const std::string& op);
  Value lowerEmbeddingBackward(const Node* n);

  // ---- Pooling (Pooling.cpp) --------------------------------------------------------------
  std::vector<Value> lowerMaxPool2d(const Node* n);

  struct PoolWindow {
    std::array<int64_t, 2> kernel, stride, padding, dilation, in, out;
  };

  static std::vector<int64_t> spatialSizes(const Node* n, const Shape& sizes);
  PoolWindow poolWindow(const Node* n, size_t first, const Shape& inSizes, const Shape& outSizes,
                        bool dilated = true);

  // max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
  // ceil_mode, indices): grad_input[.., y, x] sums grad_output over the outputs whose window
  // holds (y, x) and whose index is y*W + x. Along each dim the outputs that can hold an input
  // position are few: for windows that do not overlap (stride >= dilated kernel: the usual 2x2
  // pool) exactly one, o = (y + pad) / stride, valid when the remainder falls on a kernel tap;
  // otherwise one per kernel offset k, o = (y + pad - k*dil) / stride when it divides. They are
  // summed with o ascending, the order in which eager's scatter adds them. Conditions the
  // ranges prove are left out.
  struct PoolCandidate {
    IndexExpr o;              // the output position along the dim
    std::vector<IndexExpr> zero; // expressions that must be 0
    std::vector<std::pair<IndexExpr, int64_t>> below; // (e, n): 0 <= e < n must hold
  };

  static std::vector<PoolCandidate> poolCandidates(const PoolWindow& w, size_t d, const IndexExpr& i);
  static int emitCandidateValid(BodyContext& c, const PoolCandidate& p);
  template <typename Visit>
  static void forEachPoolCandidate(BodyContext& c, const PoolWindow& w, const Index& idx, Visit visit);
  Value lowerMaxPool2dBackward(const Node* n);
  Value lowerAvgPool2d(const Node* n, bool adaptive);

  // An average pool's window and divisor rule (avg_pool2d's arguments; an adaptive pool is a
  // window of in/out with the padded count).
  struct AvgPool {
    PoolWindow w;
    bool includePad = true;
    std::optional<int64_t> divisor;

    // The divisor of the output at spatial position `o`, as eager's avgDivisor: the override,
    // or the window's extent over the padded input (count_include_pad) or over the input; at
    // least 1 (an empty window, only where ceil_mode leaves one, gives 0 as eager's count 1).
    IndexExpr divisorAt(const std::array<IndexExpr, 2>& o, const RangeFacts& facts) const {
      if (divisor) return IndexExpr(*divisor);
      std::array<IndexExpr, 2> extent;
      for (size_t d = 0; d < 2; ++d) {
        IndexExpr start = o[d] * IndexExpr(w.stride[d]) - IndexExpr(w.padding[d]);
        IndexExpr end = min(start + IndexExpr(w.kernel[d]), IndexExpr(w.in[d] + w.padding[d]));
        extent[d] = includePad ? end - start : min(end, IndexExpr(w.in[d])) - max(start, IndexExpr(0));
      }
      return simplify(max(simplify(extent[0] * extent[1], facts), IndexExpr(1)), facts);
    }
  };

  PoolWindow adaptivePoolWindow(const Node* n, const Shape& inSizes, const Shape& outSizes);
  Value lowerAvgPool2dBackward(const Node* n, bool adaptive);
  static int emitMaxWindow(BodyContext& c, const Loader& in, const PoolWindow& w, ScalarType dtype,
                           const Index& idx, bool wantIndex);

  // ---- State ---------------------------------------------------------------------------------
  const Graph& graph_;
  LoopProgram program_;
  std::set<std::string> names_;
  int counter_ = 0;
  std::unordered_map<const Node*, Value> values_;
  std::unordered_map<const Node*, std::vector<Value>> tuples_; // ops with several results
  std::unordered_map<const Node*, size_t> order_;        // position in the graph
  std::unordered_map<std::string, std::string> versionRoot_; // in-place buffer -> root storage
};

} // namespace kiln::compiler::lowering
