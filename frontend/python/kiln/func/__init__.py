"""kiln.func (torch.func): function transforms over kiln's autograd engine.

- `functional_call(module, params_and_buffers, args, kwargs)`: runs a module with some of its
  parameters and buffers replaced for one call (tied weights follow, as torch's tie_weights).
- `grad`, `grad_and_value`, `vjp`, `jvp`, `jacrev`, `jacfwd`, `hessian`: computed with the
  reverse-mode engine (`kiln.autograd.grad`); a transform's inputs are fresh differentiable
  aliases, so only the paths through them count (a tensor the function closes over is a
  constant of the transform, as in functorch) and transforms nest (`grad(grad(f))`). `jvp` and
  `jacfwd` use the double-vjp identity (forward mode is not implemented): the values are torch's,
  the cost is that of two reverse passes.
- `vmap`: maps the function over a batch dimension by calling it once per batch element and
  stacking the results (no batching rules yet): the values are torch's for functions without
  side effects, the cost grows with the batch. `randomness="different"` draws each element's
  random numbers in turn, so they differ from torch's batched draws; "error" is not enforced.
"""
import functools

from .. import _C, get_rng_state, set_rng_state, stack, zeros_like
from ..autograd import grad as _autograd_grad
from ..autograd.grad_mode import enable_grad

__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "vjp", "vmap"]


# --------------------------------------------------------------------------- pytrees (tuples,
# lists, dicts of tensors), the containers torch.func accepts
def _flatten(tree):
    if isinstance(tree, (list, tuple)):
        leaves, specs = [], []
        for item in tree:
            lv, sp = _flatten(item)
            leaves += lv
            specs.append(sp)
        return leaves, (type(tree), specs, None)
    if isinstance(tree, dict):
        leaves, specs = [], []
        for v in tree.values():
            lv, sp = _flatten(v)
            leaves += lv
            specs.append(sp)
        return leaves, (dict, specs, list(tree.keys()))
    return [tree], None


def _unflatten(leaves, spec):
    it = iter(leaves)

    def build(sp):
        if sp is None:
            return next(it)
        kind, children, keys = sp
        items = [build(c) for c in children]
        if kind is dict:
            return dict(zip(keys, items))
        return kind(*items) if hasattr(kind, "_fields") else kind(items)
    return build(spec)


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


# --------------------------------------------------------------------------- functional_call
def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """torch.func.functional_call: `module(*args, **kwargs)` with the named tensors replaced."""
    if isinstance(parameter_and_buffer_dicts, dict):
        replacements = dict(parameter_and_buffer_dicts)
    else:
        replacements = {}
        for d in parameter_and_buffer_dicts:
            for k, v in d.items():
                if k in replacements:
                    raise ValueError(f"{k} appeared in multiple dictionaries; behavior of functional call is ambiguous")
                replacements[k] = v
    named = list(module.named_parameters(remove_duplicate=False)) + list(module.named_buffers(remove_duplicate=False))
    if strict:
        names = {n for n, _ in named}
        missing = sorted(names - set(replacements))
        unexpected = sorted(set(replacements) - names)
        if missing or unexpected:
            msgs = []
            if unexpected:
                msgs.append("Unexpected key(s): " + ", ".join(repr(k) for k in unexpected) + ".")
            if missing:
                msgs.append("Missing key(s): " + ", ".join(repr(k) for k in missing) + ".")
            raise RuntimeError("Error(s) in reparametrizing for functional_call:\n\t" + "\n\t".join(msgs))
    if tie_weights:  # a replaced tensor also replaces every other name of the same tensor
        by_tensor = {}
        for name, t in named:
            by_tensor.setdefault(id(t), []).append(name)
        for name, t in named:
            if name in replacements:
                for other in by_tensor[id(t)]:
                    if other not in replacements:
                        replacements[other] = replacements[name]
    saved = []
    try:
        for name, value in replacements.items():
            owner, _, attr = name.rpartition(".")
            sub = module.get_submodule(owner) if owner else module
            for store in ("_parameters", "_buffers"):
                table = sub.__dict__.get(store)
                if table is not None and attr in table:
                    saved.append((table, attr, table[attr]))
                    table[attr] = value
                    break
            else:
                saved.append((sub, attr, sub.__dict__.get(attr, _MISSING)))
                object.__setattr__(sub, attr, value)
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for owner, attr, old in reversed(saved):
            if isinstance(owner, dict):
                owner[attr] = old
            elif old is _MISSING:
                object.__delattr__(owner, attr)
            else:
                object.__setattr__(owner, attr, old)


