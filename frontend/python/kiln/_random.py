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

from . import _C

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


def install(namespace, tensor_type):
    """Wraps the random functions of `namespace` and the random methods of `tensor_type`."""
    for name in _FUNCTIONS:
        if name in namespace:
            namespace[name] = _with_generator(namespace[name])
    for name in _METHODS:
        if hasattr(tensor_type, name):
            setattr(tensor_type, name, _with_generator(getattr(tensor_type, name)))
