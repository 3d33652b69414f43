// LoopProgram -> CudaProgram (see CudaCodegen.h): the kernel plan (codegen/KernelPlan.h) rendered
// as CUDA kernels and a launch list. Every loop nest becomes one __global__ function; how its
// iterations map onto threads (the nest's "mapping") is decided here:
//
//   Elementwise  one pointwise phase: a thread per element, a grid-stride loop over them all.
//   ThreadRow    a row per thread (its phases run serially in the thread): rows whose
//                reduction reads are contiguous across rows (a reduction over a leading dim)
//                or too short to share.
//   WarpRow      a row per warp: the lanes stride over each phase's loops, reductions combine
//                with warp shuffles (rows up to kWarpRowMax elements).
//   BlockRow     a row per block: as WarpRow, then the warps' partials through shared memory.
//   Serial       one thread runs the whole nest in order: scatters (accumulating or indirect
//                stores), where duplicate indices must add up in order as on the CPU.
//
// Within a row, phases run in order as in the C++ emitter: a reduction's result is combined
// across the row's threads and then held by every one of them (a local), so the phases after it
// (softmax's exp(x - max) / sum) read it without memory; a pointwise phase whose values a later
// phase reads from memory is followed by a barrier. Results are the same for every launch
// shape: a thread's share of a row is fixed by the mapping, and the combine order is fixed.
#include "codegen/CudaCodegen.h"

#include <cstdint>
#include <algorithm>
#include <climits>
#include <functional>
#include <set>
#include <sstream>

#include "codegen/CppExpr.h"
#include "codegen/CudaPrelude.h"
#include "codegen/KernelPlan.h"
#include "codegen/KernelText.h"
#include "ir/Type.h"
#include "runtime/Error.h"

