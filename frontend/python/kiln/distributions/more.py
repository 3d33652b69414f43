"""More of torch.distributions, as torch writes them (same draws for a seed, same formulas):
Cauchy, HalfNormal, HalfCauchy, Gumbel, Geometric, Pareto, Weibull, Poisson, and the relaxed
(Concrete / Gumbel-softmax) LogitRelaxedBernoulli, RelaxedBernoulli, ExpRelaxedCategorical,
RelaxedOneHotCategorical; Multinomial, InverseGamma, Kumaraswamy."""
import math

from .. import _C
from .._dtype_info import finfo
from ..autograd.grad_mode import no_grad
from .categorical import Categorical
from .distribution import (
    Distribution, ExponentialFamily, broadcast_all, clamp_probs, lazy_property, logits_to_probs, probs_to_logits,
)
from .normal import Normal
from .transformed_distribution import Exponential, TransformedDistribution
from .transforms import AbsTransform, AffineTransform, ExpTransform, PowerTransform, SigmoidTransform
from .uniform import Uniform

_ops = _C._ops
_EULER = 0.57721566490153286060
_POSITIVE = ("GreaterThan(lower_bound=0.0)", lambda v: v > 0)
_REAL = ("Real()", lambda v: v == v)


def _lgamma(x):
    from ..special import gammaln
    return gammaln(x)


def _numbers(*values):
    return all(isinstance(v, (int, float)) for v in values)


class Cauchy(Distribution):
    arg_constraints = {"loc": _REAL, "scale": _POSITIVE}
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        super().__init__(() if _numbers(loc, scale) else self.loc.shape, validate_args=validate_args)

    @property
    def mean(self):
        return _ops.full(list(self._extended_shape()), math.nan, dtype=self.loc.dtype, device=self.loc.device)

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return _ops.full(list(self._extended_shape()), math.inf, dtype=self.loc.dtype, device=self.loc.device)

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        eps = _ops.empty(shape, dtype=self.loc.dtype, device=self.loc.device).cauchy_()
        return self.loc + eps * self.scale

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, *_REAL)
        return -math.log(math.pi) - self.scale.log() - (((value - self.loc) / self.scale) ** 2).log1p()

    def cdf(self, value):
        return ((value - self.loc) / self.scale).atan() / math.pi + 0.5

    def icdf(self, value):
        return (math.pi * (value - 0.5)).tan() * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + self.scale.log()


