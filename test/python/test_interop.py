"""Interop: DLPack both ways with numpy and PyTorch (shared memory, lifetimes, errors), and the
conversion methods: dtype casts, type(), tolist, __array__ and the Python number protocols."""
import gc
import operator
import weakref

import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, assert_match, need_torch, sample

NUMPY_DTYPES = [d for d in ALL_DTYPES if d != "bfloat16"]


def allocated():
    gc.collect()
    return kiln.memory_stats()["allocated_bytes.all.current"]


# ---- DLPack: consuming ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 0, 3)])
def test_from_numpy_dlpack(dtype, shape):
    a = sample(shape, dtype, seed=1)
    k = kiln.from_dlpack(a)
    assert k.dtype == getattr(kiln, dtype) and tuple(k.shape) == shape
    np.testing.assert_array_equal(k.numpy(), a)
    if a.size:
        a.reshape(-1)[0] = a.reshape(-1)[-1] if dtype == "bool" else 1
        assert k.tolist() == a.tolist()  # shared memory


def test_from_numpy_dlpack_strided():
    a = sample((6, 8), "float32", seed=2)
    for view in (a.T, a[::2, 1::3], a[1:, :5]):
        k = kiln.from_dlpack(view)
        np.testing.assert_array_equal(k.numpy(), view)
        assert k.stride() == tuple(s // 4 for s in view.strides)
    k = kiln.from_dlpack(a.T)
    k.fill_(3)
    assert np.all(a == 3)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_from_torch(dtype):
    torch = need_torch()
    t = torch.from_numpy(sample((3, 5), "float32" if dtype == "bfloat16" else dtype, seed=3)).to(getattr(torch, dtype))
    k = kiln.from_dlpack(t)
    assert_match(k, t)
    t.zero_()
    assert_match(k, t)  # shared
    tt = t.t()
    assert kiln.from_dlpack(tt).stride() == tt.stride()


def test_from_torch_shares_both_ways():
    torch = need_torch()
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    k = kiln.from_dlpack(t)
    k.fill_(7)
    assert t.tolist() == [[7.0] * 3] * 2


def test_legacy_and_versioned_capsules():
    torch = need_torch()
    t = torch.arange(4)
    for capsule in (t.__dlpack__(), t.__dlpack__(max_version=(1, 0)), torch.utils.dlpack.to_dlpack(t)):
        k = kiln.from_dlpack(capsule)
        assert k.tolist() == [0, 1, 2, 3]
        with pytest.raises(RuntimeError, match="consumed only once"):
            kiln.from_dlpack(capsule)


def test_consumer_keeps_producer_alive():
    a = np.arange(1000, dtype=np.float64)
    alive = weakref.ref(a)
    k = kiln.from_dlpack(a)
    del a
    gc.collect()
    assert alive() is not None
    assert k.tolist()[999] == 999.0
    del k
    gc.collect()
    assert alive() is None


def test_from_dlpack_errors():
    with pytest.raises(TypeError):
        kiln.from_dlpack([1, 2])
    with pytest.raises(TypeError):
        kiln.from_dlpack(np.zeros(3, dtype=np.uint16))
    assert kiln.from_dlpack(np.zeros(3, dtype=np.complex64)).dtype == kiln.complex64  # docs/complex.md
    with pytest.raises(TypeError):
        kiln.from_dlpack(np.zeros(3, dtype=np.uint32))
    with pytest.raises(ValueError):
        kiln.from_dlpack(np.zeros(5)[::-1])
    torch = need_torch()
    with pytest.raises(BufferError):
        kiln.from_dlpack(torch.ones(2, requires_grad=True))


# ---- DLPack: producing ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_to_torch(dtype):
    torch = need_torch()
    k = kiln.from_numpy(sample((4, 3), "float32" if dtype == "bfloat16" else dtype, seed=4)).to(getattr(kiln, dtype))
    t = torch.from_dlpack(k)
    assert_match(k, t)
    t.zero_()
    assert_match(k, t)  # shared
    assert kiln.from_numpy(np.zeros((4, 3), np.float32).T).__dlpack_device__() == (1, 0)


@pytest.mark.parametrize("dtype", NUMPY_DTYPES)
def test_to_numpy(dtype):
    k = kiln.from_numpy(sample((2, 3), dtype, seed=5))
    a = np.from_dlpack(k)
    np.testing.assert_array_equal(a, k.numpy())
    assert a.dtype == np.dtype(dtype)
    if dtype != "bool":
        a[0, 0] = 9
        assert k.tolist()[0][0] == 9


def test_to_torch_strided_and_0d():
    torch = need_torch()
    a = sample((5, 7), "float64", seed=6)
    k = kiln.from_numpy(a.T)
    t = torch.from_dlpack(k)
    assert t.stride() == k.stride() and np.array_equal(t.numpy(), a.T)
    t0 = torch.from_dlpack(kiln.tensor(2.5))
    assert t0.shape == () and t0.item() == 2.5
    assert torch.from_dlpack(kiln.zeros(0, 3)).shape == (0, 3)


def test_producer_lifetime():
    torch = need_torch()
    before = allocated()
    k = kiln.arange(10000, dtype=kiln.float32)
    t = torch.from_dlpack(k)
    del k
    gc.collect()
    assert t[9999].item() == 9999.0  # the capsule's holder keeps the storage
    assert allocated() > before
    del t
    assert allocated() == before
    cap = kiln.ones(5000).__dlpack__()  # an unconsumed capsule frees its tensor too
    assert allocated() > before
    del cap
    assert allocated() == before


def test_dlpack_kwargs():
    torch = need_torch()
    k = kiln.arange(4, dtype=kiln.float32)
    legacy, versioned = k.__dlpack__(), k.__dlpack__(max_version=(1, 0))
    assert "dltensor" in repr(legacy) and "dltensor_versioned" in repr(versioned)
    assert "dltensor\"" in repr(k.__dlpack__(max_version=(0, 8)))
    copy = torch.from_dlpack(k.__dlpack__(max_version=(1, 0), copy=True))
    copy.zero_()
    assert k.tolist() == [0.0, 1.0, 2.0, 3.0]
    shared = torch.from_dlpack(k.__dlpack__(dl_device=(1, 0), copy=False))
    shared.zero_()
    assert k.tolist() == [0.0] * 4
    with pytest.raises(BufferError):
        k.__dlpack__(dl_device=(2, 0))
    with pytest.raises(ValueError):
        k.__dlpack__(stream=1)
    with pytest.raises(TypeError):
        k.__dlpack__(1)


def test_dlpack_export_errors():
    torch = need_torch()
    with pytest.raises(BufferError, match="require gradient"):
        kiln.ones(2, requires_grad=True).__dlpack__()
    with pytest.raises(BufferError):
        kiln.ones(2, device="meta").__dlpack__()
    with pytest.raises(ValueError):
        torch.from_dlpack(kiln.ones(2, device="meta"))
    with pytest.raises(ValueError, match="Unknown device type meta"):
        kiln.ones(2, device="meta").__dlpack_device__()


def test_round_trips():
    torch = need_torch()
    a = sample((3, 4), "float32", seed=7)
    k = kiln.from_dlpack(torch.from_dlpack(kiln.from_numpy(a)))
    k.fill_(1)
    assert np.all(a == 1)
    n = np.from_dlpack(kiln.from_dlpack(torch.arange(6)))
    assert n.tolist() == list(range(6))


# ---- conversions ------------------------------------------------------------------------

CASTS = ["float", "double", "half", "bfloat16", "long", "int", "short", "bool", "byte", "char"]


@pytest.mark.parametrize("src", ALL_DTYPES)
@pytest.mark.parametrize("method", CASTS)
def test_cast_methods(src, method):
    torch = need_torch()
    a = sample((3, 4), "float32" if src == "bfloat16" else src, seed=8, low=0, high=5)
    k, t = kiln.from_numpy(a).to(getattr(kiln, src)), torch.from_numpy(a.copy()).to(getattr(torch, src))
    kc, tc = getattr(k, method)(), getattr(t, method)()
    assert_match(kc, tc)
    assert (kc is k) == (tc is t)  # no copy when the dtype already matches


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_type(dtype):
    torch = need_torch()
    k, t = kiln.zeros(2, dtype=getattr(kiln, dtype)), torch.zeros(2, dtype=getattr(torch, dtype))
    assert k.type() == t.type().replace("torch", "kiln")
    assert kiln.zeros(2, dtype=getattr(kiln, dtype), device="meta").type() == \
        torch.zeros(2, dtype=getattr(torch, dtype), device="meta").type().replace("torch", "kiln")
    assert_match(k.type(kiln.int32), t.type(torch.int32))
    assert_match(k.type(t.type().replace("torch", "kiln")), t)
    assert_match(kiln.ones(2).type("kiln.DoubleTensor"), torch.ones(2).type("torch.DoubleTensor"))
    assert k.type(k.dtype) is k
    with pytest.raises(ValueError):
        k.type("kiln.NoSuchTensor")


def test_type_as_cpu_cuda():
    torch = need_torch()
    assert_match(kiln.ones(3).type_as(kiln.zeros(1, dtype=kiln.int64)), torch.ones(3).type_as(torch.zeros(1, dtype=torch.int64)))
    x = kiln.ones(3)
    assert x.type_as(kiln.zeros(2)) is x and x.cpu() is x
    with pytest.raises(RuntimeError):
        x.cuda()
    with pytest.raises(RuntimeError):
        kiln.ones(2, device="meta").cpu()
    assert kiln.ones(2).to("meta").is_meta


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (4,), (2, 3), (2, 0), (2, 1, 3)])
def test_tolist(dtype, shape):
    torch = need_torch()
    a = sample(shape, "float32" if dtype == "bfloat16" else dtype, seed=9)
    k, t = kiln.from_numpy(np.array(a)).to(getattr(kiln, dtype)), torch.from_numpy(np.array(a)).to(getattr(torch, dtype))
    kl, tl = k.tolist(), t.tolist()
    assert kl == tl
    flat = kl
    while isinstance(flat, list) and flat:
        flat = flat[0]
    if not isinstance(flat, list):
        assert type(flat) is type(t.reshape(-1)[0].item())


