// Warnings from kernels (torch's TORCH_WARN): the runtime knows no Python, so a kernel queues
// the message on its thread and the binding raises it as a Python UserWarning after the call.
#pragma once
#include <string>
#include <vector>

namespace kiln {

void warn(std::string message);
// The messages queued on this thread since the last call (and clears them).
std::vector<std::string> takeWarnings();
// Whether anything is queued (a cheap check for the per-call path).
bool hasWarnings();

} // namespace kiln
