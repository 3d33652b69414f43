"""Categorical(probs=None, logits=None): a distribution over {0, ..., K - 1} per batch element."""
from .. import _C
from .._composites import broadcast_tensors
from .._dtype_info import finfo
from .._compiling import is_compiling
from .distribution import Distribution, lazy_property, logits_to_probs, probs_to_logits

_ops = _C._ops


class Categorical(Distribution):
    arg_constraints = {"probs": ("Simplex()", lambda v: (v >= 0).all(-1) & ((v.sum(-1) - 1).abs() < 1e-6)),
                       "logits": ("IndependentConstraint(Real(), 1)", lambda v: (v == v).all(-1))}
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Either `probs` or `logits` must be specified, but not both.")
        if probs is not None:
            if probs.dim() < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = probs / probs.sum(-1, keepdim=True)
        else:
            if logits.dim() < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            # Normalized: log-probabilities.
            self.logits = logits - logits.logsumexp(-1, keepdim=True)
        self._param = self.probs if probs is not None else self.logits
        if is_compiling():
            # Traced, both parametrizations now: the lazy attribute is a descriptor the tracer
            # does not run (the values are the ones it would compute).
            if probs is not None:
                self.logits = probs_to_logits(self.probs)
            else:
                self.probs = logits_to_probs(self.logits)
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def mean(self):
        return _ops.full(list(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    @property
    def mode(self):
        return self.probs.argmax(-1)

    @property
    def variance(self):
        return _ops.full(list(self._extended_shape()), float("nan"), dtype=self.probs.dtype)

    def sample(self, sample_shape=()):
        count = 1
        for s in sample_shape:
            count *= s
        probs_2d = self.probs.detach().reshape(-1, self._num_events)
        samples_2d = _ops.multinomial(probs_2d, count, True).t()
        return samples_2d.reshape(list(self._extended_shape(sample_shape)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, f"IntegerInterval(lower_bound=0, upper_bound={self._num_events - 1})",
                                  lambda v: (v >= 0) & (v < self._num_events) & (v == v.floor()))
        value = value.long().unsqueeze(-1)
        value, log_pmf = broadcast_tensors(value, self.logits)
        value = value[..., :1]
        return log_pmf.gather(-1, value).squeeze(-1)

    def entropy(self):
        logits = self.logits.clamp(min=finfo(self.logits.dtype).min)
        return -(logits * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        values = _ops.arange(self._num_events, dtype=_C.int64, device=self._param.device)
        values = values.view((-1,) + (1,) * len(self._batch_shape))
        return values.expand((-1,) + tuple(self._batch_shape)) if expand else values

