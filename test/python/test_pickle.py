"""pickle of tensors, parameters, modules and devices (what multiprocessing queues, DataLoader
workers and copy.copy rely on), with torch's semantics: the storage and the view on it,
requires_grad, subclasses and Python attributes survive; autograd history does not."""
import copy
import pickle

import numpy as np
import pytest

import kiln
from oracle import need_torch


class Tagged(kiln.Tensor):
    """A tensor subclass at module level (pickle finds classes by name)."""


def roundtrip(obj):
    return pickle.loads(pickle.dumps(obj))


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.bfloat16, kiln.float16, kiln.int64,
                                   kiln.int8, kiln.uint8, kiln.bool, kiln.complex64])
def test_tensor_round_trip_keeps_values_dtype_and_strides(dtype):
    base = (kiln.arange(12.) - 4).reshape(3, 4).to(dtype)
    for t in (base, base.t(), base[1:, ::2]):
        u = roundtrip(t)
        assert u.dtype == t.dtype and u.shape == t.shape and tuple(u.stride()) == tuple(t.stride())
        assert u.tolist() == t.tolist()
        assert u.data_ptr() != t.data_ptr()


def test_strides_and_offsets_as_torch():
    torch = need_torch()
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    for T in (torch, kiln):
        v = T.from_numpy(x).permute(2, 0, 1)[1:, :, 1:]
        u = roundtrip(v)
        if T is torch:
            expected = (tuple(u.stride()), u.storage_offset(), u.tolist())
        else:
            assert (tuple(u.stride()), u.storage_offset(), u.tolist()) == expected


def test_requires_grad_survives_and_history_does_not():
    x = kiln.ones(3, requires_grad=True)
    y = roundtrip(x * 2)
    assert y.requires_grad and y.is_leaf and y.grad_fn is None and y.tolist() == [2.0, 2.0, 2.0]
    assert not roundtrip(kiln.ones(2)).requires_grad


def test_parameter_subclass_and_attributes():
    p = kiln.nn.Parameter(kiln.ones(2))
    p.no_decay = True
    q = roundtrip(p)
    assert type(q) is kiln.nn.Parameter and q.requires_grad and q.no_decay and q.tolist() == [1.0, 1.0]
    frozen = roundtrip(kiln.nn.Parameter(kiln.ones(2), requires_grad=False))
    assert not frozen.requires_grad
    t = kiln.arange(3.).as_subclass(Tagged)
    t.tag = "x"
    u = roundtrip(t)
    assert type(u) is Tagged and u.tag == "x" and u.tolist() == [0.0, 1.0, 2.0]


def test_as_subclass_shares_data_and_rejects_non_tensor_types():
    class Sub(kiln.Tensor):
        def __init__(self, *args):
            raise AssertionError("as_subclass does not call __init__")

    t = kiln.zeros(2)
    s = t.as_subclass(Sub)
    s.add_(1)
    assert type(s) is Sub and t.tolist() == [1.0, 1.0]
    with pytest.raises(TypeError, match="as_subclass"):
        t.as_subclass(int)


def test_module_pickles_with_its_weights_and_buffers():
    kiln.manual_seed(0)
    m = kiln.nn.Sequential(kiln.nn.Linear(3, 4), kiln.nn.BatchNorm1d(4))
    m(kiln.randn(5, 3))
    m2 = roundtrip(m)
    for (k, a), (k2, b) in zip(m.state_dict().items(), m2.state_dict().items()):
        assert k == k2 and a.tolist() == b.tolist()
    assert isinstance(m2[0].weight, kiln.nn.Parameter)
    x = kiln.randn(2, 3)
    assert m2.eval()(x).tolist() == m.eval()(x).tolist()


def test_meta_device_and_copy():
    m = roundtrip(kiln.empty(2, 3, device="meta"))
    assert m.is_meta and m.shape == (2, 3)
    assert roundtrip(kiln.device("cuda:1")) == kiln.device("cuda:1")
    assert repr(roundtrip(kiln.device("cpu"))) == "device(type='cpu')"


def test_copy_copy_shares_data_as_torch():
    torch = need_torch()
    for T in (torch, kiln):
        t = T.arange(4.)
        c = copy.copy(t)
        c.add_(1)
        assert t.tolist() == [1.0, 2.0, 3.0, 4.0]
        p = T.nn.Parameter(T.ones(2))
        p.tag = 1
        q = copy.copy(p)
        assert type(q) is T.nn.Parameter and q.requires_grad and q.is_leaf and q.tag == 1
        with T.no_grad():
            q.mul_(3)
        assert p.tolist() == [3.0, 3.0]