namespace kiln::codegen {

namespace {

constexpr int kWarp = 32;
// Threads per block of an elementwise kernel, and the most blocks its grid-stride loop uses.
constexpr int kElementwiseBlock = 256;
constexpr int64_t kMaxBlocks = 65536;
// Rows of at most this many elements per phase run a warp each (kRowsBlock threads per block);
// rows of at most kThreadRowMax elements run a thread each.
constexpr int64_t kWarpRowMax = 1024;
constexpr int64_t kThreadRowMax = 16;
constexpr int kRowsBlock = 256;
// At most this many rows of at least kSplitMinRow elements are split over up to kMaxSplits
// blocks of kSplitBlock threads each (a thread then reduces 16 elements or more).
constexpr int64_t kSplitMaxRows = 32;
constexpr int64_t kSplitMinRow = 65536;
constexpr int64_t kMaxSplits = 256;
constexpr int kSplitBlock = 512;
// A row cache holds at most this many elements per thread, of at most kMaxCaches loads.
constexpr int64_t kMaxCacheSlots = 16;
constexpr size_t kMaxCaches = 4;
// Every size at most this (and static): index math in 32-bit ints (a grid-stride counter stays
// below 2^31 after its last step).
constexpr int64_t kMaxIndex32 = int64_t(1) << 30;

enum class Mapping { Elementwise, ThreadRow, WarpRow, BlockRow, SplitRow, Serial };

const char* mappingName(Mapping m) {
  switch (m) {
  case Mapping::Elementwise: return "elementwise";
  case Mapping::ThreadRow: return "a row per thread";
  case Mapping::WarpRow: return "a row per warp";
  case Mapping::BlockRow: return "a row per block";
  case Mapping::SplitRow: return "a row over several blocks";
  case Mapping::Serial: return "serial";
  }
  return "";
}

// ceil(a / b) as an expression over size symbols.
IndexExpr ceilDiv(const IndexExpr& a, int64_t b) {
  return simplify(floorDiv(a + IndexExpr(b - 1), IndexExpr(b)), symbolFacts(a));
}

// One field of an accumulator's state (what a warp shuffle moves).
struct Field {
  std::string suffix, type, init;
};

std::vector<Field> fieldsOf(const Accumulator& a) {
  switch (a.kind) {
  case ReductionKind::Sum: return {{"", a.type, "0"}};
  case ReductionKind::Prod: return {{"", a.type, "1"}};
  case ReductionKind::Max:
  case ReductionKind::Min: {
    std::vector<Field> f = {{"", a.type, cppExtremeLiteral(a.value, a.kind == ReductionKind::Min)}};
    if (a.floating()) f.push_back({"_nan", "int", "0"});
    return f;
  }
  case ReductionKind::ArgMax:
  case ReductionKind::ArgMin:
    return {{"", a.type, cppExtremeLiteral(a.value, a.kind == ReductionKind::ArgMin)},
            {"_i", "int64_t", "KILN_NO_INDEX"}};
  case ReductionKind::Any: return {{"", "int", "0"}};
  case ReductionKind::All: return {{"", "int", "1"}};
  case ReductionKind::WelfordMean:
  case ReductionKind::WelfordVar:
    return {{"_mean", "double", "0"}, {"_m2", "double", "0"}, {"_n", "double", "0"}};
  }
  return {};
}

// Lines merging the state named `o` + suffix (another thread's) into a's own.
std::vector<std::string> mergeLines(const Accumulator& a, const std::string& o) {
  const std::string& x = a.name;
  switch (a.kind) {
  case ReductionKind::Sum: return {x + " += " + o + ";"};
  case ReductionKind::Prod: return {x + " *= " + o + ";"};
  case ReductionKind::Max:
  case ReductionKind::Min: {
    std::string f = a.kind == ReductionKind::Max ? "kiln_max" : "kiln_min";
    std::vector<std::string> l = {x + " = " + f + "(" + x + ", " + o + ");"};
    if (a.floating()) l.push_back(x + "_nan |= " + o + "_nan;");
    return l;
  }
  case ReductionKind::ArgMax:
  case ReductionKind::ArgMin: {
    // The first position of the extremum, a NaN counting as the extremum; a state that saw
    // nothing better than the initial value has index KILN_NO_INDEX and never wins.
    std::string cmp = a.kind == ReductionKind::ArgMax ? " > " : " < ";
    std::string better = "(" + o + cmp + x + " || (" + o + " == " + x + " && " + o + "_i < " + x + "_i))";
    std::string take =
        a.floating() ? "((" + o + " != " + o + ") ? (!(" + x + " != " + x + ") || " + o + "_i < " + x +
                           "_i) : (!(" + x + " != " + x + ") && " + better + "))"
                     : better;
    return {"if (" + o + "_i != KILN_NO_INDEX && (" + x + "_i == KILN_NO_INDEX || " + take + ")) {",
            "  " + x + " = " + o + ";", "  " + x + "_i = " + o + "_i;", "}"};
  }
  case ReductionKind::Any: return {x + " |= " + o + ";"};
  case ReductionKind::All: return {x + " &= " + o + ";"};
  case ReductionKind::WelfordMean:
  case ReductionKind::WelfordVar:
    // Chan's parallel update.
    return {"{", "  const double nt = " + x + "_n + " + o + "_n;", "  if (nt > 0) {",
            "    const double d = " + o + "_mean - " + x + "_mean;",
            "    " + x + "_mean += d * (" + o + "_n / nt);",
            "    " + x + "_m2 += " + o + "_m2 + d * d * (" + x + "_n * " + o + "_n / nt);",
            "    " + x + "_n = nt;", "  }", "}"};
  }
  return {};
}

// The index type of the generated code.
std::string indexType(bool index32) { return index32 ? "int" : "int64_t"; }

// Lines declaring the variables of `loops` at the flat (row-major) position `flat`.
std::vector<std::string> decompose(const std::vector<Loop>& loops, const std::string& flat,
                                   const std::string& I) {
  std::vector<std::string> lines;
  IndexExpr stride(1);
  for (size_t k = loops.size(); k-- > 0;) {
    std::string v = stride == IndexExpr(1) ? flat : flat + " / " + sizeText(stride);
    if (k > 0) v = (stride == IndexExpr(1) ? v : "(" + v + ")") + " % " + sizeText(loops[k].extent);
    lines.push_back("const " + I + " " + loops[k].var + " = " + v + ";");
    stride = simplify(stride * loops[k].extent, symbolFacts(stride * loops[k].extent));
  }
  std::reverse(lines.begin(), lines.end());
  return lines;
}

// GCC builtins of the C++ bodies -> the CUDA prelude's kiln_b_* (CudaPrelude.cpp).
std::string renameBuiltins(std::string s) {
  const std::string from = "__builtin_", to = "kiln_b_";
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// Emits one nest as an extern "C" __global__ function and its launch.
class CudaNestEmitter {
public:
  CudaNestEmitter(const Nest& nest, const KernelPlan& plan, const CudaOptions& options, bool index32)
      : nest_(nest), plan_(plan), options_(options), I_(indexType(index32)) {}

  // The kernels' text; their launches (and a split row's temporaries) go to `steps`.
  std::string emit(const std::string& fname, const std::string& label, std::vector<CudaStep>& steps) {
    mapping_ = chooseMapping();
    code_.indent_ = 1;
    if (mapping_ == Mapping::SplitRow) return emitSplit(fname, label, steps);
    IndexExpr rows = tripCount(nest_.outer);
    CudaLaunch launch;
    if (mapping_ == Mapping::Elementwise) {
      emitElementwise();
      block_ = kElementwiseBlock;
      IndexExpr total = simplify(rows * tripCount(nest_.phases[0].loops), symbolFacts(rows));
      launch.grid = simplify(min(ceilDiv(total, int64_t(block_) * width_), IndexExpr(kMaxBlocks)), symbolFacts(total));
    } else {
      int64_t longest = 0;
      for (const Phase& p : nest_.phases) longest = std::max(longest, hint(tripCount(p.loops)));
      group_ = mapping_ == Mapping::WarpRow ? kWarp : 1;
      block_ = mapping_ == Mapping::Serial ? 1 : mapping_ == Mapping::BlockRow ? blockFor(longest) : kRowsBlock;
      if (mapping_ == Mapping::BlockRow) group_ = block_;
      emitRows();
      int64_t rowsPerBlock = block_ / group_;
      launch.grid = mapping_ == Mapping::Serial
                        ? IndexExpr(1)
                        : simplify(min(ceilDiv(rows, rowsPerBlock), IndexExpr(kMaxBlocks)), symbolFacts(rows));
    }
    std::string text = kernelText(fname, label, mappingName(mapping_), {}, launch);
    steps.push_back(std::move(launch));
    return text;
  }

private:
  // A temporary of a split row: one state field per (row, split).
  struct Temp {
    std::string storage, param, type;
    bool written;
  };

  // The kernel's function (the current code_ and pointers_) and its launch's arguments.
  std::string kernelText(const std::string& fname, const std::string& label, const std::string& mapping,
                         const std::vector<Temp>& temps, CudaLaunch& launch) {
    launch.kernel = fname;
    launch.block = block_;
    launch.label = label;
    std::string sig;
    auto add = [&](const std::string& s) { sig += (sig.empty() ? "" : ", ") + s; };
    for (const auto& [name, written] : pointers_) {
      add(std::string(written ? "" : "const ") + cppStorageType(plan_.dtypes.at(name)) + "* __restrict__ " +
          plan_.names.at(name));
      launch.args.push_back({CudaArg::Kind::Pointer, name});
    }
    for (const Temp& t : temps) {
      add(std::string(t.written ? "" : "const ") + t.type + "* __restrict__ " + t.param);
      launch.args.push_back({CudaArg::Kind::Pointer, t.storage});
    }
    for (const std::string& sym : plan_.symbols) {
      add("int64_t " + sym);
      launch.args.push_back({CudaArg::Kind::Size, sym});
    }
    if (usesErrors_) {
      add("KilnError* __restrict__ kerr");
      launch.args.push_back({CudaArg::Kind::Error, ""});
      launch.checksErrors = true;
    }
    return "// " + label + " (" + mapping + ")\nextern \"C\" __global__ void __launch_bounds__(" +
           std::to_string(block_) + ") " + fname + "(" + sig + ") {\n" + renameBuiltins(code_.str()) + "}\n";
  }

  static int64_t typeBytes(const std::string& type) {
    if (type == "double" || type == "int64_t" || type == "uint64_t") return 8;
    if (type == "float" || type == "int" || type == "int32_t" || type == "uint32_t") return 4;
    if (type == "int16_t" || type == "uint16_t") return 2;
    return 1;
  }

  // Few long rows whose reduction is split over `splits_` blocks each: the first kernel reduces
  // each (row, split)'s share to a state in temporaries, the second combines a row's states in
  // order (a warp per row) and finishes the row (its loop-less phases).
  std::string emitSplit(const std::string& fname, const std::string& label, std::vector<CudaStep>& steps) {
    const Phase& red = nest_.phases[0];
    std::vector<Accumulator> accs = accumulators(red);
    IndexExpr rows = simplify(tripCount(nest_.outer), symbolFacts(tripCount(nest_.outer)));
    const std::string S = std::to_string(splits_), R = sizeText(rows);
    IndexExpr tasks = simplify(rows * IndexExpr(splits_), symbolFacts(rows));
    std::vector<Temp> temps;
    for (const Accumulator& a : accs)
      if (!a.shared)
        for (const Field& f : fieldsOf(a))
          temps.push_back({fname + "." + a.name + f.suffix, "part_" + a.name + f.suffix, f.type, true});
    for (const Temp& t : temps)
      steps.push_back(CudaAlloc{t.storage, simplify(tasks * IndexExpr(typeBytes(t.type)), symbolFacts(tasks))});

    // Pass 1: a block per (row, split), its threads striding over the split's elements.
    block_ = kSplitBlock;
    group_ = block_;
    code_.line("const int lane = int(threadIdx.x);");
    code_.open("for (" + I_ + " task = " + I_ + "(blockIdx.x); task < " + sizeText(tasks) + "; task += " + I_ +
               "(gridDim.x)) {");
    code_.line("const " + I_ + " row = task / " + S + ";");
    code_.line("const " + I_ + " split = task % " + S + ";");
    code_.lines(decompose(nest_.outer, "row", I_));
    declare(accs);
    accumulate(red, accs, "split * " + std::to_string(block_) + " + lane", std::to_string(int64_t(block_) * splits_));
    combine(accs, true);
    code_.open("if (lane == 0) {");
    for (const Accumulator& a : accs)
      if (!a.shared)
        for (const Field& f : fieldsOf(a)) code_.line("part_" + a.name + f.suffix + "[task] = " + a.name + f.suffix + ";");
    code_.close();
    code_.close();
    CudaLaunch first;
    first.grid = simplify(min(tasks, IndexExpr(kMaxBlocks)), symbolFacts(tasks));
    std::string text = kernelText(fname + "_part", label + ", split " + S + " ways", "a row per " + S + " blocks",
                                  temps, first);
    steps.push_back(std::move(first));

    // Pass 2: a warp per row combines the row's states in split order.
    code_ = Code();
    code_.indent_ = 1;
    pointers_.clear();
    locals_.clear();
    usesErrors_ = false;
    block_ = kRowsBlock;
    group_ = kWarp;
    int64_t rowsPerBlock = block_ / group_;
    code_.line("const int lane = int(threadIdx.x) % " + std::to_string(kWarp) + ";");
    code_.open("for (" + I_ + " row = " + I_ + "(blockIdx.x) * " + std::to_string(rowsPerBlock) + " + " + I_ +
               "(threadIdx.x) / " + std::to_string(kWarp) + "; row < " + R + "; row += " + I_ + "(gridDim.x) * " +
               std::to_string(rowsPerBlock) + ") {");
    code_.lines(decompose(nest_.outer, "row", I_));
    declare(accs);
    code_.open("for (int k = lane; k < " + S + "; k += " + std::to_string(kWarp) + ") {");
    for (const Accumulator& a : accs) {
      if (a.shared) continue;
      for (const Field& f : fieldsOf(a))
        code_.line("const " + f.type + " " + a.name + "_o" + f.suffix + " = part_" + a.name + f.suffix + "[row * " + S +
                   " + k];");
      code_.lines(mergeLines(a, a.name + "_o"));
    }
    code_.close();
    combine(accs, false);
    finish(red, accs);
    for (size_t i = 1; i < nest_.phases.size(); ++i) emitPointwisePhase(nest_.phases[i]);
    code_.close();
    for (Temp& t : temps) t.written = false;
    CudaLaunch second;
    second.grid = simplify(min(ceilDiv(rows, rowsPerBlock), IndexExpr(kMaxBlocks)), symbolFacts(rows));
    text += "\n" + kernelText(fname, label, "the " + S + " splits of a row per warp", temps, second);
    steps.push_back(std::move(second));
    for (const Temp& t : temps) steps.push_back(CudaFree{t.storage});
    return text;
  }

  int64_t hint(const IndexExpr& e) const { return hinted(e, options_.sizeHints); }

  static int blockFor(int64_t rowLength) {
    return rowLength <= 4096 ? 256 : rowLength <= 16384 ? 512 : 1024;
  }

  // How many blocks share a row: few long rows (a reduction to a scalar) would leave most of
  // the GPU idle with a block each. Only a first reduction phase followed by loop-less phases
  // (their per-row epilogue runs in the second kernel).
  int splitCount() const {
    const Phase& red = nest_.phases[0];
    if (!red.isReduction || hint(tripCount(nest_.outer)) > kSplitMaxRows) return 1;
    for (size_t i = 1; i < nest_.phases.size(); ++i)
      if (nest_.phases[i].isReduction || !nest_.phases[i].loops.empty()) return 1;
    int64_t n = hint(tripCount(red.loops));
    if (n < kSplitMinRow) return 1;
    return int(std::clamp<int64_t>(n / (int64_t(kSplitBlock) * 16), 2, kMaxSplits));
  }

  Mapping chooseMapping() {
    if (scatters()) return Mapping::Serial;
    if (nest_.phases.size() == 1 && !nest_.phases[0].isReduction) return Mapping::Elementwise;
    if (readsAcrossRows()) return Mapping::ThreadRow;
    int64_t longest = 0;
    for (const Phase& p : nest_.phases) longest = std::max(longest, hint(tripCount(p.loops)));
    if (longest <= kThreadRowMax) return Mapping::ThreadRow;
    if (longest <= kWarpRowMax) return Mapping::WarpRow;
    splits_ = splitCount();
    return splits_ > 1 ? Mapping::SplitRow : Mapping::BlockRow;
  }

  // Whether a member stores through an indirect index or accumulates (as the C++ emitter's
  // serial nests).
  bool scatters() const {
    for (const Phase& p : nest_.phases)
      for (const Member& m : p.members)
        if (const auto* pw = std::get_if<Pointwise>(&m.buffer->computation))
          if (!pw->into.empty() && (pw->accumulate || !indirectVars(pw->body).empty())) return true;
    return false;
  }

  // A first reduction phase over one loop whose loads are contiguous in the last outer loop
  // rather than the reduction loop (x.sum(0) of [R, C]): adjacent threads take adjacent rows,
  // so their loads coalesce.
  bool readsAcrossRows() const {
    if (nest_.outer.empty() || !nest_.phases[0].isReduction || nest_.phases[0].loops.size() != 1) return false;
    const Phase& red = nest_.phases[0];
    RangeFacts facts = factsOf(nest_.outer, red.loops);
    int along = 0, across = 0;
    for (const Member& m : red.members)
      for (const LoopOp& op : m.body.ops) {
        if (op.code != LoopOpCode::Load) continue;
        auto stride = [&](const std::string& v) {
          return simplify(op.index.substitute({{v, IndexExpr::var(v) + IndexExpr(1)}}) - op.index, facts).constant();
        };
        if (stride(red.loops[0].var) == 1)
          ++along;
        else if (stride(nest_.outer.back().var) == 1)
          ++across;
      }
    return across > along;
  }

  std::string pointer(const std::string& version, bool written) {
    auto root = plan_.roots.find(version);
    const std::string& name = root == plan_.roots.end() ? version : root->second;
    auto it = std::find_if(pointers_.begin(), pointers_.end(), [&](const auto& p) { return p.first == name; });
    if (it == pointers_.end())
      pointers_.push_back({name, written});
    else
      it->second = it->second || written;
    return plan_.names.at(name);
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
    std::string var = cachedPhase(phase) ? phase.loops[0].var : "";
    e.forwarded = [this, facts, var](const std::string& b, const IndexExpr& index) -> std::optional<std::string> {
      auto it = locals_.find(b);
      if (it != locals_.end() && simplify(index - it->second.second, facts) == IndexExpr(0)) return it->second.first;
      if (!var.empty())
        if (const RowCache* c = cacheOf(b, index, var)) return c->name + "[t]";
      return std::nullopt;
    };
    return e;
  }

  // A row's elements of an input kept in registers between phases (softmax reads x in its max,
  // sum and output phases; layer norm in its statistics and output phases): per thread an array
  // of its share, filled by the first phase that loads it, read by the later ones.
  struct RowCache {
    std::string buffer;
    IndexExpr key; // the index with the phase's loop variable as kCacheVar
    std::string name;
    ScalarType dtype;
    size_t firstPhase;
  };
  static constexpr const char* kCacheVar = "jj";

  bool cachedPhase(const Phase& phase) const {
    return cacheSlots_ > 0 && phase.loops.size() == 1;
  }

  const RowCache* cacheOf(const std::string& buffer, const IndexExpr& index, const std::string& var) const {
    IndexExpr key = simplify(index.substitute({{var, IndexExpr::var(kCacheVar)}}), {});
    for (const RowCache& c : caches_)
      if (c.buffer == buffer && simplify(c.key - key, {}) == IndexExpr(0)) return &c;
    return nullptr;
  }

  // Which loads to cache: a row mapping whose phases with loops all loop once over the same
  // static extent, short enough for kMaxCacheSlots elements per thread; loads of other buffers
  // (not the nest's members) at the same index in two phases or more, at most kMaxCaches.
  void planCache() {
    if (mapping_ != Mapping::WarpRow && mapping_ != Mapping::BlockRow) return;
    std::optional<int64_t> extent;
    std::set<std::string> members;
    for (const Phase& p : nest_.phases) {
      for (const Member& m : p.members) {
        members.insert(m.buffer->name);
        if (!indirectVars(m.body).empty()) return;
      }
      if (p.loops.empty()) continue;
      std::optional<int64_t> n = p.loops[0].extent.constant();
      if (p.loops.size() != 1 || !n || (extent && *extent != *n)) return;
      extent = n;
    }
    if (!extent) return;
    int64_t slots = (*extent + group_ - 1) / group_;
    if (slots > kMaxCacheSlots) return;
    struct Seen {
      std::string buffer;
      IndexExpr key;
      ScalarType dtype;
      std::set<size_t> phases;
    };
    std::vector<Seen> seen;
    for (size_t i = 0; i < nest_.phases.size(); ++i) {
      const Phase& p = nest_.phases[i];
      if (p.loops.empty()) continue;
      for (const Member& m : p.members)
        for (const LoopOp& op : m.body.ops) {
          if (op.code != LoopOpCode::Load || members.count(op.buffer)) continue;
          IndexExpr key = simplify(op.index.substitute({{p.loops[0].var, IndexExpr::var(kCacheVar)}}), {});
          auto it = std::find_if(seen.begin(), seen.end(), [&](const Seen& x) {
            return x.buffer == op.buffer && simplify(x.key - key, {}) == IndexExpr(0);
          });
          if (it == seen.end()) seen.push_back({op.buffer, key, op.dtype, {i}});
          else it->phases.insert(i);
        }
    }
    for (const Seen& x : seen) {
      if (x.phases.size() < 2 || caches_.size() >= kMaxCaches) continue;
      caches_.push_back({x.buffer, x.key, "rc" + std::to_string(caches_.size()), x.dtype, *x.phases.begin()});
    }
    if (!caches_.empty()) cacheSlots_ = int(slots);
  }

  std::string storeLine(const Member& m, const std::string& value, const Phase& phase) {
    std::map<std::string, IndexExpr> indirect = indirectNames(m.body, "t" + std::to_string(m.id) + "_");
    std::string at = pointer(m.buffer->name, true) + "[" +
                     cppIndex(indirect.empty() ? m.flat : m.flat.substitute(indirect),
                              factsOf(nest_.outer, phase.loops)) + "]";
    const auto* pw = std::get_if<Pointwise>(&m.buffer->computation);
    if (pw && pw->accumulate)
      return at + " = " + cppToStorage(m.buffer->dtype, cppFromStorage(m.buffer->dtype, at) + " + " + value) + ";";
    return at + " = " + cppToStorage(m.buffer->dtype, value) + ";";
  }

  // A thread per element of the outer and inner loops, over a grid-stride loop; with vector
  // accesses (vectorWidth) a thread per `width` consecutive elements of the innermost loop when
  // every vector pointer is aligned, the scalar loop otherwise (views at an odd offset).
  void emitElementwise() {
    const Phase& phase = nest_.phases[0];
    std::vector<Loop> all = nest_.outer;
    all.insert(all.end(), phase.loops.begin(), phase.loops.end());
    width_ = vectorWidth(all);
    if (width_ > 1) {
      std::vector<std::string> lines;
      std::string aligned = emitVectorLoop(all, lines);
      code_.open("if (" + aligned + ") {");
      code_.lines(lines);
      code_.close("} else {");
      ++code_.indent_;
    }
    BodyEnv e = env(phase);
    std::set<std::string> loopVars;
    for (const Loop& l : all) loopVars.insert(l.var);
    std::vector<std::string> hoisted, inner;
    for (const Member& m : phase.members) {
      std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "_", e, inner, hoisted, loopVars);
      if (m.materialize) inner.push_back(storeLine(m, v, phase));
      locals_[m.buffer->name] = {v, m.flat};
    }
    code_.lines(hoisted);
    std::string total = sizeText(simplify(tripCount(all), symbolFacts(tripCount(all))));
    code_.open("for (" + I_ + " i = " + I_ + "(blockIdx.x) * " + I_ + "(blockDim.x) + " + I_ +
               "(threadIdx.x); i < " + total + "; i += " + I_ + "(gridDim.x) * " + I_ + "(blockDim.x)) {");
    code_.lines(decompose(all, "i", I_));
    code_.lines(inner);
    code_.close();
    if (width_ > 1) code_.close();
  }

  // A load or store of the elementwise nest that moves `width` consecutive elements at once.
  struct VectorAccess {
    std::string buffer; // storage (root) name
    IndexExpr base;     // its index at the first of the elements, in the vector loop's variables
    std::string local;  // the loaded vector
  };

  // The innermost variable of `all` counts vectors of `width` elements (vq); element k of a
  // vector is at innermost index width * vq + k.
  std::map<std::string, IndexExpr> vectorRename(const std::vector<Loop>& all, int width, int k) const {
    const std::string& q = all.back().var;
    return {{q, IndexExpr(width) * IndexExpr::var(q + "v") + IndexExpr(k)}};
  }

  // Whether `base` (an index in the vector loop's variables) is a multiple of `width` at every
  // point: constant strides and offset that are.
  static bool alignedIndex(const IndexExpr& base, const std::vector<std::string>& vars, int width,
                           const RangeFacts& facts) {
    std::map<std::string, IndexExpr> zero;
    for (const std::string& v : vars) {
      std::optional<int64_t> stride =
          simplify(base.substitute({{v, IndexExpr::var(v) + IndexExpr(1)}}) - base, facts).constant();
      if (!stride || *stride % width != 0) return false;
      zero[v] = IndexExpr(0);
    }
    std::optional<int64_t> offset = simplify(base.substitute(zero), facts).constant();
    return offset && *offset % width == 0;
  }

  // The vector width of the elementwise nest: 16 bytes of its widest vector access (a load of
  // another buffer or a store, contiguous and aligned in the innermost loop), at least 2
  // elements and dividing the innermost extent; 1 (scalar) without such accesses, with in-place
  // writes or indirect indices, or a symbolic innermost extent.
  int vectorWidth(const std::vector<Loop>& all) const {
    if (all.empty()) return 1;
    std::optional<int64_t> extent = all.back().extent.constant();
    if (!extent) return 1;
    const Phase& phase = nest_.phases[0];
    std::set<std::string> members;
    for (const Member& m : phase.members) {
      if (m.buffer->writesInto() || !indirectVars(m.body).empty()) return 1;
      members.insert(m.buffer->name);
    }
    RangeFacts facts = factsOf(nest_.outer, phase.loops);
    const std::string& q = all.back().var;
    int64_t widest = 0;
    auto consider = [&](const std::string& buffer, const IndexExpr& index) {
      std::optional<int64_t> stride =
          simplify(index.substitute({{q, IndexExpr::var(q) + IndexExpr(1)}}) - index, facts).constant();
      if (stride != 1) return;
      auto root = plan_.roots.find(buffer);
      widest = std::max<int64_t>(widest, elementSize(plan_.dtypes.at(root == plan_.roots.end() ? buffer : root->second)));
    };
    for (const Member& m : phase.members) {
      for (const LoopOp& op : m.body.ops)
        if (op.code == LoopOpCode::Load && !members.count(op.buffer)) consider(op.buffer, op.index);
      if (m.materialize) consider(m.buffer->name, m.flat);
    }
    if (widest == 0) return 1;
    int width = int(std::min<int64_t>(8, 16 / widest));
    while (width >= 2 && *extent % width != 0) width /= 2;
    return std::max(width, 1);
  }

  // The vector loop's lines into `lines`; returns the condition under which it runs (every
  // vector pointer aligned to its vector's bytes).
  std::string emitVectorLoop(const std::vector<Loop>& all, std::vector<std::string>& lines) {
    const Phase& phase = nest_.phases[0];
    const int width = width_;
    std::vector<Loop> vloops = all;
    vloops.back() = {all.back().var + "v", IndexExpr(*all.back().extent.constant() / width)};
    std::vector<std::string> vars;
    for (const Loop& l : vloops) vars.push_back(l.var);
    RangeFacts facts = factsOf(vloops, {});
    std::set<std::string> members;
    for (const Member& m : phase.members) members.insert(m.buffer->name);
    auto renamed = [&](const IndexExpr& e, int k) { return simplify(e.substitute(vectorRename(all, width, k)), facts); };
    auto vectorType = [&](const std::string& storage) {
      return "kiln_vec<" + std::string(cppStorageType(plan_.dtypes.at(storage))) + ", " + std::to_string(width) + ">";
    };
    auto rootOf = [&](const std::string& b) {
      auto r = plan_.roots.find(b);
      return r == plan_.roots.end() ? b : r->second;
    };
    auto vectorizable = [&](const IndexExpr& index) {
      IndexExpr base = renamed(index, 0);
      for (int k = 1; k < width; ++k)
        if (simplify(renamed(index, k) - base, facts) != IndexExpr(k)) return false;
      return alignedIndex(base, vars, width, facts);
    };
    // The vector loads, each once.
    std::vector<VectorAccess> loads;
    std::vector<std::string> body;
    std::set<std::string> alignedPointers;
    for (const Member& m : phase.members)
      for (const LoopOp& op : m.body.ops) {
        if (op.code != LoopOpCode::Load || members.count(op.buffer) || !vectorizable(op.index)) continue;
        IndexExpr base = renamed(op.index, 0);
        std::string root = rootOf(op.buffer);
        bool known = std::any_of(loads.begin(), loads.end(), [&](const VectorAccess& a) {
          return a.buffer == root && simplify(a.base - base, facts) == IndexExpr(0);
        });
        if (known) continue;
        std::string local = "vl" + std::to_string(loads.size());
        std::string p = pointer(op.buffer, false);
        alignedPointers.insert(p);
        body.push_back("const " + vectorType(root) + " " + local + " = *reinterpret_cast<const " + vectorType(root) +
                       "*>(" + p + " + " + cppIndex(base, facts) + ");");
        loads.push_back({root, base, local});
      }
    // Element k of every member, its loads of vectors read from the vector's lane k.
    std::map<std::string, std::vector<std::string>> values; // member -> value per element
    for (int k = 0; k < width; ++k) {
      Phase copy = phase;
      for (Member& m : copy.members) {
        for (LoopOp& op : m.body.ops)
          if (op.code == LoopOpCode::Load || op.code == LoopOpCode::IndexExpr) op.index = renamed(op.index, k);
        m.flat = renamed(m.flat, k);
      }
      BodyEnv e = env(phase);
      e.facts = facts;
      e.forwarded = [&, k](const std::string& b, const IndexExpr& index) -> std::optional<std::string> {
        auto it = locals_.find(b);
        if (it != locals_.end() && simplify(index - it->second.second, facts) == IndexExpr(0)) return it->second.first;
        for (const VectorAccess& a : loads) {
          if (a.buffer != rootOf(b)) continue;
          std::optional<int64_t> lane = simplify(index - a.base, facts).constant();
          if (lane && *lane >= 0 && *lane < width)
            return cppFromStorage(plan_.dtypes.at(a.buffer), a.local + ".v[" + std::to_string(*lane) + "]");
        }
        return std::nullopt;
      };
      for (const Member& m : copy.members) {
        std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "v" + std::to_string(k) + "_", e, body);
        locals_[m.buffer->name] = {v, m.flat};
        values[m.buffer->name].push_back(v);
      }
      // Stores that are not vectors: per element.
      for (const Member& m : copy.members)
        if (m.materialize && !vectorizable(phase.members[&m - &copy.members[0]].flat))
          body.push_back(pointer(m.buffer->name, true) + "[" + cppIndex(m.flat, facts) + "] = " +
                         cppToStorage(m.buffer->dtype, values[m.buffer->name].back()) + ";");
    }
    locals_.clear();
    for (const Member& m : phase.members) {
      if (!m.materialize || !vectorizable(m.flat)) continue;
      std::string p = pointer(m.buffer->name, true), T = vectorType(m.buffer->name), elems;
      alignedPointers.insert(p);
      for (int k = 0; k < width; ++k)
        elems += (k ? ", " : "") + cppToStorage(m.buffer->dtype, values[m.buffer->name][k]);
      body.push_back("*reinterpret_cast<" + T + "*>(" + p + " + " + cppIndex(renamed(m.flat, 0), facts) + ") = " + T +
                     "{{" + elems + "}};");
    }
    std::string total = sizeText(tripCount(vloops));
    lines.push_back("for (" + I_ + " i = " + I_ + "(blockIdx.x) * " + I_ + "(blockDim.x) + " + I_ +
                    "(threadIdx.x); i < " + total + "; i += " + I_ + "(gridDim.x) * " + I_ + "(blockDim.x)) {");
    for (const std::string& l : decompose(vloops, "i", I_)) lines.push_back("  " + l);
    for (const std::string& l : body) lines.push_back("  " + l);
    lines.push_back("}");
    std::string cond;
    for (const std::string& p : alignedPointers)
      cond += (cond.empty() ? "" : " && ") + std::string("kiln_aligned(") + p + ", " + std::to_string(width) + ")";
    return cond;
  }

