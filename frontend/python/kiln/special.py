"""`kiln.special` (and kiln.lgamma / digamma / polygamma / erfc / gcd / lcm / ldexp): the special
functions as compositions of table ops, so they trace, compile and differentiate like any other
ops. The gamma family is evaluated in float64 and cast back (Lanczos' lgamma, digamma and trigamma
by recurrence to x >= 6 and their asymptotic series), accurate to float32 rounding and close to
float64's (about 1e-12 relative); erfc as 1 - erf in float64 (relative error grows past x ~ 5)."""
import math

from . import _C

_ops = _C._ops
_LANCZOS_G = 7.0
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313,
            -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6,
            1.5056327351493116e-7)


def _float_input(op, x):
    """x in float64 and the dtype to return (integer inputs give the default float dtype)."""
    if not isinstance(x, _C.TensorBase):
        x = _ops.scalar_tensor(float(x), dtype=_C.float64)
    if x.dtype.is_floating_point:
        return x.double(), x.dtype
    from ._settings import get_default_dtype
    return x.double(), get_default_dtype()


def _lgamma_positive(x):
    """log|Gamma(x)| for x >= 0.5 (Lanczos, g = 7, nine terms)."""
    z = x - 1
    series = _ops.full_like(z, _LANCZOS[0])
    for k, c in enumerate(_LANCZOS[1:], start=1):
        series = series + c / (z + k)
    t = z + _LANCZOS_G + 0.5
    return 0.5 * math.log(2 * math.pi) + (z + 0.5) * t.log() - t + series.log()


def gammaln(input):
    """log|Gamma(x)|; reflection below 0.5 (inf at the poles 0, -1, -2, ...)."""
    x, dtype = _float_input("lgamma", input)
    low = x < 0.5
    safe = _ops.where(low, 1 - x, x)
    positive = _lgamma_positive(safe)
    reflected = math.log(math.pi) - (math.pi * x).sin().abs().log() - positive
    out = _ops.where(low, reflected, positive)
    pole = (x <= 0) & (x == x.floor())
    return _ops.where(pole, _ops.full_like(out, math.inf), out).to(dtype)


def _psi_large(y):
    """digamma(y) for y >= 6: the asymptotic series."""
    r = 1 / (y * y)
    tail = r * (1 / 12 - r * (1 / 120 - r * (1 / 252 - r * (1 / 240 - r * (1 / 132)))))
    return y.log() - 0.5 / y - tail


def digamma(input):
    """d/dx log Gamma(x): recurrence up to x >= 6 and the asymptotic series; reflection below 0;
    -inf at 0 and nan at the negative integers (as torch)."""
    x, dtype = _float_input("digamma", input)
    neg = x < 0
    pos = _ops.where(neg, 1 - x, x)
    value = _psi_large(pos + 6)  # psi(x) = psi(x + 6) - sum of 1 / (x + k), k < 6
    for k in range(6):
        value = value - 1 / (pos + k)
    reflected = value - math.pi / (math.pi * x).tan()
    out = _ops.where(neg, reflected, value)
    out = _ops.where(x == 0, _ops.full_like(out, -math.inf), out)
    out = _ops.where(neg & (x == x.floor()), _ops.full_like(out, math.nan), out)
    return out.to(dtype)


def _trigamma(x, dtype):
    """The second derivative of log Gamma: recurrence to x >= 6 and the asymptotic series;
    reflection below 0 (psi1(1 - x) + psi1(x) = pi^2 / sin^2(pi x))."""
    neg = x < 0
    pos = _ops.where(neg, 1 - x, x)
    y = pos + 6
    r = 1 / (y * y)
    value = 1 / y + r / 2 + (r / y) * (1 / 6 - r * (1 / 30 - r * (1 / 42 - r * (1 / 30))))
    for k in range(6):
        value = value + 1 / ((pos + k) * (pos + k))
    reflected = (math.pi / (math.pi * x).sin()) ** 2 - value
    return _ops.where(neg, reflected, value).to(dtype)


