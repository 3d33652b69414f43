// LoopProgram -> C++ source (see CppCodegen.h). The program becomes a list of units run in
// order: loop nests (a kernel group fused into one nest when its ranges allow, every other
// buffer alone) and extern GEMM calls; kiln_entry allocates intermediates before the unit that
// defines them and frees them after the last unit that reads them; a buffer planned to reuse a
// dead one's storage (Buffer::reuses) shares that allocation.
//
// A nest is a set of outer loops (run in parallel above the work threshold) around phases: a
// pointwise phase loops over the inner ranges of pointwise buffers, a reduction phase over the
// reduction ranges of reductions sharing them. Softmax over the last dim is one nest: per row,
// a max phase, a sum phase, then the pointwise phase, with the row's max and sum kept in locals.
#include "codegen/CppCodegen.h"

#include <cstdint>
#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <sstream>

#include "codegen/CppExpr.h"
#include "codegen/CppPrelude.h"
#include "codegen/KernelPlan.h"
#include "codegen/KernelText.h"
#include "ir/loop/GemmEpilogue.h"
#include "runtime/Error.h"

namespace kiln::codegen {

namespace {

// A row phase that reads again a row an earlier phase of the nest read (softmax's and
// cross-entropy's sum of exps after the max) prefetches the next row's elements of that buffer
// while it runs, when a row is at most this many bytes (so that two rows stay in L2 together).
constexpr int64_t kPrefetchRowBytes = 256 * 1024;
// Float sums add blocks of this many elements into a partial sum first (two-level summation).
constexpr int64_t kSumBlock = 512;
// Outer loops with fewer iterations than this run each phase in parallel instead when the rows
// are large (a few long rows would leave most threads idle).
constexpr int64_t kMinParallelRows = 32;
// A reduction over a strided dim runs over column blocks of this many output elements, the
// reduction loop outside the contiguous column loop (one accumulator per column, on the stack).
constexpr int64_t kColumnBlock = 256;
// A program whose kernels have this much C++ source or more is split into several translation
// units (CppOptions::translationUnits), compiled in parallel, each with at least kPartBytes of
// kernels: g++ takes about 25 ms per KB at -O3 here, a unit more costs its prelude parsed again
// and a link (~70 ms). nanoGPT's forward and backward (120-140 KB each) took 2.5-3 s of g++ each
// in one unit, on one of the cores.
constexpr size_t kSplitBytes = 64 * 1024;
constexpr size_t kPartBytes = 32 * 1024;
// A row nest in parallel with at least this many phases runs each row in a function of its own
// (NestEmitter::emit).
constexpr size_t kRowFunctionPhases = 4;

// Whether a float sum over `extent` elements is blocked (two-level summation): always for a
// symbolic extent, so the result does not depend on where the hint fell.
bool blocksSum(const IndexExpr& extent) {
  std::optional<int64_t> c = extent.constant();
  return !c || *c > kSumBlock;
}

// ---------------------------------------------------------------------------------------------
// Text emission

// Emits one nest as a static function; the names it reads and writes become its parameters.
class NestEmitter {
public:
  // `roots` maps in-place buffers to the input or buffer whose storage they write.
  NestEmitter(const Nest& nest, const CppOptions& options,
              const std::map<std::string, std::string>& cNames,
              const std::map<std::string, ScalarType>& dtypes,
              const std::map<std::string, std::string>& roots, const std::vector<std::string>& symbols)
      : nest_(nest), options_(options), cNames_(cNames), dtypes_(dtypes), roots_(roots),
        symbols_(symbols) {}

  // The function text; `params` gets the names behind its pointer parameters, in order.
  std::string emit(const std::string& fname, const std::string& label,
                   std::vector<std::string>& params) {
    reorderForContiguity();
    shareReducedValues();
    serial_ = scatters();
    int64_t rows = hint(tripCount(nest_.outer)), rowWork = 0;
    for (const Phase& p : nest_.phases) rowWork += hint(tripCount(p.loops));
    bool parallel = !serial_ && rows * std::max<int64_t>(rowWork, 1) >= options_.parallelThreshold;
    bool outerParallel = parallel && rows >= 2 &&
                         (rows >= kMinParallelRows || rowWork < options_.parallelThreshold);
    phaseParallel_ = parallel && !outerParallel;
    code_.indent_ = 1;
    // A row nest in parallel whose rows hold several phases: the row is a function of its own
    // (not inlined), which the parallel loop calls. Inside the region OpenMP outlines, a big
    // loop body with many simd loops took g++ 4x as long (a nest of 30 reduction phases: 4.0 s
    // against 0.9 s), and the row function keeps its pointers __restrict.
    bool rowFunction = !columnOrder() && outerParallel && nest_.phases.size() >= kRowFunctionPhases;
    if (columnOrder()) {
      emitColumnNest(parallel);
    } else if (rowFunction) {
      usesThreads_ = true;
      emitPhases();
    } else {
      emitRowNest(outerParallel);
    }

    std::string sig, args;
    if (usesErrors_) {
      sig = "KilnError* __restrict kerr";
      args = "kerr";
    }
    for (const auto& [name, written] : pointers_) {
      params.push_back(name);
      sig += std::string(sig.empty() ? "" : ", ") + (written ? "" : "const ") +
             cppStorageType(dtypes_.at(name)) + "* __restrict " + cNames_.at(name);
      args += std::string(args.empty() ? "" : ", ") + cNames_.at(name);
    }
    // Every size symbol, after the pointers (ProgramEmitter passes them all to every unit).
    for (const std::string& sym : symbols_) {
      sig += std::string(sig.empty() ? "" : ", ") + "[[maybe_unused]] int64_t " + sym;
      args += std::string(args.empty() ? "" : ", ") + sym;
    }
    if (rowFunction) {
      std::string rowSig = sig, rowArgs = args;
      for (const Loop& l : nest_.outer) {
        rowSig += std::string(rowSig.empty() ? "" : ", ") + "int64_t " + l.var;
        rowArgs += std::string(rowArgs.empty() ? "" : ", ") + l.var;
      }
      Code outer;
      outer.indent_ = 1;
      std::string collapse =
          nest_.outer.size() > 1 ? " collapse(" + std::to_string(nest_.outer.size()) + ")" : "";
      outer.line("#pragma omp parallel for" + collapse + " num_threads(nt)");
      for (const Loop& l : nest_.outer) outer.open(forLoop(l));
      outer.line(fname + "_row(" + rowArgs + ");");
      for (size_t i = 0; i < nest_.outer.size(); ++i) outer.close();
      sig = "int nt" + std::string(sig.empty() ? "" : ", ") + sig;
      return "// " + label + ": one row\n__attribute__((noinline)) static void " + fname + "_row(" +
             rowSig + ") {\n" + code_.str() + "}\n\n// " + label + "\nstatic void " + fname +
             "(" + sig + ") {\n" + outer.str() + "}\n";
    }
    if (usesThreads_) sig = "int nt" + std::string(sig.empty() ? "" : ", ") + sig;
    return "// " + label + "\n" + optimizeAttribute() + "static void " + fname + "(" + sig +
           ") {\n" + code_.str() + "}\n";
  }

  // GCC 12's jump threading duplicates the paths through a chain of selects that carry an
  // integer alongside a float (max_pool2d's value and index: `take = v > best || v != v`, then
  // `best = take ? v : best`, `where = take ? i : where`) into selects of booleans its
  // vectorizer rejects, so the loop stayed scalar with a branch per element. Off for such
  // nests only: elsewhere (attention's masked softmax) threading made the code faster. A compiled
  // CNN training step (2x2 max pools with indices): 1.69 -> 1.03 ms, one thread.
  std::string optimizeAttribute() const {
    for (const Phase& p : nest_.phases)
      for (const Member& m : p.members)
        for (const LoopOp& op : m.body.ops)
          if (op.code == LoopOpCode::Where && op.dtype != ScalarType::Bool && !isFloatingType(op.dtype))
            return "__attribute__((optimize(\"no-thread-jumps\"))) ";
    return "";
  }

  // Whether the function takes the thread count `nt` as its first parameter.
  bool usesThreads() const { return usesThreads_; }
  // Whether it takes the KilnError* its indirect indices report to (after nt): the caller
  // checks it after the call.
  bool usesErrors() const { return usesErrors_; }

private:
  int64_t hint(const IndexExpr& e) const { return hinted(e, options_.sizeHints); }

  // The outer loops (in parallel when `outerParallel`) around the phases, in order.
  // Every phase of the nest, in order, at the current point of the code.
  void emitPhases() {
    for (size_t i = 0; i < nest_.phases.size(); ++i) {
      current_ = i;
      if (nest_.phases[i].isReduction)
        emitReductionPhase(nest_.phases[i]);
      else
        emitPointwisePhase(nest_.phases[i]);
    }
  }

  void emitRowNest(bool outerParallel) {
    if (outerParallel) {
      usesThreads_ = true;
      std::string collapse = nest_.outer.size() > 1 ? " collapse(" + std::to_string(nest_.outer.size()) + ")" : "";
      code_.line("#pragma omp parallel for" + collapse + " num_threads(nt)");
    }
    for (const Loop& l : nest_.outer) code_.open(forLoop(l));
    emitPhases();
    for (size_t i = 0; i < nest_.outer.size(); ++i) code_.close();
  }