  // Rows over the grid (group_ threads each), the phases inside.
  void emitRows() {
    IndexExpr rows = tripCount(nest_.outer);
    int64_t rowsPerBlock = block_ / group_;
    if (group_ > 1) code_.line("const int lane = int(threadIdx.x) % " + std::to_string(group_) + ";");
    std::string first = mapping_ == Mapping::Serial ? I_ + "(0)"
                        : I_ + "(blockIdx.x) * " + std::to_string(rowsPerBlock) + " + " + I_ + "(threadIdx.x)" +
                              (group_ > 1 ? " / " + std::to_string(group_) : "");
    std::string step = mapping_ == Mapping::Serial ? "1" : I_ + "(gridDim.x) * " + std::to_string(rowsPerBlock);
    // (Every thread of a block-row block runs the same rows, so the barriers inside are reached
    // by all of them.)
    code_.open("for (" + I_ + " row = " + first + "; row < " + sizeText(rows) + "; row += " + step + ") {");
    code_.lines(decompose(nest_.outer, "row", I_));
    planCache();
    for (const RowCache& c : caches_)
      code_.line(std::string(cppComputeType(c.dtype)) + " " + c.name + "[" + std::to_string(cacheSlots_) +
                 "]; // %" + c.buffer + " of this thread's share of the row");
    for (size_t i = 0; i < nest_.phases.size(); ++i) {
      const Phase& phase = nest_.phases[i];
      currentPhase_ = i;
      if (phase.isReduction)
        emitReductionPhase(phase);
      else
        emitPointwisePhase(phase);
    }
    code_.close();
  }