def polygamma(n, input):
    """The n-th derivative of digamma; n = 0 (digamma) and n = 1 (trigamma) are supported."""
    if n < 0:
        raise RuntimeError("polygamma(n, x) does not support negative n.")
    if n == 0:
        return digamma(input)
    if n == 1:
        x, dtype = _float_input("polygamma", input)
        return _trigamma(x, dtype)
    raise NotImplementedError(f"kiln.polygamma: n={n} is not supported (n = 0 and 1 are)")


def erfc(input):
    x, dtype = _float_input("erfc", input)
    return (1 - x.erf()).to(dtype)


def ndtr(input):
    """The standard normal CDF."""
    x, dtype = _float_input("ndtr", input)
    return (0.5 * (1 + (x * (1 / math.sqrt(2))).erf())).to(dtype)


def ndtri(input):
    """The standard normal quantile function."""
    x, dtype = _float_input("ndtri", input)
    return (math.sqrt(2) * (2 * x - 1).erfinv()).to(dtype)


def log_ndtr(input):
    x, dtype = _float_input("log_ndtr", input)
    return ndtr(x).log().to(dtype)


def expit(input):
    return input.sigmoid()


def exp2(input):
    return input.exp2()


def xlog1py(input, other):
    """input * log1p(other), 0 where input is 0 (nan where other is nan)."""
    if not isinstance(input, _C.TensorBase):
        input = _ops.scalar_tensor(float(input), dtype=other.dtype)
    if not isinstance(other, _C.TensorBase):
        other = _ops.scalar_tensor(float(other), dtype=input.dtype)
    out = input * other.log1p()
    return _ops.where((input == 0) & ~other.isnan(), _ops.zeros_like(out), out)


def entr(input):
    """-x log x (0 at 0, -inf below 0)."""
    out = -input * input.log()
    out = _ops.where(input == 0, _ops.zeros_like(out), out)
    return _ops.where(input < 0, _ops.full_like(out, -math.inf), out)


def multigammaln(input, p):
    """The log of the multivariate gamma function of dimension p."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")
    out = gammaln(input)
    for j in range(1, p):
        out = out + gammaln(input - j / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


def gcd(input, other):
    """The greatest common divisor of integer tensors (Euclid, elementwise; gcd(0, 0) = 0)."""
    if input.dtype.is_floating_point or other.dtype.is_floating_point:
        raise RuntimeError(f"\"gcd_cpu\" not implemented for '{str(input.dtype).split('.')[-1].capitalize()}'")
    from ._composites import broadcast_tensors
    a, b = broadcast_tensors(input.abs(), other.abs())
    while bool((b != 0).any()):
        nonzero = b != 0
        a, b = _ops.where(nonzero, b, a), _ops.where(nonzero, a % _ops.where(nonzero, b, 1), b)
    return a


def lcm(input, other):
    g = gcd(input, other)
    return _ops.where(g == 0, _ops.zeros_like(g), (input // _ops.where(g == 0, 1, g) * other).abs())


def ldexp(input, other):
    """input * 2 ** other."""
    return input * _ops.pow(2.0, other)


def _public(module_globals):
    from . import _composites, _math_composites
    for name in ("erf", "erfinv", "expm1", "log1p", "logit", "round", "sinc", "logsumexp", "softmax",
                 "log_softmax", "xlogy", "i0"):
        if name not in module_globals and hasattr(_C._ops, name):
            module_globals[name] = getattr(_C._ops, name)
    for source in (_composites, _math_composites):
        for name in ("logit", "sinc", "xlogy"):
            if hasattr(source, name):
                module_globals[name] = getattr(source, name)
    module_globals["psi"] = digamma


_public(globals())


def _install_methods(tensor_class):
    tensor_class.lgamma = gammaln
    tensor_class.digamma = digamma
    tensor_class.polygamma = lambda self, n: polygamma(n, self)
    tensor_class.erfc = erfc
    tensor_class.gcd = gcd
    tensor_class.lcm = lcm
    tensor_class.ldexp = ldexp
