// The memory plan of a scheduled loop program (see PlanMemory.h).
#include "passes/loop/PlanMemory.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "ir/Type.h"

namespace kiln::passes::loop {

namespace {

std::vector<std::string> readsOf(const Buffer& b) {
  std::vector<std::string> names;
  if (const auto* x = std::get_if<Extern>(&b.computation)) return x->inputs;
  const LoopBody& body = b.isPointwise() ? std::get<Pointwise>(b.computation).body
                                         : std::get<Reduction>(b.computation).body;
  for (const LoopOp& op : body.ops)
    if (op.code == LoopOpCode::Load) names.push_back(op.buffer);
  return names;
}

std::string sizesText(const Buffer& b) {
  std::string s = "[";
  for (size_t i = 0; i < b.sizes.size(); ++i) s += (i ? ", " : "") + b.sizes[i].str();
  return s + "]";
}

} // namespace

std::vector<BufferLiveness> computeLiveness(const LoopProgram& p) {
  std::vector<BufferLiveness> live(p.buffers.size());
  // Buffer name -> the index of the buffer owning its storage: an in-place write ("into") is a
  // version of its root's storage, so its writes and every use of it keep the root alive, and
  // it has no storage of its own to plan.
  std::map<std::string, size_t> index;
  size_t unit = 0;
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& b = p.buffers[i];
    if (i > 0 && (b.kernel.empty() || b.kernel != p.buffers[i - 1].kernel)) ++unit;
    live[i].defined = live[i].lastUse = unit;
    std::vector<std::string> uses = readsOf(b);
    if (b.writesInto()) {
      uses.push_back(b.name);
      auto root = index.find(p.storageRoot(b.name));
      index[b.name] = root == index.end() ? p.buffers.size() : root->second; // input: none
    } else {
      index[b.name] = i;
    }
    for (const std::string& n : uses) {
      auto it = index.find(n);
      if (it == index.end() || it->second == p.buffers.size()) continue; // an input
      BufferLiveness& r = live[it->second];
      r.lastUse = std::max(r.lastUse, unit);
      r.needsStorage |= r.defined != unit;
    }
  }
  for (const std::string& out : p.outputs) {
    auto it = index.find(out);
    if (it == index.end() || it->second == p.buffers.size()) continue;
    live[it->second].output = live[it->second].needsStorage = true;
    live[it->second].lastUse = unit + 1;
  }
  return live;
}

std::vector<std::string> planMemory(LoopProgram& p) {
  std::vector<BufferLiveness> live = computeLiveness(p);
  std::vector<std::string> log;
  // (dtype, element count) -> dead buffers whose storage is free, the most recently freed last.
  std::map<std::tuple<ScalarType, std::string>, std::vector<size_t>> pool;
  auto key = [&](size_t i) {
    IndexExpr n(1);
    for (const IndexExpr& s : p.buffers[i].sizes) n = n * s;
    return std::make_tuple(p.buffers[i].dtype, n.str());
  };
  std::map<size_t, std::vector<size_t>> dyingAfter; // unit -> buffers whose last reader it is
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    p.buffers[i].reuses.clear();
    if (live[i].needsStorage && !live[i].output) dyingAfter[live[i].lastUse].push_back(i);
  }
  for (size_t i = 0; i < p.buffers.size();) {
    size_t unit = live[i].defined, end = i;
    for (; end < p.buffers.size() && live[end].defined == unit; ++end) {
      if (!live[end].needsStorage || live[end].output) continue;
      std::vector<size_t>& dead = pool[key(end)];
      if (dead.empty()) continue;
      size_t from = dead.back();
      dead.pop_back();
      Buffer& b = p.buffers[end];
      b.reuses = p.buffers[from].name;
      log.push_back("plan-memory: %" + b.name + " reuses the storage of %" + b.reuses + " (" +
                    dtypeShortName(b.dtype) + sizesText(b) + "; %" + b.reuses +
                    " has no reader left)");
    }
    // Storage is freed after the unit's writes, so a unit never writes where it reads. A dying
    // buffer holds its storage: nothing takes it over before it is dead.
    for (size_t d : dyingAfter[unit]) pool[key(d)].push_back(d);
    i = end;
  }
  return log;
}

} // namespace kiln::passes::loop
