"""The generator= argument of the random ops, as PyTorch's (`kiln.Generator().manual_seed(1)`,
`kiln.randint(0, 10, (4,), generator=g)`, `t.uniform_(generator=g)`).

Every random kernel draws from the default generator (mt19937 with PyTorch's algorithms, so the
values equal torch's for the same seed; runtime/Generator.h). An op given another generator runs
with the default generator set to that generator's state (5056 bytes, torch's layout); afterwards the generator keeps the advanced state and the default
generator gets its own back. So a user's generator yields exactly what the default generator
would have yielded from the same seed, and the default stream is untouched.
"""
import contextlib
import functools

from . import _C, _compiling

# Module functions and Tensor methods that take generator= in PyTorch.
_FUNCTIONS = ("rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
              "bernoulli", "multinomial", "normal", "poisson")
_METHODS = ("uniform_", "normal_", "random_", "bernoulli_", "bernoulli", "multinomial",
            "exponential_", "geometric_", "cauchy_", "log_normal_")


@contextlib.contextmanager
def use_generator(generator):
    """Random ops inside draw from `generator` (a kiln.Generator; None: the default one)."""
    default = _C.default_generator
    if generator is None or generator is default:
        yield
        return
    if not isinstance(generator, _C.Generator):
        raise TypeError(f"generator must be a kiln.Generator, not {type(generator).__name__}")
    saved = default.get_state()
    default.set_state(generator.get_state())
    try:
        yield
    finally:
        generator.set_state(default.get_state())
        default.set_state(saved)


def _with_generator(op):
    @functools.wraps(op)
    def random_op(*args, generator=None, **kwargs):
        if generator is None:
            return op(*args, **kwargs)
        with use_generator(generator):
            return op(*args, **kwargs)

    return random_op


def _broadcast(a, b):
    a, b = [1] * (len(b) - len(a)) + a, [1] * (len(a) - len(b)) + b
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b)):
        raise RuntimeError(f"normal(): mean of shape {a} and std of shape {b} do not broadcast")
    return [max(x, y) if 1 in (x, y) else x for x, y in zip(a, b)]


def normal(mean, std=1.0, size=None, *, dtype=None, device=None, requires_grad=False):
    """torch.normal: (float, float, size), or tensor mean and/or std broadcast together. Draws as
    torch's normal_out: N(0, std) plus mean for a tensor mean and a float std, else N(0, 1) times
    std plus mean (so the values equal torch's after the same seed)."""
    is_tensor = lambda v: isinstance(v, _C.TensorBase)  # noqa: E731
    if not is_tensor(mean) and not is_tensor(std):
        if size is None:
            raise TypeError("normal() missing the size argument for float mean and std")
        out = _C._ops.empty(list(size), dtype=dtype, device=device).normal_(mean, std)
        return out.requires_grad_(requires_grad) if requires_grad else out
    if size is not None:
        raise TypeError("normal(): size is only taken with float mean and std")
    if not is_tensor(std):
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        return _C._ops.empty_like(mean).normal_(0.0, std).add_(mean)
    if (std < 0).any():
        raise RuntimeError("normal expects all elements of std >= 0.0")
    base = mean if is_tensor(mean) else std
    shape = _broadcast(list(mean.shape), list(std.shape)) if is_tensor(mean) else list(std.shape)
    out = _C._ops.empty(shape, dtype=base.dtype, device=base.device).normal_(0.0, 1.0)
    return out.mul_(std).add_(mean)


# Functions that set or read the default generator's state: traced code does not record them
# (a graph's draws run before it, hoisted), so a call is a graph break and runs eagerly between
# the graphs, in program order (a manual_seed inside a compiled function reseeds at every call,
# and the draws after it see the new state).
_STATE_FUNCTIONS = ("manual_seed", "seed", "get_rng_state", "set_rng_state")


def _not_traced(fn, name):
    @functools.wraps(fn)
    def state_function(*args, **kwargs):
        return fn(*args, **kwargs)

    return _compiling.not_traced(state_function, f"kiln.{name}() (it sets or reads the random generator's "
                                                 "state; the graphs' draws run around it in order)")


def install(namespace, tensor_type):
    """Wraps the random functions of `namespace` and the random methods of `tensor_type`."""
    namespace.setdefault("normal", normal)
    for name in _STATE_FUNCTIONS:
        namespace[name] = _not_traced(namespace[name], name)
    for name in _FUNCTIONS:
        if name in namespace:
            namespace[name] = _with_generator(namespace[name])
    for name in _METHODS:
        if hasattr(tensor_type, name):
            setattr(tensor_type, name, _with_generator(getattr(tensor_type, name)))