  // A pointwise nest of one phase loops in the output's order, its last range innermost. When
  // its memory accesses (loads of other buffers and the stores of materialized members) cost
  // less with another range innermost (e.g. two transposed inputs), that range becomes the
  // innermost loop: the loop variables keep their names, only the nesting changes. An access
  // costs nothing when its stride in the innermost loop is 0 (hoisted or broadcast) or 1
  // (vector loads), 1 for a small stride (the same cache lines, vector shuffles: a 2x2 pool's
  // reads), 4 otherwise (a gather, a cache line per element).
  void reorderForContiguity() {
    if (nest_.phases.size() != 1 || nest_.phases[0].isReduction || nest_.phases[0].loops.size() != 1 ||
        nest_.outer.empty())
      return;
    Phase& phase = nest_.phases[0];
    RangeFacts facts = factsOf(nest_.outer, phase.loops);
    std::set<std::string> members;
    for (const Member& m : phase.members) members.insert(m.buffer->name);
    std::vector<IndexExpr> accesses;
    for (const Member& m : phase.members) {
      for (const LoopOp& op : m.body.ops)
        if (op.code == LoopOpCode::Load && !members.count(op.buffer)) accesses.push_back(op.index);
      if (m.materialize) accesses.push_back(m.flat);
    }
    auto cost = [&](const std::string& v) {
      int64_t total = 0;
      for (const IndexExpr& e : accesses) {
        std::optional<int64_t> stride = strideOf(e, v, facts);
        if (stride && (*stride == 0 || *stride == 1)) continue;
        total += stride && std::abs(*stride) <= 4 ? 1 : 4;
      }
      return total;
    };
    size_t best = nest_.outer.size();
    int64_t bestCost = cost(phase.loops[0].var);
    for (size_t k = 0; k < nest_.outer.size(); ++k) {
      int64_t c = cost(nest_.outer[k].var);
      if (c < bestCost) {
        best = k;
        bestCost = c;
      }
    }
    if (best < nest_.outer.size()) std::swap(nest_.outer[best], phase.loops[0]);
  }

  // Whether value `i` of body `a` and value `j` of body `b` compute the same thing: the same ops
  // on the same constants and loads of the same elements (b's index expressions renamed by
  // `renames`).
  static bool sameValue(const LoopBody& a, int i, const LoopBody& b, int j,
                        const std::map<std::string, IndexExpr>& renames, const RangeFacts& facts) {
    const LoopOp& x = a.ops[i];
    const LoopOp& y = b.ops[j];
    if (x.code != y.code || x.dtype != y.dtype || x.buffer != y.buffer || x.intValue != y.intValue ||
        x.operands.size() != y.operands.size())
      return false;
    if (x.code == LoopOpCode::Constant && !(x.floatValue == y.floatValue ||
                                            (x.floatValue != x.floatValue && y.floatValue != y.floatValue)))
      return false;
    if ((x.code == LoopOpCode::Load || x.code == LoopOpCode::IndexExpr) &&
        simplify(x.index - y.index.substitute(renames), facts) != IndexExpr(0))
      return false;
    for (size_t k = 0; k < x.operands.size(); ++k)
      if (!sameValue(a, x.operands[k], b, y.operands[k], renames, facts)) return false;
    return true;
  }

  // Softmax's pattern: a float sum phase over one loop whose summed value (exp(x - max)) a
  // following pointwise phase over the same extent computes again for the element it stores.
  // The sum loop then also stores that value into the pointwise member's output, and the
  // pointwise member reads it back instead of recomputing it (one exp per element, not two).
  void shareReducedValues() {
    for (size_t pi = 0; pi + 1 < nest_.phases.size(); ++pi) {
      Phase& red = nest_.phases[pi];
      Phase& pw = nest_.phases[pi + 1];
      if (!red.isReduction || pw.isReduction || red.members.size() != 1 || red.loops.size() != 1 ||
          pw.loops.size() != 1 || red.loops[0].extent != pw.loops[0].extent)
        continue;
      const Member& rm = red.members[0];
      Accumulator acc = makeAccumulator(rm);
      if (acc.kind != ReductionKind::Sum ||
          (acc.value != ScalarType::Float32 && acc.value != ScalarType::Float64))
        continue;
      const int reduced = rm.body.ops.back().operands[0];
      // A load or constant is as cheap to read again as the stored copy.
      LoopOpCode rc = rm.body.ops[reduced].code;
      if (rc == LoopOpCode::Load || rc == LoopOpCode::Constant || rc == LoopOpCode::IndexExpr) continue;
      std::map<std::string, IndexExpr> toReduction{{pw.loops[0].var, IndexExpr::var(red.loops[0].var)}};
      RangeFacts facts = factsOf(nest_.outer, red.loops);
      for (Member& m : pw.members) {
        if (!m.materialize || m.buffer->dtype != acc.value) continue;
        for (int k = int(m.body.ops.size()) - 2; k >= 0; --k) {
          if (!sameValue(rm.body, reduced, m.body, k, toReduction, facts)) continue;
          sideStores_[pi] = {m.buffer->name, simplify(m.flat.substitute(toReduction), facts)};
          LoopOp load;
          load.code = LoopOpCode::Load;
          load.dtype = acc.value;
          load.buffer = m.buffer->name;
          load.index = m.flat;
          m.body.ops[k] = load;
          break;
        }
        if (sideStores_.count(pi)) break;
      }
    }
  }

  // The constant stride of `index` in variable `v` (nullopt when it is not affine in `v`).
  static std::optional<int64_t> strideOf(const IndexExpr& index, const std::string& v,
                                         const RangeFacts& facts) {
    IndexExpr next = index.substitute({{v, IndexExpr::var(v) + IndexExpr(1)}});
    return simplify(next - index, facts).constant();
  }

  // Whether to use the column order: the nest reduces over a strided dim (a reduction over a
  // middle or leading dim) while the last outer loop is the contiguous dim of most loads. Only a
  // first phase of elementwise reductions (sum, prod, max, min, any, all) over one loop followed
  // by loop-less pointwise phases (per-element epilogues such as mean's division) qualifies.
  bool columnOrder() const {
    if (nest_.outer.empty() || nest_.phases.empty()) return false;
    const Phase& red = nest_.phases[0];
    if (!red.isReduction || red.loops.size() != 1) return false;
    for (size_t i = 1; i < nest_.phases.size(); ++i)
      if (nest_.phases[i].isReduction || !nest_.phases[i].loops.empty()) return false;
    for (const Member& m : red.members)
      if (!makeAccumulator(m).simd()) return false;
    const std::string& col = nest_.outer.back().var;
    const std::string& r = red.loops[0].var;
    RangeFacts facts = factsOf(nest_.outer, red.loops);
    int alongColumns = 0, alongReduction = 0;
    for (const Member& m : red.members)
      for (const LoopOp& op : m.body.ops) {
        if (op.code != LoopOpCode::Load) continue;
        if (strideOf(op.index, r, facts) == 1)
          ++alongReduction;
        else if (strideOf(op.index, col, facts) == 1)
          ++alongColumns;
      }
    return alongColumns > alongReduction;
  }

