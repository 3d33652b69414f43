"""Standard gamma and Dirichlet sampling bit for bit as torch's CPU kernels, and their
reparameterized gradients.

torch's _standard_gamma runs, element by element in order, sample_gamma (ATen's
native/Distributions.h: Marsaglia and Tsang with NumPy's boost for alpha < 1) on double uniform
draws (53 bits of one random64) and double normal draws (Box-Muller, the second value cached in
the generator). kiln's generator is torch's stream, and a one-element float64 uniform_/normal_
makes exactly those draws (normal_ through the same cache), so this loop reproduces torch's
samples after the same manual_seed; float32 parameters take torch's float32 steps (alpha + 1,
alpha - 1/3 and 1/alpha are float operations there). The loop runs in Python: a draw costs a few
microseconds, fine for the parameter counts of distributions code, and a graph break under
kiln.compile (the draw count depends on the values).

The gradients are ATen's standard_gamma_grad_one (Taylor series for small x, Rice saddle point
for large alpha, a rational approximation otherwise) and dirichlet_grad_one, in float64 numpy.
"""
import math

import numpy as np

from .. import _C
from ..autograd.function import Function

_ops = _C._ops
_F32 = np.float32
_THIRD_F = float(_F32(1.0) / _F32(3.0))
_C0331 = float(_F32(0.0331))


class _Draws:
    """torch's double uniform and normal draws from the default generator."""

    def __init__(self):
        self._u = _ops.empty([1], dtype=_C.float64)
        self._n = _ops.empty([1], dtype=_C.float64)

    def uniform(self):
        return self._u.uniform_().item()

    def normal(self):
        return self._n.normal_().item()


def _sample_gamma(alpha, single, draws):
    """One sample_gamma<scalar_t, double>(alpha); single: scalar_t is float."""
    scale = 1.0
    if alpha < 1.0:
        if alpha == 0.0:
            return 0.0
        inverse = float(_F32(1.0) / _F32(alpha)) if single else 1.0 / alpha
        scale *= math.pow(1 - draws.uniform(), inverse)
        alpha = float(_F32(alpha) + _F32(1.0)) if single else alpha + 1.0
    d = float(_F32(alpha) - _F32(_THIRD_F)) if single else alpha - _THIRD_F
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        while True:
            x = draws.normal()
            y = 1.0 + c * x
            if y > 0:
                break
        v = y * y * y
        u = 1 - draws.uniform()
        xx = x * x
        if u < 1.0 - _C0331 * xx * xx:
            return scale * d * v
        if math.log(u) < 0.5 * xx + d * (1.0 - v + math.log(v)):
            return scale * d * v


def _check_not_traced(op, alpha):
    if alpha.is_meta:  # a value traced by kiln.compile: the sampler needs the data
        raise NotImplementedError(f"{op} runs torch's rejection sampler on the data (how many draws it makes "
                                  "depends on the values), which kiln.compile cannot trace: a graph break")


def standard_gamma_sample(alpha):
    """torch._standard_gamma(alpha) without autograd: a tensor of alpha's shape and dtype."""
    _check_not_traced("gamma sampling (Gamma/Chi2/StudentT.rsample)", alpha)
    if alpha.dtype not in (_C.float32, _C.float64):
        raise NotImplementedError(f"\"gamma_cpu\" not implemented for '{str(alpha.dtype).split('.')[-1]}'")
    single = alpha.dtype == _C.float32
    a = alpha.detach().contiguous().cpu().numpy().astype(np.float64).reshape(-1)  # (drawn on the host)
    draws = _Draws()
    out = np.empty(a.shape, np.float32 if single else np.float64)
    tiny = np.finfo(out.dtype).tiny
    for i, value in enumerate(a):
        out[i] = max(tiny, out.dtype.type(_sample_gamma(float(value), single, draws)))
    return _C.from_numpy(out.reshape(tuple(alpha.shape))).to(alpha.device)


