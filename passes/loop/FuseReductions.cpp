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
              // Siblings are candidates only over the same rows: a reduction's ranges (before
              // " over") equal the other's, or start the ranges of a pointwise group.
              auto rows = [&](size_t x) {
                std::string r = g.rangesOf(x);
                return r.substr(0, r.find(" over "));
              };
              std::string rr = rows(ra ? a : b), other = rows(ra ? b : a);
              bool sameRows = rr == other || (!(ra && rb) && rr.size() > 2 &&
                                              other.starts_with(rr.substr(0, rr.size() - 1) + ", "));
              if (!g.reaches(a, b) && g.shareReads(a, b) && sameRows)
                return ra && rb ? "sibling reductions" : "reading the same rows";
              return std::nullopt;
            });
}

} // namespace kiln::passes::loop