class _Half(TransformedDistribution):
    """|X| for X symmetric about 0 (the base distribution, with a `scale`): torch's HalfNormal and
    HalfCauchy share these formulas."""
    arg_constraints = {"scale": _POSITIVE}
    has_rsample = True

    def __init__(self, base, validate_args=None):
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    @property
    def scale(self):
        return self.base_dist.scale

    @property
    def mode(self):
        return _ops.zeros_like(self.scale)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "GreaterThanEq(lower_bound=0.0)", lambda v: v >= 0)
        log_prob = self.base_dist.log_prob(value) + math.log(2)
        return _ops.where(value >= 0, log_prob, -math.inf)

    def cdf(self, value):
        return 2 * self.base_dist.cdf(value) - 1

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class HalfNormal(_Half):
    def __init__(self, scale, validate_args=None):
        super().__init__(Normal(0, scale, validate_args=False), validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * math.sqrt(2 / math.pi)

    @property
    def variance(self):
        return self.scale.pow(2) * (1 - 2 / math.pi)


class HalfCauchy(_Half):
    def __init__(self, scale, validate_args=None):
        super().__init__(Cauchy(0, scale, validate_args=False), validate_args=validate_args)

    @property
    def mean(self):
        return _ops.full(list(self._extended_shape()), math.inf, dtype=self.scale.dtype, device=self.scale.device)

    @property
    def variance(self):
        return self.base_dist.variance


class Gumbel(TransformedDistribution):
    arg_constraints = {"loc": _REAL, "scale": _POSITIVE}

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        info = finfo(self.loc.dtype)
        if _numbers(loc, scale):
            base = Uniform(info.tiny, 1 - info.eps, validate_args=validate_args)
        else:
            base = Uniform(_ops.full_like(self.loc, info.tiny), _ops.full_like(self.loc, 1 - info.eps),
                           validate_args=validate_args)
        transforms = [ExpTransform().inv, AffineTransform(loc=0, scale=-_ops.ones_like(self.scale)),
                      ExpTransform().inv, AffineTransform(loc=loc, scale=-self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, *_REAL)
        y = (self.loc - value) / self.scale
        return (y - y.exp()) - self.scale.log()

    @property
    def mean(self):
        return self.loc + self.scale * _EULER

    @property
    def mode(self):
        return self.loc

    @property
    def stddev(self):
        return (math.pi / math.sqrt(6)) * self.scale

    @property
    def variance(self):
        return self.stddev.pow(2)

    def entropy(self):
        return self.scale.log() + (1 + _EULER)


class Geometric(Distribution):
    """The number of failures before the first success (probs or logits)."""
    arg_constraints = {"probs": ("Interval(lower_bound=0.0, upper_bound=1.0)", lambda v: (v >= 0) & (v <= 1)),
                       "logits": _REAL}

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        super().__init__(() if isinstance(given, (int, float)) else given.shape, validate_args=validate_args)
        if self._validate_args and probs is not None:
            valid = self.probs > 0
            if not bool(valid.all()):
                raise ValueError(f"Expected parameter probs ({type(self.probs).__name__} of shape "
                                 f"{tuple(self.probs.shape)}) of distribution {self!r} to be positive but found "
                                 f"invalid values:\n{self.probs[~valid]}")

    @property
    def mean(self):
        return 1.0 / self.probs - 1.0

    @property
    def mode(self):
        return _ops.zeros_like(self.probs)

    @property
    def variance(self):
        return (1.0 / self.probs - 1.0) / self.probs

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def sample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        tiny = finfo(self.probs.dtype).tiny
        with no_grad():
            u = _ops.empty(shape, dtype=self.probs.dtype, device=self.probs.device).uniform_(tiny, 1)
            return (u.log() / (-self.probs).log1p()).floor()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "IntegerGreaterThan(lower_bound=0)", lambda v: (v >= 0) & (v == v.floor()))
        value, probs = broadcast_all(value, self.probs)
        probs = probs.clone()
        probs = _ops.where((probs == 1) & (value == 0), _ops.zeros_like(probs), probs)
        return value * (-probs).log1p() + self.probs.log()

    def entropy(self):
        from ..nn.functional import binary_cross_entropy_with_logits
        return binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none") / self.probs


class Pareto(TransformedDistribution):
    arg_constraints = {"alpha": _POSITIVE, "scale": _POSITIVE}

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha), [ExpTransform(), AffineTransform(loc=0, scale=self.scale)],
                         validate_args=validate_args)

    @property
    def mean(self):
        a = self.alpha.clamp(min=1)
        return a * self.scale / (a - 1)

    @property
    def mode(self):
        return self.scale

    @property
    def variance(self):
        a = self.alpha.clamp(min=2)
        return self.scale.pow(2) * a / ((a - 1).pow(2) * (a - 2))

    def entropy(self):
        return (self.scale / self.alpha).log() + (1 + self.alpha.reciprocal())


