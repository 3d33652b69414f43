"""Shared helpers of the indexing-op tests (test_scatter.py, test_sorting.py, test_einsum.py):
the same data in kiln and PyTorch, results compared exactly, errors compared by type."""
import kiln
import numpy as np
import pytest
from oracle import assert_match, need_torch

torch = need_torch()


def make(a, dtype=None, layout="contiguous"):
    """(kiln, torch) tensors holding array `a`: bfloat16 from float32 data; layout "transposed"
    is a numpy a.T-style view (non-contiguous), "sliced" every other element of the last dim."""
    a = np.asarray(a)
    if layout == "contiguous":
        k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
    elif layout == "transposed":
        base = np.ascontiguousarray(np.swapaxes(a, -1, -2))
        k, t = (T.from_numpy(np.swapaxes(base.copy(), -1, -2)) for T in (kiln, torch))
    else:
        base = np.ascontiguousarray(np.repeat(a, 2, axis=-1))
        k, t = (T.from_numpy(base.copy()[..., ::2]) for T in (kiln, torch))
    if dtype == "bfloat16":
        k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
    return k, t


def idx(values, dtype=np.int64):
    """An index array, as (kiln, torch) tensors."""
    return make(np.array(values, dtype))


def check(k, t, **kw):
    if isinstance(t, (tuple, list)):
        assert isinstance(k, (tuple, list)) and len(k) == len(t)
        for a, b in zip(k, t):
            check(a, b, **kw)
        return
    if hasattr(t, "dtype") and t.dtype == torch.bfloat16:
        assert k.dtype == kiln.bfloat16 and tuple(k.shape) == tuple(t.shape)
        k, t = k.to(kiln.float32), t.to(torch.float32)
    assert_match(k, t, **kw)


def run(fn, *tensors, **kw):
    """fn(module, *tensors) in both libraries; the results must match."""
    k = fn(kiln, *[a for a, _ in tensors])
    t = fn(torch, *[b for _, b in tensors])
    check(k, t, **kw)
    return k, t


def same_error(fn, *tensors):
    """fn raises in PyTorch, and kiln raises the same exception type."""
    with pytest.raises(Exception) as expected:
        fn(torch, *[b for _, b in tensors])
    with pytest.raises(Exception) as got:
        fn(kiln, *[a for a, _ in tensors])
    assert type(got.value) is type(expected.value), (
        f"{type(got.value)} ({got.value}) vs {type(expected.value)} ({expected.value})"
    )
    return got.value


def meta_shape(fn, *shapes, dtype="float32"):
    """fn on kiln meta tensors gives the shape and dtype of PyTorch's CPU result."""
    ks = [kiln.empty(s, dtype=getattr(kiln, dtype), device="meta") for s in shapes]
    ts = [torch.zeros(s, dtype=getattr(torch, dtype)) for s in shapes]
    k, t = fn(kiln, *ks), fn(torch, *ts)
    for a, b in zip(k, t) if isinstance(t, (tuple, list)) else [(k, t)]:
        assert a.is_meta and tuple(a.shape) == tuple(b.shape)
        assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
