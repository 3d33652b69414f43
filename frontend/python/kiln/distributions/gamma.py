"""Gamma, Chi2, StudentT, Beta and Dirichlet, as torch.distributions' (the same samples after the
same manual_seed: kiln/distributions/_gamma.py reproduces torch's gamma and Dirichlet samplers;
reparameterized samples carry torch's gradients)."""
import math
import numbers

from .. import _C
from .._composites import xlogy
from .._dtype_info import finfo
from ..special import digamma, gammaln
from ._gamma import DirichletSample, StandardGamma
from .distribution import Distribution, ExponentialFamily, broadcast_all

_ops = _C._ops
_POSITIVE = ("GreaterThan(lower_bound=0.0)", lambda v: v > 0)
_REAL = ("Real()", lambda v: v == v)


def _numbers(*params):
    return all(isinstance(p, numbers.Number) for p in params)


def _xlogy(x, y):
    return xlogy(x, y)


def _tiny(t):
    return finfo(t.dtype).tiny


class Gamma(ExponentialFamily):
    arg_constraints = {"concentration": _POSITIVE, "rate": _POSITIVE}
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        numbers_only = _numbers(concentration, rate)
        self.concentration, self.rate = broadcast_all(concentration, rate)
        super().__init__(() if numbers_only else self.concentration.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.rate

    @property
    def mode(self):
        return ((self.concentration - 1) / self.rate).clamp(min=0)

    @property
    def variance(self):
        return self.concentration / self.rate.pow(2)

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        value = StandardGamma.apply(self.concentration.expand(shape)) / self.rate.expand(shape)
        value.detach().clamp_(min=_tiny(value))  # outside autograd, as torch's
        return value

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "GreaterThanEq(lower_bound=0.0)", lambda v: v >= 0)
        return (_xlogy(self.concentration, self.rate) + _xlogy(self.concentration - 1, value)
                - self.rate * value - gammaln(self.concentration))

    def entropy(self):
        return (self.concentration - self.rate.log() + gammaln(self.concentration)
                + (1.0 - self.concentration) * digamma(self.concentration))


class Chi2(Gamma):
    arg_constraints = {"df": _POSITIVE}

    def __init__(self, df, validate_args=None):
        if isinstance(df, numbers.Number):
            df = _ops.full([], float(df), dtype=_C.float32)
        self.df = df
        super().__init__(0.5 * df, 0.5, validate_args=validate_args)


class StudentT(Distribution):
    arg_constraints = {"df": _POSITIVE, "loc": _REAL, "scale": _POSITIVE}
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self.df, self.loc, self.scale = broadcast_all(df, loc, scale)
        self._chi2 = Chi2(self.df)
        super().__init__(self.df.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _ops.where(self.df <= 1, _ops.full_like(self.loc, math.nan), self.loc)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        df = self.df
        finite = self.scale.pow(2) * df / (df - 2)
        out = _ops.where(df > 2, finite, _ops.full_like(df, math.inf))
        return _ops.where(df <= 1, _ops.full_like(df, math.nan), out)

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        x = _ops.empty(shape, dtype=self.df.dtype, device=self.df.device).normal_()
        z = self._chi2.rsample(sample_shape)
        return self.loc + self.scale * (x * (z / self.df).rsqrt())

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, *_REAL)
        y = (value - self.loc) / self.scale
        z = (self.scale.log() + 0.5 * self.df.log() + 0.5 * math.log(math.pi) + gammaln(0.5 * self.df)
             - gammaln(0.5 * (self.df + 1.0)))
        return -0.5 * (self.df + 1.0) * (y ** 2.0 / self.df).log1p() - z

    def entropy(self):
        lbeta = gammaln(0.5 * self.df) + math.lgamma(0.5) - gammaln(0.5 * (self.df + 1))
        return (self.scale.log() + 0.5 * (self.df + 1) * (digamma(0.5 * (self.df + 1)) - digamma(0.5 * self.df))
                + 0.5 * self.df.log() + lbeta)


class Dirichlet(ExponentialFamily):
    arg_constraints = {"concentration": ("IndependentConstraint(GreaterThan(lower_bound=0.0), 1)", lambda v: v > 0)}
    has_rsample = True

    def __init__(self, concentration, validate_args=None):
        if concentration.dim() < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = concentration
        super().__init__(concentration.shape[:-1], concentration.shape[-1:], validate_args=validate_args)

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        return DirichletSample.apply(self.concentration.expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "Simplex()", lambda v: ((v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6))
                                  .unsqueeze(-1))
        return (_xlogy(self.concentration - 1.0, value).sum(-1) + gammaln(self.concentration.sum(-1))
                - gammaln(self.concentration).sum(-1))

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, True)

    @property
    def variance(self):
        con0 = self.concentration.sum(-1, True)
        return self.concentration * (con0 - self.concentration) / (con0.pow(2) * (con0 + 1))

    def entropy(self):
        k = self.concentration.shape[-1]
        a0 = self.concentration.sum(-1)
        return (gammaln(self.concentration).sum(-1) - gammaln(a0) - (k - a0) * digamma(a0)
                - ((self.concentration - 1.0) * digamma(self.concentration)).sum(-1))


class Beta(ExponentialFamily):
    arg_constraints = {"concentration1": _POSITIVE, "concentration0": _POSITIVE}
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        if _numbers(concentration1, concentration0):
            from .._creation import tensor
            concentration = tensor([float(concentration1), float(concentration0)])
            batch_shape = ()
        else:
            concentration1, concentration0 = broadcast_all(concentration1, concentration0)
            concentration = _ops.stack([concentration1, concentration0], -1)
            batch_shape = concentration1.shape
        self._dirichlet = Dirichlet(concentration, validate_args=validate_args)
        super().__init__(batch_shape, validate_args=validate_args)

    @property
    def concentration1(self):
        return self._dirichlet.concentration[..., 0]

    @property
    def concentration0(self):
        return self._dirichlet.concentration[..., 1]

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return self._dirichlet.concentration[..., 0].sub(1).div(self._dirichlet.concentration.sum(-1).sub(2))

    @property
    def variance(self):
        total = self.concentration1 + self.concentration0
        return self.concentration1 * self.concentration0 / (total.pow(2) * (total + 1))

    def rsample(self, sample_shape=()):
        return self._dirichlet.rsample(sample_shape).select(-1, 0)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "Interval(lower_bound=0.0, upper_bound=1.0)", lambda v: (v >= 0) & (v <= 1))
        return self._dirichlet.log_prob(_ops.stack([value, 1.0 - value], -1))

    def entropy(self):
        return self._dirichlet.entropy()
