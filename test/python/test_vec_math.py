"""The eager kernels' vectorizable math (runtime/cpu/KilnMath.h, the generated code's functions):
float32 expm1 and log1p accuracy in ulps against a float64 reference over wide ranges, the
special values, eager equal to compiled bit for bit, and the float64/bfloat16 paths."""
import numpy as np
import pytest

import kiln


def ulp_error(got, ref):
    ref32 = ref.astype(np.float32)
    finite = np.isfinite(ref32)
    spacing = np.spacing(np.abs(ref32[finite])).astype(np.float64)
    return np.abs(got[finite].astype(np.float64) - ref[finite]) / spacing


def inputs(low, high, n=200000, seed=0):
    r = np.random.default_rng(seed)
    parts = [r.uniform(low, high, n), r.uniform(-1e-3, 1e-3, n // 4), np.ldexp(r.uniform(-1, 1, n // 4), r.integers(-60, 0, n // 4))]
    return np.clip(np.concatenate(parts), low, high).astype(np.float32)


@pytest.mark.parametrize("op,ref,low,high,max_ulp", [
    ("expm1", np.expm1, -100.0, 88.0, 3.5),
    ("log1p", np.log1p, -1.0, 1e30, 2.5),
])
def test_float32_accuracy(op, ref, low, high, max_ulp):
    x = inputs(low, high)
    got = getattr(kiln.from_numpy(x), op)().numpy()
    assert ulp_error(got, ref(x.astype(np.float64))).max() <= max_ulp


def test_special_values():
    x = np.array([0.0, -0.0, -1.0, -2.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 89.0, 3e38], dtype=np.float32)
    with np.errstate(all="ignore"):
        for op in ("expm1", "log1p"):
            got = getattr(kiln.from_numpy(x), op)().numpy()
            want = getattr(np, op)(x)
            np.testing.assert_array_equal(got, want)
            assert np.array_equal(np.signbit(got[:2]), [False, True])  # -0 stays -0


SPECIALS = [0.0, -0.0, 1e-40, -1e-40, 1e-30, -1e-30, 88.7, 89.0, -88.0, -104.0, 710.0, -750.0,
            1e30, -1e30, np.inf, -np.inf, np.nan]


def wide_inputs(dtype, seed=1):
    r = np.random.default_rng(seed)
    parts = [r.standard_normal(50000) * s for s in (0.01, 1.0, 5.0, 30.0)] + [np.array(SPECIALS)]
    return np.concatenate(parts).astype(dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", ["exp", "expm1", "log", "log1p", "tanh"])
def test_eager_equals_compiled(op, dtype):
    # One set of functions (KilnMath.inc) for the eager kernels and the generated code: the same
    # bits, including the vectorized body's tail and the special values.
    x = wide_inputs(dtype)
    if op in ("log", "log1p"):
        x = np.concatenate([x, np.abs(x)])
    x = x[:100003]  # an odd length: a scalar tail after the vector body
    t = kiln.from_numpy(x)
    eager = getattr(kiln, op)(t).numpy()
    compiled = kiln.compile(lambda v: getattr(kiln, op)(v))(t).numpy()
    assert eager.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(eager, compiled)


REFS = {
    "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh,
}


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", sorted(REFS))
def test_transcendental_accuracy(op, dtype):
    # float32 against a float64 reference, float64 against libm: within 4 ulp (libmvec's bound;
    # the branch-free functions are tighter), NaN, infinities and zeros where the reference has them.
    x = wide_inputs(dtype)
    with np.errstate(all="ignore"):
        if op in ("log", "log2", "log10", "asin", "acos", "log1p"):
            x = np.concatenate([x, np.abs(x), -np.abs(x) % 1])
        ref = REFS[op](x.astype(np.float64))
        ref_t = ref.astype(dtype)
    got = getattr(kiln, op)(kiln.from_numpy(x)).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref_t))
    inf = np.isinf(ref_t)
    np.testing.assert_array_equal(got[inf], ref_t[inf])
    ok = np.isfinite(ref_t) & (ref_t != 0)
    spacing = np.spacing(np.abs(ref_t[ok]).astype(dtype)).astype(np.float64)
    assert (np.abs(got[ok].astype(np.float64) - ref[ok]) / spacing).max() <= 4.0
    zero = ref_t == 0
    assert np.abs(got[zero]).max(initial=0.0) <= np.finfo(dtype).tiny


@pytest.mark.parametrize("op", ["exp", "log1p", "tanh", "sigmoid", "erf", "sin"])
def test_bfloat16_is_float_rounded(op):
    # bfloat16 computes in float and rounds once, through the same vectorized loop.
    x = kiln.from_numpy(wide_inputs("float32")[:20001]).to(kiln.bfloat16)
    if op == "log1p":
        x = x.abs()
    got = getattr(kiln, op)(x)
    want = getattr(kiln, op)(x.float()).to(kiln.bfloat16)
    assert got.dtype == kiln.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), want.float().numpy())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_atan2_accuracy_and_special_values(dtype):
    # libmvec's vector atan2 (the eager kernel's loop vectorizes): within 4 ulp of libm in
    # float64, the signed zeros and infinities exactly.
    r = np.random.default_rng(3)
    y = np.concatenate([r.standard_normal(100000) * 10, np.repeat([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.nan], 7)])
    x = np.concatenate([r.standard_normal(100000) * 10, np.tile([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, np.nan], 7)])
    y, x = y.astype(dtype), x.astype(dtype)
    got = kiln.atan2(kiln.from_numpy(y), kiln.from_numpy(x)).numpy()
    ref = np.arctan2(y.astype(np.float64), x.astype(np.float64))
    ref_t = ref.astype(dtype)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref_t))
    special = ~np.isfinite(y) | ~np.isfinite(x) | (y == 0) | (x == 0)
    np.testing.assert_array_equal(got[special & ~np.isnan(ref_t)], ref_t[special & ~np.isnan(ref_t)])
    np.testing.assert_array_equal(np.signbit(got[special & (ref_t == 0)]), np.signbit(ref_t[special & (ref_t == 0)]))
    ok = np.isfinite(ref_t) & (ref_t != 0)
    spacing = np.spacing(np.abs(ref_t[ok]).astype(dtype)).astype(np.float64)
    assert (np.abs(got[ok].astype(np.float64) - ref[ok]) / spacing).max() <= 4.0
