"""kiln.autograd.functional (torch.autograd.functional): vjp, jvp, vhp, hvp, jacobian, hessian of
a function of tensors, on the reverse-mode engine. jvp and hvp use the double-vjp identity (no
forward mode); `vectorize=True` is accepted and computes the same values row by row."""
from .. import _C
from .grad_mode import enable_grad


def _tuple(x, arg, fn):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, _C.TensorBase):
            what = f"The {arg} given to {fn} must be either a Tensor or a tuple of Tensors"
            raise TypeError(f"{what} but the value at index {i} has type {type(t)}." if is_tuple else
                            f"{what} but the given {arg} has type {type(t)}.")
    return is_tuple, xs


def _inputs(xs, create_graph):
    """The inputs as differentiable leaves (views when they already require grad and the result
    must stay differentiable, so gradients flow on to them)."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad else x.detach().requires_grad_() for x in xs)


def _grad(outputs, inputs, grad_outputs, create_graph, strict, what):
    from . import grad as _autograd_grad
    outs = [o for o in outputs]
    if grad_outputs is None:
        grad_outputs = [None] * len(outs)
    pairs = [(o, g) for o, g in zip(outs, grad_outputs) if o.requires_grad]
    if not pairs:
        if strict:
            raise RuntimeError(f"The output of the user-provided function is independent of input 0. This is not "
                               f"allowed in strict mode.")
        return tuple(_C._ops.zeros_like(x) for x in inputs)
    gs = _autograd_grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
                        retain_graph=True, allow_unused=True)
    out = []
    for i, (g, x) in enumerate(zip(gs, inputs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of input {i}. This is "
                                   f"not allowed in strict mode.")
            g = _C._ops.zeros_like(x)
        out.append(g)
    return tuple(out)


def _finish(xs, create_graph):
    return tuple(x if create_graph else x.detach() for x in xs)


def _check_v(v, outputs, fn):
    if v is None:
        if len(outputs) != 1 or outputs[0].numel() != 1:
            raise RuntimeError(f"The vector v can only be None if the user-provided function returns a single "
                               f"Tensor with a single element.")
        return (None,)
    _, vs = _tuple(v, "v", fn)
    if len(vs) != len(outputs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(outputs)} but got {len(vs)}.")
    for o, t in zip(outputs, vs):
        if tuple(o.shape) != tuple(t.shape):
            raise RuntimeError(f"Mismatch in shape: output has shape {tuple(o.shape)} and v has shape "
                               f"{tuple(t.shape)}.")
    return vs


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J)."""
    is_tuple, xs = _tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _inputs(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "outputs of the user-provided function", "vjp")
        vs = _check_v(v, outs, "vjp")
        gs = _grad(outs, xs, vs, create_graph, strict, "vjp")
    outs = _finish(outs, create_graph)
    return (outs if out_tuple else outs[0]), (_finish(gs, create_graph) if is_tuple else _finish(gs, create_graph)[0])


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), through the double-vjp identity."""
    is_tuple, xs = _tuple(inputs, "inputs", "jvp")
    if v is None:
        if len(xs) != 1 or xs[0].numel() != 1:
            raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                               "single Tensor with a single element.")
        vs = (_C._ops.ones_like(xs[0]),)
    else:
        _, vs = _tuple(v, "v", "jvp")
    with enable_grad():
        xs = _inputs(xs, create_graph)
        out = func(*xs)
        out_tuple, outs = _tuple(out, "outputs of the user-provided function", "jvp")
        us = tuple(_C._ops.zeros_like(o).requires_grad_() for o in outs)
        gs = _grad(outs, xs, us, True, strict, "jvp")
        js = _grad(gs, us, vs, create_graph, strict, "jvp")
    outs, js = _finish(outs, create_graph), _finish(js, create_graph)
    return (outs if out_tuple else outs[0]), (js if out_tuple else js[0])


def _jacobian_rows(func, xs, create_graph, strict):
    """For each output: one row of gradients per output element."""
    with enable_grad():
        out = func(*xs)
        out_tuple, outs = _tuple(out, "outputs of the user-provided function", "jacobian")
        result = []
        for o in outs:
            flat = o.reshape(-1)
            per_input = [[] for _ in xs]
            for i in range(flat.numel()):
                for k, g in enumerate(_grad([flat[i]], xs, None, create_graph, strict, "jacobian")):
                    per_input[k].append(g)
            blocks = []
            for k, x in enumerate(xs):
                shape = tuple(o.shape) + tuple(x.shape)
                rows = per_input[k]
                blocks.append(_C._ops.stack(rows).reshape(shape) if rows else _C._ops.zeros(shape, dtype=x.dtype))
            result.append(tuple(blocks))
    return out_tuple, result


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False, strategy="reverse-mode"):
    """d func(inputs) / d inputs, shaped output.shape + input.shape (nested per output and input
    when either is a tuple)."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                         'function has more outputs than inputs, "forward-mode" tends to be more performant. '
                         'Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode" and not vectorize:
        raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse Hessian is"
                                  "only implemented for `vectorize=True`.")
    is_tuple, xs = _tuple(inputs, "inputs", "jacobian")
    xs = _inputs(xs, create_graph)
    out_tuple, rows = _jacobian_rows(func, xs, create_graph, strict)
    rows = [_finish(r, create_graph) for r in rows]
    if not out_tuple:
        return rows[0] if is_tuple else rows[0][0]
    return tuple(r if is_tuple else r[0] for r in rows)


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False, outer_jacobian_strategy="reverse-mode"):
    """The Jacobian of the gradient of a scalar function."""
    is_tuple, xs = _tuple(inputs, "inputs", "hessian")

    def gradient(*ys):
        out = func(*ys)
        _, outs = _tuple(out, "outputs of the user-provided function", "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor with a single element")
        return _grad([outs[0].reshape(())], ys, None, True, strict, "hessian")

    return jacobian(gradient, inputs if is_tuple else xs[0], create_graph=create_graph, strict=strict)


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H)."""
    is_tuple, xs = _tuple(inputs, "inputs", "vhp")
    _, vs = _tuple(v, "v", "vhp") if v is not None else (False, None)
    with enable_grad():
        xs = _inputs(xs, create_graph)
        out = func(*xs)
        _, outs = _tuple(out, "outputs of the user-provided function", "vhp")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The function given in vhp should return a single Tensor with a single element.")
        gs = _grad([outs[0]], xs, None, True, strict, "vhp")
        if vs is None:
            if len(xs) != 1 or xs[0].numel() != 1:
                raise RuntimeError("The vector v can only be None if the input to the user-provided function is a "
                                   "single Tensor with a single element.")
            vs = (_C._ops.ones_like(xs[0]),)
        hs = _grad(gs, xs, vs, create_graph, strict, "vhp")
    o, hs = _finish(outs, create_graph)[0], _finish(hs, create_graph)
    return o, (hs if is_tuple else hs[0])


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v): H is symmetric for twice-differentiable functions, so H v = v^T H."""
    return vhp(func, inputs, v, create_graph, strict)
