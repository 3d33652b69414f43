// The pass registry (PassRegistry.def) and the pass manager: a pipeline string such as
// "dce,cse,shape-prop" names passes to run in order; the verifier runs after each one.
#pragma once
#include <ostream>
#include <string_view>
#include <vector>

#include "ir/Graph.h"

namespace kiln {

using PassFunction = void (*)(Graph&);

struct PassInfo {
  const char* name;
  PassFunction run;
  const char* description;
};

// Every registered pass, in registry order.
const std::vector<PassInfo>& registeredPasses();
// The pass with that name, or null.
const PassInfo* findPass(std::string_view name);

struct PipelineOptions {
  // Print the graph after each pass (to `log`) under "// -----// IR after <pass> //----- //".
  bool printAfterAll = false;
  std::ostream* log = nullptr;
};

class PassManager {
public:
  // "dce,cse": comma-separated pass names (spaces around names allowed; empty: no passes).
  // Throws IRError naming the unknown pass and listing the available ones.
  static PassManager parse(std::string_view pipeline);

  // Runs the passes in order, verifying the graph after each. A failing pass or a graph the
  // verifier rejects throws IRError, its message naming the pass.
  void run(Graph& g, const PipelineOptions& options = {}) const;
  const std::vector<const PassInfo*>& passes() const { return passes_; }

private:
  std::vector<const PassInfo*> passes_;
};

} // namespace kiln