  // The column order: the outer loops but the last, and blocks of columns (elements of the last
  // outer loop), in parallel together; per block the accumulators are arrays over its columns,
  // the reduction loop runs outside a `simd` loop over the columns (contiguous loads), then a
  // loop over the columns finishes the reductions and runs the per-element phases. Float sums
  // and products keep the row order's two-level summation (partials per block of kSumBlock).
  void emitColumnNest(bool parallel) {
    const Phase& red = nest_.phases[0];
    const Loop& col = nest_.outer.back();
    const Loop& r = red.loops[0];
    // The accumulator arrays are on the stack: a symbolic column count gets full-size blocks.
    const int64_t block = std::min(col.extent.constant().value_or(kColumnBlock), kColumnBlock);
    std::vector<Accumulator> accs;
    for (const Member& m : red.members) accs.push_back(makeAccumulator(m));
    bool anyPart = std::any_of(accs.begin(), accs.end(), [](const Accumulator& a) { return a.usesPart(); });
    bool blocked = blocksSum(r.extent) && anyPart;
    auto nanFlag = [](const Accumulator& a) {
      return a.floating() && (a.kind == ReductionKind::Max || a.kind == ReductionKind::Min);
    };
    size_t outerCount = nest_.outer.size() - 1;
    std::string L = sizeText(col.extent), B = std::to_string(block);
    code_.line("// column order: the reduction loop outside the contiguous loop over " + col.var);
    if (parallel) {
      usesThreads_ = true;
      std::string collapse = outerCount ? " collapse(" + std::to_string(outerCount + 1) + ")" : "";
      code_.line("#pragma omp parallel for" + collapse + " num_threads(nt)");
    }
    for (size_t i = 0; i < outerCount; ++i) code_.open(forLoop(nest_.outer[i]));
    code_.open("for (int64_t cb = 0; cb < " + L + "; cb += " + B + ") {");
    code_.line("const int64_t ce = kiln_min<int64_t>(" + L + ", cb + " + B + ");");
    for (const Accumulator& a : accs) {
      code_.line(a.type + " " + a.name + "_col[" + B + "];");
      if (nanFlag(a)) code_.line("int " + a.name + "_nan_col[" + B + "];");
      if (blocked && a.usesPart()) code_.line(a.type + " " + a.name + "_p_col[" + B + "];");
    }
    code_.line("#pragma omp simd");
    code_.open("for (int64_t j = 0; j < " + B + "; ++j) {");
    for (const Accumulator& a : accs) {
      code_.line(a.name + "_col[j] = " + a.initValue() + ";");
      if (nanFlag(a)) code_.line(a.name + "_nan_col[j] = 0;");
    }
    code_.close();
    // References naming a column's accumulators as the row order's scalar accumulators.
    auto columnRefs = [&](bool part) {
      std::string j = col.var + " - cb";
      for (const Accumulator& a : accs) {
        if (part && a.usesPart()) {
          code_.line(a.type + "& " + a.name + "_p = " + a.name + "_p_col[" + j + "];");
          continue;
        }
        code_.line(a.type + "& " + a.name + " = " + a.name + "_col[" + j + "];");
        if (nanFlag(a)) code_.line("int& " + a.name + "_nan = " + a.name + "_nan_col[" + j + "];");
      }
    };
    std::string colLoop = "for (int64_t " + col.var + " = cb; " + col.var + " < ce; ++" + col.var + ") {";
    BodyEnv e = env(red);
    auto emitUpdates = [&](bool part) {
      code_.line("#pragma omp simd");
      code_.open(colLoop);
      columnRefs(part);
      for (size_t i = 0; i < red.members.size(); ++i) {
        const Member& m = red.members[i];
        std::vector<std::string> body;
        std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "_", e, body);
        code_.lines(body);
        code_.lines(accs[i].update(v, "0", part));
      }
      code_.close();
    };
    if (blocked) {
      std::string N = sizeText(r.extent), SB = std::to_string(kSumBlock);
      code_.open("for (int64_t rb = 0; rb < " + N + "; rb += " + SB + ") {");
      code_.line("const int64_t re = kiln_min<int64_t>(" + N + ", rb + " + SB + ");");
      code_.line("#pragma omp simd");
      code_.open("for (int64_t j = 0; j < " + B + "; ++j) {");
      for (const Accumulator& a : accs)
        if (a.usesPart()) code_.line(a.name + "_p_col[j] = " + a.initValue() + ";");
      code_.close();
      code_.open("for (int64_t " + r.var + " = rb; " + r.var + " < re; ++" + r.var + ") {");
      emitUpdates(true);
      code_.close();
      code_.line("#pragma omp simd");
      code_.open("for (int64_t j = 0; j < " + B + "; ++j) {");
      for (const Accumulator& a : accs)
        if (a.usesPart())
          code_.line(a.name + "_col[j]" + (a.kind == ReductionKind::Sum ? " += " : " *= ") + a.name + "_p_col[j];");
      code_.close();
      code_.close();
    } else {
      code_.open(forLoop(r));
      emitUpdates(false);
      code_.close();
    }
    code_.open(colLoop);
    columnRefs(false);
    current_ = 0;
    for (size_t i = 0; i < red.members.size(); ++i) {
      const Member& m = red.members[i];
      std::string local = "v" + std::to_string(m.id);
      code_.line("const " + std::string(cppComputeType(m.buffer->dtype)) + " " + local + " = " +
                 accs[i].finalValue() + ";");
      store(m, local);
      locals_[m.buffer->name] = {local, m.flat};
    }
    for (size_t i = 1; i < nest_.phases.size(); ++i) {
      current_ = i;
      emitPointwisePhase(nest_.phases[i]);
    }
    code_.close();
    code_.close();
    for (size_t i = 0; i < outerCount; ++i) code_.close();
  }

  // The pointer parameter of a buffer or input; versions of one storage share their root's.
  std::string pointer(const std::string& version, bool written) {
    auto root = roots_.find(version);
    const std::string& name = root == roots_.end() ? version : root->second;
    auto it = std::find_if(pointers_.begin(), pointers_.end(),
                           [&](const auto& p) { return p.first == name; });
    if (it == pointers_.end())
      pointers_.push_back({name, written});
    else
      it->second = it->second || written;
    return cNames_.at(name);
  }

  // Whether a member stores through an indirect index or accumulates: such a nest runs
  // serially, without simd, so duplicate indices add up (or the last write wins) as in eager's
  // loops instead of racing.
  bool scatters() const {
    for (const Phase& p : nest_.phases)
      for (const Member& m : p.members)
        if (const auto* pw = std::get_if<Pointwise>(&m.buffer->computation))
          if (!pw->into.empty() && (pw->accumulate || !indirectVars(pw->body).empty())) return true;
    return false;
  }

  BodyEnv env(const Phase& phase) {
    BodyEnv e;
    e.errors = [this]() {
      usesErrors_ = true;
      return std::string("kerr");
    };
    e.facts = factsOf(nest_.outer, phase.loops);
    e.pointer = [this](const std::string& b) { return pointer(b, false); };
    RangeFacts facts = e.facts;
    e.forwarded = [this, facts](const std::string& b, const IndexExpr& index) -> std::optional<std::string> {
      auto it = locals_.find(b);
      if (it == locals_.end()) return std::nullopt;
      if (simplify(index - it->second.second, facts) != IndexExpr(0)) return std::nullopt;
      return it->second.first;
    };
    return e;
  }

  std::string storeLine(const Member& m, const std::string& value) {
    // A scatter's index names the locals of the body's indirect ops.
    std::map<std::string, IndexExpr> indirect = indirectNames(m.body, "t" + std::to_string(m.id) + "_");
    std::string at = pointer(m.buffer->name, true) + "[" +
                     cppIndex(indirect.empty() ? m.flat : m.flat.substitute(indirect),
                              factsOf(nest_.outer, nest_.phases[current_].loops)) + "]";
    const auto* pw = std::get_if<Pointwise>(&m.buffer->computation);
    if (pw && pw->accumulate)
      return at + " = " + cppToStorage(m.buffer->dtype, cppFromStorage(m.buffer->dtype, at) + " + " + value) + ";";
    return at + " = " + cppToStorage(m.buffer->dtype, value) + ";";
  }
  void store(const Member& m, const std::string& value) {
    if (m.materialize) code_.line(storeLine(m, value));
  }

  void emitPointwisePhase(const Phase& phase) {
    bool parallel = phaseParallel_ && hint(tripCount(phase.loops)) >= options_.parallelThreshold;
    // The members' bodies first: their loop-invariant values go before the loops.
    BodyEnv e = env(phase);
    std::map<std::string, std::string> shared;
    e.shared = &shared;
    std::set<std::string> loopVars;
    for (const Loop& l : phase.loops) loopVars.insert(l.var);
    std::vector<std::string> added, hoisted, inner;
    for (const Member& m : phase.members) {
      std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "_", e, inner, hoisted, loopVars);
      if (m.materialize) inner.push_back(storeLine(m, v));
      locals_[m.buffer->name] = {v, m.flat};
      added.push_back(m.buffer->name);
    }
    code_.lines(hoisted);
    for (size_t k = 0; k < phase.loops.size(); ++k) {
      bool last = k + 1 == phase.loops.size();
      if (k == 0 && parallel) {
        usesThreads_ = true;
        code_.line(std::string("#pragma omp parallel for") + (last ? " simd" : "") + " num_threads(nt)");
      } else if (last && !serial_) {
        code_.line("#pragma omp simd");
      }
      code_.open(forLoop(phase.loops[k]));
    }
    code_.lines(inner);
    for (size_t k = 0; k < phase.loops.size(); ++k) code_.close();
    // The locals of the phase's loop body are out of scope after it.
    if (!phase.loops.empty())
      for (const std::string& name : added) locals_.erase(name);
  }

