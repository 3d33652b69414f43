// fuse-reductions (see FuseReductions.h).
#include "passes/loop/FuseReductions.h"

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseReductions(FusionGroups& groups) {
  fusePairs(groups, "fuse-reductions",
            [](const FusionGroups& g, size_t a, size_t b) -> std::optional<std::string> {
              if (g.hasExtern(a) || g.hasExtern(b)) return std::nullopt;
              bool ra = g.hasReduction(a), rb = g.hasReduction(b);
              if (!ra && !rb) return std::nullopt;
              if (g.reads(b, a))
                return ra ? (rb ? "reduction read by a reduction" : "reduction epilogue")
                          : "reduction prologue";
              if (!g.reaches(a, b) && g.shareReads(a, b))
                return ra && rb ? "sibling reductions" : "reading the same rows";
              return std::nullopt;
            });
}

} // namespace kiln::passes::loop