class Weibull(TransformedDistribution):
    arg_constraints = {"scale": _POSITIVE, "concentration": _POSITIVE}

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = self.concentration.reciprocal()
        base = Exponential(_ops.ones_like(self.scale), validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration_reciprocal), AffineTransform(loc=0, scale=self.scale)]
        super().__init__(base, transforms, validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * _lgamma(1 + self.concentration_reciprocal).exp()

    @property
    def mode(self):
        return self.scale * ((self.concentration - 1) / self.concentration) ** self.concentration.reciprocal()

    @property
    def variance(self):
        return self.scale.pow(2) * (_lgamma(1 + 2 * self.concentration_reciprocal).exp()
                                    - _lgamma(1 + self.concentration_reciprocal).exp().pow(2))

    def entropy(self):
        return (_EULER * (1 - self.concentration_reciprocal) + (self.scale * self.concentration_reciprocal).log() + 1)


class Poisson(ExponentialFamily):
    arg_constraints = {"rate": ("GreaterThanEq(lower_bound=0.0)", lambda v: v >= 0)}

    def __init__(self, rate, validate_args=None):
        (self.rate,) = broadcast_all(rate)
        super().__init__(() if isinstance(rate, (int, float)) else self.rate.shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.rate

    @property
    def mode(self):
        return self.rate.floor()

    @property
    def variance(self):
        return self.rate

    def sample(self, sample_shape=()):
        with no_grad():
            return _ops.poisson(self.rate.expand(list(self._extended_shape(sample_shape))))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "IntegerGreaterThan(lower_bound=0)", lambda v: (v >= 0) & (v == v.floor()))
        rate, value = broadcast_all(self.rate, value)
        return value.xlogy(rate) - rate - _lgamma(value + 1)


class LogitRelaxedBernoulli(Distribution):
    """The logit of a RelaxedBernoulli sample (Concrete / Gumbel-softmax for two classes)."""
    arg_constraints = {"probs": ("Interval(lower_bound=0.0, upper_bound=1.0)", lambda v: (v >= 0) & (v <= 1)),
                       "logits": _REAL}

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self.temperature = temperature
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
        else:
            (self.logits,) = broadcast_all(logits)
        given = probs if probs is not None else logits
        self._param = self.probs if probs is not None else self.logits
        super().__init__(() if isinstance(given, (int, float)) else self._param.shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def param_shape(self):
        return self._param.shape

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        probs = clamp_probs(self.probs.expand(shape))
        uniforms = clamp_probs(_ops.rand(shape, dtype=probs.dtype, device=probs.device))
        return (uniforms.log() - (-uniforms).log1p() + probs.log() - (-probs).log1p()) / self.temperature

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, *_REAL)
        logits, value = broadcast_all(self.logits, value)
        diff = logits - value.mul(self.temperature)
        return self.temperature.log() + diff - 2 * diff.exp().log1p()


class _Relaxed(TransformedDistribution):
    """The relaxed distributions' parameters, read from their base distribution."""

    @property
    def temperature(self):
        return self.base_dist.temperature

    @property
    def logits(self):
        return self.base_dist.logits

    @property
    def probs(self):
        return self.base_dist.probs


class RelaxedBernoulli(_Relaxed):
    """A continuous relaxation of Bernoulli on (0, 1): sigmoid of a LogitRelaxedBernoulli."""
    arg_constraints = LogitRelaxedBernoulli.arg_constraints
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(LogitRelaxedBernoulli(temperature, probs, logits), SigmoidTransform(),
                         validate_args=validate_args)


class ExpRelaxedCategorical(Distribution):
    """The log of a RelaxedOneHotCategorical sample (Gumbel-softmax scores, log-normalized)."""
    arg_constraints = {"probs": ("Simplex()", lambda v: v >= 0), "logits": ("IndependentConstraint(Real(), 1)",
                                                                           lambda v: v == v)}
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits)
        self.temperature = temperature
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def probs(self):
        return self._categorical.probs

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        uniforms = clamp_probs(_ops.rand(shape, dtype=self.logits.dtype, device=self.logits.device))
        gumbels = -((-(uniforms.log())).log())
        scores = (self.logits + gumbels) / self.temperature
        return scores - scores.logsumexp(dim=-1, keepdim=True)

    def log_prob(self, value):
        K = self._categorical._num_events
        logits, value = broadcast_all(self.logits, value)
        log_scale = _lgamma(_ops.full_like(self.temperature, float(K))) - self.temperature.log().mul(-(K - 1))
        score = logits - value.mul(self.temperature)
        score = (score - score.logsumexp(dim=-1, keepdim=True)).sum(-1)
        return score + log_scale


class RelaxedOneHotCategorical(_Relaxed):
    """A continuous relaxation of OneHotCategorical on the simplex (the Gumbel-softmax): exp of an
    ExpRelaxedCategorical."""
    arg_constraints = ExpRelaxedCategorical.arg_constraints
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        super().__init__(ExpRelaxedCategorical(temperature, probs, logits, validate_args=validate_args),
                         ExpTransform(), validate_args=validate_args)


