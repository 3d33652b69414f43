"""Distribution: shapes, argument validation and the sample/rsample split of torch's base class,
and the helpers its subclasses share (broadcasting parameters, probs <-> logits)."""
import numbers
import warnings

from .. import _C
from .._compiling import is_compiling
from .._composites import broadcast_tensors
from .._dtype_info import finfo
from .._tensor import Size, Tensor
from ..autograd.grad_mode import no_grad

_ops = _C._ops


class Distribution:
    has_rsample = False
    has_enumerate_support = False
    arg_constraints = {}  # name -> (description, predicate on the tensor): checked when validating
    _validate_args = __debug__

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError
        Distribution._validate_args = value

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        # The qualified names of the class and its bases, most derived first: kl_divergence's keys.
        cls._kl_names = tuple(f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__ if c is not object)

    def __init__(self, batch_shape=(), event_shape=(), validate_args=None):
        self._batch_shape = Size(batch_shape)
        self._event_shape = Size(event_shape)
        if validate_args is not None:
            self._validate_args = validate_args
        # Validation reads tensor values: not while kiln.compile traces (it would break the graph).
        if self._validate_args and not is_compiling():
            for name, (description, valid) in self.arg_constraints.items():
                if name not in self.__dict__:
                    continue  # a lazily computed parameter (probs from logits, or the reverse)
                value = self.__dict__[name]
                if not bool(valid(value).all()):
                    raise ValueError(f"Expected parameter {name} ({type(value).__name__} of shape "
                                     f"{tuple(value.shape)}) of distribution {self!r} to satisfy the constraint "
                                     f"{description}, but found invalid values:\n{value}")

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    @property
    def mean(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mean")

    @property
    def variance(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement variance")

    @property
    def stddev(self):
        return self.variance.sqrt()

    def sample(self, sample_shape=()):
        with no_grad():
            return self.rsample(sample_shape)

    def rsample(self, sample_shape=()):
        raise NotImplementedError(f"{type(self).__name__} has no reparameterized sampling (rsample)")

    def sample_n(self, n):
        warnings.warn("sample_n will be deprecated. Use .sample((n,)) instead", UserWarning, stacklevel=2)
        return self.sample((n,))

    def log_prob(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def perplexity(self):
        return self.entropy().exp()

    def _extended_shape(self, sample_shape=()):
        return Size(tuple(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def _validate_sample(self, value, support, valid):
        """torch's checks of a value passed to log_prob: a tensor, broadcastable to the
        distribution's shape, inside the support (not while traced, as in __init__)."""
        if is_compiling():
            return
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        event_dim_start = len(value.shape) - len(self._event_shape)
        if tuple(value.shape[event_dim_start:]) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        actual, expected = tuple(value.shape), tuple(self._batch_shape) + tuple(self._event_shape)
        for i, j in zip(reversed(actual), reversed(expected)):
            if i != 1 and j != 1 and i != j:
                raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {actual} vs {expected}.")
        if not bool(valid(value).all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {actual}) to be within the "
                             f"support ({support}) of the distribution {self!r}, but found invalid values:\n{value}")

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{p}: {self.__dict__[p] if self.__dict__[p].numel() == 1 else self.__dict__[p].size()}"
                         for p in names)
        return f"{type(self).__name__}({args})"


class ExponentialFamily(Distribution):
    """The base of the exponential-family distributions (Normal, Bernoulli, Beta, Dirichlet,
    Exponential, Gamma, Poisson), as torch's: p(x) = h(x) exp(<t(x), theta> - F(theta)). A
    subclass defining _natural_params, _log_normalizer and _mean_carrier_measure gets the entropy
    from the Bregman divergence of F, as torch computes it; kiln's own ones define entropy
    directly."""

    @property
    def _natural_params(self):
        raise NotImplementedError

    def _log_normalizer(self, *natural_params):
        raise NotImplementedError

    @property
    def _mean_carrier_measure(self):
        raise NotImplementedError

    def entropy(self):
        from ..autograd import grad
        from ..autograd.grad_mode import enable_grad
        result = -self._mean_carrier_measure
        nparams = [p.detach().requires_grad_() for p in self._natural_params]
        with enable_grad():
            lg_normal = self._log_normalizer(*nparams)
            gradients = grad(lg_normal.sum(), nparams, create_graph=True)
        result = result + lg_normal
        for nparam, g in zip(nparams, gradients):
            result = result - (nparam * g).reshape(tuple(self._batch_shape) + (-1,)).sum(-1)
        return result


def broadcast_all(*values):
    """Tensors and numbers broadcast to one shape (numbers become tensors of the tensors' dtype)."""
    tensors = [v for v in values if isinstance(v, Tensor)]
    if not tensors and not all(isinstance(v, numbers.Number) for v in values):
        raise ValueError("Input arguments must all be instances of numbers.Number or kiln.Tensor.")
    dtype = tensors[0].dtype if tensors else _C._get_default_dtype()
    device = tensors[0].device if tensors else None
    as_tensors = [v if isinstance(v, Tensor) else _ops.full([], float(v), dtype=dtype, device=device) for v in values]
    return broadcast_tensors(*as_tensors)


def clamp_probs(probs):
    eps = finfo(probs.dtype).eps
    return probs.clamp(min=eps, max=1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    return ps.log() - (-ps).log1p() if is_binary else ps.log()


def logits_to_probs(logits, is_binary=False):
    return logits.sigmoid() if is_binary else _ops.softmax(logits, -1)


class lazy_property:
    """Computed on first access and stored in the instance (probs from logits, or the reverse)."""

    def __init__(self, fn):
        self.fn = fn
        self.__doc__ = fn.__doc__

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        value = self.fn(instance)
        instance.__dict__[self.fn.__name__] = value
        return value
