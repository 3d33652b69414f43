"""PyTorch as the oracle: identical inputs for both libraries and exact result comparison.

Tests that need torch call `torch = need_torch()` (skips cleanly where torch is absent).
"""
import numpy as np
import pytest

import kiln

ALL_DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
FLOAT_DTYPES = ["float16", "bfloat16", "float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]

# Tolerances per dtype for floating results.
TOL = {"float16": (1e-3, 1e-3), "bfloat16": (1.6e-2, 1e-2), "float32": (1.3e-6, 1e-5), "float64": (1e-12, 1e-12)}


def need_torch():
    return pytest.importorskip("torch")


def sample(shape, dtype, seed=0, low=-4, high=4):
    """A numpy array of `dtype` (a name), deterministic in seed; bfloat16 comes as float32."""
    r = np.random.default_rng(seed)
    if dtype == "bool":
        return r.integers(0, 2, size=shape).astype(np.bool_)
    if dtype in INT_DTYPES:
        lo = 0 if dtype == "uint8" else low
        return r.integers(lo, high + 1, size=shape).astype(dtype)
    a = r.uniform(low, high, size=shape)
    return a.astype(np.float32 if dtype == "bfloat16" else dtype)


def both(a, dtype=None):
    """The same data as (kiln tensor, torch tensor); dtype names the tensor dtype."""
    torch = need_torch()
    dtype = dtype or str(a.dtype)
    # np.array(copy) keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d).
    k = kiln.from_numpy(np.array(a, copy=True, order="C"))
    t = torch.from_numpy(np.array(a, copy=True, order="C"))
    if dtype == "bfloat16":
        k = k.to(kiln.bfloat16)
        t = t.to(torch.bfloat16)
    return k, t


def dtype_name(x):
    return str(x.dtype).split(".")[-1]


def to_numpy(x):
    if getattr(getattr(x, "device", None), "type", "cpu") == "cuda":
        x = x.cpu()  # device-generic tests compare on the host
    if dtype_name(x) == "bfloat16":
        x = x.float()
    return np.array(x.detach().numpy() if hasattr(x, "detach") else x.numpy(), copy=True)


def assert_match(k, t, rtol=None, atol=None, check_stride=False):
    """kiln result k equals torch result t: same type structure, dtype, shape, values."""
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t), f"structure {type(k)} vs {type(t)}"
        for a, b in zip(k, t):
            assert_match(a, b, rtol, atol, check_stride)
        return
    if not hasattr(t, "dtype"):
        assert k == t or (isinstance(t, float) and np.isclose(k, t, rtol=rtol or 1e-6, atol=atol or 1e-6)), f"{k} != {t}"
        return
    assert dtype_name(k) == dtype_name(t), f"dtype {dtype_name(k)} != expected {dtype_name(t)}"
    assert tuple(k.shape) == tuple(t.shape), f"shape {tuple(k.shape)} != expected {tuple(t.shape)}"
    if check_stride:
        assert tuple(k.stride()) == tuple(t.stride()), f"stride {k.stride()} != {t.stride()}"
    a, b = to_numpy(k), to_numpy(t)
    name = dtype_name(t)
    if name in TOL:
        r, at = TOL[name]
        np.testing.assert_allclose(a, b, rtol=rtol or r, atol=atol or at, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, b)
