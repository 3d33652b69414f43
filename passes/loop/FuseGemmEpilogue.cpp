// fuse-gemm-epilogue (see FuseGemmEpilogue.h).
#include "passes/loop/FuseGemmEpilogue.h"

#include <algorithm>
#include <map>

#include "ir/loop/GemmEpilogue.h"

namespace kiln::passes::loop {

namespace {

// How many places read each name: loads, extern inputs, in-place targets and outputs.
std::map<std::string, int> readCounts(const LoopProgram& p) {
  std::map<std::string, int> n;
  for (const Buffer& b : p.buffers) {
    if (const std::string* into = b.writesInto()) ++n[*into];
    if (const Extern* x = std::get_if<Extern>(&b.computation)) {
      for (const std::string& in : x->inputs) ++n[in];
      continue;
    }
    const LoopBody& body = b.isPointwise() ? std::get<Pointwise>(b.computation).body
                                           : std::get<Reduction>(b.computation).body;
    for (const LoopOp& op : body.ops)
      if (op.code == LoopOpCode::Load) ++n[op.buffer];
  }
  for (const std::string& o : p.outputs) ++n[o];
  return n;
}

} // namespace

std::vector<std::string> fuseGemmEpilogues(LoopProgram& p) {
  std::vector<std::string> log;
  std::map<std::string, int> reads = readCounts(p);
  for (size_t i = 0; i < p.buffers.size(); ++i) {
    const Buffer& consumer = p.buffers[i];
    bool alone = !consumer.kernel.empty() && (i == 0 || p.buffers[i - 1].kernel != consumer.kernel) &&
                 (i + 1 == p.buffers.size() || p.buffers[i + 1].kernel != consumer.kernel);
    if (!alone || !consumer.isPointwise()) continue;
    // The one extern mm the kernel reads, if any.
    const Buffer* gemm = nullptr;
    for (const LoopOp& op : std::get<Pointwise>(consumer.computation).body.ops) {
      if (op.code != LoopOpCode::Load) continue;
      const Buffer* b = p.findBuffer(op.buffer);
      if (b && b->isExtern() && std::get<Extern>(b->computation).kernel == "mm") gemm = b;
    }
    if (!gemm || !gemm->kernel.empty()) continue;
    std::string what = "fuse-gemm-epilogue: %" + gemm->name + " into kernel @" + consumer.kernel;
    if (reads[gemm->name] != 1) {
      log.push_back(what + ": no, the product is read elsewhere too");
      continue;
    }
    auto steps = gemmEpilogueOf(p, *gemm, consumer);
    if (const std::string* why = std::get_if<std::string>(&steps)) {
      log.push_back(what + ": no, " + *why);
      continue;
    }
    std::string chain;
    for (const GemmPostOp& s : std::get<std::vector<GemmPostOp>>(steps))
      chain += std::string(chain.empty() ? "" : ", ") + gemmPostOpName(s.kind) + (s.isBinary() ? " %" + s.tensor : "");
    log.push_back(what + " (post-ops: " + (chain.empty() ? "none" : chain) + ")");
    // Nothing between the mm and its only reader reads the mm, so it can move down.
    size_t g = size_t(gemm - p.buffers.data());
    Buffer moved = std::move(p.buffers[g]);
    moved.kernel = consumer.kernel;
    std::string consumerName = consumer.name;
    p.buffers.erase(p.buffers.begin() + std::ptrdiff_t(g));
    auto at = std::find_if(p.buffers.begin(), p.buffers.end(),
                           [&](const Buffer& b) { return b.name == consumerName; });
    i = size_t(at - p.buffers.begin());
    p.buffers.insert(at, std::move(moved));
    ++i; // the consumer
  }
  return log;
}

} // namespace kiln::passes::loop
