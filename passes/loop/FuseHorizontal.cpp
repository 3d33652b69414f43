// fuse-horizontal (see FuseHorizontal.h).
#include "passes/loop/FuseHorizontal.h"

#include <map>

#include "passes/loop/FusePairs.h"

namespace kiln::passes::loop {

void fuseHorizontal(FusionGroups& groups) {
  // Pointwise groups by their ranges (a merge keeps a group's ranges: only groups of the same
  // ranges merge here, and a merged group's ranges are those of its first buffer).
  std::map<std::string, std::vector<size_t>> byRanges;
  std::vector<const std::vector<size_t>*> bucket(groups.program().buffers.size(), nullptr);
  for (size_t g : groups.order())
    if (!groups.hasExtern(g) && !groups.hasReduction(g)) byRanges[groups.rangesOf(g)].push_back(g);
  for (const auto& [ranges, gs] : byRanges)
    for (size_t g : gs) bucket[g] = &gs;
  // Only groups reading a common input or buffer merge: that read is then one pass over memory.
  // Merging unrelated groups saves a loop and runs the earlier one late, after everything the
  // later one waits for, when its inputs have left the cache and live longer (a GPT forward's
  // four per-layer bias adds ran after the last layer's GEMM, 8 MB read cold).
  // Groups together over the kernel size bound are not candidates (nothing is gained by
  // logging each such pair). No revisits: a group that refused two groups (dependent, in place,
  // too large) refuses them merged too.
  fusePairs(
      groups, "fuse-horizontal",
      [](const FusionGroups& g, size_t a, size_t b) -> std::optional<std::string> {
        if (g.hasExtern(a) || g.hasExtern(b) || g.hasReduction(a) || g.hasReduction(b) ||
            g.ops(a) + g.ops(b) > g.maxKernelOps() || g.rangesOf(a) != g.rangesOf(b) ||
            !g.shareReads(a, b) || g.reaches(a, b))
          return std::nullopt;
        return "independent, same ranges " + g.rangesOf(a);
      },
      [&bucket](const FusionGroups&, size_t x) {
        return bucket[x] ? *bucket[x] : std::vector<size_t>{};
      },
      /*revisit=*/false);
}

} // namespace kiln::passes::loop
