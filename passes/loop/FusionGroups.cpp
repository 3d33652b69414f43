// Fusion groups of the loop scheduler (see FusionGroups.h).
#include "passes/loop/FusionGroups.h"

#include <algorithm>
#include <map>

#include "codegen/CppCodegen.h"

namespace kiln::passes::loop {

std::string sizesText(const std::vector<IterVar>& ranges) {
  std::string s = "[";
  for (size_t i = 0; i < ranges.size(); ++i) s += (i ? ", " : "") + ranges[i].extent.str();
  return s + "]";
}

FusionGroups::FusionGroups(const LoopProgram& p) : p_(p) {
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < p.buffers.size(); ++i) index[p.buffers[i].name] = i;
  readsBuffers_.resize(p.buffers.size());
  readsNames_.resize(p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    auto note = [&](const std::string& n) {
      readsNames_[i].insert(n);
      auto it = index.find(n);
      if (it != index.end()) readsBuffers_[i].insert(it->second);
    };
    if (const auto* x = std::get_if<Extern>(&b.computation)) {
      for (const std::string& in : x->inputs) note(in);
    } else {
      const LoopBody& body = b.isPointwise() ? std::get<Pointwise>(b.computation).body
                                             : std::get<Reduction>(b.computation).body;
      for (const LoopOp& op : body.ops)
        if (op.code == LoopOpCode::Load) note(op.buffer);
    }
    groups_.push_back({i});
  }
  // An in-place write runs after the buffer it overwrites and after every earlier reader of
  // that version (they must see the old values).
  after_.resize(p.buffers.size());
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const std::string* base = p.buffers[i].writesInto();
    if (!base) continue;
    if (auto it = index.find(*base); it != index.end()) after_[i].insert(it->second);
    for (size_t j = 0; j < i; ++j)
      if (readsNames_[j].count(*base)) after_[i].insert(j);
  }
}

bool FusionGroups::dependsOn(size_t b, size_t a) const {
  if (reads(b, a)) return true;
  for (size_t i : groups_[b])
    for (size_t j : groups_[a])
      if (after_[i].count(j)) return true;
  return false;
}

const Buffer* FusionGroups::inPlaceWriter(size_t g) const {
  for (size_t i : groups_[g])
    if (p_.buffers[i].writesInto()) return &p_.buffers[i];
  return nullptr;
}

bool FusionGroups::hasReduction(size_t g) const {
  for (size_t i : groups_[g])
    if (p_.buffers[i].isReduction()) return true;
  return false;
}

bool FusionGroups::hasExtern(size_t g) const {
  for (size_t i : groups_[g])
    if (p_.buffers[i].isExtern()) return true;
  return false;
}

bool FusionGroups::reads(size_t b, size_t a) const {
  for (size_t i : groups_[b])
    for (size_t j : groups_[a])
      if (readsBuffers_[i].count(j)) return true;
  return false;
}

bool FusionGroups::shareReads(size_t a, size_t b) const {
  for (size_t i : groups_[a])
    for (size_t j : groups_[b])
      for (const std::string& n : readsNames_[i])
        if (readsNames_[j].count(n)) return true;
  return false;
}

bool FusionGroups::reaches(size_t from, size_t to) const {
  // Groups are in execution order, so only groups between the two can be on a path.
  if (from >= to) return false;
  std::vector<bool> reached(groups_.size(), false);
  reached[from] = true;
  for (size_t g = from + 1; g <= to; ++g)
    for (size_t h = from; h < g && !reached[g]; ++h)
      if (reached[h] && dependsOn(g, h)) reached[g] = true;
  return reached[to];
}

std::string FusionGroups::describe(size_t g) const {
  std::string s;
  for (size_t i : groups_[g]) s += (s.empty() ? "%" : ", %") + p_.buffers[i].name;
  return s;
}

std::string FusionGroups::rangesOf(size_t g) const {
  const Buffer& b = p_.buffers[groups_[g][0]];
  if (const auto* pw = std::get_if<Pointwise>(&b.computation)) return sizesText(pw->ranges);
  if (const auto* r = std::get_if<Reduction>(&b.computation))
    return sizesText(r->ranges) + " over " + sizesText(r->reductionRanges);
  return "extern";
}

std::string FusionGroups::whyNotMergeable(size_t a, size_t b) const {
  if (hasExtern(a) || hasExtern(b)) return "extern kernels are not fused";
  for (size_t g : {a, b})
    if (const Buffer* w = inPlaceWriter(g))
      return "%" + w->name + " writes into %" + *w->writesInto() +
             " in place: it is a kernel of its own";
  for (size_t x = a + 1; x < b; ++x)
    if (reaches(a, x) && reaches(x, b)) return "{" + describe(x) + "} runs between them";
  std::vector<size_t> members = groups_[a];
  members.insert(members.end(), groups_[b].begin(), groups_[b].end());
  std::sort(members.begin(), members.end());
  std::vector<const Buffer*> bufs;
  for (size_t i : members) bufs.push_back(&p_.buffers[i]);
  if (!codegen::fusesIntoOneNest(bufs))
    return "no single loop nest: ranges " + rangesOf(a) + " and " + rangesOf(b) +
           " or the elements read do not fit";
  return "";
}

void FusionGroups::merge(size_t a, size_t b) {
  groups_[a].insert(groups_[a].end(), groups_[b].begin(), groups_[b].end());
  std::sort(groups_[a].begin(), groups_[a].end());
  groups_.erase(groups_.begin() + std::ptrdiff_t(b));
  sortGroups();
}

// A topological order of the groups; among ready groups the one with the earliest buffer first,
// so unrelated work keeps its program order.
void FusionGroups::sortGroups() {
  size_t n = groups_.size();
  std::vector<std::vector<size_t>> sorted;
  std::vector<bool> done(n, false);
  while (sorted.size() < n) {
    size_t best = n;
    for (size_t g = 0; g < n; ++g) {
      if (done[g]) continue;
      bool ready = true;
      for (size_t h = 0; h < n && ready; ++h)
        if (h != g && !done[h] && dependsOn(g, h)) ready = false;
      if (ready && (best == n || groups_[g][0] < groups_[best][0])) best = g;
    }
    done[best] = true;
    sorted.push_back(groups_[best]);
  }
  groups_ = std::move(sorted);
}

} // namespace kiln::passes::loop
