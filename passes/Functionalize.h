// Functionalization ("functionalize"): the same computation without in-place writes, as
// PyTorch's functionalization (torch/_subclasses/functional_tensor.py, FunctionalStorageImpl)
// gives AOT autograd, so that tracing the backward and partitioning see values only.
//
//  - An op writing into its first argument (schema "Tensor(a!)": aten.add_.Tensor, aten.mul_,
//    aten.copy_, aten.zero_, aten.fill_.Scalar) becomes a functional op: its twin (the name
//    without "_", same overload), then aten._to_copy back to the destination's dtype where the
//    twin promotes; copy_ takes the source (cast, expanded to the destination); zero_ / fill_
//    become zeros_like / full_like. Every later reader of the written tensor reads the new value.
//  - A write through a view (chains of select, slice, view, squeeze, unsqueeze, permute,
//    transpose, t, alias, detach) gives the view's base a new value, built from the written
//    value by each view's inverse, innermost first (select_scatter, slice_scatter, reshape,
//    permute, transpose, t); views of that base read afterwards are taken again from the new
//    value (PyTorch's view regeneration).
//  - A graph input (placeholder or get_attr) written anywhere gets one aten.copy_ of its final
//    value into it before the output, so the caller sees the write as in eager mode; outputs
//    that are the input or views of it are taken from that copy_ (they alias the input).
//
//  - aten.native_batch_norm in training, which updates its running statistics in place though
//    its schema does not say so, runs without them; their updates (momentum-weighted with the
//    batch mean and the unbiased batch variance) are written back as above.
//
// New nodes are typed (the types of the nodes they read are needed: run shape-prop first on
// untyped text). Raises IRError naming the node for what it
// cannot express: in-place view ops (unsqueeze_), writes through views without an inverse here
// (expand, as_strided, an element of split), ops writing into arguments without a functional
// form, and calls whose effects are unknown (call_method, call_module: retrace to ATen first).
#pragma once
#include "ir/Graph.h"

namespace kiln {

void functionalize(Graph& g);

} // namespace kiln
