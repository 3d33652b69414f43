// The loop the fusion passes share: merge pairs of groups a pass wants, as long as any is left.
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "passes/loop/FusionGroups.h"

namespace kiln::passes::loop {

// For groups a before b: why the pass wants them fused ("reads %buf0"), or nullopt when the
// pair is not its business.
using FusionCandidate =
    std::function<std::optional<std::string>(const FusionGroups&, size_t a, size_t b)>;

// Merges the first legal candidate pair in execution order until none is left; logs every
// merge and every refused candidate (once) as "<pass>: ...".
void fusePairs(FusionGroups& groups, const std::string& pass, const FusionCandidate& wants);

} // namespace kiln::passes::loop
