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

Under kiln.compile this module's code is traced like user code, so the function a transform is
given is traced too (its guards recorded); the autograd steps (_autograd_steps.py) and
functional_call run for real on the fake tensors, recording the engine's backward ops into the
graph: grad, vjp, jacrev, jacfwd, hessian and vmap compile into one graph, as with torch.compile.
vmap unrolls its loop there (one copy of the function's ops per batch element).
"""
import functools

from .. import _C, _compiling, get_rng_state, set_rng_state, stack, zeros_like
from ..autograd.grad_mode import enable_grad
from ._autograd_steps import aliases as _aliases
from ._autograd_steps import double_vjp as _double_vjp
from ._autograd_steps import grads as _grads
from ._autograd_steps import release as _release_leaves
from ._functional_call import functional_call

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


# --------------------------------------------------------------------------- reverse mode
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


def _release(tree, originals, flat):
    leaves, spec = _flatten(tree)
    return _unflatten(_release_leaves(leaves, originals, flat), spec)


def _uncaptured_when_eager(wrapper, like=None):
    """`wrapper` (a transform's), made to run its function uncaptured when it runs eagerly (from
    kiln.compile's glue at a graph break inside that function): a graph captured there would be
    a compiled region that the transform's autograd reaches, and a compiled region's backward is
    not differentiable again (jvp, jacfwd, hessian, nested transforms need that). Traced by
    kiln.compile, the wrapper and its function are inlined into the caller's graph instead.
    Named like `like` (functools.wraps)."""
    if _compiling.is_compiling():  # made while tracing: a function of the trace
        return wrapper
    capture = getattr(_C, "_capture", None)
    uncaptured = capture.CompiledFunction(wrapper, None) if capture is not None else wrapper

    def run(*args, **kwargs):
        if _compiling.is_compiling():
            return wrapper(*args, **kwargs)
        return uncaptured(*args, **kwargs)
    return functools.wraps(like if like is not None else wrapper)(run)


def _transform(func):
    """The decorator of a transform's wrapper of `func`."""
    return lambda wrapper: _uncaptured_when_eager(wrapper, func)


def _regroup(grads, trees, argnums):
    out, i = [], 0
    for _, spec, n in trees:
        out.append(_unflatten(list(grads[i:i + n]), spec))
        i += n
    return out[0] if isinstance(argnums, int) else tuple(out)


def grad_and_value(func, argnums=0, has_aux=False):
    """torch.func.grad_and_value: (gradient of func's scalar output wrt args[argnums], output)."""
    @_transform(func)
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


def grad(func, argnums=0, has_aux=False):
    """torch.func.grad: the gradient of func's scalar output wrt args[argnums]."""
    gv = grad_and_value(func, argnums, has_aux)

    @_transform(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


@_uncaptured_when_eager
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


@_uncaptured_when_eager
def jvp(func, primals, tangents, *, has_aux=False):
    """torch.func.jvp: (func(*primals), J @ tangents), through the double-vjp identity."""
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to be tuples")
    if len(primals) != len(tangents):
        raise RuntimeError("jvp(f, primals, tangents): Expected primals and tangents to have the same length")
    trees, flat, out, aux = _vjp_core(func, primals, {}, tuple(range(len(primals))), has_aux)
    out_leaves, out_spec = _flatten(out)
    js = _double_vjp(out_leaves, flat, _flatten(tangents)[0], primals)
    outs = _unflatten([o.detach() for o in out_leaves], out_spec)
    jv = _unflatten(list(js), out_spec)
    return (outs, jv, _release(aux, primals, flat)) if has_aux else (outs, jv)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """torch.func.jacrev: d func(*args) / d args[argnums], shaped output.shape + input.shape,
    one reverse pass per output element."""
    @_transform(func)
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
    @_transform(func)
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

    @_transform(func)
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
        # Each argument split once and each result flattened once: traced by kiln.compile, the
        # loop is unrolled, and the interpreter's instructions per element bound the batch size.
        specs = [_flatten(a)[1] for a in args]
        pieces = [[x.unbind(d) if d is not None else None for x, d in zip(leaves, ds)] for leaves, ds in per_arg]
        results, out_spec = [], None
        for i in range(size):
            if state is not None:
                set_rng_state(state)
            sliced = [_unflatten([x if p is None else p[i] for x, p in zip(leaves, ps)], spec)
                      for (leaves, _), ps, spec in zip(per_arg, pieces, specs)]
            leaves_i, spec_i = _flatten(func(*sliced, **kwargs))
            if out_spec is None:
                out_spec = spec_i
            results.append(leaves_i)
        out_leaves0 = results[0]
        od = _flatten(out_dims)[0] if not isinstance(out_dims, int) and out_dims is not None else \
            [out_dims] * len(out_leaves0)
        if len(od) != len(out_leaves0):
            raise ValueError("vmap: out_dims is not compatible with the structure of the outputs")
        stacked = []
        for k in range(len(out_leaves0)):
            items = [r[k] for r in results]
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