_MISSING = object()


# --------------------------------------------------------------------------- reverse mode
def _aliases(xs):
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


def _argnums_tuple(argnums, nargs):
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise RuntimeError("argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int):
            raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(a).__name__}")
        if not -nargs <= a < nargs:
            raise RuntimeError(f"Got argnums={a}, but only {nargs} positional inputs")
    return tuple(a % nargs for a in nums)


def _vjp_core(func, args, kwargs, argnums, has_aux):
    """Runs func on aliases of args[argnums]: (args' trees, flat aliases, output, aux)."""
    nums = _argnums_tuple(argnums, len(args))
    args = list(args)
    trees, flat = [], []
    for a in nums:
        leaves, spec = _flatten(args[a])
        al = _aliases(leaves)
        trees.append((a, spec, len(al)))
        flat += al
        args[a] = _unflatten(al, spec)
    with enable_grad():
        result = func(*args, **kwargs)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise RuntimeError("grad_and_value(f)(*args): output of function f should be a tuple: (output, aux) "
                               "if has_aux is True")
        result, aux = result
    return trees, flat, result, aux


def _regroup(grads, trees, argnums):
    out, i = [], 0
    for _, spec, n in trees:
        out.append(_unflatten(list(grads[i:i + n]), spec))
        i += n
    return out[0] if isinstance(argnums, int) else tuple(out)


