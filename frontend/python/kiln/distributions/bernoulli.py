"""Bernoulli(probs=None, logits=None)."""
import numbers

from .. import _C
from .._compiling import is_compiling
from ..autograd.grad_mode import no_grad
from ..nn import functional as F
from .distribution import ExponentialFamily, broadcast_all, lazy_property, logits_to_probs, probs_to_logits

_ops = _C._ops


class Bernoulli(ExponentialFamily):
    arg_constraints = {"probs": ("Interval(lower_bound=0.0, upper_bound=1.0)", lambda v: (v >= 0) & (v <= 1)),
                       "logits": ("Real()", lambda v: v == v)}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        scalar = isinstance(probs if probs is not None else logits, numbers.Number)
        if probs is not None:
            (self.probs,) = broadcast_all(probs)
            param = self.probs
        else:
            (self.logits,) = broadcast_all(logits)
            param = self.logits
        if is_compiling():
            # Traced, both parametrizations now: the lazy attribute is a descriptor the tracer
            # does not run (the values are the ones it would compute).
            if probs is not None:
                self.logits = probs_to_logits(self.probs, is_binary=True)
            else:
                self.probs = logits_to_probs(self.logits, is_binary=True)
        super().__init__(() if scalar else param.shape, validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def sample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        with no_grad():
            return _ops.bernoulli(self.probs.detach().expand(shape))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "Boolean()", lambda v: (v == 0) | (v == 1))
        logits, value = broadcast_all(self.logits, value)
        return -F.binary_cross_entropy_with_logits(logits, value, reduction="none")

    def entropy(self):
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")