  // The loop of this thread's share of a phase's loops: lane, lane + group, ...
  void openShare(const Phase& phase) { openShareLoop(phase, group_ > 1 ? "lane" : "0", std::to_string(group_), currentPhase_); }

  // Opens the loop over j = start, start + step, ... < the phase's trip count and declares the
  // phase's variables; with a row cache, an unrolled loop over the thread's cache slots t that
  // fills the caches this phase is the first to load. closeShareLoop closes it.
  void openShareLoop(const Phase& phase, const std::string& start, const std::string& step, size_t phaseIndex) {
    IndexExpr n = tripCount(phase.loops);
    std::string N = sizeText(simplify(n, symbolFacts(n)));
    if (!cachedPhase(phase) || start != "lane") {
      code_.open("for (" + I_ + " j = " + start + "; j < " + N + "; j += " + step + ") {");
      code_.lines(decompose(phase.loops, "j", I_));
      shareDepth_ = 1;
      return;
    }
    code_.line("#pragma unroll");
    code_.open("for (int t = 0; t < " + std::to_string(cacheSlots_) + "; ++t) {");
    code_.line("const " + I_ + " j = lane + t * " + step + ";");
    code_.open("if (j < " + N + ") {");
    code_.lines(decompose(phase.loops, "j", I_));
    RangeFacts facts = factsOf(nest_.outer, phase.loops);
    for (const RowCache& c : caches_)
      if (c.firstPhase == phaseIndex) {
        IndexExpr index = simplify(c.key.substitute({{kCacheVar, IndexExpr::var(phase.loops[0].var)}}), facts);
        code_.line(c.name + "[t] = " + cppFromStorage(c.dtype, pointer(c.buffer, false) + "[" + cppIndex(index, facts) + "]") + ";");
      }
    shareDepth_ = 2;
  }

