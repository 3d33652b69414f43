// The pairwise fusion loop of the scheduler's passes (see FusePairs.h).
#include "passes/loop/FusePairs.h"

#include <algorithm>
#include <unordered_set>

namespace kiln::passes::loop {

void fusePairs(FusionGroups& groups, const std::string& pass, const FusionCandidate& wants,
               const RelatedGroups& related, bool revisit) {
  std::unordered_set<std::string> refused;
  for (size_t cursor = 0; cursor < groups.slots();) {
    size_t a = groups.at(cursor);
    if (a == FusionGroups::kNoGroup) {
      ++cursor;
      continue;
    }
    std::vector<size_t> after;
    for (size_t b : related(groups, a))
      if (groups.alive(b) && groups.position(b) > cursor) after.push_back(b);
    std::sort(after.begin(), after.end(),
              [&](size_t x, size_t y) { return groups.position(x) < groups.position(y); });
    after.erase(std::unique(after.begin(), after.end()), after.end());
    bool merged = false;
    for (size_t b : after) {
      std::optional<std::string> why = wants(groups, a, b);
      if (!why) continue;
      std::string pair = "{" + groups.describe(a) + "} and {" + groups.describe(b) + "}";
      std::string whyNot = groups.tryMerge(a, b);
      if (whyNot.empty()) {
        groups.log(pass + ": fused " + pair + " (" + *why + ")");
        merged = true;
        break;
      }
      if (refused.insert(pair).second)
        groups.log(pass + ": not fused " + pair + " (" + *why + "): " + whyNot);
    }
    if (!merged) {
      ++cursor;
      continue;
    }
    // The merged group (named a) may now be wanted by a related group before it: look again
    // from the first of those, else at a itself.
    cursor = groups.position(a);
    if (!revisit) continue;
    for (size_t x : related(groups, a))
      if (groups.alive(x) && groups.position(x) < cursor) cursor = groups.position(x);
  }
}

} // namespace kiln::passes::loop
