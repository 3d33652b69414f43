// The loop scheduler: fusion passes over a LoopProgram's buffers, then buffers reordered so each
// kernel's buffers are adjacent (dependencies kept) and every non-extern group named as kernel
// @k0, @k1, ... in execution order. Every decision (fused, or why not) goes to a text log.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::passes::loop {

// A kernel holds at most this many body ops (loads, constants, math, over all its buffers): a
// longer chain is split into kernels of about this size, the value at each split written to
// memory. g++'s time per op grows with the size of a loop body (a 10,000-op chain: 2.8 s as one
// kernel, 0.34 s as kernels of 500 ops; docs/loop-ir.md, "Kernel size"); the kernels of the
// benchmark workloads have at most about 50 ops.
constexpr int64_t kMaxKernelOps = 512;

struct ScheduleOptions {
  bool matchRanges = true;
  bool fuseVertical = true;
  bool fuseReductions = true;
  bool fuseHorizontal = true;
  bool fuseGemmEpilogue = true; // after the kernels are formed (FuseGemmEpilogue.h)
  bool planMemory = true; // after the kernels are formed: storage reuse (PlanMemory.h)
  int64_t maxKernelOps = kMaxKernelOps;
};

struct ScheduleResult {
  std::vector<std::string> log; // one line per decision, in order
  std::string logText() const;  // the lines joined with newlines
};

// Groups the buffers of `p` (ignoring any kernels it had) into kernels. Only groupings the C++
// code generator emits as one loop nest are made; extern buffers stay outside kernels.
ScheduleResult schedule(LoopProgram& p, const ScheduleOptions& options = {});

// The scheduling passes by pipeline name: "match-ranges", "fuse-vertical", "fuse-reductions",
// "fuse-horizontal", "plan-memory" switch one on; "schedule" all of them. nullopt for another name.
std::optional<ScheduleOptions> scheduleOptionsFor(const std::vector<std::string>& passNames);
// "  name  description" lines for --help.
std::string describeSchedulePasses();

} // namespace kiln::passes::loop