  void closeShareLoop() {
    for (int i = 0; i < shareDepth_; ++i) code_.close();
  }

  std::string barrier() const { return mapping_ == Mapping::BlockRow ? "__syncthreads();" : "__syncwarp();"; }

  void emitPointwisePhase(const Phase& phase) {
    BodyEnv e = env(phase);
    std::set<std::string> loopVars;
    for (const Loop& l : phase.loops) loopVars.insert(l.var);
    std::vector<std::string> hoisted, inner, stores, added;
    bool readLater = false;
    for (const Member& m : phase.members) {
      std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "_", e, inner, hoisted, loopVars);
      if (m.materialize) (phase.loops.empty() ? stores : inner).push_back(storeLine(m, v, phase));
      locals_[m.buffer->name] = {v, m.flat};
      added.push_back(m.buffer->name);
      readLater |= nest_.memoryReads.count(m.buffer->name) > 0;
    }
    code_.lines(hoisted);
    if (phase.loops.empty()) {
      // One value per row, computed by every thread of the row (they all need it), stored once.
      code_.lines(inner);
      if (!stores.empty()) {
        code_.open(group_ > 1 ? "if (lane == 0) {" : "{");
        code_.lines(stores);
        code_.close();
      }
    } else {
      openShare(phase);
      code_.lines(inner);
      closeShareLoop();
      for (const std::string& name : added) locals_.erase(name);
    }
    // Later phases read other elements of this one from memory: wait for the row's stores.
    if (readLater && group_ > 1) code_.line(barrier());
  }

  // The accumulators of a reduction phase; mean and variance of one body share a Welford state.
  static std::vector<Accumulator> accumulators(const Phase& phase) {
    std::vector<Accumulator> accs;
    for (size_t i = 0; i < phase.members.size(); ++i) {
      const Member& m = phase.members[i];
      Accumulator a = makeAccumulator(m);
      bool welford = a.kind == ReductionKind::WelfordMean || a.kind == ReductionKind::WelfordVar;
      for (size_t j = 0; j < i && welford; ++j) {
        const Accumulator& o = accs[j];
        if (phase.members[j].body == m.body &&
            (o.kind == ReductionKind::WelfordMean || o.kind == ReductionKind::WelfordVar) && !o.shared) {
          a.name = o.name;
          a.shared = true;
          break;
        }
      }
      accs.push_back(a);
    }
    return accs;
  }

  void declare(const std::vector<Accumulator>& accs) {
    for (const Accumulator& a : accs) {
      code_.lines(a.declare());
      if (!a.shared && (a.kind == ReductionKind::ArgMax || a.kind == ReductionKind::ArgMin))
        code_.line(a.name + "_i = KILN_NO_INDEX;");
    }
  }

  // This thread's elements of the phase (j from `start` by `step`) into its accumulators.
  void accumulate(const Phase& phase, const std::vector<Accumulator>& accs, const std::string& start,
                  const std::string& step) {
    openShareLoop(phase, start, step, currentPhase_);
    BodyEnv e = env(phase);
    for (size_t i = 0; i < phase.members.size(); ++i) {
      const Member& m = phase.members[i];
      if (accs[i].shared) continue;
      std::vector<std::string> body;
      std::string v = emitBody(m.body, "t" + std::to_string(m.id) + "_", e, body);
      code_.lines(body);
      code_.lines(accs[i].update(v, "j", false));
    }
    closeShareLoop();
  }

  // The reductions' values (locals every thread of the row holds), stored by lane 0.
  void finish(const Phase& phase, const std::vector<Accumulator>& accs) {
    for (size_t i = 0; i < phase.members.size(); ++i) {
      const Member& m = phase.members[i];
      std::string local = "v" + std::to_string(m.id);
      std::string value = accs[i].finalValue();
      if (accs[i].kind == ReductionKind::ArgMax || accs[i].kind == ReductionKind::ArgMin)
        value = "(" + accs[i].name + "_i == KILN_NO_INDEX ? int64_t(0) : " + accs[i].name + "_i)";
      code_.line("const " + std::string(cppComputeType(m.buffer->dtype)) + " " + local + " = " + value + ";");
      if (m.materialize) {
        code_.open(group_ > 1 ? "if (lane == 0) {" : "{");
        code_.line(storeLine(m, local, phase));
        code_.close();
      }
      locals_[m.buffer->name] = {local, m.flat};
    }
  }

  void emitReductionPhase(const Phase& phase) {
    std::vector<Accumulator> accs = accumulators(phase);
    declare(accs);
    accumulate(phase, accs, group_ > 1 ? "lane" : "0", std::to_string(group_));
    if (group_ > 1) combine(accs, mapping_ == Mapping::BlockRow);
    finish(phase, accs);
  }

  // The row's threads combine their states; afterwards every one of them holds the row's.
  void combine(const std::vector<Accumulator>& accs, bool wholeBlock) {
    std::vector<const Accumulator*> own;
    for (const Accumulator& a : accs)
      if (!a.shared) own.push_back(&a);
    auto butterfly = [&]() {
      code_.line("#pragma unroll");
      code_.open("for (int off = " + std::to_string(kWarp / 2) + "; off > 0; off >>= 1) {");
      for (const Accumulator* a : own) {
        for (const Field& f : fieldsOf(*a))
          code_.line("const " + f.type + " " + a->name + "_o" + f.suffix + " = kiln_shfl_xor(" + a->name + f.suffix +
                     ", off);");
        code_.lines(mergeLines(*a, a->name + "_o"));
      }
      code_.close();
    };
    butterfly();
    if (!wholeBlock) {
      // Lanes may differ in the last bits where a merge is not commutative (Welford): lane 0's.
      for (const Accumulator* a : own)
        for (const Field& f : fieldsOf(*a)) code_.line(a->name + f.suffix + " = kiln_shfl(" + a->name + f.suffix + ", 0);");
      return;
    }
    int warps = block_ / kWarp;
    for (const Accumulator* a : own)
      for (const Field& f : fieldsOf(*a))
        code_.line("__shared__ " + f.type + " " + a->name + f.suffix + "_sh[" + std::to_string(kWarp + 1) + "];");
    code_.open("if (threadIdx.x % " + std::to_string(kWarp) + " == 0) {");
    for (const Accumulator* a : own)
      for (const Field& f : fieldsOf(*a))
        code_.line(a->name + f.suffix + "_sh[threadIdx.x / " + std::to_string(kWarp) + "] = " + a->name + f.suffix + ";");
    code_.close();
    code_.line("__syncthreads();");
    code_.open("if (threadIdx.x < " + std::to_string(kWarp) + ") {");
    for (const Accumulator* a : own)
      for (const Field& f : fieldsOf(*a))
        code_.line(a->name + f.suffix + " = threadIdx.x < " + std::to_string(warps) + " ? " + a->name + f.suffix +
                   "_sh[threadIdx.x] : " + f.type + "(" + f.init + ");");
    butterfly();
    code_.open("if (threadIdx.x == 0) {");
    for (const Accumulator* a : own)
      for (const Field& f : fieldsOf(*a))
        code_.line(a->name + f.suffix + "_sh[" + std::to_string(kWarp) + "] = " + a->name + f.suffix + ";");
    code_.close();
    code_.close();
    code_.line("__syncthreads();");
    for (const Accumulator* a : own)
      for (const Field& f : fieldsOf(*a))
        code_.line(a->name + f.suffix + " = " + a->name + f.suffix + "_sh[" + std::to_string(kWarp) + "];");
  }

