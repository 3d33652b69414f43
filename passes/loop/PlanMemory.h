// plan-memory: intermediate buffers take over the storage of buffers of the same dtype and size
// whose last reader has run (Buffer::reuses), so the wrapper allocates fewer, reused blocks.
#pragma once
#include <string>
#include <vector>

#include "ir/loop/LoopIR.h"

namespace kiln::passes::loop {

// When a buffer's storage is in use, in units of execution: a kernel's buffers run as one
// unit, every other buffer as a unit of its own, in program order.
struct BufferLiveness {
  size_t defined = 0;  // the unit writing it
  size_t lastUse = 0;  // the last unit reading it (`defined` when none does)
  bool output = false; // a program output: its storage outlives the program
  // Read by a unit other than its own (or an output): its values live in memory. A buffer
  // read only inside its own kernel can stay in that kernel's registers.
  bool needsStorage = false;
};

// The liveness of every buffer of `p` (indexed like p.buffers): the one place that says how
// long a buffer's storage is in use, for the plan and its checks.
std::vector<BufferLiveness> computeLiveness(const LoopProgram& p);

// Sets Buffer::reuses: in execution order, a buffer needing storage that is not an output
// takes the storage of a dead one (not an output, same dtype and element count; exact sizes,
// as TorchInductor reuses) freed most recently. Returns one log line per reuse.
std::vector<std::string> planMemory(LoopProgram& p);

} // namespace kiln::passes::loop
