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


def _batch_mv(bmat, bvec):
    return (bmat @ bvec.unsqueeze(-1)).squeeze(-1)


def _batch_capacitance_tril(W, D):
    """The Cholesky factor of I + W^T D^-1 W (the capacitance of W W^T + D)."""
    m = W.shape[-1]
    K = (W.mT / D.unsqueeze(-2)) @ W
    return cholesky(K + _ops.eye(m, dtype=K.dtype, device=K.device))


def _batch_lowrank_logdet(W, D, capacitance_tril):
    return 2 * capacitance_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1) + D.log().sum(-1)


def _batch_lowrank_mahalanobis(W, D, x, capacitance_tril):
    Wt_Dinv = W.mT / D.unsqueeze(-2)
    return (x.pow(2) / D).sum(-1) - _batch_mahalanobis(capacitance_tril, _batch_mv(Wt_Dinv, x))


class LowRankMultivariateNormal(Distribution):
    """A multivariate normal whose covariance is cov_factor @ cov_factor^T + diag(cov_diag), as
    torch's: log_prob and entropy through the capacitance matrix (Woodbury), rsample as
    loc + W eps_W + sqrt(D) eps_D with torch's two draws."""
    arg_constraints = {"loc": ("IndependentConstraint(Real(), 1)", lambda v: v == v),
                       "cov_factor": ("IndependentConstraint(Real(), 2)", lambda v: v == v),
                       "cov_diag": ("IndependentConstraint(GreaterThan(lower_bound=0.0), 1)", lambda v: v > 0)}
    has_rsample = True

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        if loc.dim() < 1:
            raise ValueError("loc must be at least one-dimensional.")
        event_shape = tuple(loc.shape[-1:])
        if cov_factor.dim() < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if tuple(cov_factor.shape[-2:-1]) != event_shape:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {event_shape[0]} x m")
        if tuple(cov_diag.shape[-1:]) != event_shape:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {event_shape}")
        try:
            shape = _broadcast_shape(_broadcast_shape(tuple(loc.shape) + (1,), tuple(cov_factor.shape)),
                                     tuple(cov_diag.shape) + (1,))
        except RuntimeError as e:
            raise ValueError(f"Incompatible batch shapes: loc {loc.shape}, cov_factor {cov_factor.shape}, "
                             f"cov_diag {cov_diag.shape}") from e
        self.loc = loc.unsqueeze(-1).expand(shape)[..., 0]
        self.cov_factor = cov_factor.expand(shape)
        self.cov_diag = cov_diag.unsqueeze(-1).expand(shape)[..., 0]
        self._unbroadcasted_cov_factor = cov_factor
        self._unbroadcasted_cov_diag = cov_diag
        self._capacitance_tril = _batch_capacitance_tril(cov_factor, cov_diag)
        super().__init__(tuple(self.loc.shape[:-1]), event_shape, validate_args=validate_args)

    @property
    def mean(self):
        return self.loc

    @property
    def mode(self):
        return self.loc

    @lazy_property
    def variance(self):
        return (self._unbroadcasted_cov_factor.pow(2).sum(-1) + self._unbroadcasted_cov_diag).expand(
            tuple(self._batch_shape) + tuple(self._event_shape))

    @lazy_property
    def scale_tril(self):
        n = self._event_shape[0]
        root = self._unbroadcasted_cov_diag.sqrt().unsqueeze(-1)
        Dinvsqrt_W = self._unbroadcasted_cov_factor / root
        K = Dinvsqrt_W @ Dinvsqrt_W.mT + _ops.eye(n, dtype=root.dtype, device=root.device)
        return (root * cholesky(K)).expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def covariance_matrix(self):
        n = self._event_shape[0]
        cov = self._unbroadcasted_cov_factor @ self._unbroadcasted_cov_factor.mT + \
            self._unbroadcasted_cov_diag.diag_embed()
        return cov.expand(tuple(self._batch_shape) + (n, n))

    @lazy_property
    def precision_matrix(self):
        n = self._event_shape[0]
        Wt_Dinv = self._unbroadcasted_cov_factor.mT / self._unbroadcasted_cov_diag.unsqueeze(-2)
        A = solve_triangular(self._capacitance_tril, Wt_Dinv, upper=False)
        return (self._unbroadcasted_cov_diag.reciprocal().diag_embed() - A.mT @ A).expand(
            tuple(self._batch_shape) + (n, n))

    def rsample(self, sample_shape=()):
        shape = list(self._extended_shape(sample_shape))
        w_shape = shape[:-1] + [self.cov_factor.shape[-1]]
        eps_w = _ops.randn(w_shape, dtype=self.loc.dtype, device=self.loc.device)
        eps_d = _ops.randn(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + _batch_mv(self._unbroadcasted_cov_factor, eps_w) + self._unbroadcasted_cov_diag.sqrt() * eps_d

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value, "IndependentConstraint(Real(), 1)", lambda v: v == v)
        M = _batch_lowrank_mahalanobis(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                       value - self.loc, self._capacitance_tril)
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        return -0.5 * (self._event_shape[0] * math.log(2 * math.pi) + log_det + M)

    def entropy(self):
        log_det = _batch_lowrank_logdet(self._unbroadcasted_cov_factor, self._unbroadcasted_cov_diag,
                                        self._capacitance_tril)
        H = 0.5 * (self._event_shape[0] * (1.0 + math.log(2 * math.pi)) + log_det)
        return H if len(self._batch_shape) == 0 else H.expand(tuple(self._batch_shape))
