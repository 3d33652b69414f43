// The pairwise fusion loop of the scheduler's passes (see FusePairs.h).
#include "passes/loop/FusePairs.h"

#include <set>

namespace kiln::passes::loop {

void fusePairs(FusionGroups& groups, const std::string& pass, const FusionCandidate& wants) {
  std::set<std::string> refused;
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t a = 0; a < groups.groups().size() && !merged; ++a)
      for (size_t b = a + 1; b < groups.groups().size() && !merged; ++b) {
        std::optional<std::string> why = wants(groups, a, b);
        if (!why) continue;
        std::string pair = "{" + groups.describe(a) + "} and {" + groups.describe(b) + "}";
        std::string whyNot = groups.whyNotMergeable(a, b);
        if (whyNot.empty()) {
          groups.log(pass + ": fused " + pair + " (" + *why + ")");
          groups.merge(a, b);
          merged = true;
        } else if (refused.insert(pair).second) {
          groups.log(pass + ": not fused " + pair + " (" + *why + "): " + whyNot);
        }
      }
  }
}

} // namespace kiln::passes::loop
