"""float32 expm1 and log1p (runtime/cpu/PointwiseVecMath.h, vectorizable): accuracy in ulps
against a float64 reference over wide ranges, and the special values."""
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
