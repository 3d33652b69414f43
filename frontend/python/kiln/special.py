"""`kiln.special` (and kiln.lgamma / digamma / polygamma / erfc / gcd / lcm / ldexp): the special
functions as compositions of table ops, so they trace, compile and differentiate like any other
ops. The gamma family is evaluated in float64 and cast back (Lanczos' lgamma, digamma and trigamma
by recurrence to x >= 6 and their asymptotic series), accurate to float32 rounding and close to
float64's (about 1e-12 relative); erfc, erfcx and log_ndtr through erfcx in float64: Laplace's
continued fraction from x = 3 (24 terms: double precision there), exp(x^2)(1 - erf(x)) below (1 - erf
alone came out 0 past x ~ 5.9: erfc(6) is 2e-17; log_ndtr(-40) is finite)."""
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


_CONTINUED_FRACTION_FROM = 3.0
_CONTINUED_FRACTION_TERMS = 24


def _erfcx64(x):
    """exp(x^2) erfc(x) of a float64 tensor: Laplace's continued fraction
    1 / (sqrt(pi) (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...))))) where x >= 3, exp(x^2)(1 - erf(x))
    below (1 - erf(x) >= 2e-5 there: its rounding is relative 5e-12 at most). Each branch sees
    a harmless stand-in where the other is taken, so neither overflows nor gives nan gradients."""
    far = x >= _CONTINUED_FRACTION_FROM
    z = _ops.where(far, x, _ops.full_like(x, _CONTINUED_FRACTION_FROM))
    t = z
    for k in range(_CONTINUED_FRACTION_TERMS, 0, -1):
        t = z + (k / 2) / t
    near = _ops.where(far, _ops.zeros_like(x), x)
    return _ops.where(far, 1 / (math.sqrt(math.pi) * t), (near * near).exp() * (1 - near.erf()))


def _erfc64(x):
    """erfc of a float64 tensor, exp(-x^2) erfcx(x) where that keeps its digits."""
    far = x >= _CONTINUED_FRACTION_FROM
    return _ops.where(far, (-x * x).exp() * _erfcx64(x), 1 - _ops.where(far, _ops.zeros_like(x), x).erf())


def erfc(input):
    x, dtype = _float_input("erfc", input)
    return _erfc64(x).to(dtype)


def erfcx(input):
    """The scaled complementary error function exp(x^2) erfc(x) (inf below x ~ -26.6, as torch)."""
    x, dtype = _float_input("erfcx", input)
    return _erfcx64(x).to(dtype)


def ndtr(input):
    """The standard normal CDF, (1 + erf(x / sqrt(2))) / 2 as torch computes it (0 past x ~ -8.3
    in float64 there too; log_ndtr keeps the tail)."""
    x, dtype = _float_input("ndtr", input)
    return (0.5 * (1 + (x * (1 / math.sqrt(2))).erf())).to(dtype)


def ndtri(input):
    """The standard normal quantile function."""
    x, dtype = _float_input("ndtri", input)
    return (math.sqrt(2) * (2 * x - 1).erfinv()).to(dtype)


def log_ndtr(input):
    """log of the standard normal CDF: log(erfcx(z) / 2) - z^2 with z = -x / sqrt(2) in the left
    tail (finite far past where the CDF underflows), log1p(-erfc(-z) / 2) on the right."""
    x, dtype = _float_input("log_ndtr", input)
    z = x * (-1 / math.sqrt(2))
    left = x < -1
    zl = _ops.where(left, z, _ops.zeros_like(z))
    zr = _ops.where(left, _ops.zeros_like(z), z)
    return _ops.where(left, (0.5 * _erfcx64(zl)).log() - zl * zl, (-0.5 * _erfc64(-zr)).log1p()).to(dtype)


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


# Modified Bessel functions of the first kind, orders 0 and 1: Cephes' Chebyshev expansions of
# exp(-x) I(x) on [0, 8] (in x / 2 - 2) and of exp(-x) sqrt(x) I(x) on (8, inf) (in 32 / x - 2),
# the coefficients PyTorch's kernels use. Both branches are evaluated on inputs clamped into their
# own range, so the branch `where` does not select leads their gradients (no 0 * inf = nan).
_I0E_A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
          1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
          -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
          9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
          -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
          1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
          -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
          1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
          -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
          1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0E_B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
          3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
          1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
          -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
          7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
          -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
          3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
          2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
          8.04490411014108831608e-1)
_I1E_A = (2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
          -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
          3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
          -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
          9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
          -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
          4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
          -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
          2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
          -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1E_B = (7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
          -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
          -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
          4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
          -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
          3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
          -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
          -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
          7.78576235018280120474e-1)


def _chebyshev(y, coefficients):
    """Clenshaw's recurrence: sum of c_k T_k(y / 2) with the first term halved (Cephes' chbevl)."""
    b0, b1, b2 = _ops.full_like(y, coefficients[0]), _ops.zeros_like(y), None
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = y * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _bessel(op, input, order, scaled):
    """I0/I1(x) (order 0 or 1), times exp(-|x|) when `scaled`, from the two expansions."""
    a, b = (_I0E_A, _I0E_B) if order == 0 else (_I1E_A, _I1E_B)
    x, dtype = _float_input(op, input)
    ax = x.abs()
    small = ax <= 8
    xa = _ops.where(small, ax, 0.0)
    xb = _ops.where(small, 16.0, ax)
    low = _chebyshev(xa / 2 - 2, a)
    high = _chebyshev(32 / xb - 2, b) / xb.sqrt()
    if order == 1:  # odd: the small branch times x itself (not |x|), so its slope at 0 is I1'(0) = 1/2
        low = low * _ops.where(small, x, 0.0)
        high = _ops.where(x < 0, -high, high)
    out = _ops.where(small, low, high)
    return (out if scaled else out * ax.exp()).to(dtype)


def i0(input):
    """I0(x), the modified Bessel function of the first kind of order 0."""
    return _bessel("i0", input, 0, scaled=False)


def i0e(input):
    """exp(-|x|) I0(x), the exponentially scaled modified Bessel function of order 0."""
    return _bessel("i0e", input, 0, scaled=True)


def i1(input):
    """I1(x), the modified Bessel function of the first kind of order 1."""
    return _bessel("i1", input, 1, scaled=False)


def i1e(input):
    """exp(-|x|) I1(x), the exponentially scaled modified Bessel function of order 1."""
    return _bessel("i1e", input, 1, scaled=True)


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
    tensor_class.i0 = i0
