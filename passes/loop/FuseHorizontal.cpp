// fuse-horizontal (see FuseHorizontal.h).
#include "passes/loop/FuseHorizontal.h"

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseHorizontal(FusionGroups& groups) {
  fusePairs(groups, "fuse-horizontal",
            [](const FusionGroups& g, size_t a, size_t b) -> std::optional<std::string> {
              if (g.hasExtern(a) || g.hasExtern(b) || g.hasReduction(a) || g.hasReduction(b) ||
                  g.reaches(a, b) || g.rangesOf(a) != g.rangesOf(b))
                return std::nullopt;
              return "independent, same ranges " + g.rangesOf(a);
            });
}

} // namespace kiln::passes::loop
