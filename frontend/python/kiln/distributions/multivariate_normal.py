"""MultivariateNormal(loc, covariance_matrix | precision_matrix | scale_tril), as torch's: the
Cholesky factor comes from kiln.linalg (LAPACK), sampling is loc + L @ eps with torch's draws."""
import math

from .. import _C
from ..linalg import cholesky, solve_triangular
from .distribution import Distribution, lazy_property

_ops = _C._ops


def _batch_mahalanobis(bL, bx):
    """x^T (L L^T)^-1 x for batched L and x (torch.distributions.multivariate_normal's)."""
    n = bx.shape[-1]
    L = bL.expand(tuple(bx.shape[:-1]) + (n, n)) if bL.dim() - 2 < bx.dim() - 1 else bL
    x = bx.expand(tuple(L.shape[:-2]) + (n,)) if bx.dim() - 1 < L.dim() - 2 else bx
    y = solve_triangular(L, x.unsqueeze(-1), upper=False).squeeze(-1)
    return y.pow(2).sum(-1)


def _precision_to_scale_tril(P):
    Lf = cholesky(P.flip((-2, -1)))
    L_inv = Lf.flip((-2, -1)).transpose(-2, -1)
    n = P.shape[-1]
    eye = _ops.eye(n, dtype=P.dtype, device=P.device)
    return solve_triangular(L_inv, eye, upper=False)


def _broadcast_shape(a, b):
    out = []
    for i in range(max(len(a), len(b))):
        x = a[len(a) - 1 - i] if i < len(a) else 1
        y = b[len(b) - 1 - i] if i < len(b) else 1
        if x != 1 and y != 1 and x != y:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) at non-singleton "
                               f"dimension {max(len(a), len(b)) - 1 - i}")
        out.append(max(x, y) if x != 1 and y != 1 else (x if y == 1 else y))
    return tuple(reversed(out))


class MultivariateNormal(Distribution):
    arg_constraints = {"loc": ("IndependentConstraint(Real(), 1)", lambda v: v == v)}
    has_rsample = True

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        matrix = next(m for m in (scale_tril, covariance_matrix, precision_matrix) if m is not None)
        if matrix.dim() < 2:
            name = "scale_tril" if scale_tril is not None else ("covariance_matrix" if covariance_matrix is not None
                                                                 else "precision_matrix")
            raise ValueError(f"{name} matrix must be at least two-dimensional, with optional leading batch dimensions")
        batch_shape = _broadcast_shape(tuple(matrix.shape[:-2]), tuple(loc.shape[:-1]))
        n = loc.shape[-1]
        if scale_tril is not None:
            self.scale_tril = scale_tril.expand(batch_shape + (n, n))
            self._unbroadcasted_scale_tril = scale_tril
        elif covariance_matrix is not None:
            self.covariance_matrix = covariance_matrix.expand(batch_shape + (n, n))
            self._unbroadcasted_scale_tril = cholesky(covariance_matrix)
        else:
            self.precision_matrix = precision_matrix.expand(batch_shape + (n, n))
            self._unbroadcasted_scale_tril = _precision_to_scale_tril(precision_matrix)
        self.loc = loc.expand(batch_shape + (n,))
        super().__init__(batch_shape, (n,), validate_args=validate_args)

    @lazy_property
    def scale_tril(self):
        return self._unbroadcasted_scale_tril.expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def covariance_matrix(self):
        L = self._unbroadcasted_scale_tril
        return (L @ L.transpose(-2, -1)).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @lazy_property
    def precision_matrix(self):
        n = self._event_shape[0]
        eye = _ops.eye(n, dtype=self.loc.dtype, device=self.loc.device)
        Linv = solve_triangular(self._unbroadcasted_scale_tril, eye, upper=False)
        return (Linv.transpose(-2, -1) @ Linv).expand(tuple(self._batch_shape) + tuple(self._event_shape) * 2)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @property
    def variance(self):
        return self._unbroadcasted_scale_tril.pow(2).sum(-1).expand(tuple(self._batch_shape) +
                                                                   tuple(self._event_shape))

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        eps = _ops.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "IndependentConstraint(Real(), 1)", lambda v: v == v)
        diff = value - self.loc
        M = _batch_mahalanobis(self._unbroadcasted_scale_tril, diff)
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + M) - half_log_det

    def entropy(self):
        half_log_det = self._unbroadcasted_scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        H = 0.5 * self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + half_log_det
        return H if len(self._batch_shape) == 0 else H.expand(self._batch_shape)
