// Thread-local warning queue (see Warning.h).
#include "runtime/Warning.h"

namespace kiln {

namespace {
thread_local std::vector<std::string> gPending;
} // namespace

void warn(std::string message) { gPending.push_back(std::move(message)); }

std::vector<std::string> takeWarnings() {
  std::vector<std::string> out;
  out.swap(gPending);
  return out;
}

bool hasWarnings() { return !gPending.empty(); }

} // namespace kiln
