// fuse-vertical (see FuseVertical.h).
#include "passes/loop/FuseVertical.h"

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseVertical(FusionGroups& groups) {
  fusePairs(groups, "fuse-vertical",
            [](const FusionGroups& g, size_t a, size_t b) -> std::optional<std::string> {
              if (g.hasExtern(a) || g.hasExtern(b) || g.hasReduction(a) || g.hasReduction(b) ||
                  !g.reads(b, a))
                return std::nullopt;
              return "producer and consumer";
            });
}

} // namespace kiln::passes::loop