def dirichlet_sample(alpha):
    """torch._sample_dirichlet(alpha): gammas in double (clamped to the smallest normal double),
    normalized over the last dim, clamped into [tiny, the float just below 1]."""
    _check_not_traced("Dirichlet/Beta sampling", alpha)
    if alpha.dtype not in (_C.float32, _C.float64):
        raise NotImplementedError(f"\"dirichlet\" not implemented for '{str(alpha.dtype).split('.')[-1]}'")
    a = alpha.detach().contiguous().cpu().numpy().astype(np.float64)
    draws = _Draws()
    gamma = np.array([max(np.finfo(np.float64).tiny, _sample_gamma(float(v), False, draws)) for v in a.reshape(-1)],
                     np.float64).reshape(a.shape)
    ratio = gamma / gamma.sum(-1, keepdims=True)
    dtype = np.float32 if alpha.dtype == _C.float32 else np.float64
    cast = ratio.astype(dtype)
    cast = np.minimum(np.nextafter(dtype(1), dtype(0)), np.maximum(np.finfo(dtype).tiny, cast))
    return _C.from_numpy(np.ascontiguousarray(cast)).to(alpha.device)


# --------------------------------------------------------------------------- gradients
def _digamma(x):
    """digamma of float64 numpy values: the recurrence up to 10, then the asymptotic series
    (ATen's calc_digamma's approach)."""
    x = np.asarray(x, np.float64)
    result = np.zeros_like(x)
    reflect = x < 0.5
    xr = np.where(reflect, 1 - x, x)
    while True:
        small = xr < 10
        if not small.any():
            break
        result = np.where(small, result - 1 / np.where(small, xr, 1), result)
        xr = np.where(small, xr + 1, xr)
    inv2 = 1 / (xr * xr)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 * (1 / 132)))))
    result = result + np.log(xr) - 0.5 / xr - series
    with np.errstate(all="ignore"):
        return np.where(reflect, result - np.pi / np.tan(np.pi * x), result)


def standard_gamma_grad(alpha, x):
    """ATen's standard_gamma_grad_one, elementwise on float64 arrays."""
    alpha, x = np.broadcast_arrays(np.asarray(alpha, np.float64), np.asarray(x, np.float64))
    with np.errstate(all="ignore"):
        numer, denom = np.ones_like(x), alpha.copy()
        series1, series2 = numer / denom, numer / (denom * denom)
        for i in range(1, 6):
            numer = numer * (-x / i)
            denom = denom + 1
            series1 = series1 + numer / denom
            series2 = series2 + numer / (denom * denom)
        pow_x_alpha = np.power(x, alpha)
        pdf = np.power(x, alpha - 1) * np.exp(-x)
        cdf = pow_x_alpha * series1
        cdf_alpha = (np.log(x) - _digamma(alpha)) * cdf - pow_x_alpha * series2
        small = -cdf_alpha / pdf
        small = np.where(np.isnan(small), 0.0, small)
        numer_1 = 1 + 24 * alpha * (1 + 12 * alpha)
        numer_2 = (1440 * (alpha * alpha) + 6 * x * (53 - 120 * x) - 65 * x * x / alpha + alpha * (107 + 3600 * x))
        saddle_near = numer_1 * numer_2 / (1244160 * (alpha * alpha) * (alpha * alpha))
        den = np.sqrt(8 * alpha)
        term2 = den / (alpha - x)
        term3 = np.power(x - alpha - alpha * np.log(x / alpha), -1.5)
        term23 = np.where(x < alpha, term2 - term3, term2 + term3)
        term1 = np.log(x / alpha) * term23 - np.sqrt(2 / alpha) * (alpha + x) / ((alpha - x) * (alpha - x))
        stirling = 1 + 1 / (12 * alpha) * (1 + 1 / (24 * alpha))
        saddle = -stirling * (x * term1) / den
        u, v = np.log(x / alpha), np.log(alpha)
        coef = np.array(_GAMMA_UV)
        cv = [coef[0, i] + u * (coef[1, i] + u * coef[2, i]) for i in range(8)]
        p = cv[0] + v * (cv[1] + v * (cv[2] + v * cv[3]))
        q = cv[4] + v * (cv[5] + v * (cv[6] + v * cv[7]))
        rational = np.exp(p / q)
    near = (0.9 * alpha <= x) & (x <= 1.1 * alpha)
    large = np.where(near, saddle_near, saddle)
    return np.where(x < 0.8, small, np.where(alpha > 8.0, large, rational))


