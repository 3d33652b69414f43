"""torch.distributions.transforms' elementwise bijections (event_dim 0): Exp, Tanh, Sigmoid,
Affine, and Compose of them, with torch's formulas for the inverse and log|det J|, and its
one-entry cache (cache_size=1: inv(y) of the last y returns the x that made it, which keeps
TanhTransform's log_prob of its own samples exact, as squashed-Gaussian policies need)."""
import math

from .. import _C
from .._dtype_info import finfo
from ..nn import functional as F

_ops = _C._ops

__all__ = ["Transform", "ComposeTransform", "ExpTransform", "TanhTransform", "SigmoidTransform", "AffineTransform",
           "AbsTransform", "PowerTransform", "SoftplusTransform"]


class _EventDim:
    """The domain/codomain descriptor transforms expose (its event_dim)."""

    def __init__(self, event_dim):
        self.event_dim = event_dim


class Transform:
    bijective = True
    sign = 1

    def __init__(self, cache_size=0):
        if cache_size not in (0, 1):
            raise ValueError("cache_size must be 0 or 1")
        self._cache_size = cache_size
        self._cached_x_y = None, None

    domain = _EventDim(0)
    codomain = _EventDim(0)

    @property
    def event_dim(self):
        return self.domain.event_dim

    @property
    def inv(self):
        return _InverseTransform(self)

    def __call__(self, x):
        return self._forward(x)

    def _forward(self, x):
        if self._cache_size == 0:
            return self._call(x)
        x_old, y_old = self._cached_x_y
        if x is x_old:
            return y_old
        y = self._call(x)
        self._cached_x_y = x, y
        return y

    def _inv_call(self, y):
        if self._cache_size == 0:
            return self._inverse(y)
        x_old, y_old = self._cached_x_y
        if y is y_old:
            return x_old
        x = self._inverse(y)
        self._cached_x_y = x, y
        return x

    def forward_shape(self, shape):
        return shape

    def inverse_shape(self, shape):
        return shape

    def _call(self, x):
        raise NotImplementedError

    def _inverse(self, y):
        raise NotImplementedError

    def log_abs_det_jacobian(self, x, y):
        raise NotImplementedError

    def __repr__(self):
        return type(self).__name__ + "()"


class _InverseTransform(Transform):
    def __init__(self, transform):
        super().__init__(cache_size=transform._cache_size)
        self._inv = transform

    @property
    def inv(self):
        return self._inv

    @property
    def sign(self):
        return self._inv.sign

    def _forward(self, x):
        return self._inv._inv_call(x)

    def _inv_call(self, y):
        return self._inv._forward(y)

    def log_abs_det_jacobian(self, x, y):
        return -self._inv.log_abs_det_jacobian(y, x)


class ComposeTransform(Transform):
    def __init__(self, parts, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.parts = list(parts)

    def _call(self, x):
        for part in self.parts:
            x = part._forward(x)
        return x

    def _inverse(self, y):
        for part in reversed(self.parts):
            y = part._inv_call(y)
        return y

    def log_abs_det_jacobian(self, x, y):
        if not self.parts:
            return _ops.zeros_like(x)
        terms = []
        for part in self.parts[:-1]:
            x_next = part._forward(x)
            terms.append(part.log_abs_det_jacobian(x, x_next))
            x = x_next
        terms.append(self.parts[-1].log_abs_det_jacobian(x, y))
        total = terms[0]
        for t in terms[1:]:
            total = total + t
        return total


class ExpTransform(Transform):
    def _call(self, x):
        return x.exp()

    def _inverse(self, y):
        return y.log()

    def log_abs_det_jacobian(self, x, y):
        return x


class TanhTransform(Transform):
    def _call(self, x):
        return x.tanh()

    def _inverse(self, y):
        return 0.5 * (y.log1p() - (-y).log1p())

    def log_abs_det_jacobian(self, x, y):
        # log(1 - tanh(x)^2) written stably (torch's formula)
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


class SigmoidTransform(Transform):
    def _call(self, x):
        info = finfo(x.dtype)
        return x.sigmoid().clamp(min=info.tiny, max=1.0 - info.eps)

    def _inverse(self, y):
        info = finfo(y.dtype)
        y = y.clamp(min=info.tiny, max=1.0 - info.eps)
        return y.log() - (-y).log1p()

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x) - F.softplus(x)


class AffineTransform(Transform):
    def __init__(self, loc, scale, event_dim=0, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.loc, self.scale = loc, scale
        self._event_dim = event_dim
        self.domain = self.codomain = _EventDim(event_dim)

    @property
    def sign(self):
        """+1 or -1 (a tensor of them for a tensor scale): whether y grows with x."""
        if isinstance(self.scale, (int, float)):
            return 1 if self.scale > 0 else -1 if self.scale < 0 else 0
        return self.scale.sign()

    def _call(self, x):
        return self.loc + self.scale * x

    def _inverse(self, y):
        return (y - self.loc) / self.scale

    def log_abs_det_jacobian(self, x, y):
        scale = self.scale
        if isinstance(scale, (int, float)):
            result = _ops.full_like(x, math.log(abs(scale)))
        else:
            result = scale.abs().log()
        if self._event_dim:
            result = result.reshape(list(result.shape[:result.dim() - self._event_dim]) + [-1]).sum(-1)
            shape = list(x.shape[:x.dim() - self._event_dim])
        else:
            shape = list(x.shape)
        return result.expand(shape)


class AbsTransform(Transform):
    """y = |x| (not bijective: its inverse is x = y, as torch's)."""
    bijective = False

    def _call(self, x):
        return x.abs()

    def _inverse(self, y):
        return y


class PowerTransform(Transform):
    """y = x ** exponent (positive x)."""

    def __init__(self, exponent, cache_size=0):
        super().__init__(cache_size=cache_size)
        self.exponent = exponent

    def _call(self, x):
        return x.pow(self.exponent)

    def _inverse(self, y):
        return y.pow(1 / self.exponent)

    def log_abs_det_jacobian(self, x, y):
        return (self.exponent * y / x).abs().log()


class SoftplusTransform(Transform):
    """y = log(1 + exp(x)); x = log(expm1(y)) written as y + log(-expm1(-y))."""

    def _call(self, x):
        return F.softplus(x)

    def _inverse(self, y):
        return (-y).expm1().neg().log() + y

    def log_abs_det_jacobian(self, x, y):
        return -F.softplus(-x)
