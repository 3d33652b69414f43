// The kernel planner (see KernelPlan.h): which buffers form one loop nest, its phases and
// members, which members are written to memory, the units of a program and their storage.
#include "codegen/KernelPlan.h"

#include <cstdint>
#include <algorithm>
#include <cctype>
#include <functional>

#include "runtime/Error.h"

namespace kiln::codegen {

IndexExpr tripCount(const std::vector<Loop>& loops) {
  IndexExpr n(1);
  for (const Loop& l : loops) n = n * l.extent;
  return n;
}

std::vector<IndexExpr> extents(const std::vector<Loop>& loops) {
  std::vector<IndexExpr> e;
  for (const Loop& l : loops) e.push_back(l.extent);
  return e;
}

IndexExpr flatIndex(const std::vector<Loop>& loops) {
  IndexExpr flat(0), stride(1);
  for (size_t i = loops.size(); i-- > 0;) {
    flat = flat + stride * IndexExpr::var(loops[i].var);
    stride = stride * loops[i].extent;
  }
  return flat;
}

IndexExpr numel(const std::vector<IndexExpr>& sizes) {
  IndexExpr n(1);
  for (const IndexExpr& s : sizes) n = n * s;
  return n;
}

int64_t hinted(const IndexExpr& e, const std::map<std::string, int64_t>& hints) {
  if (std::optional<int64_t> c = e.constant()) return *c;
  std::map<std::string, int64_t> values;
  for (const std::string& v : e.variables()) {
    auto it = hints.find(v);
    values[v] = it == hints.end() ? kDefaultSizeHint : it->second;
  }
  try {
    return e.evaluate(values);
  } catch (const Error&) {
    return kDefaultSizeHint; // a hint only steers heuristics; overflow must not fail codegen
  }
}

// What the loop variables range over; a symbolic extent bounds its variable below only (facts
// are constant intervals). Size symbols are at least kMinSizeSymbol (ir/loop/LoopIR.h).
RangeFacts factsOf(const std::vector<Loop>& outer, const std::vector<Loop>& inner) {
  RangeFacts f;
  for (const std::vector<Loop>* loops : {&outer, &inner})
    for (const Loop& l : *loops) {
      f[l.var] = {0, l.extent.constant()};
      for (const std::string& s : l.extent.variables()) f[s] = {kMinSizeSymbol, std::nullopt};
    }
  return f;
}

// The facts about the size symbols of `e`.
RangeFacts symbolFacts(const IndexExpr& e) {
  RangeFacts f;
  for (const std::string& v : e.variables()) f[v] = {kMinSizeSymbol, std::nullopt};
  return f;
}

std::vector<Loop> named(const std::vector<IndexExpr>& extents, const std::string& prefix) {
  std::vector<Loop> loops;
  for (size_t i = 0; i < extents.size(); ++i) loops.push_back({prefix + std::to_string(i), extents[i]});
  return loops;
}

namespace {

// Whether `offset`, over the variables of `loops` and size symbols, stays in [0, rowLength) at
// every point: interval bounds decide for a static row length; for a symbolic one, an offset
// affine in the loop variables with strides of known sign is checked at its extreme points.
bool withinRow(const IndexExpr& offset, const std::vector<Loop>& loops, const IndexExpr& rowLength,
               const RangeFacts& facts) {
  if (std::optional<int64_t> length = rowLength.constant()) {
    Bounds bo = bounds(offset, facts);
    return bo.lo && bo.hi && *bo.lo >= 0 && *bo.hi < *length;
  }
  std::map<std::string, IndexExpr> least, most;
  for (const Loop& l : loops) {
    IndexExpr stride = simplify(offset.substitute({{l.var, IndexExpr::var(l.var) + 1}}) - offset, facts);
    for (const Loop& other : loops)
      for (const std::string& v : stride.variables())
        if (v == other.var) return false; // not affine
    Bounds b = bounds(stride, facts);
    bool up = b.lo && *b.lo >= 0, down = b.hi && *b.hi <= 0;
    if (!up && !down) return false;
    least[l.var] = up ? IndexExpr(0) : l.extent - 1;
    most[l.var] = up ? l.extent - 1 : IndexExpr(0);
  }
  Bounds lo = bounds(offset.substitute(least), facts);
  Bounds room = bounds(rowLength - 1 - offset.substitute(most), facts);
  return lo.lo && *lo.lo >= 0 && room.lo && *room.lo >= 0;
}

// A computation's ranges without extent-1 ones (their variables are 0 everywhere).
std::vector<Loop> keptRanges(const std::vector<IterVar>& ranges,
                             std::map<std::string, IndexExpr>& zeroed) {
  std::vector<Loop> kept;
  for (const IterVar& v : ranges) {
    if (v.extent.constant() == 1)
      zeroed[v.name] = IndexExpr(0);
    else
      kept.push_back({v.name, v.extent});
  }
  return kept;
}

// The body with its loop variables renamed (index expressions substituted and simplified).
LoopBody renameBody(const LoopBody& body, const std::map<std::string, IndexExpr>& renames,
                    const RangeFacts& facts) {
  LoopBody out = body;
  for (LoopOp& op : out.ops)
    if (op.code == LoopOpCode::Load || op.code == LoopOpCode::IndexExpr)
      op.index = simplify(op.index.substitute(renames), facts);
  return out;
}

// Whether the in-place writes of a nest of several members are safe fused: the nest runs its
// members element by element (and its rows in parallel), so a member may read the storage an
// in-place member writes only at the element being written, in the writer's phase (before the
// write it sees the old value, after it the new one, as the members' program order says). A
// write at a place the body computes (a scatter) or accumulating is never fused.
bool inPlaceWritesFuse(const Nest& nest) {
  std::map<std::string, std::string> root;                    // version -> its storage
  std::map<std::string, std::pair<size_t, IndexExpr>> written; // storage -> (phase, offset)
  for (size_t pi = 0; pi < nest.phases.size(); ++pi)
    for (const Member& m : nest.phases[pi].members) {
      const std::string* into = m.buffer->writesInto();
      if (!into) continue;
      const auto& pw = std::get<Pointwise>(m.buffer->computation);
      if (pw.accumulate || !indirectVars(pw.body).empty()) return false;
      auto r = root.find(*into);
      std::string storage = r == root.end() ? *into : r->second;
      root[m.buffer->name] = storage;
      auto [it, added] = written.emplace(storage, std::pair{pi, m.flat});
      if (!added && (it->second.first != pi || it->second.second != m.flat)) return false;
    }
  if (written.empty()) return true;
  for (size_t pi = 0; pi < nest.phases.size(); ++pi)
    for (const Member& m : nest.phases[pi].members)
      for (const LoopOp& op : m.body.ops) {
        if (op.code != LoopOpCode::Load) continue;
        auto r = root.find(op.buffer);
        auto w = written.find(r == root.end() ? op.buffer : r->second);
        if (w == written.end()) continue;
        const Phase& phase = nest.phases[pi];
        RangeFacts facts = factsOf(nest.outer, phase.loops);
        if (w->second.first != pi || simplify(op.index - w->second.second, facts) != IndexExpr(0))
          return false;
      }
  return true;
}

} // namespace

std::optional<Nest> buildNest(const std::vector<const Buffer*>& bufs) {
  struct Normalized {
    std::vector<Loop> ranges, reductionRanges;
    std::map<std::string, IndexExpr> zeroed;
  };
  std::vector<Normalized> norm;
  std::optional<std::vector<IndexExpr>> outerExtents;
  for (const Buffer* b : bufs) {
    Normalized n;
    if (const auto* pw = std::get_if<Pointwise>(&b->computation)) {
      n.ranges = keptRanges(pw->ranges, n.zeroed);
    } else {
      const auto& r = std::get<Reduction>(b->computation);
      n.ranges = keptRanges(r.ranges, n.zeroed);
      n.reductionRanges = keptRanges(r.reductionRanges, n.zeroed);
      if (!outerExtents) outerExtents = extents(n.ranges);
    }
    norm.push_back(std::move(n));
  }
  if (!outerExtents) {
    // Pointwise only: every buffer over the same ranges; the last one is the inner loop.
    std::vector<IndexExpr> e = extents(norm[0].ranges);
    for (const Normalized& n : norm)
      if (extents(n.ranges) != e) return std::nullopt;
    if (!e.empty()) e.pop_back();
    outerExtents = e;
  }
  Nest nest;
  nest.outer = named(*outerExtents, "o");
  IndexExpr outerFlat = flatIndex(nest.outer);
  std::map<std::string, std::pair<size_t, size_t>> where; // member -> (phase, index)
  for (size_t k = 0; k < bufs.size(); ++k) {
    const Buffer* b = bufs[k];
    const Normalized& n = norm[k];
    std::vector<IndexExpr> e = extents(n.ranges);
    if (e.size() < outerExtents->size() ||
        !std::equal(outerExtents->begin(), outerExtents->end(), e.begin()))
      return std::nullopt;
    std::vector<IndexExpr> inner(e.begin() + outerExtents->size(), e.end());
    bool reduction = b->isReduction();
    if (reduction) {
      if (!inner.empty()) return std::nullopt;
      inner = extents(n.reductionRanges);
    }
    const LoopBody& body = reduction ? std::get<Reduction>(b->computation).body
                                     : std::get<Pointwise>(b->computation).body;
    std::vector<Loop> innerLoops = named(inner, reduction ? "r" : "p");
    std::map<std::string, IndexExpr> renames = n.zeroed;
    size_t outerCount = nest.outer.size();
    for (size_t i = 0; i < outerCount; ++i) renames[n.ranges[i].var] = IndexExpr::var(nest.outer[i].var);
    const std::vector<Loop>& innerRanges = reduction ? n.reductionRanges : n.ranges;
    size_t skip = reduction ? 0 : outerCount;
    for (size_t i = skip; i < innerRanges.size(); ++i)
      renames[innerRanges[i].var] = IndexExpr::var(innerLoops[i - skip].var);
    RangeFacts facts = factsOf(nest.outer, innerLoops);
    LoopBody renamed = renameBody(body, renames, facts);
    // A buffer joins the previous phase when it loops over the same ranges and reads nothing
    // of that phase (a reduction) or only the current element of its members (pointwise).
    bool join = !nest.phases.empty() && nest.phases.back().isReduction == reduction &&
                extents(nest.phases.back().loops) == inner;
    // Welford and other reductions do not share a phase: a mixed phase would run the sequential
    // Welford update (a division per element, no simd) and keep the others from vectorizing;
    // apart, Welford runs in vectorized blocks and the others in a simd loop.
    if (join && reduction) {
      auto welford = [](const Buffer* x) {
        ReductionKind k = std::get<Reduction>(x->computation).kind;
        return k == ReductionKind::WelfordMean || k == ReductionKind::WelfordVar;
      };
      for (const Member& other : nest.phases.back().members)
        if (welford(other.buffer) != welford(b)) join = false;
    }
    for (const LoopOp& op : renamed.ops) {
      if (!join || op.code != LoopOpCode::Load || !where.count(op.buffer)) continue;
      auto [pi, mi] = where[op.buffer];
      if (pi == nest.phases.size() - 1 &&
          (reduction || simplify(op.index - nest.phases[pi].members[mi].flat, facts) != IndexExpr(0)))
        join = false;
    }
    if (!join) nest.phases.push_back({reduction, innerLoops, {}});
    Phase& phase = nest.phases.back();
    Member m;
    m.buffer = b;
    m.body = std::move(renamed);
    m.flat = reduction ? outerFlat : simplify(tripCount(phase.loops) * outerFlat +
                                                  flatIndex(phase.loops), facts);
    // An in-place write stores at its offset into the storage it overwrites.
    if (!reduction && b->writesInto())
      m.flat = simplify(std::get<Pointwise>(b->computation).intoIndex.substitute(renames), facts);
    m.id = int(k);
    // Reads of earlier members: a reduction's value or the current element of a member of the
    // same pointwise phase come from locals; other elements of a member's row from memory.
    for (const LoopOp& op : m.body.ops) {
      if (op.code != LoopOpCode::Load || !where.count(op.buffer)) continue;
      auto [pi, mi] = where[op.buffer];
      const Phase& from = nest.phases[pi];
      const Member& producer = from.members[mi];
      bool samePhase = pi == nest.phases.size() - 1;
      // (A pointwise phase without loops computes one value per row, in scope for the row.)
      if (samePhase || from.isReduction || from.loops.empty()) {
        if (simplify(op.index - producer.flat, facts) == IndexExpr(0)) continue;
        return std::nullopt;
      }
      IndexExpr rowLength = tripCount(from.loops);
      IndexExpr offset = simplify(op.index - rowLength * outerFlat, facts);
      // (Variables other than the phase's loops are the outer loops' or size symbols.)
      for (const std::string& v : offset.variables())
        for (const Loop& l : nest.outer)
          if (v == l.var) return std::nullopt;
      if (!withinRow(offset, phase.loops, rowLength, facts)) return std::nullopt;
      nest.memoryReads.insert(op.buffer);
    }
    where[b->name] = {nest.phases.size() - 1, phase.members.size()};
    phase.members.push_back(std::move(m));
  }
  if (bufs.size() > 1 && !inPlaceWritesFuse(nest)) return std::nullopt;
  return nest;
}

bool fusesIntoOneNest(const std::vector<const Buffer*>& bufs) {
  if (bufs.empty()) return false;
  for (const Buffer* b : bufs)
    if (b->isExtern()) return false;
  return buildNest(bufs).has_value();
}

std::optional<PointwiseNestFacts> pointwiseNestFacts(const Buffer& b) {
  const auto* pw = std::get_if<Pointwise>(&b.computation);
  if (!pw || b.writesInto()) return std::nullopt;
  // buildNest for a group of pointwise buffers of these extents: the outer loops are all ranges
  // but the last, every member's phase loops the last range, and its flat offset the same.
  std::map<std::string, IndexExpr> renames;
  std::vector<Loop> kept = keptRanges(pw->ranges, renames);
  PointwiseNestFacts f;
  f.extents = extents(kept);
  std::vector<IndexExpr> outerExtents = f.extents, inner;
  if (!outerExtents.empty()) {
    inner.push_back(outerExtents.back());
    outerExtents.pop_back();
  }
  std::vector<Loop> outer = named(outerExtents, "o"), loops = named(inner, "p");
  for (size_t i = 0; i < outer.size(); ++i) renames[kept[i].var] = IndexExpr::var(outer[i].var);
  for (size_t i = outer.size(); i < kept.size(); ++i)
    renames[kept[i].var] = IndexExpr::var(loops[i - outer.size()].var);
  RangeFacts facts = factsOf(outer, loops);
  IndexExpr outerFlat = flatIndex(outer);
  IndexExpr flat = simplify(tripCount(loops) * outerFlat + flatIndex(loops), facts);
  IndexExpr rowLength = tripCount(loops);
  for (const LoopOp& op : pw->body.ops) {
    if (op.code != LoopOpCode::Load) continue;
    IndexExpr index = simplify(op.index.substitute(renames), facts);
    PointwiseNestFacts::Read read = PointwiseNestFacts::Read::Other;
    if (simplify(index - flat, facts) == IndexExpr(0)) {
      read = PointwiseNestFacts::Read::Element;
    } else if (!loops.empty()) {
      // As buildNest: a read of an earlier phase's member within the current row.
      IndexExpr offset = simplify(index - rowLength * outerFlat, facts);
      bool inner = true;
      for (const std::string& v : offset.variables())
        for (const Loop& l : outer)
          if (v == l.var) inner = false;
      if (inner && withinRow(offset, loops, rowLength, facts)) read = PointwiseNestFacts::Read::Row;
    }
    f.loads.push_back({op.buffer, read});
  }
  return f;
}

// ---------------------------------------------------------------------------------------------
// The program's units

std::string KernelPlan::rootOf(const std::string& name) const {
  auto it = roots.find(name);
  return it == roots.end() ? name : it->second;
}

namespace {

std::string sanitize(const std::string& s) {
  std::string out;
  for (char ch : s) out += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
  return out;
}

class Planner {
public:
  Planner(const LoopProgram& p, const PlanOptions& o) : p_(p), options_(o) {}