def test_tolist_views_and_errors():
    a = sample((4, 5), "int32", seed=10)
    assert kiln.from_numpy(a.T).tolist() == a.T.tolist()
    assert kiln.from_numpy(a[::2, 1::2]).tolist() == a[::2, 1::2].tolist()
    with pytest.raises(RuntimeError, match="meta"):
        kiln.ones(2, device="meta").tolist()


def test_array_protocol():
    torch = need_torch()
    k = kiln.arange(6, dtype=kiln.float32)
    a = np.asarray(k)
    a[0] = 5
    assert k.tolist()[0] == 5  # shares
    assert np.asarray(k, dtype=np.float64).dtype == np.float64
    assert np.array(k, copy=True) is not None and np.array(k, copy=True)[0] == 5
    c = np.array(k, copy=True)
    c[1] = -1
    assert k.tolist()[1] == 1
    assert np.add(k, 1).tolist() == (np.arange(6) + 1 + np.eye(1, 6)[0] * 5).tolist()
    for make in (lambda T: np.asarray(T.ones(2, dtype=T.bfloat16)), lambda T: np.asarray(T.ones(2, device="meta"))):
        with pytest.raises(TypeError):
            make(torch)
        with pytest.raises(TypeError):
            make(kiln)


@pytest.mark.parametrize("fn", [float, int, bool, complex, operator.index], ids=lambda f: f.__name__)
@pytest.mark.parametrize("value", [2.5, -2.7, 0.0, 3, 0, True, False, float("nan")], ids=repr)
def test_number_protocols(fn, value):
    torch = need_torch()
    for shape in [(), (1,), (1, 1)]:
        k, t = kiln.full(shape, value), torch.full(shape, value)
        try:
            expected = fn(t)
        except Exception as e:  # noqa: BLE001 - the kind is compared below
            with pytest.raises(type(e)):
                fn(k)
            continue
        got = fn(k)
        assert type(got) is type(expected)
        assert got == expected or (got != got and expected != expected)


@pytest.mark.parametrize("fn", [float, int, bool, operator.index], ids=lambda f: f.__name__)
@pytest.mark.parametrize("shape", [(2,), (0,), (2, 2)])
def test_number_protocol_errors(fn, shape):
    torch = need_torch()
    with pytest.raises(Exception) as caught:
        fn(torch.ones(shape, dtype=torch.int64))
    with pytest.raises(type(caught.value), match=str(caught.value).split("(")[0][:30]):
        fn(kiln.ones(shape, dtype=kiln.int64))
    with pytest.raises(RuntimeError):
        float(kiln.ones(1, device="meta"))


def test_item():
    torch = need_torch()
    for dtype in ALL_DTYPES:
        k, t = kiln.ones((1, 1), dtype=getattr(kiln, dtype)), torch.ones((1, 1), dtype=getattr(torch, dtype))
        assert k.item() == t.item() and type(k.item()) is type(t.item())
    with pytest.raises(RuntimeError, match="a Tensor with 3 elements cannot be converted to Scalar"):
        kiln.ones(3).item()
