// The loop scheduler's entry point (see Schedule.h).
#include "passes/loop/Schedule.h"

#include "passes/loop/FuseGemmEpilogue.h"
#include "passes/loop/FuseHorizontal.h"
#include "passes/loop/FuseReductions.h"
#include "passes/loop/FuseVertical.h"
#include "passes/loop/FusionGroups.h"
#include "passes/loop/MatchRanges.h"
#include "passes/loop/PlanMemory.h"

namespace kiln::passes::loop {

namespace {

struct SchedulePass {
  const char* name;
  const char* description;
};

const SchedulePass kPasses[] = {
    {"schedule", "match-ranges, fuse-vertical, fuse-reductions and fuse-horizontal, then kernels "
                 "@k0, @k1, ..., then fuse-gemm-epilogue and plan-memory"},
    {"match-ranges", "give pointwise readers of a reduction its row structure as their ranges"},
    {"fuse-vertical", "fuse pointwise producers with their pointwise consumers"},
    {"fuse-reductions", "fuse reductions with their prologue, epilogue and sibling reductions"},
    {"fuse-horizontal", "fuse independent pointwise buffers over the same ranges"},
    {"fuse-gemm-epilogue", "a kernel computing a chain of post-ops (bias, activation, residual) "
                           "of an mm's product takes the mm in"},
    {"plan-memory", "intermediate buffers reuse the storage of dead ones of the same dtype and size"},
};

} // namespace

std::string ScheduleResult::logText() const {
  std::string s;
  for (const std::string& l : log) s += l + "\n";
  return s;
}

ScheduleResult schedule(LoopProgram& p, const ScheduleOptions& options) {
  std::vector<std::string> rangeLog;
  if (options.matchRanges) matchRanges(p, rangeLog);
  FusionGroups groups(p, options.maxKernelOps);
  for (const std::string& line : rangeLog) groups.log(line);
  if (options.fuseVertical) fuseVertical(groups);
  if (options.fuseReductions) fuseReductions(groups);
  if (options.fuseHorizontal) fuseHorizontal(groups);
  std::vector<Buffer> ordered;
  int kernels = 0;
  for (size_t g : groups.executionOrder()) {
    std::string kernel;
    if (!groups.hasExtern(g)) kernel = "k" + std::to_string(kernels++);
    groups.log((kernel.empty() ? std::string("extern") : "kernel @" + kernel) + ": " +
               groups.describe(g));
    for (size_t i : groups.members(g)) {
      ordered.push_back(p.buffers[i]);
      ordered.back().kernel = kernel;
    }
  }
  ScheduleResult result{groups.logLines()};
  p.buffers = std::move(ordered);
  if (options.fuseGemmEpilogue) {
    std::vector<std::string> lines = fuseGemmEpilogues(p);
    result.log.insert(result.log.end(), lines.begin(), lines.end());
  }
  if (options.planMemory) {
    std::vector<std::string> reuses = planMemory(p);
    result.log.insert(result.log.end(), reuses.begin(), reuses.end());
  }
  return result;
}

std::optional<ScheduleOptions> scheduleOptionsFor(const std::vector<std::string>& passNames) {
  ScheduleOptions o{false, false, false, false, false, false};
  for (const std::string& n : passNames) {
    if (n == "schedule")
      o = ScheduleOptions{};
    else if (n == "match-ranges")
      o.matchRanges = true;
    else if (n == "fuse-vertical")
      o.fuseVertical = true;
    else if (n == "fuse-reductions")
      o.fuseReductions = true;
    else if (n == "fuse-horizontal")
      o.fuseHorizontal = true;
    else if (n == "fuse-gemm-epilogue")
      o.fuseGemmEpilogue = true;
    else if (n == "plan-memory")
      o.planMemory = true;
    else
      return std::nullopt;
  }
  return o;
}

std::string describeSchedulePasses() {
  std::string s;
  for (const SchedulePass& p : kPasses)
    s += std::string("  ") + p.name + "  (after lower-loops) " + p.description + "\n";
  return s;
}

} // namespace kiln::passes::loop