  Nest nest_;
  const KernelPlan& plan_;
  const CudaOptions& options_;
  std::string I_;
  Mapping mapping_ = Mapping::Elementwise;
  int block_ = kElementwiseBlock, group_ = 1;
  int width_ = 1; // elements per thread of an elementwise nest's vector loop
  int splits_ = 1; // blocks per row of a split row
  std::vector<RowCache> caches_;
  int cacheSlots_ = 0;     // elements of a row cache per thread (0: no cache)
  size_t currentPhase_ = 0;
  int shareDepth_ = 1;     // blocks openShareLoop opened
  Code code_;
  bool usesErrors_ = false;
  std::vector<std::pair<std::string, bool>> pointers_; // storage name, written
  std::map<std::string, std::pair<std::string, IndexExpr>> locals_;
};

// ---------------------------------------------------------------------------------------------
// Extern GEMMs and copies

// A kernel writing every element of `loops` (a grid-stride loop): `line` is the statement for
// the point, in the loops' variables.
std::string copyKernel(const std::string& fname, const std::string& label, const std::vector<Loop>& loops,
                       const std::string& params, const std::string& line, const std::string& I) {
  Code code;
  code.indent_ = 1;
  IndexExpr total = simplify(tripCount(loops), symbolFacts(tripCount(loops)));
  code.open("for (" + I + " i = " + I + "(blockIdx.x) * " + I + "(blockDim.x) + " + I + "(threadIdx.x); i < " +
            sizeText(total) + "; i += " + I + "(gridDim.x) * " + I + "(blockDim.x)) {");
  code.lines(decompose(loops, "i", I));
  code.line(line);
  code.close();
  return "// " + label + " (elementwise)\nextern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(kElementwiseBlock) + ") " + fname + "(" + params + ") {\n" + renameBuiltins(code.str()) +
         "}\n";
}

struct Operand {
  std::string name; // storage
  std::vector<IndexExpr> sizes, strides;
  int64_t offset = 0;
};

class ProgramEmitter {
public:
  ProgramEmitter(const LoopProgram& p, const CudaOptions& o)
      : p_(p), options_(o), plan_(planKernels(p, PlanOptions{false, "CUDA codegen"})) {}

  CudaProgram emit() {
    index32_ = fitsIndex32();
    out_.name = p_.name;
    out_.symbols = plan_.symbols;
    for (const LoopInput& in : p_.inputs) out_.inputs.push_back(in.name);
    // Per unit: its kernels and steps, and the storages it passes (their last readers free them).
    std::vector<std::vector<CudaStep>> unitSteps(plan_.units.size());
    std::map<std::string, std::set<size_t>> readers;
    for (size_t u = 0; u < plan_.units.size(); ++u) {
      const Unit& unit = plan_.units[u];
      std::string fname = "kiln_unit" + std::to_string(u);
      if (const Nest* nest = std::get_if<Nest>(&unit.work)) {
        CudaNestEmitter ne(*nest, plan_, options_, index32_);
        kernels_ += ne.emit(fname, unit.label, unitSteps[u]) + "\n";
        for (const CudaStep& step : unitSteps[u])
          if (const auto* launch = std::get_if<CudaLaunch>(&step)) {
            for (const CudaArg& a : launch->args)
              if (a.kind == CudaArg::Kind::Pointer) readers[a.name].insert(u);
            out_.usesErrors |= launch->checksErrors;
          }
      } else {
        const Buffer* b = std::get<const Buffer*>(unit.work);
        const std::string& kernel = std::get<Extern>(b->computation).kernel;
        unitSteps[u] = kernel == "cumsum" || kernel == "cumprod" ? scanSteps(*b, fname) : gemmSteps(*b, fname);
        readers[b->name].insert(u);
        for (const std::string& in : std::get<Extern>(b->computation).inputs) readers[plan_.rootOf(in)].insert(u);
      }
    }
    // Output slots computed in place; intermediates allocated before their unit and freed after
    // the last unit reading any buffer sharing the storage (as the C++ entry does).
    std::map<std::string, size_t> outputSlot;
    out_.outputBuffers.assign(plan_.outputs.size(), "");
    for (size_t i = 0; i < plan_.outputs.size(); ++i) {
      const Buffer* b = p_.findBuffer(plan_.outputs[i]);
      if (!b || outputSlot.count(b->name)) continue;
      outputSlot[b->name] = i;
      out_.outputBuffers[i] = b->name;
    }
    std::map<std::string, std::string> storageOf;
    std::map<std::string, size_t> lastUse;
    std::vector<std::vector<CudaStep>> before(plan_.units.size());
    for (size_t u = 0; u < plan_.units.size(); ++u)
      for (const Buffer* b : plan_.units[u].defines) {
        if (outputSlot.count(b->name) || !plan_.materialized.count(b->name)) continue;
        auto reused = storageOf.find(b->reuses);
        if (b->reuses.empty() || reused == storageOf.end()) {
          storageOf[b->name] = b->name;
          before[u].push_back(CudaAlloc{b->name, simplify(numel(b->sizes) * IndexExpr(int64_t(elementSize(b->dtype))),
                                                          symbolFacts(numel(b->sizes)))});
        } else {
          size_t lastReader = *readers[b->reuses].rbegin();
          KILN_CHECK(lastReader < u, "CUDA codegen: %", b->name, " reuses the storage of %", b->reuses,
                     ", which is still read by a later or the same kernel (", plan_.units[lastReader].label, ")");
          storageOf[b->name] = reused->second;
          before[u].push_back(CudaAlias{b->name, reused->second});
        }
        size_t& last = lastUse[storageOf[b->name]];
        last = std::max(last, *readers[b->name].rbegin());
      }
    std::map<size_t, std::vector<std::string>> freeAfter;
    for (const auto& [storage, u] : lastUse) freeAfter[u].push_back(storage);
    for (size_t u = 0; u < plan_.units.size(); ++u) {
      for (CudaStep& s : before[u]) out_.steps.push_back(std::move(s));
      for (CudaStep& s : unitSteps[u]) out_.steps.push_back(std::move(s));
      for (const std::string& f : freeAfter[u]) out_.steps.push_back(CudaFree{f});
    }
    // Outputs that are inputs are gathered; a buffer listed again is copied.
    for (size_t i = 0; i < plan_.outputs.size(); ++i) {
      const std::string& o = plan_.outputs[i];
      std::string slot = "output:" + std::to_string(i);
      if (const LoopInput* in = p_.findInput(o)) {
        out_.steps.push_back(gather("kiln_output" + std::to_string(i), "output " + std::to_string(i) + " = %" + o,
                                    slot, o, in->dtype, in->sizes, in->strides, 0));
      } else if (outputSlot[o] != i) {
        const Buffer* b = p_.findBuffer(o);
        out_.steps.push_back(CudaCopy{slot, o, simplify(numel(b->sizes) * IndexExpr(int64_t(elementSize(b->dtype))),
                                                        symbolFacts(numel(b->sizes)))});
      }
    }
    out_.source = cudaPrelude() + "\n// program @" + p_.name + " (" + (index32_ ? "32" : "64") +
                  "-bit indices)\n\n" + kernels_;
    return std::move(out_);
  }

private:
  // 32-bit index math when every size of the program is static and at most kMaxIndex32.
  bool fitsIndex32() const {
    if (!plan_.symbols.empty()) return false;
    // (The element count, and for a strided input the span of elements it reaches.)
    auto small = [](const std::vector<IndexExpr>& sizes, const std::vector<IndexExpr>* strides) {
      int64_t count = 1, span = 1;
      for (size_t i = 0; i < sizes.size(); ++i) {
        std::optional<int64_t> n = sizes[i].constant();
        if (!n || *n > kMaxIndex32) return false;
        count *= *n;
        if (count > kMaxIndex32) return false;
        if (!strides) continue;
        std::optional<int64_t> st = (*strides)[i].constant();
        if (!st || std::abs(*st) > kMaxIndex32) return false;
        span += (*n > 0 ? *n - 1 : 0) * std::abs(*st);
        if (span > kMaxIndex32) return false;
      }
      return true;
    };
    for (const LoopInput& in : p_.inputs)
      if (!small(in.sizes, &in.strides)) return false;
    for (const Buffer& b : p_.buffers) {
      if (!small(b.sizes, nullptr)) return false;
      auto ranges = [&](const std::vector<IterVar>& rs) {
        IndexExpr n(1);
        for (const IterVar& v : rs) n = n * v.extent;
        std::optional<int64_t> c = simplify(n, {}).constant();
        return c && *c <= kMaxIndex32;
      };
      if (const auto* pw = std::get_if<Pointwise>(&b.computation)) {
        if (!ranges(pw->ranges)) return false;
      } else if (const auto* r = std::get_if<Reduction>(&b.computation)) {
        if (!ranges(r->ranges) || !ranges(r->reductionRanges)) return false;
      }
    }
    return true;
  }