class Multinomial(Distribution):
    """Counts of total_count draws from a Categorical(probs or logits): sample draws the categories
    as torch does (one Categorical sample of total_count + sample_shape, scattered into counts)."""
    arg_constraints = {"probs": ("Simplex()", lambda v: v >= 0),
                       "logits": ("IndependentConstraint(Real(), 1)", lambda v: v == v)}

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int):
            raise NotImplementedError("inhomogeneous total_count is not supported")
        self.total_count = total_count
        self._categorical = Categorical(probs=probs, logits=logits)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    @property
    def probs(self):
        return self._categorical.probs

    @property
    def logits(self):
        return self._categorical.logits

    @property
    def param_shape(self):
        return self._categorical.param_shape

    @property
    def mean(self):
        return self.probs * self.total_count

    @property
    def variance(self):
        return self.total_count * self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        with no_grad():
            samples = self._categorical.sample((self.total_count,) + tuple(sample_shape))
            order = list(range(samples.dim()))
            order.append(order.pop(0))
            samples = samples.permute(*order)
            counts = _ops.zeros(list(self._extended_shape(sample_shape)), dtype=samples.dtype, device=samples.device)
            counts.scatter_add_(-1, samples, _ops.ones_like(samples))
            return counts.to(self.probs.dtype)

    def log_prob(self, value):
        logits, value = broadcast_all(self.logits, value)
        logits = _ops.where((value == 0) & (logits == -math.inf), _ops.zeros_like(logits), logits)
        return _lgamma(value.sum(-1) + 1) - _lgamma(value + 1).sum(-1) + (logits * value).sum(-1)


class InverseGamma(TransformedDistribution):
    """1 / X for X ~ Gamma(concentration, rate) (Gamma's draws, so a seed gives torch's samples)."""
    arg_constraints = {"concentration": _POSITIVE, "rate": _POSITIVE}
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        from .gamma import Gamma
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-base.rate.new_ones(())), validate_args=validate_args)

    @property
    def concentration(self):
        return self.base_dist.concentration

    @property
    def rate(self):
        return self.base_dist.rate

    @property
    def mean(self):
        return _ops.where(self.concentration > 1, self.rate / (self.concentration - 1), math.inf)

    @property
    def mode(self):
        return self.rate / (self.concentration + 1)

    @property
    def variance(self):
        result = self.rate.square() / ((self.concentration - 1).square() * (self.concentration - 2))
        return _ops.where(self.concentration > 2, result, math.inf)

    def entropy(self):
        from ..special import digamma
        return (self.concentration + self.rate.log() + _lgamma(self.concentration)
                - (1 + self.concentration) * digamma(self.concentration))


def _kumaraswamy_moment(a, b, n):
    arg1 = 1 + n / a
    return b * (_lgamma(arg1) + _lgamma(b) - _lgamma(arg1 + b)).exp()


class Kumaraswamy(TransformedDistribution):
    """(1 - (1 - U)^(1/c0))^(1/c1) for U ~ Uniform(0, 1): a Beta-like distribution on (0, 1)."""
    arg_constraints = {"concentration1": _POSITIVE, "concentration0": _POSITIVE}
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(_ops.full_like(self.concentration0, 0), _ops.full_like(self.concentration0, 1),
                       validate_args=validate_args)
        transforms = [PowerTransform(exponent=self.concentration0.reciprocal()), AffineTransform(loc=1.0, scale=-1.0),
                      PowerTransform(exponent=self.concentration1.reciprocal())]
        super().__init__(base, transforms, validate_args=validate_args)

    @property
    def mean(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 1)

    @property
    def mode(self):
        log_mode = (self.concentration0.reciprocal() * (-self.concentration0).log1p()
                    - (-self.concentration0 * self.concentration1).log1p())
        log_mode = _ops.where((self.concentration0 < 1) | (self.concentration1 < 1), math.nan, log_mode)
        return log_mode.exp()

    @property
    def variance(self):
        return _kumaraswamy_moment(self.concentration1, self.concentration0, 2) - self.mean.pow(2)

    def entropy(self):
        from ..special import digamma
        t1 = 1 - self.concentration1.reciprocal()
        t0 = 1 - self.concentration0.reciprocal()
        H0 = digamma(self.concentration0 + 1) + _EULER
        return t0 + t1 * H0 - self.concentration1.log() - self.concentration0.log()
