// match-ranges (see MatchRanges.h).
#include "passes/loop/MatchRanges.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

namespace {

std::optional<std::vector<int64_t>> constantExtents(const std::vector<IterVar>& ranges) {
  std::vector<int64_t> r;
  for (const IterVar& v : ranges) {
    std::optional<int64_t> c = v.extent.constant();
    if (!c) return std::nullopt;
    r.push_back(*c);
  }
  return r;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// How many floor-divisions and modulos an expression has.
int divisions(const IndexExpr& e) {
  int n = e.kind() == IndexExpr::Kind::FloorDiv || e.kind() == IndexExpr::Kind::Mod ? 1 : 0;
  if (e.kind() != IndexExpr::Kind::Const && e.kind() != IndexExpr::Kind::Var)
    for (const IndexExpr& o : e.operands()) n += divisions(o);
  return n;
}

// The body over new ranges `to` (row-major over the same elements as `from`), or nullopt when
// an index would gain a division.
std::optional<LoopBody> reindexed(const LoopBody& body, const std::vector<IterVar>& from,
                                  const std::vector<int64_t>& fromExtents,
                                  const std::vector<int64_t>& to) {
  RangeFacts facts;
  IndexExpr flat(0);
  int64_t stride = 1;
  std::vector<IndexExpr> vars;
  for (size_t d = 0; d < to.size(); ++d) {
    std::string name = "m" + std::to_string(d);
    vars.push_back(IndexExpr::var(name));
    facts[name] = VarRange{0, to[d]};
  }
  for (size_t d = to.size(); d-- > 0;) {
    flat = flat + vars[d] * IndexExpr(stride);
    stride *= to[d];
  }
  std::map<std::string, IndexExpr> old;
  stride = 1;
  for (size_t d = fromExtents.size(); d-- > 0;) {
    old[from[d].name] = mod(floorDiv(flat, IndexExpr(stride)), IndexExpr(fromExtents[d]));
    stride *= fromExtents[d];
  }
  std::map<std::string, IndexExpr> rename;
  for (size_t d = 0; d < to.size(); ++d) rename["m" + std::to_string(d)] = IndexExpr::var("i" + std::to_string(d));
  LoopBody out = body;
  for (LoopOp& op : out.ops) {
    if (op.code != LoopOpCode::Load && op.code != LoopOpCode::IndexExpr) continue;
    IndexExpr e = simplify(op.index.substitute(old), facts);
    if (divisions(e) > divisions(op.index)) return std::nullopt;
    op.index = e.substitute(rename);
  }
  return out;
}

// Gives `b` the ranges `shape` (row-major over the same elements) when no index gains a
// division; logs why.
bool reshapeRanges(Buffer& b, const std::vector<int64_t>& shape, const std::string& why,
                   std::vector<std::string>& log) {
  auto& pw = std::get<Pointwise>(b.computation);
  std::optional<std::vector<int64_t>> extents = constantExtents(pw.ranges);
  std::optional<LoopBody> body = reindexed(pw.body, pw.ranges, *extents, shape);
  if (!body) return false;
  std::string before = sizesText(pw.ranges);
  pw.body = std::move(*body);
  pw.ranges.clear();
  for (size_t d = 0; d < shape.size(); ++d)
    pw.ranges.push_back({"i" + std::to_string(d), IndexExpr(shape[d])});
  log.push_back("match-ranges: %" + b.name + " over " + sizesText(pw.ranges) + " (was " + before + "), " + why);
  return true;
}

// The fresh pointwise buffer's constant ranges, when it has any elements.
std::optional<std::vector<int64_t>> pointwiseExtents(const Buffer& b) {
  const auto* pw = std::get_if<Pointwise>(&b.computation);
  if (!pw || !pw->into.empty()) return std::nullopt;
  std::optional<std::vector<int64_t>> e = constantExtents(pw->ranges);
  if (!e || product(*e) == 0) return std::nullopt;
  return e;
}

bool readsReduction(const Buffer& b, const std::map<std::string, const Reduction*>& reductions) {
  for (const LoopOp& op : std::get<Pointwise>(b.computation).body.ops)
    if (op.code == LoopOpCode::Load && reductions.count(op.buffer)) return true;
  return false;
}

// Pointwise buffers reading a common buffer over the same elements in different shapes (a
// linear layer's bias add kept for the backward over [512, 512] and the GELU reading the same
// product over [8, 64, 512]) take the ranges of the one with more dims, so that fuse-horizontal
// can make them one pass over the product. Only the first reader of each buffer is a target, so
// the work stays linear in the program.
void matchSiblings(LoopProgram& p, const std::map<std::string, const Reduction*>& reductions,
                   std::vector<std::string>& log) {
  std::map<std::string, size_t> firstReader;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    std::optional<std::vector<int64_t>> mine = pointwiseExtents(p.buffers[i]);
    if (!mine) continue;
    for (const LoopOp& op : std::get<Pointwise>(p.buffers[i].computation).body.ops) {
      if (op.code != LoopOpCode::Load) continue;
      auto [at, fresh] = firstReader.emplace(op.buffer, i);
      if (fresh) continue;
      Buffer& first = p.buffers[at->second];
      std::optional<std::vector<int64_t>> theirs = pointwiseExtents(first);
      if (!theirs || *theirs == *mine || product(*theirs) != product(*mine)) continue;
      bool mineFiner = mine->size() > theirs->size();
      Buffer& coarse = mineFiner ? first : p.buffers[i];
      const Buffer& fine = mineFiner ? p.buffers[i] : first;
      // A reader of a reduction keeps the rows the rule above gave it.
      if (readsReduction(coarse, reductions)) continue;
      if (reshapeRanges(coarse, mineFiner ? *mine : *theirs,
                        "the ranges of %" + fine.name + " (both read %" + op.buffer + ")", log))
        break;
    }
  }
}

} // namespace

