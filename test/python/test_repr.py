"""repr(tensor) is PyTorch's text with "torch" read as "kiln"."""
import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, FLOAT_DTYPES, need_torch, sample


def both(a, dtype=None):
    """oracle.both, keeping 0-d arrays 0-d (np.ascontiguousarray makes them 1-d)."""
    torch = need_torch()
    k, t = kiln.from_numpy(np.array(a, copy=True)), torch.from_numpy(np.array(a, copy=True))
    if dtype == "bfloat16":
        k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
    return k, t


def assert_same_repr(k, t):
    assert repr(k) == repr(t).replace("torch", "kiln")
    assert str(k) == str(t).replace("torch", "kiln")


FLOAT_ARRAYS = {
    "simple": [1.0, 2.0, 3.0],
    "fraction": [[0.1234, -1.5], [2.25, 3.0]],
    "small": [1e-5, 2e-3, 0.5],
    "large": [1e9, 2.0, 3.5],
    "wide_ratio": [1.0, 1500.0],
    "ints_big": [1e8, 3e8],
    "negative": [-0.5, -1234.5678, 7.0],
    "zeros": [0.0, 0.0, -0.0],
    "nan_inf": [float("nan"), float("inf"), -float("inf"), 1.5],
    "only_nonfinite": [float("nan"), float("inf")],
    "whole_with_nan": [1.0, float("nan"), -3.0],
    "tiny": [1e-30, 1e-31],
    "huge_sci": [1.5e30, -2.5e-30],
    "precise": [0.123456789, 1.0 / 3.0],
    "scalar": 2.5,
    "scalar_whole": 7.0,
    "scalar_nan": float("nan"),
}


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("name", sorted(FLOAT_ARRAYS))
def test_float_values(name, dtype):
    a = np.array(FLOAT_ARRAYS[name], dtype=np.float64)
    if dtype == "float16" and name in ("large", "tiny", "huge_sci", "ints_big"):
        pytest.skip("out of float16 range")
    k, t = both(a.astype(np.float32 if dtype == "bfloat16" else dtype), dtype)
    assert_same_repr(k, t)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(), (1,), (5,), (2, 3), (2, 1, 3), (2, 2, 2, 2)])
def test_shapes_and_dtypes(dtype, shape):
    k, t = both(sample(shape, dtype, seed=len(shape)), dtype)
    assert_same_repr(k, t)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(0,), (2, 0), (0, 3, 0)])
def test_empty(dtype, shape):
    k, t = both(np.zeros(shape, dtype=np.float32 if dtype == "bfloat16" else dtype), dtype)
    assert_same_repr(k, t)


@pytest.mark.parametrize("dtype", ["int64", "float32", "int8", "bool", "float64"])
@pytest.mark.parametrize("shape", [(1001,), (2000,), (40, 30), (11, 11, 11), (3, 400), (400, 3), (2, 2, 300)])
def test_summarized(dtype, shape):
    a = sample(shape, dtype, seed=3, low=-100, high=100)
    if dtype.startswith("float"):
        a = a * np.float32(1.37)
    k, t = both(a, dtype)
    assert_same_repr(k, t)


def test_summary_formats_only_shown_values():
    # The hidden middle holds a huge value: the shown edges must not switch to scientific notation.
    a = np.ones(3000, dtype=np.float32)
    a[1500] = 1e12
    k, t = both(a)
    assert_same_repr(k, t)


@pytest.mark.parametrize("n", [8, 20, 30, 81])
def test_line_wrapping(n):
    k, t = both(np.linspace(-100, 100, n).astype(np.float32))
    assert_same_repr(k, t)
    k, t = both(np.arange(n * 3).reshape(3, n) * 1000)
    assert_same_repr(k, t)


def test_non_contiguous():
    torch = need_torch()
    a = sample((3, 4), "float32", seed=9)
    assert_same_repr(kiln.from_numpy(a.T), torch.from_numpy(a.T))
    assert_same_repr(kiln.from_numpy(a[:, ::2]), torch.from_numpy(a[:, ::2]))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (), (0,)])
def test_meta(dtype, shape):
    torch = need_torch()
    k = kiln.empty(shape, dtype=getattr(kiln, dtype), device="meta")
    t = torch.empty(shape, dtype=getattr(torch, dtype), device="meta")
    assert_same_repr(k, t)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
def test_requires_grad(dtype):
    torch = need_torch()
    k = kiln.ones(2, 3, dtype=getattr(kiln, dtype), requires_grad=True)
    t = torch.ones(2, 3, dtype=getattr(torch, dtype), requires_grad=True)
    assert_same_repr(k, t)
    # a long first line pushes the suffixes onto their own lines
    k = kiln.full((12,), 1 / 3, dtype=getattr(kiln, dtype), requires_grad=True)
    t = torch.full((12,), 1 / 3, dtype=getattr(torch, dtype), requires_grad=True)
    assert_same_repr(k, t)


def test_created_tensors():
    torch = need_torch()
    for make in (lambda T: T.arange(10), lambda T: T.arange(0, 1, 0.1), lambda T: T.eye(3),
                 lambda T: T.linspace(-1, 1, 7, dtype=T.float64), lambda T: T.full((2, 2), True),
                 lambda T: T.tensor([[1, 2], [3, 4]], dtype=T.int16), lambda T: T.zeros(2, 3, dtype=T.bfloat16)):
        assert_same_repr(make(kiln), make(torch))


@pytest.mark.parametrize("options", [dict(precision=2), dict(threshold=5), dict(edgeitems=1, threshold=5),
                                     dict(linewidth=40), dict(sci_mode=True), dict(sci_mode=False),
                                     dict(profile="short"), dict(edgeitems=0, threshold=5)])
def test_printoptions(options):
    torch = need_torch()
    a = sample((4, 12), "float32", seed=4) * np.float32(123.4)
    k, t = both(a)
    ki, ti = both(np.arange(20))
    with kiln.printoptions(**options), torch._tensor_str.printoptions(**options):
        assert_same_repr(k, t)
        assert_same_repr(ki, ti)
    assert kiln.get_printoptions()["precision"] == 4
    assert_same_repr(k, t)


def test_format():
    torch = need_torch()
    k, t = both(np.array(2.5, dtype=np.float32))
    assert f"{k:.2f}" == f"{t:.2f}" == "2.50"
    assert f"{kiln.tensor(3)}" == "3"
    assert format(kiln.ones(2), "") == format(torch.ones(2), "").replace("torch", "kiln")
    with pytest.raises(TypeError):
        format(kiln.ones(2), ".2f")
