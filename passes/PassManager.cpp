// The registry table expanded from PassRegistry.def, pipeline parsing and running.
#include "passes/PassManager.h"

#include "ir/Printer.h"
#include "ir/Verifier.h"
#include "passes/CommonSubexpressionElimination.h"
#include "passes/ConstantFolding.h"
#include "passes/DeadCodeElimination.h"
#include "passes/DecomposeCoreAten.h"
#include "passes/DecomposePrims.h"
#include "passes/Functionalize.h"
#include "passes/MergeSliceWrites.h"
#include "passes/ShapePropagation.h"

namespace kiln {

const std::vector<PassInfo>& registeredPasses() {
  static const std::vector<PassInfo> passes = {
#define KILN_PASS(name, function, description) {name, function, description},
#include "passes/PassRegistry.def"
#undef KILN_PASS
  };
  return passes;
}

const PassInfo* findPass(std::string_view name) {
  for (const PassInfo& p : registeredPasses())
    if (name == p.name) return &p;
  return nullptr;
}

PassManager PassManager::parse(std::string_view pipeline) {
  PassManager pm;
  size_t start = 0;
  while (start <= pipeline.size()) {
    size_t comma = pipeline.find(',', start);
    std::string_view item =
        pipeline.substr(start, comma == std::string_view::npos ? comma : comma - start);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    if (!item.empty()) {
      const PassInfo* p = findPass(item);
      if (!p) {
        std::string names;
        for (const PassInfo& info : registeredPasses())
          names += (names.empty() ? "" : ", ") + std::string(info.name);
        throw IRError(TextPos{}, strCat("unknown pass '", item, "' (available: ", names, ")"));
      }
      pm.passes_.push_back(p);
    } else if (comma != std::string_view::npos) {
      throw IRError(TextPos{}, strCat("empty pass name in pipeline '", pipeline, "'"));
    }
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return pm;
}

void PassManager::run(Graph& g, const PipelineOptions& options) const {
  for (const PassInfo* p : passes_) {
    try {
      p->run(g);
    } catch (const IRError& e) {
      Diagnostic d = e.diagnostic();
      d.message = strCat("in pass '", p->name, "': ", d.message);
      throw IRError(d);
    } catch (const Error& e) {
      throw IRError(g.parsedAt,
                    strCat("in pass '", p->name, "' on graph @", g.name(), ": ", e.what()));
    }
    std::vector<Diagnostic> problems = verify(g);
    if (!problems.empty()) {
      Diagnostic d = problems.front();
      d.message = strCat("pass '", p->name, "' left an invalid graph: ", d.message);
      throw IRError(d);
    }
    if (options.printAfterAll && options.log)
      *options.log << "// -----// IR after " << p->name << " //----- //\n" << printGraph(g);
  }
}

} // namespace kiln