  void emitReductionPhase(const Phase& phase) {
    std::vector<Accumulator> accs;
    std::vector<int> sameBodyAs; // the earlier member with an equal body, or -1
    for (size_t i = 0; i < phase.members.size(); ++i) {
      const Member& m = phase.members[i];
      Accumulator a = makeAccumulator(m);
      int same = -1;
      for (size_t j = 0; j < i; ++j)
        if (phase.members[j].body == m.body) same = int(j);
      bool welford = a.kind == ReductionKind::WelfordMean || a.kind == ReductionKind::WelfordVar;
      if (same >= 0 && welford) {
        const Accumulator& o = accs[same];
        if (o.kind == ReductionKind::WelfordMean || o.kind == ReductionKind::WelfordVar) {
          a.name = o.name;
          a.shared = true;
        }
      }
      accs.push_back(a);
      sameBodyAs.push_back(same);
    }
    bool allSimd = std::all_of(accs.begin(), accs.end(), [](const Accumulator& a) { return a.simd(); });
    bool anyPart = std::any_of(accs.begin(), accs.end(), [](const Accumulator& a) { return a.usesPart(); });
    int64_t trip = hint(tripCount(phase.loops));
    bool parallel = phaseParallel_ && allSimd && trip >= options_.parallelThreshold && !phase.loops.empty();
    if (parallel) usesThreads_ = true;
    auto clauses = [&](bool part) {
      std::string s;
      for (const Accumulator& a : accs) s += a.clauses(part);
      return s;
    };
    for (const Accumulator& a : accs) code_.lines(a.declare());

    BodyEnv e = env(phase);
    std::string pos = phase.loops.empty() ? "0" : cppIndex(flatIndex(phase.loops), e.facts);
    // The members' bodies, then `update(i, value)` of each.
    auto emitBodiesWith = [&](const std::function<std::vector<std::string>(size_t, const std::string&)>& update) {
      std::vector<std::string> values;
      for (size_t i = 0; i < phase.members.size(); ++i) {
        const Member& m = phase.members[i];
        if (sameBodyAs[i] >= 0) {
          values.push_back(values[sameBodyAs[i]]);
        } else {
          std::vector<std::string> body;
          values.push_back(emitBody(m.body, "t" + std::to_string(m.id) + "_", e, body));
          code_.lines(body);
        }
        code_.lines(update(i, values.back()));
      }
    };
    auto side = sideStores_.find(current_);
    auto emitBodies = [&](bool part) {
      emitBodiesWith([&](size_t i, const std::string& v) {
        std::vector<std::string> lines = accs[i].update(v, pos, part);
        if (side != sideStores_.end())
          lines.push_back(pointer(side->second.first, true) + "[" + cppIndex(side->second.second, e.facts) +
                          "] = " + v + ";");
        return lines;
      });
    };
    bool allWelford = std::all_of(accs.begin(), accs.end(), [](const Accumulator& a) {
      return a.kind == ReductionKind::WelfordMean || a.kind == ReductionKind::WelfordVar;
    });

    size_t n = phase.loops.size();
    for (size_t k = 0; k + 1 < n; ++k) {
      if (k == 0 && parallel) code_.line("#pragma omp parallel for num_threads(nt)" + clauses(false));
      code_.open(forLoop(phase.loops[k]));
    }
    if (n == 0) {
      emitBodies(false);
    } else if (allWelford) {
      emitWelfordBlocks(phase.loops.back(), accs, emitBodiesWith);
    } else {
      const Loop& inner = phase.loops.back();
      bool blocked = blocksSum(inner.extent) && (anyPart || parallel);
      bool parallelHere = parallel && n == 1;
      if (blocked) {
        std::string N = sizeText(inner.extent), B = std::to_string(kSumBlock);
        if (parallelHere) code_.line("#pragma omp parallel for num_threads(nt)" + clauses(false));
        code_.open("for (int64_t rb = 0; rb < " + N + "; rb += " + B + ") {");
        code_.line("const int64_t re = kiln_min<int64_t>(" + N + ", rb + " + B + ");");
        for (const Accumulator& a : accs) code_.lines(a.declarePart());
        emitNextRowPrefetch(phase, e.facts);
        if (allSimd) code_.line("#pragma omp simd" + clauses(true));
        code_.open("for (int64_t " + inner.var + " = rb; " + inner.var + " < re; ++" + inner.var + ") {");
        emitBodies(true);
        code_.close();
        for (const Accumulator& a : accs) code_.lines(a.combinePart());
        code_.close();
      } else {
        if (parallelHere)
          code_.line("#pragma omp parallel for simd num_threads(nt)" + clauses(false));
        else if (allSimd)
          code_.line("#pragma omp simd" + clauses(false));
        code_.open(forLoop(inner));
        emitBodies(false);
        code_.close();
      }
    }
    for (size_t k = 0; k + 1 < n; ++k) code_.close();

    for (size_t i = 0; i < phase.members.size(); ++i) {
      const Member& m = phase.members[i];
      std::string local = "v" + std::to_string(m.id);
      code_.line("const " + std::string(cppComputeType(m.buffer->dtype)) + " " + local + " = " +
                 accs[i].finalValue() + ";");
      store(m, local);
      locals_[m.buffer->name] = {local, m.flat};
    }
  }

  // Inside a block [rb, re) of a row phase over one loop: prefetches of the same block of the next
  // row (the last outer loop's next value) of each buffer this phase reads contiguously along
  // its loop, when an earlier phase of the nest read it too and no later phase does. The earlier
  // phase (the max) waits on memory while this one (the sum of exps) is compute-bound from
  // cache: prefetched, the next row's first pass reads from L2. A C++ model of the max + sum of
  // exps nest, best of about 700 chunks of rows on a loaded 2-core Zen 3: rows of 32000 floats
  // 22.1 -> 16.6 us a row (torch.compile's kernel 21.3), rows of 4096 2.76 -> 2.39 us (2 threads).
  void emitNextRowPrefetch(const Phase& phase, const RangeFacts& facts) {
    if (nest_.outer.empty() || phase.loops.size() != 1) return;
    const std::string& row = nest_.outer.back().var;
    const Loop& inner = phase.loops[0];
    auto readsIn = [&](size_t pi, const std::string& buffer) {
      for (const Member& m : nest_.phases[pi].members)
        for (const LoopOp& op : m.body.ops)
          if (op.code == LoopOpCode::Load && op.buffer == buffer) return true;
      return false;
    };
    std::set<std::string> done;
    for (const Member& m : phase.members)
      for (const LoopOp& op : m.body.ops) {
        if (op.code != LoopOpCode::Load || done.count(op.buffer) || !dtypes_.count(op.buffer)) continue;
        int64_t elem = int64_t(elementSize(dtypes_.at(op.buffer)));
        if (hint(inner.extent) * elem > kPrefetchRowBytes || strideOf(op.index, inner.var, facts) != 1) continue;
        std::optional<int64_t> rowStride = strideOf(op.index, row, facts);
        if (!rowStride || *rowStride == 0) continue;
        bool earlier = false, later = false;
        for (size_t pi = 0; pi < current_; ++pi) earlier = earlier || readsIn(pi, op.buffer);
        for (size_t pi = current_ + 1; pi < nest_.phases.size(); ++pi) later = later || readsIn(pi, op.buffer);
        if (!earlier || later) continue;
        done.insert(op.buffer);
        IndexExpr next = op.index.substitute({{row, IndexExpr::var(row) + IndexExpr(1)},
                                              {inner.var, IndexExpr::var("pf")}});
        code_.open("if (" + row + " + 1 < " + sizeText(nest_.outer.back().extent) + ") {");
        code_.line("for (int64_t pf = rb; pf < re; pf += " + std::to_string(std::max<int64_t>(64 / elem, 1)) +
                   ") __builtin_prefetch(&" + pointer(op.buffer, false) + "[" + cppIndex(next, facts) + "]);");
        code_.close();
      }
  }

  // Welford reductions by blocks: each block's mean and M2 in two vectorizable passes (sums in
  // double), merged into the running state with Chan's update; the sequential Welford update
  // divides for every element and does not vectorize.
  template <typename EmitBodies>
  void emitWelfordBlocks(const Loop& inner, const std::vector<Accumulator>& accs,
                         const EmitBodies& emitBodiesWith) {
    std::vector<const Accumulator*> own;
    for (const Accumulator& a : accs)
      if (!a.shared) own.push_back(&a);
    auto clauses = [&](const char* suffix) {
      std::string c;
      for (const Accumulator* a : own) c += " reduction(+:" + a->name + suffix + ")";
      return c;
    };
    auto isOwn = [&](size_t i) { return !accs[i].shared; };
    std::string N = sizeText(inner.extent), B = std::to_string(kSumBlock);
    std::string loop = "for (int64_t " + inner.var + " = rb; " + inner.var + " < re; ++" + inner.var + ") {";
    code_.open("for (int64_t rb = 0; rb < " + N + "; rb += " + B + ") {");
    code_.line("const int64_t re = kiln_min<int64_t>(" + N + ", rb + " + B + ");");
    code_.line("const double bn = static_cast<double>(re - rb);");
    for (const Accumulator* a : own) code_.line("double " + a->name + "_s = 0;");
    code_.line("#pragma omp simd" + clauses("_s"));
    code_.open(loop);
    emitBodiesWith([&](size_t i, const std::string& v) -> std::vector<std::string> {
      if (!isOwn(i)) return {};
      return {accs[i].name + "_s += static_cast<double>(" + v + ");"};
    });
    code_.close();
    for (const Accumulator* a : own) {
      code_.line("const double " + a->name + "_bmean = " + a->name + "_s / bn;");
      code_.line("double " + a->name + "_bm2 = 0;");
    }
    code_.line("#pragma omp simd" + clauses("_bm2"));
    code_.open(loop);
    emitBodiesWith([&](size_t i, const std::string& v) -> std::vector<std::string> {
      if (!isOwn(i)) return {};
      const std::string& a = accs[i].name;
      return {"const double " + a + "_d = static_cast<double>(" + v + ") - " + a + "_bmean;",
              a + "_bm2 += " + a + "_d * " + a + "_d;"};
    });
    code_.close();
    for (const Accumulator* a : own) {
      const std::string& x = a->name;
      code_.open("{");
      code_.line("const double total = " + x + "_n + bn, delta = " + x + "_bmean - " + x + "_mean;");
      code_.line(x + "_mean += delta * (bn / total);");
      code_.line(x + "_m2 += " + x + "_bm2 + delta * delta * (" + x + "_n * bn / total);");
      code_.line(x + "_n = total;");
      code_.close();
    }
    code_.close();
  }