def _grads(outputs, inputs, cotangents, originals, retain_graph=None):
    keep = _keeps_graph(originals, outputs, inputs)
    gs = _autograd_grad(outputs, inputs, cotangents, retain_graph=True if retain_graph is None else retain_graph,
                        create_graph=keep, allow_unused=True)
    return [zeros_like(x) if g is None else g for g, x in zip(gs, inputs)]


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: (gradient of func's scalar output wrt args[argnums], output)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args))
        originals = [leaf for a in nums for leaf in _flatten(args[a])[0]]
        trees, flat, out, aux = _vjp_core(func, args, kwargs, argnums, has_aux)
        if not _is_tensor(out):
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a Tensor, got {type(out)}")
        if out.dim() != 0:
            raise RuntimeError("grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got tensor "
                               f"with {out.dim()} dims. Maybe you wanted to use the vjp or jacrev APIs instead?")
        gs = _grads([out], flat, None, originals)
        g = _regroup(gs, trees, argnums)
        value = _release(out, originals, flat)
        return (g, (value, _release(aux, originals, flat))) if has_aux else (g, value)
    return wrapper


def _release(tree, originals, flat):
    """Outputs of a transform, detached from its own level: they keep a history only where it
    reaches further than the transform's inputs (an outer transform's, a closed-over parameter)."""
    leaves, spec = _flatten(tree)
    return _unflatten([x if not _is_tensor(x) or (x.requires_grad and _keeps_graph(originals, x, flat))
                       else x.detach() for x in leaves], spec)


def _keeps_graph(originals, outs, flat):
    """Whether results must stay differentiable: an input already required grad (an outer
    transform's, MAML's parameters) or the history reaches a leaf outside the transform."""
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    return _C.is_grad_enabled() and (any(_is_tensor(o) and o.requires_grad for o in originals)
                                     or _reaches_other_leaves(outs, flat))


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of func's scalar output wrt args[argnums]."""
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """torch.func.vjp: (func(*primals), vjp_fn[, aux]); vjp_fn(cotangents) gives one gradient per
    primal."""
    trees, flat, out, aux = _vjp_core(func, primals, {}, tuple(range(len(primals))), has_aux)
    out_leaves, out_spec = _flatten(out)

    def vjp_fn(cotangents):
        ct_leaves, _ = _flatten(cotangents)
        if len(ct_leaves) != len(out_leaves):
            raise RuntimeError(f"Expected pytree structure of cotangents to be the same as pytree structure of "
                               f"outputs to the function ({len(out_leaves)} leaves), got {len(ct_leaves)}")
        gs = _grads(out_leaves, flat, ct_leaves, primals)
        return _regroup(gs, trees, tuple(range(len(primals))))

    result = _release(out, primals, flat)
    return (result, vjp_fn, _release(aux, primals, flat)) if has_aux else (result, vjp_fn)


def jvp(func, primals, tangents, *, has_aux=False):
    """torch.func.jvp: (func(*primals), J @ tangents), through the double-vjp identity."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same length")
    trees, flat, out, aux = _vjp_core(func, primals, {}, tuple(range(len(primals))), has_aux)
    out_leaves, out_spec = _flatten(out)
    with enable_grad():
        us = [zeros_like(o).requires_grad_() for o in out_leaves]
        gs = _autograd_grad(out_leaves, flat, us, create_graph=True, allow_unused=True)
        used = [(g, t) for g, t in zip(gs, _flatten(tangents)[0]) if g is not None]
        if used and any(g.requires_grad for g, _ in used):
            js = _autograd_grad([g for g, _ in used], us, [t for _, t in used], allow_unused=True,
                                create_graph=_C.is_grad_enabled() and any(p.requires_grad for p in primals))
        else:
            js = [None] * len(us)
    js = [zeros_like(o) if j is None else j for j, o in zip(js, out_leaves)]
    outs = _unflatten([o.detach() for o in out_leaves], out_spec)
    jv = _unflatten(list(js), out_spec)
    return (outs, jv, _release(aux, primals, flat)) if has_aux else (outs, jv)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """torch.func.jacrev: d func(*args) / d args[argnums], shaped output.shape + input.shape,
    one reverse pass per output element."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args))
        originals = [leaf for a in nums for leaf in _flatten(args[a])[0]]
        trees, flat, out, aux = _vjp_core(func, args, kwargs, argnums, has_aux)
        out_leaves, out_spec = _flatten(out)
        per_output = []
        for o in out_leaves:
            rows = []
            flat_o = o.reshape(-1)
            for i in range(flat_o.numel()):
                rows.append(_grads([flat_o[i]], flat, None, originals))
            jac = []
            for k, x in enumerate(flat):
                if rows:
                    jac.append(stack([r[k] for r in rows]).reshape(tuple(o.shape) + tuple(x.shape)))
                else:
                    jac.append(zeros_like(x).reshape((0,) + tuple(x.shape)).reshape(tuple(o.shape) + tuple(x.shape)))
            per_output.append(_regroup(jac, trees, argnums))
        result = _unflatten(per_output, out_spec)
        return (result, _release(aux, originals, flat)) if has_aux else result
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """torch.func.jacfwd: the Jacobian column by column, one jvp per input element."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        nums = _argnums_tuple(argnums, len(args))
        leaves_per_arg = [_flatten(args[a]) for a in nums]
        flat_in = [x for leaves, _ in leaves_per_arg for x in leaves]

        def f_flat(*xs):
            new_args, i = list(args), 0
            for a, (leaves, spec) in zip(nums, leaves_per_arg):
                new_args[a] = _unflatten(list(xs[i:i + len(leaves)]), spec)
                i += len(leaves)
            r = func(*new_args, **kwargs)
            return r[0] if has_aux else r

        out = f_flat(*flat_in)
        aux = func(*args, **kwargs)[1] if has_aux else None
        out_leaves, out_spec = _flatten(out)
        cols = []  # per input leaf: per output leaf: columns
        for k, x in enumerate(flat_in):
            per_out = [[] for _ in out_leaves]
            for j in range(x.numel()):
                tangents = [zeros_like(y) for y in flat_in]
                basis = zeros_like(x).reshape(-1)
                basis[j] = 1
                tangents[k] = basis.reshape(x.shape)
                _, jv = jvp(f_flat, tuple(flat_in), tuple(tangents))
                for m, col in enumerate(_flatten(jv)[0]):
                    per_out[m].append(col)
            cols.append(per_out)
        per_output = []
        for m, o in enumerate(out_leaves):
            jac = []
            for k, x in enumerate(flat_in):
                c = cols[k][m]
                j = stack(c, dim=-1) if c else zeros_like(o).unsqueeze(-1)[..., :0]
                jac.append(j.reshape(tuple(o.shape) + tuple(x.shape)))
            trees = [(a, spec, len(leaves)) for a, (leaves, spec) in zip(nums, leaves_per_arg)]
            per_output.append(_regroup(jac, trees, argnums))
        result = _unflatten(per_output, out_spec)
        return (result, aux) if has_aux else result
    return wrapper


def hessian(func, argnums=0):
    """torch.func.hessian: jacfwd(jacrev(func))."""
    return jacfwd(jacrev(func, argnums), argnums)


# --------------------------------------------------------------------------- vmap
def _broadcast_dims(in_dims, args):
    if isinstance(in_dims, int) or in_dims is None:
        return [in_dims] * len(args)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise ValueError(f"vmap(f, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {type(in_dims).__name__} but inputs has "
                         f"{len(args)} arguments")
    return list(in_dims)


def _leaf_dims(dims, arg):
    """The in_dim of every tensor leaf of one argument (an int/None for all, or a matching tree)."""
    leaves, _ = _flatten(arg)
    if dims is None or isinstance(dims, int):
        return leaves, [dims if _is_tensor(x) else None for x in leaves]
    dim_leaves, _ = _flatten(dims)
    if len(dim_leaves) != len(leaves):
        raise ValueError("vmap: in_dims is not compatible with the structure of an input")
    return leaves, [d if _is_tensor(x) else None for x, d in zip(leaves, dim_leaves)]


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.vmap / torch.func.vmap: func mapped over a dimension of its inputs (see the module
    docstring: one call per batch element, results stacked at out_dims)."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if chunk_size is not None and (not isinstance(chunk_size, int) or chunk_size <= 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = _broadcast_dims(in_dims, args)
        per_arg = [_leaf_dims(d, a) for d, a in zip(dims, args)]
        size = None
        for leaves, ds in per_arg:
            for x, d in zip(leaves, ds):
                if d is None:
                    continue
                if not isinstance(d, int):
                    raise ValueError(f"vmap: in_dims must be int or None, got {type(d).__name__}")
                if x.dim() == 0:
                    raise ValueError(f"vmap: Got in_dim={d} for an input but the input is a scalar (0-d) tensor; "
                                     "in_dim must be None for such inputs")
                if not -x.dim() <= d < x.dim():
                    raise ValueError(f"vmap: Got in_dim={d} for an input but the input is of type {type(x)} with "
                                     f"{x.dim()} dims: in_dim must be in [-{x.dim()}, {x.dim()})")
                n = x.shape[d]
                if size is not None and n != size:
                    raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, "
                                     f"got sizes {size} and {n} for the mapped dimension")
                size = n
        if size is None:
            raise ValueError("vmap(f, in_dims=..., ...)(<inputs>): at least one input must be a Tensor mapped over "
                             "a dimension (got in_dims=None for all of them)")
        state = get_rng_state() if randomness == "same" else None
        results = []
        for i in range(size):
            if state is not None:
                set_rng_state(state)
            sliced = []
            for a, (leaves, ds) in zip(args, per_arg):
                _, spec = _flatten(a)
                sliced.append(_unflatten([x.select(d, i) if d is not None else x for x, d in zip(leaves, ds)], spec))
            results.append(func(*sliced, **kwargs))
        out_leaves0, out_spec = _flatten(results[0])
        od = _flatten(out_dims)[0] if not isinstance(out_dims, int) and out_dims is not None else \
            [out_dims] * len(out_leaves0)
        if len(od) != len(out_leaves0):
            raise ValueError("vmap: out_dims is not compatible with the structure of the outputs")
        stacked = []
        for k in range(len(out_leaves0)):
            items = [_flatten(r)[0][k] for r in results]
            if not all(_is_tensor(t) for t in items):
                raise ValueError(f"vmap: `{func.__name__ if hasattr(func, '__name__') else func}` must only return "
                                 f"Tensors, got type {type(items[0])}. Did you mean to set out_dims= to None for "
                                 "output?")
            d = od[k]
            if d is None:
                stacked.append(items[0])
            else:
                stacked.append(stack(items, dim=d if d >= 0 else d + items[0].dim() + 1))
        return _unflatten(stacked, out_spec)
    return wrapper
