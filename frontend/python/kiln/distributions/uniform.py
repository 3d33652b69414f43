"""Uniform(low, high) and Laplace(loc, scale), as torch.distributions' (same draws for a seed)."""
import numbers

from .. import _C
from .distribution import Distribution, broadcast_all

_ops = _C._ops


def _batch_shape(*params):
    return () if all(isinstance(p, numbers.Number) for p in params) else None


class Uniform(Distribution):
    arg_constraints = {"low": ("Real()", lambda v: v == v), "high": ("Real()", lambda v: v == v)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        numbers_only = _batch_shape(low, high) == ()
        self.low, self.high = broadcast_all(low, high)
        super().__init__(() if numbers_only else self.low.shape, validate_args=validate_args)
        if self._validate_args and not bool((self.low < self.high).all()):
            raise ValueError(f"Expected parameter low ({type(self.low).__name__} of shape {tuple(self.low.shape)}) "
                             f"of distribution {self!r} to satisfy the constraint LessThan(high), but found invalid "
                             f"values:\n{self.low}")

    @property
    def mean(self):
        return (self.high + self.low) / 2

    @property
    def mode(self):
        return self.high * float("nan")

    @property
    def stddev(self):
        return (self.high - self.low) / 12 ** 0.5

    @property
    def variance(self):
        return (self.high - self.low).pow(2) / 12

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        rand = _ops.rand(shape, dtype=self.low.dtype, device=self.low.device)
        return self.low + rand * (self.high - self.low)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "Interval", lambda v: (v >= self.low) & (v < self.high))
        lb = self.low.le(value).type_as(self.low)
        ub = self.high.gt(value).type_as(self.low)
        return (lb * ub).log() - (self.high - self.low).log()

    def cdf(self, value):
        return ((value - self.low) / (self.high - self.low)).clamp(min=0, max=1)

    def icdf(self, value):
        return value * (self.high - self.low) + self.low

    def entropy(self):
        return (self.high - self.low).log()


class Laplace(Distribution):
    arg_constraints = {"loc": ("Real()", lambda v: v == v), "scale": ("GreaterThan(lower_bound=0.0)", lambda v: v > 0)}
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        numbers_only = _batch_shape(loc, scale) == ()
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(() if numbers_only else self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return 2 * self.scale.pow(2)

    @property
    def stddev(self):
        return (2 ** 0.5) * self.scale

    def rsample(self, sample_shape=()):
        from .. import finfo
        shape = list(self._extended_shape(sample_shape))
        u = _ops.empty(shape, dtype=self.loc.dtype, device=self.loc.device).uniform_(finfo(self.loc.dtype).eps - 1, 1)
        return self.loc - self.scale * u.sign() * (-u.abs()).log1p()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "Real()", lambda v: v == v)
        return -(2 * self.scale).log() - (value - self.loc).abs() / self.scale

    def cdf(self, value):
        return 0.5 - 0.5 * (value - self.loc).sign() * (-(value - self.loc).abs() / self.scale).expm1()

    def icdf(self, value):
        term = value - 0.5
        return self.loc - self.scale * term.sign() * (-2 * term.abs()).log1p()

    def entropy(self):
        return 1 + (2 * self.scale).log()


