// fuse-reductions (see FuseReductions.h).
#include "passes/loop/FuseReductions.h"

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseReductions(FusionGroups& groups) {
  fusePairs(
      groups, "fuse-reductions",
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
        if (sameRows && g.shareReads(a, b) && !g.reaches(a, b))
          return ra && rb ? "sibling reductions" : "reading the same rows";
        return std::nullopt;
      },
      // Producers and consumers, and the groups reading what x reads (when x has no reduction,
      // only those with one: a pair without a reduction is not this pass's business).
      [](const FusionGroups& g, size_t x) {
        std::vector<size_t> r(g.producers(x).begin(), g.producers(x).end());
        r.insert(r.end(), g.consumers(x).begin(), g.consumers(x).end());
        if (g.hasReduction(x)) {
          std::vector<size_t> s = g.sharingReads(x);
          r.insert(r.end(), s.begin(), s.end());
        } else {
          for (size_t y : g.reductionGroups())
            if (y != x && g.shareReads(x, y)) r.push_back(y);
        }
        return r;
      });
}

} // namespace kiln::passes::loop
