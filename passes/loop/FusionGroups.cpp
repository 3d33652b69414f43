// Fusion groups of the loop scheduler (see FusionGroups.h).
#include "passes/loop/FusionGroups.h"

#include <cstdint>
#include <algorithm>
#include <limits>
#include <queue>
#include <unordered_map>

#include "runtime/Error.h"

namespace kiln::passes::loop {

namespace {

constexpr size_t kTomb = FusionGroups::kNoGroup;

const LoopBody* bodyOf(const Buffer& b) {
  if (const auto* pw = std::get_if<Pointwise>(&b.computation)) return &pw->body;
  if (const auto* r = std::get_if<Reduction>(&b.computation)) return &r->body;
  return nullptr;
}

template <class T> void sortUnique(std::vector<T>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

} // namespace

std::string sizesText(const std::vector<IterVar>& ranges) {
  std::string s = "[";
  for (size_t i = 0; i < ranges.size(); ++i) s += (i ? ", " : "") + ranges[i].extent.str();
  return s + "]";
}

FusionGroups::FusionGroups(const LoopProgram& p, int64_t maxKernelOps)
    : p_(p), maxKernelOps_(maxKernelOps), n_(p.buffers.size()) {
  std::unordered_map<std::string, size_t> index;
  for (size_t i = 0; i < n_; ++i) index[p.buffers[i].name] = i;
  std::unordered_map<std::string, int> nameIds;
  auto nameId = [&](const std::string& n) {
    auto [it, added] = nameIds.emplace(n, int(nameIds.size()));
    if (added) readersOfName_.emplace_back();
    return it->second;
  };
  bufReads_.resize(n_);
  bufNames_.resize(n_);
  bufAfter_.resize(n_);
  bufOps_.resize(n_, 1);
  pwFacts_.resize(n_);
  pwBad_.resize(n_);
  pwBadReaders_.resize(n_);
  for (size_t i = 0; i < n_; ++i) {
    const Buffer& b = p.buffers[i];
    auto note = [&](const std::string& n) {
      bufNames_[i].push_back(nameId(n));
      if (auto it = index.find(n); it != index.end()) bufReads_[i].push_back(it->second);
    };
    if (const auto* x = std::get_if<Extern>(&b.computation)) {
      for (const std::string& in : x->inputs) note(in);
    } else {
      const LoopBody& body = *bodyOf(b);
      bufOps_[i] = int64_t(body.ops.size());
      for (const LoopOp& op : body.ops)
        if (op.code == LoopOpCode::Load) note(op.buffer);
    }
    sortUnique(bufNames_[i]);
    sortUnique(bufReads_[i]);
    for (int id : bufNames_[i]) readersOfName_[size_t(id)].push_back(i);
    pwFacts_[i] = codegen::pointwiseNestFacts(b);
    if (pwFacts_[i]) {
      for (const auto& [name, read] : pwFacts_[i]->loads) {
        auto it = index.find(name);
        if (it == index.end() || read != codegen::PointwiseNestFacts::Read::Other) continue;
        pwBad_[i].push_back(it->second);
        pwBadReaders_[it->second].push_back(i);
      }
    }
  }
  // An in-place write runs after the buffer it overwrites and after every earlier reader of
  // that version (they must see the old values).
  for (size_t i = 0; i < n_; ++i) {
    const std::string* base = p.buffers[i].writesInto();
    if (!base) continue;
    if (auto it = index.find(*base); it != index.end()) bufAfter_[i].push_back(it->second);
    if (auto id = nameIds.find(*base); id != nameIds.end())
      for (size_t j : readersOfName_[size_t(id->second)])
        if (j < i) bufAfter_[i].push_back(j);
    sortUnique(bufAfter_[i]);
  }
  groupOf_.resize(n_);
  alive_.assign(n_, true);
  members_.resize(n_);
  names_.resize(n_);
  reductions_.assign(n_, 0);
  externs_.assign(n_, 0);
  notPointwiseNest_.assign(n_, 0);
  ops_.resize(n_);
  readSucc_.resize(n_);
  readPred_.resize(n_);
  depSucc_.resize(n_);
  depPred_.resize(n_);
  order_.resize(n_);
  pos_.resize(n_);
  fwd_.assign(n_, 0);
  bwd_.assign(n_, 0);
  for (size_t i = 0; i < n_; ++i) {
    const Buffer& b = p.buffers[i];
    groupOf_[i] = i;
    members_[i] = {i};
    names_[i] = bufNames_[i];
    reductions_[i] = b.isReduction();
    externs_[i] = b.isExtern();
    notPointwiseNest_[i] = !pwFacts_[i].has_value();
    ops_[i] = bufOps_[i];
    order_[i] = pos_[i] = i;
    for (size_t r : bufReads_[i]) {
      readSucc_[r].insert(i);
      readPred_[i].insert(r);
      depSucc_[r].insert(i);
      depPred_[i].insert(r);
    }
    for (size_t j : bufAfter_[i]) {
      depSucc_[j].insert(i);
      depPred_[i].insert(j);
    }
    if (reductions_[i]) reductionGroups_.insert(i);
  }
}

std::vector<size_t> FusionGroups::executionOrder() const {
  // Kahn's algorithm, the ready group with the earliest first buffer first (a sink: the earliest
  // first buffer of the group that made it ready).
  std::vector<size_t> waiting(n_, 0);
  using Ready = std::pair<size_t, size_t>; // (first buffer, group)
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  for (size_t g = 0; g < n_; ++g) {
    if (!alive_[g]) continue;
    waiting[g] = depPred_[g].size();
    if (waiting[g] == 0) ready.push({members_[g][0], g});
  }
  std::vector<size_t> out;
  while (!ready.empty()) {
    size_t g = ready.top().second;
    ready.pop();
    out.push_back(g);
    // A group nothing depends on (it computes outputs only) runs as soon as it is ready, right
    // after its last producer: in program order it can come much later (an output the lowering
    // realized last, such as a forward's saved pre-activation), its inputs read cold by then and
    // kept alive until it runs.
    for (size_t h : depSucc_[g])
      if (--waiting[h] == 0) ready.push({depSucc_[h].empty() ? members_[g][0] : members_[h][0], h});
  }
  size_t live = size_t(std::count(alive_.begin(), alive_.end(), true));
  KILN_CHECK(out.size() == live, "loop scheduler: the fusion groups depend on each other in a cycle (",
             out.size(), " of ", live, " ordered)");
  return out;
}

std::vector<std::vector<size_t>> FusionGroups::groups() const {
  std::vector<std::vector<size_t>> out;
  for (size_t g : executionOrder()) out.push_back(members_[g]);
  return out;
}

std::vector<size_t> FusionGroups::order() const {
  std::vector<size_t> out;
  for (size_t g : order_)
    if (g != kTomb) out.push_back(g);
  return out;
}

bool FusionGroups::shareReads(size_t a, size_t b) const {
  const std::vector<int>& x = names_[a];
  const std::vector<int>& y = names_[b];
  for (size_t i = 0, j = 0; i < x.size() && j < y.size();) {
    if (x[i] == y[j]) return true;
    if (x[i] < y[j])
      ++i;
    else
      ++j;
  }
  return false;
}

std::vector<size_t> FusionGroups::sharingReads(size_t g) const {
  std::vector<size_t> out;
  uint32_t s = ++stamp_;
  fwd_[g] = s;
  for (int id : names_[g])
    for (size_t i : readersOfName_[size_t(id)]) {
      size_t h = groupOf_[i];
      if (fwd_[h] != s) {
        fwd_[h] = s;
        out.push_back(h);
      }
    }
  return out;
}

bool FusionGroups::reaches(size_t from, size_t to) const {
  // Execution order bounds the search: only groups between the two can be on a path.
  if (pos_[from] >= pos_[to]) return false;
  uint32_t s = ++stamp_;
  std::vector<size_t> stack{from};
  fwd_[from] = s;
  while (!stack.empty()) {
    size_t x = stack.back();
    stack.pop_back();
    for (size_t y : depSucc_[x]) {
      if (y == to) return true;
      if (pos_[y] < pos_[to] && fwd_[y] != s) {
        fwd_[y] = s;
        stack.push_back(y);
      }
    }
  }
  return false;
}

size_t FusionGroups::firstBetween(size_t a, size_t b) const {
  size_t pa = pos_[a], pb = pos_[b];
  uint32_t s = ++stamp_;
  // Forward from a, then backward from b through what a reaches.
  std::vector<size_t> stack{a};
  while (!stack.empty()) {
    size_t x = stack.back();
    stack.pop_back();
    for (size_t y : depSucc_[x])
      if (pos_[y] < pb && fwd_[y] != s) {
        fwd_[y] = s;
        stack.push_back(y);
      }
  }
  size_t first = kTomb;
  stack = {b};
  while (!stack.empty()) {
    size_t x = stack.back();
    stack.pop_back();
    for (size_t y : depPred_[x])
      if (pos_[y] > pa && fwd_[y] == s && bwd_[y] != s) {
        bwd_[y] = s;
        stack.push_back(y);
        if (first == kTomb || pos_[y] < pos_[first]) first = y;
      }
  }
  return first;
}

std::string FusionGroups::describe(size_t g) const {
  const std::vector<size_t>& m = members_[g];
  auto name = [&](size_t k) { return "%" + p_.buffers[m[k]].name; };
  std::string s;
  if (m.size() > 8) {
    s = name(0) + ", " + name(1) + ", " + name(2) + ", ... " + std::to_string(m.size() - 5) +
        " more ..., " + name(m.size() - 2) + ", " + name(m.size() - 1);
    return s;
  }
  for (size_t k = 0; k < m.size(); ++k) s += (k ? ", " : "") + name(k);
  return s;
}

std::string FusionGroups::rangesOf(size_t g) const {
  const Buffer& b = p_.buffers[members_[g][0]];
  if (const auto* pw = std::get_if<Pointwise>(&b.computation)) return sizesText(pw->ranges);
  if (const auto* r = std::get_if<Reduction>(&b.computation))
    return sizesText(r->ranges) + " over " + sizesText(r->reductionRanges);
  return "extern";
}

bool FusionGroups::oneNest(size_t a, size_t b) const {
  if (!notPointwiseNest_[a] && !notPointwiseNest_[b]) {
    // Pointwise groups (none in place): the same extents, and no member reads a member of the
    // other group at an element that one nest cannot give it (codegen::pointwiseNestFacts).
    if (pwFacts_[members_[a][0]]->extents != pwFacts_[members_[b][0]]->extents) return false;
    size_t small = members_[a].size() <= members_[b].size() ? a : b, other = small == a ? b : a;
    for (size_t i : members_[small]) {
      for (size_t t : pwBad_[i])
        if (groupOf_[t] == other) return false;
      for (size_t r : pwBadReaders_[i])
        if (groupOf_[r] == other) return false;
    }
    return true;
  }
  std::vector<size_t> all;
  std::merge(members_[a].begin(), members_[a].end(), members_[b].begin(), members_[b].end(),
             std::back_inserter(all));
  std::vector<const Buffer*> bufs;
  for (size_t i : all) bufs.push_back(&p_.buffers[i]);
  return codegen::fusesIntoOneNest(bufs);
}

std::string FusionGroups::whyNotMergeable(size_t a, size_t b) const {
  if (hasExtern(a) || hasExtern(b)) return "extern kernels are not fused";
  if (size_t x = firstBetween(a, b); x != kTomb) return "{" + describe(x) + "} runs between them";
  if (ops_[a] + ops_[b] > maxKernelOps_)
    return "the kernel would have " + std::to_string(ops_[a] + ops_[b]) + " ops, more than " +
           std::to_string(maxKernelOps_) + " (kernels are split to bound the C++ compiler's time)";
  if (!oneNest(a, b))
    return "no single loop nest: ranges " + rangesOf(a) + " and " + rangesOf(b) +
           " or the elements read do not fit";
  return "";
}

std::string FusionGroups::tryMerge(size_t a, size_t b) {
  std::string why = whyNotMergeable(a, b);
  if (why.empty()) merge(a, b);
  return why;
}

void FusionGroups::merge(size_t a, size_t b) {
  size_t pa = pos_[a], pb = pos_[b];
  // The new order of the groups between: those b depends on (they must run before the merged
  // group; none depends on a, or the merge would be a cycle), the merged group, the others.
  uint32_t s = ++stamp_;
  std::vector<size_t> stack{b};
  while (!stack.empty()) {
    size_t x = stack.back();
    stack.pop_back();
    for (size_t y : depPred_[x])
      if (pos_[y] > pa && pos_[y] < pb && bwd_[y] != s) {
        bwd_[y] = s;
        stack.push_back(y);
      }
  }
  std::vector<size_t> seg;
  for (size_t i = pa + 1; i < pb; ++i)
    if (order_[i] != kTomb && bwd_[order_[i]] == s) seg.push_back(order_[i]);
  seg.push_back(a);
  for (size_t i = pa + 1; i < pb; ++i)
    if (order_[i] != kTomb && bwd_[order_[i]] != s) seg.push_back(order_[i]);
  for (size_t i = pa; i <= pb; ++i) {
    size_t k = i - pa;
    order_[i] = k < seg.size() ? seg[k] : kTomb;
    if (k < seg.size()) pos_[seg[k]] = i;
  }
  ++dead_;

  for (size_t i : members_[b]) groupOf_[i] = a;
  std::vector<size_t> all;
  std::merge(members_[a].begin(), members_[a].end(), members_[b].begin(), members_[b].end(),
             std::back_inserter(all));
  members_[a] = std::move(all);
  std::vector<int> names;
  std::set_union(names_[a].begin(), names_[a].end(), names_[b].begin(), names_[b].end(),
                 std::back_inserter(names));
  names_[a] = std::move(names);
  reductions_[a] += reductions_[b];
  externs_[a] += externs_[b];
  notPointwiseNest_[a] += notPointwiseNest_[b];
  ops_[a] += ops_[b];
  if (reductions_[a]) reductionGroups_.insert(a);
  reductionGroups_.erase(b);
  auto moveEdges = [&](std::vector<std::set<size_t>>& succ, std::vector<std::set<size_t>>& pred) {
    for (size_t x : pred[b]) {
      succ[x].erase(b);
      if (x != a) {
        succ[x].insert(a);
        pred[a].insert(x);
      }
    }
    for (size_t x : succ[b]) {
      pred[x].erase(b);
      if (x != a) {
        pred[x].insert(a);
        succ[a].insert(x);
      }
    }
    succ[a].erase(b);
    pred[a].erase(b);
    succ[b].clear();
    pred[b].clear();
  };
  moveEdges(readSucc_, readPred_);
  moveEdges(depSucc_, depPred_);
  alive_[b] = false;
  members_[b].clear();
  names_[b].clear();
  pos_[b] = kTomb;
  if (dead_ * 2 > order_.size()) compactOrder();
}

void FusionGroups::compactOrder() {
  std::vector<size_t> live;
  for (size_t g : order_)
    if (g != kTomb) live.push_back(g);
  order_ = std::move(live);
  for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = i;
  dead_ = 0;
}

} // namespace kiln::passes::loop