void matchRanges(LoopProgram& p, std::vector<std::string>& log) {
  std::map<std::string, const Reduction*> reductions;
  for (const Buffer& b : p.buffers)
    if (const auto* r = std::get_if<Reduction>(&b.computation)) reductions[b.name] = r;
  for (Buffer& b : p.buffers) {
    auto* pw = std::get_if<Pointwise>(&b.computation);
    // An in-place write keeps its ranges: its index written is over them.
    if (!pw || !pw->into.empty()) continue;
    std::optional<std::vector<int64_t>> extents = constantExtents(pw->ranges);
    // A buffer of no elements has no rows to match (and the row-major split would divide by 0).
    if (!extents || product(*extents) == 0) continue;
    for (const LoopOp& op : pw->body.ops) {
      if (op.code != LoopOpCode::Load || !reductions.count(op.buffer)) continue;
      const Reduction& r = *reductions.at(op.buffer);
      std::optional<std::vector<int64_t>> rows = constantExtents(r.ranges),
                                          cols = constantExtents(r.reductionRanges);
      if (!rows || !cols) continue;
      std::vector<int64_t> shape = *rows;
      shape.insert(shape.end(), cols->begin(), cols->end());
      if (shape == *extents || product(shape) != product(*extents)) continue;
      std::optional<LoopBody> body = reindexed(pw->body, pw->ranges, *extents, shape);
      if (!body) continue;
      std::string before = sizesText(pw->ranges);
      pw->body = std::move(*body);
      pw->ranges.clear();
      for (size_t d = 0; d < shape.size(); ++d)
        pw->ranges.push_back({"i" + std::to_string(d), IndexExpr(shape[d])});
      log.push_back("match-ranges: %" + b.name + " over " + sizesText(pw->ranges) + " (was " +
                    before + "), the rows of %" + op.buffer);
      break;
    }
  }
  matchSiblings(p, reductions, log);
}

} // namespace kiln::passes::loop
