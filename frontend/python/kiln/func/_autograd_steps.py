"""The autograd steps of kiln.func's transforms: making a transform's differentiable inputs,
running the reverse-mode engine, releasing its outputs.

kiln.func's own code is traced by kiln.compile like user code (so the function a transform is
given is traced, with its guards); these steps only see tensors and run for real on the fake
tensors, so the engine's backward ops are recorded into the graph, as TorchDynamo traces
torch.func.grad's inner autograd. They are marked for the tracer (kiln._compiling): the leaves
requiring grad they make are the transform's own (no graph output is one: `release` detaches
them), and a backward that meets a composite op recorded as one node retraces the frame with
composites recorded as their parts, as for kiln.autograd.grad."""
from .. import _C, _compiling, zeros_like
from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def aliases(xs):
    """Fresh differentiable stand-ins for a transform's inputs: a view of an input that already
    requires grad (an outer transform's, so they nest), else a detached leaf."""
    out = []
    for x in xs:
        if not _is_tensor(x):
            raise ValueError(f"Expected the arguments to differentiate to be Tensors, got {type(x).__name__}")
        if not x.is_floating_point():
            raise RuntimeError(f"only Tensors of floating point dtype can require gradients (got {x.dtype})")
        out.append(x.view_as(x) if x.requires_grad else x.detach().requires_grad_())
    return out


def _reaches_other_leaves(outputs, ours):
    """Whether the outputs' history reaches a leaf requiring grad other than `ours`: then the
    gradients must stay differentiable (a closed-over parameter, as in MAML's inner step)."""
    seen, stack = set(), [o.grad_fn for o in outputs if _is_tensor(o) and o.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.name() == "AccumulateGrad":
            var = node.variable
            if not any(var._is_same(x) for x in ours):
                return True
            continue
        stack.extend(fn for fn, _ in node.next_functions)
    return False


def keeps_graph(originals, outs, flat):
    """Whether results must stay differentiable: an input already required grad (an outer
    transform's, MAML's parameters) or the history reaches a leaf outside the transform."""
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return _C.is_grad_enabled() and (any(_is_tensor(o) and o.requires_grad for o in originals)
                                     or _reaches_other_leaves(outs, flat))


def grads(outputs, inputs, cotangents, originals, retain_graph=None):
    """d outputs / d inputs (weighted by cotangents), zeros where an input is not used."""
    keep = keeps_graph(originals, outputs, inputs)
    gs = _autograd_grad(outputs, inputs, cotangents, retain_graph=True if retain_graph is None else retain_graph,
                        create_graph=keep, allow_unused=True)
    return [zeros_like(x) if g is None else g for g, x in zip(gs, inputs)]


def release(leaves, originals, flat):
    """Outputs of a transform, detached from its own level: they keep a history only where it
    reaches further than the transform's inputs (an outer transform's, a closed-over parameter)."""
    return [x if not _is_tensor(x) or (x.requires_grad and keeps_graph(originals, x, flat)) else x.detach()
            for x in leaves]


def double_vjp(out_leaves, flat, tangent_leaves, primals):
    """J @ tangents through the double-vjp identity (forward mode is not implemented): the vjp
    with a zero cotangent u that requires grad is linear in u; its vjp with the tangents is J t."""
    with enable_grad():
        us = [zeros_like(o).requires_grad_() for o in out_leaves]
        gs = _autograd_grad(out_leaves, flat, us, create_graph=True, allow_unused=True)
        used = [(g, t) for g, t in zip(gs, tangent_leaves) if g is not None]
        if used and any(g.requires_grad for g, _ in used):
            js = _autograd_grad([g for g, _ in used], us, [t for _, t in used], allow_unused=True,
                                create_graph=_C.is_grad_enabled() and any(p.requires_grad for p in primals))
        else:
            js = [None] * len(us)
    return [zeros_like(o) if j is None else j for j, o in zip(js, out_leaves)]


for _step in (aliases, grads, double_vjp):
    _compiling.transform_step(_step)