  Nest nest_; // a copy: reorderForContiguity may swap its loops
  const CppOptions& options_;
  const std::map<std::string, std::string>& cNames_;
  const std::map<std::string, ScalarType>& dtypes_;
  const std::map<std::string, std::string>& roots_;
  const std::vector<std::string>& symbols_;
  Code code_;
  size_t current_ = 0;
  bool phaseParallel_ = false, usesThreads_ = false, usesErrors_ = false, serial_ = false;
  std::vector<std::pair<std::string, bool>> pointers_; // name, written
  std::map<std::string, std::pair<std::string, IndexExpr>> locals_; // buffer -> local, flat
  // Reduction phase -> (buffer, flat index in the phase's variables) its summed value is also
  // stored into (shareReducedValues).
  std::map<size_t, std::pair<std::string, IndexExpr>> sideStores_;
};

// ---------------------------------------------------------------------------------------------
// Extern GEMM calls

struct Operand {
  std::string name;
  std::vector<IndexExpr> sizes, strides;
  int64_t offset = 0; // in elements, from the start of the input or buffer
  ScalarType dtype = ScalarType::Float32;
};

// A pointer expression to an operand's first element.
std::string at(const std::string& pointer, int64_t offset) {
  return offset == 0 ? pointer : "(" + pointer + " + " + std::to_string(offset) + ")";
}

// Nested loops copying a strided view into contiguous memory.
void emitGather(Code& code, const std::string& dst, const std::string& src,
                const std::vector<IndexExpr>& sizes, const std::vector<IndexExpr>& strides) {
  std::vector<Loop> loops = named(sizes, "c");
  IndexExpr from(0);
  for (size_t i = 0; i < loops.size(); ++i) {
    code.open(forLoop(loops[i]));
    from = from + strides[i] * IndexExpr::var(loops[i].var);
  }
  RangeFacts facts = factsOf(loops, {});
  code.line(dst + "[" + cppIndex(flatIndex(loops), facts) + "] = " + src + "[" + cppIndex(from, facts) + "];");
  for (size_t i = 0; i < loops.size(); ++i) code.close();
}

// A GEMM size or leading dimension as BLAS's int: symbolic ones are converted (static ones are
// checked to fit by emitExtern).
std::string blasInt(const IndexExpr& e) {
  return e.isConstant() ? sizeText(e) : "static_cast<int>(" + sizeText(e) + ")";
}

// BLAS takes sizes and leading dimensions as int: symbolic ones (static ones are checked while
// emitting) are checked at run time before the call, and a size beyond INT_MAX makes the
// program return 2 with a RuntimeError naming the op and its sizes (instead of a truncated int).
void emitBlasRangeCheck(Code& code, const std::string& kernel, const std::string& buffer, const IndexExpr& m,
                        const IndexExpr& n, const IndexExpr& k, const std::vector<IndexExpr>& lds) {
  std::vector<std::string> values; // each symbolic size once
  for (const std::vector<IndexExpr>& group : {std::vector<IndexExpr>{m, n, k}, lds})
    for (const IndexExpr& e : group) {
      std::string v = "static_cast<int64_t>(" + sizeText(e) + ")";
      if (!e.isConstant() && std::find(values.begin(), values.end(), v) == values.end()) values.push_back(v);
    }
  if (values.empty()) return;
  std::string cond;
  for (const std::string& v : values) cond += (cond.empty() ? "" : " || ") + v + " > INT32_MAX";
  std::string message = "RuntimeError: extern " + kernel + " (%" + buffer + "): a GEMM size (" +
                        "{index}) is beyond BLAS's int range (at most {size}): m = " + m.str() + ", n = " +
                        n.str() + ", k = " + k.str() + " at these sizes";
  code.open("if (" + cond + ") {");
  code.line("int64_t largest = 0;");
  for (const std::string& v : values) code.line("if (" + v + " > largest) largest = " + v + ";");
  code.line("kiln_index_error(ctx->error, largest, INT32_MAX, " + cppStringLiteral(message) + ");");
  code.line("return 2;");
  code.close();
}

std::string num(double v, bool isDouble) { return cppFloatLiteral(v, isDouble ? ScalarType::Float64 : ScalarType::Float32); }

// The call of ctx->sgemm_post for an mm whose epilogue runs as its post-ops: the steps as static
// tables, the binary steps' tensors (`tensorParam` gives a tensor's storage pointer) in an array.
void emitPostOpCall(Code& code, const std::vector<GemmPostOp>& ops, const MatrixLayout& la,
                    const MatrixLayout& lb, const IndexExpr& m, const IndexExpr& n, const IndexExpr& k,
                    const std::string& pa,
                    const std::string& pb, const std::string& c,
                    const std::function<std::string(const std::string&)>& tensorParam) {
  std::string kinds, scalars, tensors, strides;
  for (size_t i = 0; i < ops.size(); ++i) {
    const GemmPostOp& op = ops[i];
    std::string sep = i ? ", " : "";
    kinds += sep + std::to_string(int(op.kind)) + " /* " + gemmPostOpName(op.kind) + " */";
    scalars += sep + cppFloatLiteral(op.alpha, ScalarType::Float32) + ", " +
               cppFloatLiteral(op.beta, ScalarType::Float32);
    tensors += sep + (op.isBinary() ? at(tensorParam(op.tensor), op.offset) : std::string("nullptr"));
    strides += sep + std::to_string(op.rowStride);
  }
  size_t nops = ops.size();
  std::string count = std::to_string(std::max<size_t>(nops, 1));
  code.open("{");
  code.line("static const int kinds[" + count + "] = {" + (nops ? kinds : "0") + "};");
  code.line("static const float scalars[" + std::to_string(2 * std::max<size_t>(nops, 1)) + "] = {" +
            (nops ? scalars : "0.0f, 0.0f") + "};");
  code.line("const float* const tensors[" + count + "] = {" + (nops ? tensors : "nullptr") + "};");
  code.line("static const int64_t row_strides[" + count + "] = {" + (nops ? strides : "0") + "};");
  code.line("ctx->sgemm_post(" + std::string(la.transposed ? "112" : "111") + ", " +
            (lb.transposed ? "112" : "111") + ", " + blasInt(m) + ", " + blasInt(n) + ", " + blasInt(k) +
            ", " + pa + ", " + blasInt(la.ld) + ", " + pb + ", " + blasInt(lb.ld) + ", " + c + ", " +
            blasInt(n) + ", " + std::to_string(nops) + ", kinds, scalars, tensors, row_strides);");
  code.close();
}

