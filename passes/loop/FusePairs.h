// The loop the fusion passes share: merge pairs of groups a pass wants, as long as any is left.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

// For groups a before b: why the pass wants them fused ("reads %buf0"), or nullopt when the
// pair is not its business.
using FusionCandidate =
    std::function<std::optional<std::string>(const FusionGroups&, size_t a, size_t b)>;
// The groups a pass may want to fuse with g, before or after it (any order, may repeat, may
// include g): a superset of those it wants, symmetric (h in related(g) when g in related(h)).
using RelatedGroups = std::function<std::vector<size_t>(const FusionGroups&, size_t g)>;

// Visits the groups in execution order; a group merges with the first related group after it
// that the pass wants and that can merge, again while there is one. With `revisit`, after a
// merge the related groups before the merged one are visited again first (it may now be wanted
// by them), so the result is that of always merging the first legal wanted pair in execution
// order; without, a pass declares that a merge never makes an earlier refused pair legal. Logs
// every merge and every refused candidate (once) as "<pass>: ...". The work is proportional to
// the related pairs looked at, not to all pairs of groups.
void fusePairs(FusionGroups& groups, const std::string& pass, const FusionCandidate& wants,
               const RelatedGroups& related, bool revisit = true);

} // namespace kiln::passes::loop
