// fuse-vertical (see FuseVertical.h).
#include "passes/loop/FuseVertical.h"

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseVertical(FusionGroups& groups) {
  fusePairs(
      groups, "fuse-vertical",
      [](const FusionGroups& g, size_t a, size_t b) -> std::optional<std::string> {
        if (g.hasExtern(a) || g.hasExtern(b) || g.hasReduction(a) || g.hasReduction(b) ||
            !g.reads(b, a))
          return std::nullopt;
        return "producer and consumer";
      },
      [](const FusionGroups& g, size_t x) {
        std::vector<size_t> r(g.producers(x).begin(), g.producers(x).end());
        r.insert(r.end(), g.consumers(x).begin(), g.consumers(x).end());
        return r;
      });
}

} // namespace kiln::passes::loop