// An extern mm / bmm / addmm as a static function returning 0, or 1 when a copy could not be
// allocated.
std::string emitExtern(const Buffer& b, const std::string& fname, const std::vector<Operand>& ops,
                       const std::map<std::string, std::string>& cNames, const std::vector<std::string>& symbols,
                       std::vector<std::string>& params, const Unit& unit,
                       const std::function<std::string(const std::string&)>& rootOf) {
  const Extern& x = std::get<Extern>(b.computation);
  std::string what = "C++ codegen: extern " + x.kernel + " (%" + b.name + ")";
  bool batched = x.kernel == "bmm", addmm = x.kernel == "addmm";
  KILN_CHECK(x.kernel == "mm" || batched || addmm, what,
             ": unsupported extern kernel (mm, bmm and addmm are)");
  // The operands' type: the result's, or a 16-bit float type multiplied into an f32 result.
  ScalarType in = ops.empty() ? b.dtype : ops.back().dtype;
  for (const Operand& o : ops)
    KILN_CHECK(o.dtype == in || (addmm && &o == &ops[0]), what, ": operands of different dtypes");
  bool is16 = in == ScalarType::Float16 || in == ScalarType::BFloat16;
  KILN_CHECK(in == b.dtype || (is16 && b.dtype == ScalarType::Float32), what, ": ",
             scalarTypeShortName(in), " operands and a ", scalarTypeShortName(b.dtype), " result");
  KILN_CHECK(in == ScalarType::Float32 || in == ScalarType::Float64 || is16, what,
             ": only f32, f64, f16 and bf16 GEMMs are supported, not ", scalarTypeShortName(b.dtype));
  KILN_CHECK(!is16 || !addmm, what, ": a 16-bit addmm is not supported (mm and bmm are)");
  bool isDouble = b.dtype == ScalarType::Float64;
  std::string T = is16 ? "uint16_t" : isDouble ? "double" : "float", gemm = isDouble ? "ctx->dgemm" : "ctx->sgemm";
  std::string outT = b.dtype == ScalarType::Float32 ? "float" : T;
  size_t first = addmm ? 1 : 0;
  KILN_CHECK(ops.size() == first + 2, what, ": expected ", first + 2, " inputs, got ", ops.size());
  size_t rank = batched ? 3 : 2;
  const Operand &A = ops[first], &B = ops[first + 1];
  KILN_CHECK(A.sizes.size() == rank && B.sizes.size() == rank, what, ": operands must be ", rank, "-D");
  IndexExpr batch = batched ? A.sizes[0] : IndexExpr(1);
  IndexExpr m = A.sizes[rank - 2], k = A.sizes[rank - 1], n = B.sizes[rank - 1];
  std::vector<IndexExpr> outSizes = {m, n};
  if (batched) outSizes.insert(outSizes.begin(), batch);
  // The result is written row-major; its buffer may have another shape of as many elements
  // (a graph output reshaping it).
  KILN_CHECK(B.sizes[rank - 2] == k && (!batched || B.sizes[0] == batch) &&
                 numel(b.sizes) == batch * m * n,
             what, ": operand and result sizes do not match");
  for (const IndexExpr& d : {m, n, k})
    KILN_CHECK(!d.isConstant() || *d.constant() <= INT_MAX, what, ": sizes beyond BLAS's int range");
  double alpha = externScalar(x, "alpha", 1.0, "C++ codegen"), beta = addmm ? externScalar(x, "beta", 1.0, "C++ codegen") : 0.0;
  for (const auto& [key, v] : x.args)
    KILN_CHECK(key == "alpha" || (addmm && key == "beta"), what, ": unknown argument ", key);

  Code code;
  code.indent_ = 1;
  // Before anything is written (the bias fill): BLAS's int sizes hold this call's sizes.
  emitBlasRangeCheck(code, x.kernel, b.name, m, n, k,
                     {matrixLayout(m, k, A.strides[rank - 2], A.strides[rank - 1]).ld,
                      matrixLayout(k, n, B.strides[rank - 2], B.strides[rank - 1]).ld});
  std::string sig = "const KilnContext* ctx";
  auto param = [&](const Operand& o, bool written) {
    if (std::find(params.begin(), params.end(), o.name) != params.end()) return cNames.at(o.name);
    params.push_back(o.name);
    sig += std::string(", ") + (written ? "" : "const ") + T + "* " + cNames.at(o.name);
    return cNames.at(o.name);
  };
  std::string c = [&] {
    Operand out{unit.epilogue ? unit.epilogue->name : b.name, outSizes, {}};
    if (std::find(params.begin(), params.end(), out.name) != params.end()) return cNames.at(out.name);
    params.push_back(out.name);
    sig += ", " + outT + "* " + cNames.at(out.name);
    return cNames.at(out.name);
  }();
  // The result starts as beta * bias (broadcast) for addmm.
  bool fillBias = addmm && beta != 0.0;
  if (addmm) {
    const Operand& bias = ops[0];
    std::string p = at(param(bias, false), bias.offset);
    KILN_CHECK(bias.sizes.size() <= 2, what, ": the bias must have at most 2 dims");
    std::vector<IndexExpr> bs(2, IndexExpr(0));
    for (size_t i = 0; i < bias.sizes.size(); ++i) {
      size_t d = 2 - bias.sizes.size() + i;
      KILN_CHECK(bias.sizes[i] == IndexExpr(1) || bias.sizes[i] == outSizes[rank - 2 + d], what,
                 ": the bias does not broadcast to the result");
      bs[d] = bias.sizes[i] == IndexExpr(1) ? IndexExpr(0) : bias.strides[i];
    }
    if (fillBias) {
      std::vector<Loop> loops = named({m, n}, "c");
      for (const Loop& l : loops) code.open(forLoop(l));
      RangeFacts facts = factsOf(loops, {});
      std::string scale = (k.constant() == 0 && beta != 1.0) ? num(beta, isDouble) + " * " : "";
      code.line(c + "[" + cppIndex(flatIndex(loops), facts) + "] = " + scale + p + "[" +
                cppIndex(bs[0] * IndexExpr::var("c0") + bs[1] * IndexExpr::var("c1"), facts) +
                "];");
      for (size_t i = 0; i < loops.size(); ++i) code.close();
    }
  }
  std::string a = param(A, false), bb = param(B, false);
  // (Size symbols are never 0: only static sizes can make the product empty.)
  if (m.constant() == 0 || n.constant() == 0) {
    code.line("(void)ctx;");
  } else if (k.constant() == 0) {
    // An empty inner dimension: the product is zero (BLAS needs k >= 1 for its leading dims).
    if (!fillBias) {
      code.line("__builtin_memset(" + c + ", 0, " + sizeText(batch * m * n) + " * sizeof(" + outT + "));");
    }
    code.line("(void)ctx;");
  } else {
    std::vector<std::string> frees;
    auto layoutFor = [&](const Operand& o, const std::string& p, const IndexExpr& rows,
                         const IndexExpr& cols, std::string& ptr, IndexExpr& batchStride) {
      size_t r = o.sizes.size();
      MatrixLayout l = matrixLayout(rows, cols, o.strides[r - 2], o.strides[r - 1]);
      batchStride = batched ? o.strides[0] : IndexExpr(0);
      ptr = at(p, o.offset);
      if (l.copy) {
        std::string tmp = "copy" + std::to_string(frees.size());
        IndexExpr count = batch * rows * cols;
        code.line(T + "* " + tmp + " = static_cast<" + T + "*>(ctx->alloc(" +
                  allocBytes(count, isDouble ? 8 : 4) + "));");
        code.line("if (!" + tmp + ") {");
        for (const std::string& f : frees) code.line("  ctx->free(" + f + ");");
        code.line("  return 1;");
        code.line("}");
        emitGather(code, tmp, at(p, o.offset), o.sizes, o.strides);
        frees.push_back(tmp);
        ptr = tmp;
        batchStride = rows * cols;
      }
      return l;
    };
    std::string pa, pb;
    IndexExpr sa(0), sb(0);
    MatrixLayout la = layoutFor(A, a, m, k, pa, sa), lb = layoutFor(B, bb, k, n, pb, sb);
    std::string call = gemm + "(101, " + (la.transposed ? "112" : "111") + ", " +
                       (lb.transposed ? "112" : "111") + ", " + blasInt(m) + ", " + blasInt(n) +
                       ", " + blasInt(k) + ", " + num(alpha, isDouble) + ", ";
    std::string tail = ", " + num(fillBias ? beta : 0.0, isDouble) + ", ";
    if (is16) {
      // 16-bit floats: accumulated in f32 and rounded once (bf16 on oneDNN's bf16 kernels where
      // the CPU has them, else widened to f32 by the runtime).
      KILN_CHECK(alpha == 1.0 && !unit.epilogue, what, ": a 16-bit GEMM takes no alpha or epilogue");
      code.line("ctx->gemm16_batched(" + std::string(in == ScalarType::BFloat16 ? "1" : "0") + ", " +
                (b.dtype == ScalarType::Float32 ? "1" : "0") + ", " + (la.transposed ? "112" : "111") + ", " + (lb.transposed ? "112" : "111") + ", " +
                sizeText(batch) + ", " + blasInt(m) + ", " + blasInt(n) + ", " + blasInt(k) + ", " + pa + ", " +
                blasInt(la.ld) + ", " + sizeText(sa) + ", " + pb + ", " + blasInt(lb.ld) + ", " + sizeText(sb) +
                ", " + c + ", " + blasInt(n) + ", " + sizeText(m * n) + ");");
    } else if (unit.epilogue) {
      KILN_CHECK(!batched && !addmm && alpha == 1.0 && !isDouble, what, ": a fused epilogue needs an f32 mm");
      emitPostOpCall(code, unit.postOps, la, lb, m, n, k, pa, pb, c, [&](const std::string& tensor) {
        return param({rootOf(tensor), {}, {}}, false);
      });
    } else if (batched && !isDouble && alpha == 1.0 && !fillBias) {
      code.line("ctx->sgemm_batched(" + std::string(la.transposed ? "112" : "111") + ", " +
                (lb.transposed ? "112" : "111") + ", " + sizeText(batch) + ", " + blasInt(m) + ", " +
                blasInt(n) + ", " + blasInt(k) + ", " + pa + ", " + blasInt(la.ld) + ", " + sizeText(sa) +
                ", " + pb + ", " + blasInt(lb.ld) + ", " + sizeText(sb) + ", " + c + ", " + blasInt(n) +
                ", " + sizeText(m * n) + ");");
    } else if (batched) {
      code.open("for (int64_t bt = 0; bt < " + sizeText(batch) + "; ++bt) {");
      code.line(call + pa + " + bt * " + sizeText(sa) + ", " + blasInt(la.ld) + ", " + pb + " + bt * " +
                sizeText(sb) + ", " + blasInt(lb.ld) + tail + c + " + bt * " + sizeText(m * n) + ", " +
                blasInt(n) + ");");
      code.close();
    } else {
      code.line(call + pa + ", " + blasInt(la.ld) + ", " + pb + ", " + blasInt(lb.ld) + tail + c + ", " +
                blasInt(n) + ");");
    }
    for (const std::string& f : frees) code.line("ctx->free(" + f + ");");
  }
  code.line("return 0;");
  for (const std::string& sym : symbols) sig += ", [[maybe_unused]] int64_t " + sym;
  std::ostringstream label;
  label << "// %" << b.name << " = " << x.kernel << "(";
  for (size_t i = 0; i < x.inputs.size(); ++i) label << (i ? ", %" : "%") << x.inputs[i];
  label << ")";
  if (unit.epilogue) {
    label << " -> %" << unit.epilogue->name << " (post-ops:";
    for (const GemmPostOp& op : unit.postOps)
      label << " " << gemmPostOpName(op.kind) << (op.isBinary() ? " %" + op.tensor : "");
    label << ")";
  }
  return label.str() + "\nstatic int " + fname + "(" + sig + ") {\n" + code.str() + "}\n";
}

// Lanes of the inner dims one thread scans together (a 64-byte line of f32).
constexpr int64_t kScanLanes = 16;
// Elements below which a scan runs on one thread.
constexpr int64_t kScanParallelElements = 32768;

