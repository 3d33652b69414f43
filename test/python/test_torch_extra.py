"""torch.* functions added in kiln/_torch_extra.py, against torch: values, dtypes and errors."""
import warnings

import numpy as np
import pytest

import kiln
from oracle import need_torch

torch = need_torch()
rng = np.random.default_rng(0)
A = rng.standard_normal((3, 4)).astype(np.float32)
SQ = rng.standard_normal((2, 3, 3)).astype(np.float64)
IMG = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)

CASES = {
    "addr": lambda T: T.addr(T.from_numpy(A), T.arange(3.0), T.arange(4.0), beta=0.5, alpha=2),
    "addr_beta0": lambda T: T.addr(T.full((3, 4), float("nan")), T.arange(3.0), T.arange(4.0), beta=0),
    "addbmm": lambda T: T.addbmm(T.from_numpy(A), T.ones(2, 3, 5), T.ones(2, 5, 4), beta=2, alpha=0.5),
    "inner": lambda T: (T.inner(T.from_numpy(A), T.from_numpy(A)), T.inner(T.tensor(2.0), T.from_numpy(A))),
    "vdot": lambda T: (T.vdot(T.tensor([1 + 1j, 2j]), T.tensor([1 + 0j, 1j])), T.vdot(T.arange(3.0), T.arange(3.0))),
    "diagflat": lambda T: (T.diagflat(T.from_numpy(A[:2, :2].copy())), T.diagflat(T.arange(3.0), -1)),
    "matrix_power": lambda T: (T.matrix_power(T.from_numpy(SQ), 0), T.matrix_power(T.from_numpy(SQ), 5),
                               T.matrix_power(T.from_numpy(SQ), -3)),
    "chain_matmul": lambda T: T.chain_matmul(T.from_numpy(A), T.from_numpy(A).t(), T.from_numpy(A)),
    "unravel_index": lambda T: (T.unravel_index(T.tensor([[5, 7], [11, 0]]), (3, 4)), T.unravel_index(T.tensor(9), 4)),
    "gradient": lambda T: (T.gradient(T.from_numpy(A), spacing=0.5), T.gradient(T.from_numpy(A), dim=1, edge_order=2),
                           T.gradient(T.arange(5) ** 2, spacing=[2.0])),
    "mvlgamma": lambda T: T.mvlgamma(T.tensor([2.5, 3.0, 7.0]), 3),
    "range": lambda T: (T.range(0, 1, 0.25), T.range(1, 4), T.range(3, 0, -1.5)),
    "fill": lambda T: T.fill(T.from_numpy(A), 2.5),
    "norms": lambda T: (T.batch_norm(T.from_numpy(IMG), T.ones(3), T.zeros(3), T.zeros(3), T.ones(3), True, 0.1, 1e-5, True),
                        T.group_norm(T.from_numpy(IMG), 3, T.ones(3) * 2, None, 1e-5, True),
                        T.instance_norm(T.from_numpy(IMG), None, None, None, None, True, 0.1, 1e-5, True)),
    "functional_aliases": lambda T: (T.conv2d(T.from_numpy(IMG), T.ones(2, 3, 3, 3), None, 1, 1),
                                     T.max_pool2d(T.from_numpy(IMG), 2), T.selu(T.from_numpy(A)), T.celu(T.from_numpy(A), 0.5),
                                     T.prelu(T.from_numpy(A), T.tensor([0.2])), T.hardshrink(T.from_numpy(A), 0.3),
                                     T.cosine_similarity(T.from_numpy(A), T.from_numpy(A) + 1), T.pixel_shuffle(T.from_numpy(IMG).repeat(1, 4, 1, 1)[:, :4], 2),
                                     T.threshold(T.from_numpy(A), 0.1, 5.0), T.pdist(T.from_numpy(A))),
    "predicates": lambda T: (T.is_nonzero(T.tensor([2])), T.is_signed(T.ones(1, dtype=T.uint8)), T.is_signed(T.ones(1)),
                             T.is_same_size(T.ones(2, 3), T.zeros(2, 3)), T.get_device(T.ones(1))),
}


def _flat(o):
    if isinstance(o, (tuple, list)):
        return [y for x in o for y in _flat(x)]
    return [o]


@pytest.mark.parametrize("name", sorted(CASES))
def test_as_torch(name):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got, want = _flat(CASES[name](kiln)), _flat(CASES[name](torch))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        if isinstance(w, torch.Tensor):
            assert str(g.dtype).split(".")[-1] == str(w.dtype).split(".")[-1]
            np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5, equal_nan=True)
        else:
            assert g == w


def test_errors_and_sharing():
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        kiln.is_nonzero(kiln.ones(2))
    with pytest.raises(TypeError, match="integer dtype"):
        kiln.unravel_index(kiln.tensor([1.0]), (2,))
    with pytest.raises(ValueError, match="negative values"):
        kiln.unravel_index(kiln.tensor([1]), (2, -1))
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        kiln.range(0, 2)
    assert kiln.typename(kiln.ones(1)) == "kiln.FloatTensor"
    assert kiln.typename(kiln.nn.Linear(1, 1)).endswith("Linear")
    buf = bytearray(np.array([1.0, 2.0], np.float32).tobytes())
    t = kiln.frombuffer(buf, dtype=kiln.float32)
    buf[0:4] = np.array([3.0], np.float32).tobytes()
    assert t.tolist() == [3.0, 2.0]  # shares the buffer
    a = np.arange(3.0)
    x = kiln.asarray(a)
    a[0] = 9
    assert x.tolist() == [9.0, 1.0, 2.0] and kiln.asarray(a, copy=True).data_ptr() != x.data_ptr()
    assert kiln.asarray([1, 2]).dtype == kiln.int64 and kiln.asarray(x, dtype=kiln.float32).dtype == kiln.float32
    kiln.set_num_interop_threads(2)
    assert kiln.get_num_interop_threads() == 2
    kiln.set_num_interop_threads(1)
    assert kiln.set_flush_denormal(True) is False
    prev = kiln.get_default_dtype()
    try:
        with pytest.warns(UserWarning, match="deprecated"):
            kiln.set_default_tensor_type("torch.DoubleTensor")
        assert kiln.get_default_dtype() == kiln.float64
    finally:
        kiln.set_default_dtype(prev)