  // A launch copying a strided view of `src` (from element `offset`) into contiguous `dst`.
  CudaLaunch gather(const std::string& fname, const std::string& label, const std::string& dst,
                    const std::string& src, ScalarType t, const std::vector<IndexExpr>& sizes,
                    const std::vector<IndexExpr>& strides, int64_t offset) {
    std::vector<Loop> loops = named(sizes, "c");
    IndexExpr from(offset);
    for (size_t i = 0; i < loops.size(); ++i) from = from + strides[i] * IndexExpr::var(loops[i].var);
    RangeFacts facts = factsOf(loops, {});
    std::string T = cppStorageType(t);
    std::string params = T + "* __restrict__ dst, const " + T + "* __restrict__ src";
    for (const std::string& sym : plan_.symbols) params += ", int64_t " + sym;
    kernels_ += copyKernel(fname, label, loops, params,
                           "dst[" + cppIndex(flatIndex(loops), facts) + "] = src[" + cppIndex(from, facts) + "];",
                           indexType(index32_)) + "\n";
    CudaLaunch l;
    l.kernel = fname;
    l.label = label;
    l.block = kElementwiseBlock;
    IndexExpr n = numel(sizes);
    l.grid = simplify(min(ceilDiv(n, kElementwiseBlock), IndexExpr(kMaxBlocks)), symbolFacts(n));
    l.args = {{CudaArg::Kind::Pointer, dst}, {CudaArg::Kind::Pointer, src}};
    for (const std::string& sym : plan_.symbols) l.args.push_back({CudaArg::Kind::Size, sym});
    return l;
  }

  Operand operand(const Extern& x, size_t i) {
    std::string storage = plan_.rootOf(x.inputs[i]);
    if (const std::optional<StridedView>& v = x.viewOf(i))
      return Operand{storage, {v->sizes.begin(), v->sizes.end()}, {v->strides.begin(), v->strides.end()}, v->offset};
    if (const LoopInput* in = p_.findInput(storage)) return Operand{storage, in->sizes, in->strides};
    const Buffer* b = p_.findBuffer(storage);
    return Operand{storage, b->sizes, contiguousStrides(b->sizes)};
  }

  // An extern cumsum / cumprod (ScanShape): a thread per row and inner position carries the
  // running value along the scanned dim (neighbouring threads read neighbouring inner elements).
  std::vector<CudaStep> scanSteps(const Buffer& b, const std::string& fname) {
    const Extern& x = std::get<Extern>(b.computation);
    std::string what = "CUDA codegen: extern " + x.kernel + " (%" + b.name + ")";
    KILN_CHECK(x.inputs.size() == 1, what, ": expected 1 input, got ", x.inputs.size());
    Operand in = operand(x, 0);
    KILN_CHECK(in.strides == contiguousStrides(in.sizes) && in.offset == 0, what, ": the operand must be contiguous");
    const LoopInput* input = p_.findInput(in.name);
    ScanShape s = scanShape(b, in.sizes, input ? input->dtype : p_.findBuffer(in.name)->dtype, what);
    std::vector<Loop> loops = named({s.rows, s.inner}, "c");
    std::string params = s.T + "* __restrict__ dst, const " + s.T + "* __restrict__ src";
    for (const std::string& sym : plan_.symbols) params += ", int64_t " + sym;
    std::string n = sizeText(s.length), inner = sizeText(s.inner);
    std::string body = "{ const int64_t base = int64_t(c0) * " + n + " * " + inner + " + int64_t(c1); " + s.A +
                       " acc = " + s.init() + "; for (int64_t j = 0; j < " + n + "; ++j) { " +
                       s.step("acc", "src[base + j * " + inner + "]") + " dst[base + j * " + inner +
                       "] = static_cast<" + s.T + ">(acc); } }";
    std::string label = "%" + b.name + " = " + x.kernel + "(%" + x.inputs[0] + ")";
    kernels_ += copyKernel(fname, label, loops, params, body, indexType(index32_)) + "\n";
    CudaLaunch l;
    l.kernel = fname;
    l.label = label;
    l.block = kElementwiseBlock;
    IndexExpr lanes = s.rows * s.inner;
    l.grid = simplify(min(ceilDiv(lanes, kElementwiseBlock), IndexExpr(kMaxBlocks)), symbolFacts(lanes));
    l.args = {{CudaArg::Kind::Pointer, b.name}, {CudaArg::Kind::Pointer, in.name}};
    for (const std::string& sym : plan_.symbols) l.args.push_back({CudaArg::Kind::Size, sym});
    return {std::move(l)};
  }