// An extern cumsum / cumprod (ScanShape) as a static function returning 0: a running value
// carried along the scanned dim, in parallel over the rows and over blocks of kScanLanes
// inner positions (simd across the lanes of a block).
std::string emitScan(const Buffer& b, const std::string& fname, const std::vector<Operand>& ops,
                     const std::map<std::string, std::string>& cNames, const std::vector<std::string>& symbols,
                     std::vector<std::string>& params) {
  const Extern& x = std::get<Extern>(b.computation);
  std::string what = "C++ codegen: extern " + x.kernel + " (%" + b.name + ")";
  KILN_CHECK(ops.size() == 1, what, ": expected 1 input, got ", ops.size());
  const Operand& in = ops[0];
  KILN_CHECK(in.strides == contiguousStrides(in.sizes), what, ": the operand must be contiguous");
  ScanShape s = scanShape(b, in.sizes, in.dtype, what);
  params = {in.name, b.name};
  const std::string& src = cNames.at(in.name);
  const std::string& dst = cNames.at(b.name);
  std::string sig = "const KilnContext* ctx, const " + s.T + "* " + src + ", " + s.T + "* " + dst;
  for (const std::string& sym : symbols) sig += ", [[maybe_unused]] int64_t " + sym;
  Code code;
  code.indent_ = 1;
  code.line("const int64_t rows = " + sizeText(s.rows) + ", n = " + sizeText(s.length) + ", inner = " +
            sizeText(s.inner) + ";");
  code.line("[[maybe_unused]] const int nt = kiln_num_threads(ctx);");
  std::string parallel = "num_threads(nt) if (rows * n * inner >= " + std::to_string(kScanParallelElements) + ")";
  const std::string x0 = at(src, in.offset);
  if (s.inner == IndexExpr(1)) { // rows scanned one per thread
    code.line("#pragma omp parallel for " + parallel);
    code.open("for (int64_t r = 0; r < rows; ++r) {");
    code.line("const " + s.T + "* x = " + x0 + " + r * n;");
    code.line(s.T + "* y = " + dst + " + r * n;");
    code.line(s.A + " acc = " + s.init() + ";");
    code.open("for (int64_t j = 0; j < n; ++j) {");
    code.line(s.step("acc", "x[j]"));
    code.line("y[j] = static_cast<" + s.T + ">(acc);");
    code.close();
    code.close();
  } else {
    std::string lanes = std::to_string(kScanLanes);
    code.line("const int64_t blocks = (inner + " + lanes + " - 1) / " + lanes + ";");
    code.line("#pragma omp parallel for collapse(2) " + parallel);
    code.open("for (int64_t r = 0; r < rows; ++r) {");
    code.open("for (int64_t blk = 0; blk < blocks; ++blk) {");
    code.line("const int64_t lo = blk * " + lanes + ", w = inner - lo < " + lanes + " ? inner - lo : " + lanes + ";");
    code.line("const " + s.T + "* x = " + x0 + " + r * n * inner + lo;");
    code.line(s.T + "* y = " + dst + " + r * n * inner + lo;");
    code.line(s.A + " acc[" + lanes + "];");
    code.line("for (int64_t l = 0; l < " + lanes + "; ++l) acc[l] = " + s.init() + ";");
    code.open("for (int64_t j = 0; j < n; ++j) {");
    code.line("#pragma omp simd");
    code.open("for (int64_t l = 0; l < w; ++l) {");
    code.line(s.step("acc[l]", "x[j * inner + l]"));
    code.line("y[j * inner + l] = static_cast<" + s.T + ">(acc[l]);");
    code.close();
    code.close();
    code.close();
    code.close();
  }
  code.line("return 0;");
  std::string label = "// %" + b.name + " = " + x.kernel + "(%" + x.inputs[0] + ")";
  return label + "\nstatic int " + fname + "(" + sig + ") {\n" + code.str() + "}\n";
}

// ---------------------------------------------------------------------------------------------
// The program

class ProgramEmitter {
public:
  ProgramEmitter(const LoopProgram& p, const CppOptions& o)
      : p_(p), options_(o), plan_(planKernels(p)), units_(plan_.units), outputs_(plan_.outputs),
        roots_(plan_.roots), cNames_(plan_.names), dtypes_(plan_.dtypes),
        materialized_(plan_.materialized), symbols_(plan_.symbols) {}

  std::string emit() {

    std::vector<std::string> unitTexts(units_.size());
    Code entry;
    std::vector<std::string> calls(units_.size());
    std::vector<bool> checksErrors(units_.size(), false); // units reporting index errors
    bool usesThreads = false;
    for (size_t u = 0; u < units_.size(); ++u) {
      std::vector<std::string> params;
      std::string fname = "kiln_unit" + std::to_string(u);
      if (const Nest* nest = std::get_if<Nest>(&units_[u].work)) {
        NestEmitter ne(*nest, options_, cNames_, dtypes_, roots_, symbols_);
        unitTexts[u] = ne.emit(fname, units_[u].label, params) + "\n";
        std::vector<std::string> args;
        if (ne.usesThreads()) args.push_back("nt");
        if (ne.usesErrors()) args.push_back("ctx->error");
        for (const std::string& q : params) args.push_back(cNames_[q]);
        args.insert(args.end(), symbols_.begin(), symbols_.end());
        calls[u] = fname + "(";
        for (size_t i = 0; i < args.size(); ++i) calls[u] += (i ? ", " : "") + args[i];
        calls[u] += ");";
        usesThreads |= ne.usesThreads();
        checksErrors[u] = ne.usesErrors();
      } else {
        const Buffer* b = std::get<const Buffer*>(units_[u].work);
        std::vector<Operand> ops;
        const Extern& x = std::get<Extern>(b->computation);
        for (size_t i = 0; i < x.inputs.size(); ++i) {
          // Versions of a storage (in-place writes) read their root's memory.
          std::string storage = rootOf(x.inputs[i]);
          ops.push_back(operand(storage));
          if (const std::optional<StridedView>& v = x.viewOf(i))
            ops.back() = Operand{storage, {v->sizes.begin(), v->sizes.end()},
                                 {v->strides.begin(), v->strides.end()}, v->offset, ops.back().dtype};
        }
        if (x.kernel == "cumsum" || x.kernel == "cumprod")
          unitTexts[u] = emitScan(*b, fname, ops, cNames_, symbols_, params) + "\n";
        else
          unitTexts[u] = emitExtern(*b, fname, ops, cNames_, symbols_, params, units_[u],
                                    [&](const std::string& n) { return rootOf(n); }) + "\n";
        calls[u] = "if (const int rc = " + fname + "(ctx";
        for (const std::string& q : params) calls[u] += ", " + cNames_[q];
        for (const std::string& sym : symbols_) calls[u] += ", " + sym;
        calls[u] += "); rc != 0) {";
      }
      for (const std::string& q : params) readers_[q].insert(u);
    }

    entry.open("extern \"C\" int " + options_.entryName +
               "(const KilnContext* ctx, void* const* inputs, void* const* outputs, const int64_t* sizes) {");
    if (symbols_.empty()) entry.line("(void)sizes;");
    for (size_t i = 0; i < symbols_.size(); ++i)
      entry.line("[[maybe_unused]] const int64_t " + symbols_[i] + " = sizes[" + std::to_string(i) + "];");
    if (usesThreads) entry.line("const int nt = kiln_num_threads(ctx);");
    bool usesCtx = usesThreads || std::count(checksErrors.begin(), checksErrors.end(), true);
    for (const Unit& unit : units_)
      for (const Buffer* b : unit.defines)
        usesCtx |= b->isExtern() || (materialized_.count(b->name) &&
                                     !std::count(outputs_.begin(), outputs_.end(), b->name));
    if (!usesCtx) entry.line("(void)ctx;");
    bool usesInputs = std::any_of(p_.inputs.begin(), p_.inputs.end(), [&](const LoopInput& in) {
      return readers_.count(in.name) || std::count(outputs_.begin(), outputs_.end(), in.name);
    });
    if (!usesInputs) entry.line("(void)inputs;");
    if (outputs_.empty()) entry.line("(void)outputs;");
    std::set<std::string> written; // inputs written in place
    for (const auto& [version, root] : roots_) written.insert(root);
    for (size_t i = 0; i < p_.inputs.size(); ++i) {
      const LoopInput& in = p_.inputs[i];
      if (!readers_.count(in.name) && !std::count(outputs_.begin(), outputs_.end(), in.name))
        continue; // unused
      std::string T = std::string(written.count(in.name) ? "" : "const ") + cppStorageType(in.dtype);
      entry.line(T + "* " + cNames_[in.name] + " = static_cast<" + T + "*>(inputs[" +
                 std::to_string(i) + "]);");
    }
    std::map<std::string, size_t> outputSlot;
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const Buffer* b = p_.findBuffer(outputs_[i]);
      if (!b || outputSlot.count(b->name)) continue;
      outputSlot[b->name] = i;
      std::string T = cppStorageType(b->dtype);
      entry.line(T + "* " + cNames_[b->name] + " = static_cast<" + T + "*>(outputs[" + std::to_string(i) + "]);");
    }
    // Intermediates: a storage is allocated before the unit defining its first buffer and freed
    // after the last unit reading any buffer that uses it. A buffer listed as reusing a
    // materialized one (the memory plan, Buffer::reuses) writes into that one's storage.
    std::map<std::string, const Buffer*> storageOf;
    std::map<size_t, std::vector<const Buffer*>> freeAfter;
    std::map<const Buffer*, size_t> lastUse;
    for (size_t u = 0; u < units_.size(); ++u)
      for (const Buffer* b : units_[u].defines) {
        if (outputSlot.count(b->name) || !materialized_.count(b->name)) continue;
        auto reused = storageOf.find(b->reuses);
        if (b->reuses.empty() || reused == storageOf.end()) {
          storageOf[b->name] = b;
          std::string T = cppStorageType(b->dtype);
          entry.line(T + "* " + cNames_[b->name] + " = nullptr;");
        } else {
          size_t lastReader = *readers_[b->reuses].rbegin();
          KILN_CHECK(lastReader < u, "C++ codegen: %", b->name, " reuses the storage of %", b->reuses,
                     ", which is still read by a later or the same loop nest (", units_[lastReader].label, ")");
          storageOf[b->name] = reused->second;
        }
        size_t& last = lastUse[storageOf[b->name]];
        last = std::max(last, *readers_[b->name].rbegin());
      }
    for (const auto& [storage, u] : lastUse) freeAfter[u].push_back(storage);
    // A failure frees the live intermediates and returns `status` (1: out of memory, 2: an index
    // error or a GEMM size beyond BLAS's int range, recorded in ctx->error; `rc`: an extern's
    // status). Where more than kInlineFrees storages can be live at a failure, the frees are one
    // cleanup (kiln_fail) of the storages not null (each is null until allocated and again once
    // freed) rather than spelled out at each failure, which grew with the square of the live
    // storages (a wide DAG of 10,000 ops: 1,275 lines, 27 KB more for g++).
    constexpr size_t kInlineFrees = 4;
    bool cleanup = false;
    {
      size_t live = 0;
      for (size_t u = 0; u < units_.size(); ++u) {
        for (const Buffer* b : units_[u].defines)
          if (!outputSlot.count(b->name) && materialized_.count(b->name) && storageOf[b->name] == b)
            ++live; // (a failure of its allocation frees those before it)
        if (!std::holds_alternative<Nest>(units_[u].work) || checksErrors[u]) cleanup |= live > kInlineFrees;
        cleanup |= live > kInlineFrees + 1;
        live -= freeAfter[u].size();
      }
    }
    if (cleanup) {
      entry.open("auto kiln_fail = [&](int status) {");
      for (const auto& [name, storage] : storageOf)
        if (storage->name == name) entry.line("if (" + cNames_[name] + ") ctx->free(" + cNames_[name] + ");");
      entry.line("return status;");
      entry.close("};");
    }
    std::vector<const Buffer*> live;
    auto failure = [&](const std::string& status = "1") {
      if (cleanup) {
        entry.line("  return kiln_fail(" + status + ");");
      } else {
        for (const Buffer* l : live) entry.line("  ctx->free(" + cNames_[l->name] + ");");
        entry.line("  return " + status + ";");
      }
      entry.line("}");
    };
    for (size_t u = 0; u < units_.size(); ++u) {
      for (const Buffer* b : units_[u].defines) {
        if (outputSlot.count(b->name) || !materialized_.count(b->name)) continue;
        std::string T = cppStorageType(b->dtype), c = cNames_[b->name];
        if (const Buffer* storage = storageOf[b->name]; storage != b) {
          entry.line(T + "* " + c + " = " + cNames_[storage->name] + ";");
          continue;
        }
        entry.line(c + " = static_cast<" + T + "*>(ctx->alloc(" +
                   allocBytes(numel(b->sizes), int64_t(elementSize(b->dtype))) + "));");
        entry.line("if (!" + c + ") {");
        failure();
        live.push_back(b);
      }
      entry.line(calls[u]);
      if (!std::holds_alternative<Nest>(units_[u].work)) failure("rc");
      if (checksErrors[u]) {
        entry.line("if (ctx->error->set) {");
        failure("2");
      }
      for (const Buffer* b : freeAfter[u]) {
        entry.line("ctx->free(" + cNames_[b->name] + ");");
        if (cleanup) entry.line(cNames_[b->name] + " = nullptr;");
        live.erase(std::find(live.begin(), live.end(), b));
      }
    }
    // Outputs that are inputs, or a buffer listed again, are copies.
    for (size_t i = 0; i < outputs_.size(); ++i) {
      const std::string& o = outputs_[i];
      ScalarType t = *p_.dtypeOf(o);
      std::string T = cppStorageType(t), dst = "static_cast<" + T + "*>(outputs[" + std::to_string(i) + "])";
      if (const LoopInput* in = p_.findInput(o)) {
        entry.open("{");
        entry.line(T + "* dst = " + dst + ";");
        emitGather(entry, "dst", cNames_[o], in->sizes, in->strides);
        entry.close();
      } else if (outputSlot[o] != i) {
        entry.line("__builtin_memcpy(" + dst + ", " + cNames_[o] + ", " +
                   sizeText(numel(p_.findBuffer(o)->sizes)) + " * sizeof(" + T + "));");
      }
    }
    entry.line("return 0;");
    entry.close();

