// Dead-code elimination: a backward walk erasing unused nodes without side effects.
#include "passes/DeadCodeElimination.h"

#include "ir/Effects.h"

namespace kiln {

void eliminateDeadCode(Graph& g) {
  // Backwards, so a node's users are decided (and dead ones gone) before the node is looked at.
  for (Node* n = g.last(); n;) {
    Node* prev = n->prev();
    if (n->users().empty() && !hasSideEffects(*n)) g.erase(n);
    n = prev;
  }
}

} // namespace kiln