_GAMMA_UV = [
    [0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084],
    [0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623],
    [0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
     -1.5247877e-07],
]


class StandardGamma(Function):
    """torch._standard_gamma with its derivative grad * _standard_gamma_grad(alpha, sample)."""

    @staticmethod
    def forward(ctx, alpha):
        sample = standard_gamma_sample(alpha)
        ctx.save_for_backward(alpha, sample)
        return sample

    @staticmethod
    def backward(ctx, grad):
        alpha, sample = ctx.saved_tensors
        s = sample.cpu().numpy()
        local = standard_gamma_grad(alpha.detach().cpu().numpy(), s).astype(s.dtype)
        return grad * _C.from_numpy(np.ascontiguousarray(local)).to(grad.device)


def _beta_grad_alpha_small(x, alpha, beta):
    factor = _digamma(alpha) - _digamma(alpha + beta) - np.log(x)
    numer = np.ones_like(x)
    series = numer / alpha * (factor + 1 / alpha)
    for i in range(1, 11):
        numer = numer * ((i - beta) * x / i)
        denom = alpha + i
        series = series + numer / denom * (factor + 1 / denom)
    result = x * np.power(1 - x, -beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_beta_small(x, alpha, beta):
    factor = _digamma(alpha + beta) - _digamma(beta)
    numer = np.ones_like(x)
    betas = np.ones_like(x)
    dbetas = np.zeros_like(x)
    series = factor / alpha
    for i in range(1, 9):
        numer = numer * (-x / i)
        dbetas = dbetas * (beta - i) + betas
        betas = betas * (beta - i)
        series = series + numer / (alpha + i) * (dbetas + factor * betas)
    result = -np.power(1 - x, 1 - beta) * series
    return np.where(np.isnan(result), 0.0, result)


def _beta_grad_alpha_mid(x, alpha, beta):
    total = alpha + beta
    mean = alpha / total
    std = np.sqrt(alpha * beta / (total + 1)) / total
    if_mean = np.where((mean - 0.1 * std <= x) & (x <= mean + 0.1 * std), 1, 0)
    poly = 47 * x * (beta * beta) * (beta * beta) + alpha * (
        (43 + 20 * (16 + 27 * beta) * x) * (beta * beta) * beta + alpha * (
            3 * (59 + 180 * beta - 90 * x) * (beta * beta) + alpha * (
                (453 + 1620 * beta * (1 - x) - 455 * x) * beta + alpha * (8 * (1 - x) * (135 * beta - 11)))))
    prefactor_num = (1 + 12 * alpha) * (1 + 12 * beta) / (total * total)
    prefactor_den = 12960 * alpha * alpha * alpha * beta * beta * (1 + 12 * total)
    near = prefactor_num / (1 - x) * poly / prefactor_den
    prefactor = -x / np.sqrt(2 * alpha * beta / total)
    stirling = (1 + 1 / (12 * alpha) + 1 / (288 * alpha * alpha)) * (1 + 1 / (12 * beta) + 1 / (288 * beta * beta)) \
        / (1 + 1 / (12 * total) + 1 / (288 * total * total))
    term1_num = 2 * (alpha * alpha) * (x - 1) + alpha * beta * (x - 1) - x * (beta * beta)
    axbx = alpha * (x - 1) + beta * x
    term1_den = np.sqrt(2 * alpha / beta) * np.power(total, 1.5) * axbx * axbx
    term1 = term1_num / term1_den
    term2 = 0.5 * np.log(alpha / (total * x))
    term3_num = np.sqrt(8 * alpha * beta / total)
    term3_den = beta * x + alpha * (x - 1)
    term3 = term3_num / term3_den
    term4_base = beta * np.log(beta / (total * (1 - x))) + alpha * np.log(alpha / (total * x))
    term4 = np.power(term4_base, -1.5)
    term1234 = term1 + term2 * (term3 + np.where(x < mean, term4, -term4))
    far = stirling * prefactor * term1234
    return np.where(if_mean == 1, near, far)


_DIRICHLET_C = np.array([
    [[[1.003668233, -0.01061107488, -0.0657888334, 0.01201642863],
      [0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033],
      [-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013]],
     [[0.221950385, -0.3187676331, 0.01799915743, 0.01074823814],
      [-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057],
      [0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05]],
     [[-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565],
      [0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181],
      [0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05]]],
    [[[1, -0.02924021934, -0.04438342661, 0.007285809825],
      [0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521],
      [-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149]],
     [[0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273],
      [0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956],
      [-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05]],
     [[0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05],
      [0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05],
      [-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06]]],
])


def dirichlet_grad(x, alpha, total):
    """ATen's dirichlet_grad_one (d x / d alpha of the marginal Beta(alpha, total - alpha)),
    elementwise on float64 arrays."""
    x, alpha, total = np.broadcast_arrays(*(np.asarray(v, np.float64) for v in (x, alpha, total)))
    beta = total - alpha
    boundary = total * x * (1 - x)
    with np.errstate(all="ignore"):
        small = _beta_grad_alpha_small(x, alpha, beta)
        large = -_beta_grad_beta_small(1 - x, beta, alpha)
        mid = _beta_grad_alpha_mid(x, alpha, beta)
        u = np.log(x)
        a = np.log(alpha) - u
        b = np.log(total) - a
        pow_u, pow_a = (np.ones_like(u), u, u * u), (np.ones_like(a), a, a * a)
        p = np.zeros_like(x)
        q = np.zeros_like(x)
        c = _DIRICHLET_C
        for i in range(3):
            for j in range(3):
                ua = pow_u[i] * pow_a[j]
                p = p + ua * (c[0, i, j, 0] + b * (c[0, i, j, 1] + b * (c[0, i, j, 2] + b * c[0, i, j, 3])))
                q = q + ua * (c[1, i, j, 0] + b * (c[1, i, j, 1] + b * (c[1, i, j, 2] + b * c[1, i, j, 3])))
        approx = x * (_digamma(total) - _digamma(alpha)) / beta
        rational = p / q * approx
    return np.where((x <= 0.5) & (boundary < 2.5), small,
                    np.where((x >= 0.5) & (boundary < 0.75), large,
                             np.where((alpha > 6) & (beta > 6), mid, rational)))


class DirichletSample(Function):
    """torch's _Dirichlet: the sample and its gradient _dirichlet_grad(x, alpha, alpha.sum(-1))
    (torch's backward: grad * that, minus the x-weighted sum of it over the last dim)."""

    @staticmethod
    def forward(ctx, alpha):
        x = dirichlet_sample(alpha)
        ctx.save_for_backward(x, alpha)
        return x

    @staticmethod
    def backward(ctx, grad):
        x, alpha = ctx.saved_tensors
        xh = x.cpu().numpy()
        xn, an = xh.astype(np.float64), alpha.detach().cpu().numpy().astype(np.float64)
        total = np.broadcast_to(an.sum(-1, keepdims=True), an.shape)
        local = _C.from_numpy(np.ascontiguousarray(dirichlet_grad(xn, an, total).astype(xh.dtype))).to(x.device)
        return local * (grad - (x * grad).sum(-1, keepdim=True))
