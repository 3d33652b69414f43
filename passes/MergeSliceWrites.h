// merge-slice-writes: the sum of zero-filled tensors that are each written only in disjoint
// slices is one zero-filled tensor written in all of those slices.
//
// The backward of a split (q, k, v = x.split(n, dim)) is, per part, slice's backward (zeros
// with the part's gradient copied into its slice), and the engine adds the parts' gradients:
// three zero-filled tensors, three writes and two adds where one tensor and three writes do.
// PyTorch's split has a formula of its own (a cat); kiln's split decomposes to slices, so the
// joint graph is mended here instead.
//
// Pattern (ATen level, as the joint trace records it):
//   %z1 = aten.zeros(S) ; aten.copy_(aten.slice.Tensor(%z1, d, s1, e1), %a) ; ...
//   %z2 = aten.zeros(S) ; aten.copy_(aten.slice.Tensor(%z2, d, s2, e2), %b) ; ...
//   %sum = aten.add.Tensor(%z1, %z2)
// where each zeros is read only by its slices (each read only as a copy_ destination whose
// result is unused) and by the add, the slices are along one dim with step 1 and constant
// bounds, pairwise disjoint, all written before the add, and the add has the zeros' type and no
// alpha. The later zeros' slices then slice the earlier zeros and the add's users read it; a
// chain of adds merges one add at a time. Other nodes are left as they are.
#pragma once
#include "ir/Graph.h"

namespace kiln {

void mergeSliceWrites(Graph& g);

} // namespace kiln