  KernelPlan plan() {
    plan_.program = &p_;
    plan_.symbols = p_.sizeSymbols();
    checkSymbols();
    for (const LoopInput& in : p_.inputs) {
      name(in.name, "in_");
      plan_.dtypes[in.name] = in.dtype;
    }
    for (const Buffer& b : p_.buffers) {
      if (b.writesInto()) {
        plan_.roots[b.name] = p_.storageRoot(b.name);
        continue; // no storage of its own
      }
      name(b.name, "b_");
      plan_.dtypes[b.name] = b.dtype;
    }
    // An output that is a version of a storage is that storage at the end.
    for (const std::string& o : p_.outputs) plan_.outputs.push_back(plan_.rootOf(o));
    buildUnits();
    decideMaterialization();
    return std::move(plan_);
  }

private:
  void name(const std::string& n, const std::string& prefix) {
    std::string c = prefix + sanitize(n), base = c;
    for (int i = 1; used_.count(c); ++i) c = base + "_" + std::to_string(i);
    used_.insert(c);
    plan_.names[n] = c;
  }

  // Size symbols become locals and parameters of every generated function, so their names
  // must not collide with the names the emitters make up: s0, s1, ... (as capture names them).
  void checkSymbols() const {
    for (const std::string& sym : plan_.symbols) {
      bool ok = sym.size() >= 2 && sym[0] == 's' &&
                std::all_of(sym.begin() + 1, sym.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      KILN_CHECK(ok, options_.what, ": size symbol '", sym, "' of program @", p_.name,
                 ": name size symbols s0, s1, ... (other names could collide with generated ones)");
    }
  }

  void addNest(const std::vector<const Buffer*>& bufs, const std::string& label) {
    std::optional<Nest> nest = buildNest(bufs);
    if (!nest) {
      // The group's ranges do not fit one nest: each buffer gets its own.
      for (const Buffer* b : bufs) addNest({b}, "%" + b->name + " (of " + label + ", not fused)");
      return;
    }
    plan_.units.push_back({std::move(*nest), label, bufs});
  }

  void buildUnits() {
    const std::vector<Buffer>& bs = p_.buffers;
    std::vector<Unit>& units = plan_.units;
    for (size_t i = 0; i < bs.size();) {
      size_t j = i + 1;
      if (!bs[i].kernel.empty())
        while (j < bs.size() && bs[j].kernel == bs[i].kernel) ++j;
      std::string label = bs[i].kernel.empty() ? "%" + bs[i].name : "kernel @" + bs[i].kernel;
      std::vector<const Buffer*> run;
      std::string members;
      for (size_t k = i; k < j; ++k) members += (k > i ? ", %" : ": %") + bs[k].name;
      // An mm and the epilogue fused into its kernel: one GEMM call with post-ops.
      if (options_.gemmEpilogues && j == i + 2 && bs[i].isExtern() && bs[i + 1].isPointwise()) {
        auto steps = gemmEpilogueOf(p_, bs[i], bs[i + 1]);
        if (auto* ops = std::get_if<std::vector<GemmPostOp>>(&steps)) {
          units.push_back({&bs[i], label + members, {&bs[i + 1]}, &bs[i + 1], std::move(*ops)});
          i = j;
          continue;
        }
      }
      for (size_t k = i; k <= j; ++k) {
        if (k < j && !bs[k].isExtern()) {
          run.push_back(&bs[k]);
          continue;
        }
        if (!run.empty()) addNest(run, run.size() > 1 || j > i + 1 ? label + members : label);
        run.clear();
        if (k < j) units.push_back({&bs[k], "%" + bs[k].name, {&bs[k]}});
      }
      i = j;
    }
  }

  // A nest's member is written to memory when it is an output, read by another unit, read
  // from memory inside its own nest, or overwritten in place; otherwise its values only live in
  // locals. In-place writes allocate nothing: they store into their root's storage.
  void decideMaterialization() {
    std::vector<Unit>& units = plan_.units;
    std::set<std::string> outputs(plan_.outputs.begin(), plan_.outputs.end());
    std::set<std::string> overwritten;
    for (const auto& [version, root] : plan_.roots) overwritten.insert(root);
    std::map<std::string, size_t> definedIn;
    for (size_t u = 0; u < units.size(); ++u)
      for (const Buffer* b : units[u].defines) definedIn[b->name] = u;
    std::set<std::string> readElsewhere;
    for (size_t u = 0; u < units.size(); ++u) {
      auto note = [&](const std::string& n) {
        auto it = definedIn.find(n);
        if (it != definedIn.end() && it->second != u) readElsewhere.insert(n);
      };
      if (const Nest* nest = std::get_if<Nest>(&units[u].work)) {
        for (const Phase& ph : nest->phases)
          for (const Member& m : ph.members)
            for (const LoopOp& op : m.body.ops)
              if (op.code == LoopOpCode::Load) note(op.buffer);
      } else {
        for (const std::string& in : std::get<Extern>(std::get<const Buffer*>(units[u].work)->computation).inputs)
          note(in);
        for (const GemmPostOp& op : units[u].postOps)
          if (op.isBinary()) note(op.tensor);
      }
    }
    for (Unit& unit : units) {
      if (Nest* nest = std::get_if<Nest>(&unit.work)) {
        for (Phase& ph : nest->phases)
          for (Member& m : ph.members) {
            const std::string& n = m.buffer->name;
            // In-place writes always store; the storage they write must exist.
            m.materialize = outputs.count(n) || readElsewhere.count(n) ||
                            nest->memoryReads.count(n) || m.buffer->writesInto() ||
                            overwritten.count(n);
            if (m.materialize && !m.buffer->writesInto()) plan_.materialized.insert(n);
          }
      } else {
        for (const Buffer* b : unit.defines) plan_.materialized.insert(b->name);
      }
    }
  }

  const LoopProgram& p_;
  const PlanOptions& options_;
  KernelPlan plan_;
  std::set<std::string> used_;
};

} // namespace

KernelPlan planKernels(const LoopProgram& p, const PlanOptions& options) {
  return Planner(p, options).plan();
}

namespace {

// a >= b for every value of the size symbols.
bool alwaysAtLeast(const IndexExpr& a, const IndexExpr& b) {
  IndexExpr d = a - b;
  std::optional<int64_t> lo = bounds(d, symbolFacts(d)).lo;
  return lo && *lo >= 0;
}

} // namespace

MatrixLayout matrixLayout(const IndexExpr& rows, const IndexExpr& cols, IndexExpr s0, IndexExpr s1) {
  IndexExpr one(1), colsOrOne = simplify(max(cols, one), symbolFacts(cols));
  if (rows == one) s0 = colsOrOne;
  if (cols == one) s1 = one;
  if (s1 == one && alwaysAtLeast(s0, colsOrOne)) return {false, false, s0};
  if (s0 == one && alwaysAtLeast(s1, simplify(max(rows, one), symbolFacts(rows)))) return {true, false, s1};
  return {false, true, colsOrOne};
}

double externScalar(const Extern& x, const std::string& key, double dflt, const std::string& what) {
  for (const auto& [k, v] : x.args) {
    if (k != key) continue;
    if (const double* d = std::get_if<double>(&v)) return *d;
    if (const int64_t* i = std::get_if<int64_t>(&v)) return double(*i);
    if (const bool* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
    throw Error(strCat(what, ": extern ", x.kernel, ": ", key, " must be a number"));
  }
  return dflt;
}

} // namespace kiln::codegen