  // An extern mm / bmm / addmm: operand copies where cuBLAS cannot read the layout, addmm's
  // bias broadcast into the result (cuBLAS's beta then scales it), the GEMM.
  std::vector<CudaStep> gemmSteps(const Buffer& b, const std::string& fname) {
    const Extern& x = std::get<Extern>(b.computation);
    std::string what = "CUDA codegen: extern " + x.kernel + " (%" + b.name + ")";
    bool batched = x.kernel == "bmm", addmm = x.kernel == "addmm";
    KILN_CHECK(x.kernel == "mm" || batched || addmm, what, ": unsupported extern kernel (mm, bmm and addmm are)");
    KILN_CHECK(b.dtype == ScalarType::Float32 || b.dtype == ScalarType::Float64 || b.dtype == ScalarType::Float16 ||
                   b.dtype == ScalarType::BFloat16,
               what, ": only f32, f64, f16 and bf16 GEMMs are supported, not ", scalarTypeShortName(b.dtype));
    size_t first = addmm ? 1 : 0;
    KILN_CHECK(x.inputs.size() == first + 2, what, ": expected ", first + 2, " inputs, got ", x.inputs.size());
    // The operands' type: the result's, or a 16-bit float type multiplied into an f32 result
    // (a 16-bit addmm's decomposition: cuBLAS reads bf16/f16 and writes f32).
    ScalarType in = b.dtype;
    for (size_t i = first; i < x.inputs.size(); ++i) {
      std::string storage = plan_.rootOf(x.inputs[i]);
      const LoopInput* input = p_.findInput(storage);
      ScalarType dt = input ? input->dtype : p_.findBuffer(storage)->dtype;
      bool mixed = !addmm && b.dtype == ScalarType::Float32 &&
                   (dt == ScalarType::Float16 || dt == ScalarType::BFloat16);
      KILN_CHECK(dt == b.dtype || mixed, what, ": ", scalarTypeShortName(dt), " operands and a ",
                 scalarTypeShortName(b.dtype), " result");
      KILN_CHECK(i == first || dt == in, what, ": operands of different dtypes");
      in = dt;
    }
    size_t rank = batched ? 3 : 2;
    Operand A = operand(x, first), B = operand(x, first + 1);
    KILN_CHECK(A.sizes.size() == rank && B.sizes.size() == rank, what, ": operands must be ", rank, "-D");
    IndexExpr batch = batched ? A.sizes[0] : IndexExpr(1);
    IndexExpr m = A.sizes[rank - 2], k = A.sizes[rank - 1], n = B.sizes[rank - 1];
    KILN_CHECK(B.sizes[rank - 2] == k && (!batched || B.sizes[0] == batch) && numel(b.sizes) == batch * m * n, what,
               ": operand and result sizes do not match");
    for (const IndexExpr& d : {m, n, k})
      KILN_CHECK(!d.isConstant() || *d.constant() <= INT_MAX, what, ": sizes beyond cuBLAS's int range");
    double alpha = externScalar(x, "alpha", 1.0, "CUDA codegen"), beta = addmm ? externScalar(x, "beta", 1.0, "CUDA codegen") : 0.0;
    for (const auto& [key, v] : x.args)
      KILN_CHECK(key == "alpha" || (addmm && key == "beta"), what, ": unknown argument ", key);

    std::vector<CudaStep> steps;
    std::string label = "%" + b.name + " = " + x.kernel + "(%" + x.inputs[first] + ", %" + x.inputs[first + 1] + ")";
    bool fillBias = addmm && beta != 0.0;
    if (fillBias) {
      Operand bias = operand(x, 0);
      KILN_CHECK(bias.sizes.size() <= 2, what, ": the bias must have at most 2 dims");
      std::vector<IndexExpr> bs(2, IndexExpr(0));
      for (size_t i = 0; i < bias.sizes.size(); ++i) {
        size_t d = 2 - bias.sizes.size() + i;
        IndexExpr out = d == 0 ? m : n;
        KILN_CHECK(bias.sizes[i] == IndexExpr(1) || bias.sizes[i] == out, what, ": the bias does not broadcast to the result");
        bs[d] = bias.sizes[i] == IndexExpr(1) ? IndexExpr(0) : bias.strides[i];
      }
      // With k == 0 the product is zero and cuBLAS is not called: the fill applies beta itself.
      std::string scale = (k.constant() == 0 && beta != 1.0) ? cppFloatLiteral(beta, ScalarType::Float32) + " * " : "";
      std::vector<IndexExpr> fillSizes = {m, n}, fillStrides = {bs[0], bs[1]};
      if (scale.empty()) {
        steps.push_back(gather(fname + "_bias", "%" + b.name + " = broadcast bias %" + bias.name, b.name, bias.name,
                               b.dtype, fillSizes, fillStrides, bias.offset));
      } else {
        std::vector<Loop> loops = named(fillSizes, "c");
        RangeFacts facts = factsOf(loops, {});
        std::string T = cppStorageType(b.dtype);
        std::string params = T + "* __restrict__ dst, const " + T + "* __restrict__ src";
        for (const std::string& sym : plan_.symbols) params += ", int64_t " + sym;
        IndexExpr from = IndexExpr(bias.offset) + bs[0] * IndexExpr::var("c0") + bs[1] * IndexExpr::var("c1");
        std::string v = cppFromStorage(b.dtype, "src[" + cppIndex(from, facts) + "]");
        kernels_ += copyKernel(fname + "_bias", "%" + b.name + " = beta * bias %" + bias.name, loops, params,
                               "dst[" + cppIndex(flatIndex(loops), facts) + "] = " +
                                   cppToStorage(b.dtype, scale + v) + ";",
                               indexType(index32_)) + "\n";
        CudaLaunch l;
        l.kernel = fname + "_bias";
        l.label = "%" + b.name + " = beta * bias %" + bias.name;
        l.grid = simplify(min(ceilDiv(m * n, kElementwiseBlock), IndexExpr(kMaxBlocks)), symbolFacts(m * n));
        l.args = {{CudaArg::Kind::Pointer, b.name}, {CudaArg::Kind::Pointer, bias.name}};
        for (const std::string& sym : plan_.symbols) l.args.push_back({CudaArg::Kind::Size, sym});
        steps.push_back(std::move(l));
      }
    }
    // (Size symbols are never 0: only static sizes can make the product empty.)
    if (m.constant() == 0 || n.constant() == 0) return steps;
    if (k.constant() == 0) {
      if (!fillBias) {
        std::vector<Loop> loops = named({batch * m * n}, "c");
        std::string T = cppStorageType(b.dtype);
        std::string params = T + "* __restrict__ dst";
        for (const std::string& sym : plan_.symbols) params += ", int64_t " + sym;
        kernels_ += copyKernel(fname + "_zero", "%" + b.name + " = 0 (k = 0)", loops, params,
                               "dst[c0] = " + cppToStorage(b.dtype, std::string(cppComputeType(b.dtype)) + "(0)") + ";",
                               indexType(index32_)) + "\n";
        CudaLaunch l;
        l.kernel = fname + "_zero";
        l.label = "%" + b.name + " = 0";
        IndexExpr total = batch * m * n;
        l.grid = simplify(min(ceilDiv(total, kElementwiseBlock), IndexExpr(kMaxBlocks)), symbolFacts(total));
        l.args = {{CudaArg::Kind::Pointer, b.name}};
        for (const std::string& sym : plan_.symbols) l.args.push_back({CudaArg::Kind::Size, sym});
        steps.push_back(std::move(l));
      }
      return steps;
    }
    std::vector<std::string> temps;
    auto layoutFor = [&](Operand& o, const IndexExpr& rows, const IndexExpr& cols, const char* which,
                         IndexExpr& batchStride) {
      size_t r = o.sizes.size();
      MatrixLayout l = matrixLayout(rows, cols, o.strides[r - 2], o.strides[r - 1]);
      batchStride = batched ? o.strides[0] : IndexExpr(0);
      if (l.copy) {
        std::string tmp = b.name + "." + which;
        tempTypes_[tmp] = in;
        IndexExpr count = batch * rows * cols;
        steps.push_back(CudaAlloc{tmp, simplify(count * IndexExpr(int64_t(elementSize(in))), symbolFacts(count))});
        steps.push_back(gather(fname + "_" + which, tmp + " = contiguous %" + o.name, tmp, o.name, in, o.sizes,
                               o.strides, o.offset));
        temps.push_back(tmp);
        o = Operand{tmp, {}, {}, 0};
        batchStride = simplify(rows * cols, symbolFacts(rows * cols));
      }
      return l;
    };
    IndexExpr sa(0), sb(0);
    MatrixLayout la = layoutFor(A, m, k, "a", sa), lb = layoutFor(B, k, n, "b", sb);
    CudaGemm g;
    g.dtype = in;
    g.outDtype = b.dtype;
    g.transA = la.transposed;
    g.transB = lb.transposed;
    g.m = m;
    g.n = n;
    g.k = k;
    g.lda = la.ld;
    g.ldb = lb.ld;
    g.ldc = n;
    g.batch = batch;
    g.strideA = sa;
    g.strideB = sb;
    g.strideC = batched ? simplify(m * n, symbolFacts(m * n)) : IndexExpr(0);
    g.a = A.name;
    g.b = B.name;
    g.c = b.name;
    g.offsetA = A.offset;
    g.offsetB = B.offset;
    g.alpha = alpha;
    g.beta = fillBias ? beta : 0.0;
    g.label = label;
    steps.push_back(std::move(g));
    for (const std::string& t : temps) steps.push_back(CudaFree{t});
    return steps;
  }

  const LoopProgram& p_;
  const CudaOptions& options_;
  KernelPlan plan_;
  bool index32_ = false;
  CudaProgram out_;
  std::string kernels_;
  std::map<std::string, ScalarType> tempTypes_; // GEMM operand copies
};

std::string argText(const CudaArg& a) {
  switch (a.kind) {
  case CudaArg::Kind::Pointer: return a.name.rfind("output:", 0) == 0 ? a.name : "%" + a.name;
  case CudaArg::Kind::Size: return a.name;
  case CudaArg::Kind::Error: return "error";
  }
  return "";
}

} // namespace

CudaProgram emitCuda(const LoopProgram& p, const CudaOptions& options) {
  return ProgramEmitter(p, options).emit();
}

std::string printLaunchList(const CudaProgram& p) {
  std::ostringstream os;
  for (const CudaStep& step : p.steps) {
    if (const auto* l = std::get_if<CudaLaunch>(&step)) {
      os << "launch " << l->kernel << " grid=" << l->grid.str() << " block=" << l->block;
      if (l->sharedBytes) os << " shared=" << l->sharedBytes;
      os << " (";
      for (size_t i = 0; i < l->args.size(); ++i) os << (i ? ", " : "") << argText(l->args[i]);
      os << ")" << (l->checksErrors ? " checks errors" : "") << "\n";
    } else if (const auto* g = std::get_if<CudaGemm>(&step)) {
      os << "gemm " << dtypeShortName(g->dtype) << " " << (g->transA ? "T" : "N") << (g->transB ? "T" : "N")
         << " m=" << g->m.str() << " n=" << g->n.str() << " k=" << g->k.str() << " a=%" << g->a;
      if (g->offsetA) os << "+" << g->offsetA;
      os << " lda=" << g->lda.str() << " b=%" << g->b;
      if (g->offsetB) os << "+" << g->offsetB;
      os << " ldb=" << g->ldb.str() << " c=%" << g->c << " ldc=" << g->ldc.str();
      if (!(g->batch == IndexExpr(1)))
        os << " batch=" << g->batch.str() << " strides=" << g->strideA.str() << "," << g->strideB.str() << ","
           << g->strideC.str();
      os << " alpha=" << g->alpha << " beta=" << g->beta;
      if (g->outDtype != g->dtype) os << " out=" << dtypeShortName(g->outDtype);
      os << "\n";
    } else if (const auto* a = std::get_if<CudaAlloc>(&step)) {
      os << "alloc %" << a->name << " " << a->bytes.str() << " bytes\n";
    } else if (const auto* a = std::get_if<CudaAlias>(&step)) {
      os << "alias %" << a->name << " = %" << a->of << "\n";
    } else if (const auto* f = std::get_if<CudaFree>(&step)) {
      os << "free %" << f->name << "\n";
    } else if (const auto* c = std::get_if<CudaCopy>(&step)) {
      os << "copy " << c->dst << " <- %" << c->src << " " << c->bytes.str() << " bytes\n";
    }
  }
  for (size_t i = 0; i < p.outputBuffers.size(); ++i)
    if (!p.outputBuffers[i].empty()) os << "output " << i << " = %" << p.outputBuffers[i] << "\n";
  return os.str();
}

} // namespace kiln::codegen