    std::string out = options_.prelude ? cppPrelude() + "\n" : "";
    size_t parts = translationUnits(unitTexts);
    if (parts <= 1) {
      out += "// program @" + p_.name + "\n\n";
      for (const std::string& t : unitTexts) out += t;
      return out + entry.str();
    }
    // Several translation units (the toolchain compiles them in parallel, kTranslationUnitMarker):
    // the units get external linkage (hidden), declared before the entry; each part is the
    // prelude and its units, the first also the entry.
    // Parts of about equal size (g++'s time follows it), the first counting the entry it holds
    // (with one declaration line per unit, about its first line) and each unit going to the part
    // its middle falls in.
    std::string entryText = entry.str();
    size_t total = entryText.size(), done = entryText.size();
    for (const std::string& t : unitTexts) {
      size_t start = t.find("\nstatic "), end = t.find(" {\n", start);
      size_t declaration = start == std::string::npos || end == std::string::npos ? 0 : end - start;
      total += t.size() + declaration;
      done += declaration;
    }
    std::vector<std::string> partTexts(parts);
    std::string declarations;
    for (size_t u = 0; u < unitTexts.size(); ++u) {
      std::string fname = "kiln_unit" + std::to_string(u);
      std::string& t = unitTexts[u];
      for (const char* ret : {"void ", "int "}) {
        // The definition's line: "static R kiln_unitN(", after attributes of its own (a unit
        // made with optimize("no-thread-jumps") has them first).
        std::string from = std::string("static ") + ret + fname + "(";
        size_t at = t.find(from);
        if (at == std::string::npos) continue;
        std::string to = std::string("__attribute__((visibility(\"hidden\"))) ") + ret + fname + "(";
        t.replace(at, from.size(), to);
        size_t end = t.find(" {\n", at);
        declarations += t.substr(at, end - at) + ";\n";
      }
      partTexts[std::min(parts - 1, (done + t.size() / 2) * parts / std::max<size_t>(total, 1))] += t;
      done += t.size();
    }
    out += std::string(kEndOfPreludeMarker) + "\n// program @" + p_.name + "\n\n" + declarations + "\n" +
           partTexts[0] + entryText;
    for (size_t k = 1; k < parts; ++k)
      out += "\n" + std::string(kTranslationUnitMarker) + "\n// program @" + p_.name + ", part " +
             std::to_string(k + 1) + " of " + std::to_string(parts) + "\n\n" + partTexts[k];
    return out;
  }

  // How many translation units the kernels go in: options_.translationUnits, or (0) for a
  // program with a prelude whose kernels have kSplitBytes of source or more, min(cores, 4).
  size_t translationUnits(const std::vector<std::string>& unitTexts) const {
    if (!options_.prelude || unitTexts.size() < 2) return 1;
    size_t n = size_t(std::max(options_.translationUnits, 0));
    if (n == 0) {
      size_t bytes = 0;
      for (const std::string& t : unitTexts) bytes += t.size();
      if (bytes < kSplitBytes) return 1;
      n = std::min<size_t>(std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 4),
                           bytes / kPartBytes);
    }
    return std::min(n, unitTexts.size());
  }

private:
  Operand operand(const std::string& n) {
    if (const LoopInput* in = p_.findInput(n)) return Operand{n, in->sizes, in->strides, 0, in->dtype};
    const Buffer* b = p_.findBuffer(n);
    return Operand{n, b->sizes, contiguousStrides(b->sizes), 0, b->dtype};
  }

  std::string rootOf(const std::string& name) const { return plan_.rootOf(name); }

  const LoopProgram& p_;
  const CppOptions& options_;
  KernelPlan plan_; // what this emitter renders (codegen/KernelPlan.h); the references name its parts
  std::vector<Unit>& units_;
  const std::vector<std::string>& outputs_;
  const std::map<std::string, std::string>& roots_;
  std::map<std::string, std::string>& cNames_;
  const std::map<std::string, ScalarType>& dtypes_;
  const std::set<std::string>& materialized_;
  std::map<std::string, std::set<size_t>> readers_; // buffer -> units passing it (incl. its own)
  const std::vector<std::string>& symbols_;
};

} // namespace

std::string emitCpp(const LoopProgram& p, const CppOptions& options) {
  return ProgramEmitter(p, options).emit();
}

} // namespace kiln::codegen
