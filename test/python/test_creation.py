"""Creation ops against PyTorch: kiln.tensor's inference, factories, ranges, *_like and new_*."""
import numpy as np
import pytest

import kiln
from oracle import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_match, need_torch, sample

# PyTorch warns about copy-constructing from tensors and lists of arrays, which these tests do.
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def run_both(make):
    """make(T) with T = kiln and T = torch, compared exactly (dtype, shape, values)."""
    torch = need_torch()
    k, t = make(kiln), make(torch)
    assert_match(k, t)
    return k, t


def on(T, device):
    """The device a device-generic test creates on: `device` for kiln, the CPU for the oracle."""
    return device if T is kiln else "cpu"


def same_error(make, match=None):
    """make(T) raises in PyTorch; kiln raises the same kind (RuntimeError for torch's
    NotImplementedError on unsupported dtypes, a RuntimeError subclass)."""
    torch = need_torch()
    with pytest.raises(Exception) as caught:
        make(torch)
    kind = type(caught.value)
    if kind is NotImplementedError:
        kind = RuntimeError
    with pytest.raises(kind, match=match):
        make(kiln)


# ---- kiln.tensor --------------------------------------------------------------------------

DATA = [
    1, 2.5, True, [1, 2, 3], [1, 2.0], [True, 1], [True, False], [1, True, 2.5], [], [[], []],
    [[1, 2], [3, 4]], [[1, 2], (3, 4)], ((1.5,), (2.5,)), range(4), [[[1]], [[2]]], -2 ** 63,
    [2 ** 63 - 1, 1.0], [1e40], [float("nan"), float("inf")],
]


@pytest.mark.parametrize("data", DATA, ids=repr)
def test_tensor_inference(data):
    run_both(lambda T: T.tensor(data))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("data", [[1, 0, 2], [[1.5, -0.0], [2.7, 3.2]], [True, False], 3, 0.5, [[]]], ids=repr)
def test_tensor_dtype(data, dtype):
    if dtype == "uint8" and data == [[1.5, -0.0], [2.7, 3.2]]:
        data = [[1.5, 0.0], [2.7, 3.2]]
    run_both(lambda T: T.tensor(data, dtype=getattr(T, dtype)))


def test_tensor_python_type_dtypes():
    run_both(lambda T: T.tensor([1], dtype=float))
    run_both(lambda T: T.tensor([1.7], dtype=int))
    run_both(lambda T: T.tensor([2], dtype=bool))


def test_tensor_numpy_values():
    run_both(lambda T: T.tensor(np.float64(1.5)))
    run_both(lambda T: T.tensor([np.float64(1.5), 1]))
    run_both(lambda T: T.tensor([np.int32(1), 2]))
    run_both(lambda T: T.tensor([np.float16(1), np.float16(2)]))
    run_both(lambda T: T.tensor([np.uint8(1), np.int8(1)]))
    run_both(lambda T: T.tensor(np.bool_(True)))
    run_both(lambda T: T.tensor([np.array([1.0, 2.0]), [3, 4]]))


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tensor_from_numpy_array_copies(dtype):
    a = sample((3, 4), dtype if dtype != "bfloat16" else "float32", seed=1)
    k, t = run_both(lambda T: T.tensor(a))
    run_both(lambda T: T.tensor(a.T))
    run_both(lambda T: T.tensor(a[1:, ::2]))
    same_error(lambda T: T.tensor(a[::-1]))  # negative strides
    run_both(lambda T: T.tensor(a, dtype=getattr(T, dtype)))
    before = a.copy()
    k.fill_(1)
    np.testing.assert_array_equal(a, before)


def test_tensor_from_tensors():
    run_both(lambda T: T.tensor([T.tensor(1.0), T.tensor(2.0)]))
    run_both(lambda T: T.tensor([T.tensor([1.0]), T.tensor([2.0])]))
    run_both(lambda T: T.tensor([T.tensor(1, dtype=T.int32), T.tensor(2, dtype=T.int16)]))
    run_both(lambda T: T.tensor([T.tensor(1.5, dtype=T.float64), 1]))
    run_both(lambda T: T.tensor([[T.tensor(1.0)], [2.0]]))
    src = kiln.tensor([1, 2])
    copy = kiln.tensor(src)
    copy.fill_(7)
    assert src.tolist() == [1, 2]
    run_both(lambda T: T.tensor(T.tensor([1, 2]), dtype=T.float16))


@pytest.mark.parametrize("make", [
    lambda T: T.tensor([[1, 2], [3]]),
    lambda T: T.tensor([[[1, 2]], [[3]]]),
    lambda T: T.tensor([[1, 2], 3]),
    lambda T: T.tensor([1, [2, 3]]),
    lambda T: T.tensor("abc"),
    lambda T: T.tensor(b"ab"),
    lambda T: T.tensor(["a"]),
    lambda T: T.tensor(None),
    lambda T: T.tensor([1, None]),
    lambda T: T.tensor({1: 2}),
    lambda T: T.tensor(2 ** 63),
    lambda T: T.tensor([1, 2 ** 64]),
    lambda T: T.tensor([300], dtype=T.uint8),
    lambda T: T.tensor([128], dtype=T.int8),
    lambda T: T.tensor([-129], dtype=T.int8),
    lambda T: T.tensor([1e10], dtype=T.int32),
    lambda T: T.tensor([-1.5], dtype=T.uint8),
    lambda T: T.tensor(float("nan"), dtype=T.int64),
    lambda T: T.tensor([T.tensor([1.0, 2.0]), T.tensor([3.0])]),
    lambda T: T.tensor([np.array(1.5), 2]),
    lambda T: T.tensor(np.array(["a"])),
    lambda T: T.tensor([1, 2], requires_grad=True),
    lambda T: T.tensor(1, 2),
    lambda T: T.tensor([1], dtype="float32"),
], ids=range(24))
def test_tensor_errors(make):
    same_error(make)


def test_tensor_error_messages():
    with pytest.raises(ValueError, match=r"expected sequence of length 2 at dim 1 \(got 1\)"):
        kiln.tensor([[1, 2], [3]])
    with pytest.raises(RuntimeError, match="value cannot be converted to type uint8 without overflow"):
        kiln.tensor([300], dtype=kiln.uint8)
    with pytest.raises(RuntimeError, match="Could not infer dtype of NoneType"):
        kiln.tensor([None])


def test_tensor_unsigned_wraps_negative_ints():
    run_both(lambda T: T.tensor([-1, -255], dtype=T.uint8))


def test_tensor_keywords():
    torch = need_torch()
    k = kiln.tensor([1.0, 2.0], requires_grad=True)
    assert k.requires_grad and not kiln.tensor([1.0]).requires_grad
    m = kiln.tensor([[1, 2]], device="meta")
    assert m.is_meta and tuple(m.shape) == (1, 2) and m.dtype == kiln.int64
    assert kiln.tensor([1], device=kiln.device("cpu")).device.type == "cpu"
    run_both(lambda T: T.tensor(data=[1, 2]))
    assert repr(kiln.tensor(5, device="meta")) == repr(torch.tensor(5, device="meta")).replace("torch", "kiln")


def test_as_tensor_shares():
    a = np.arange(6, dtype=np.float32)
    k = kiln.as_tensor(a)
    a[0] = 42
    assert k.tolist()[0] == 42
    assert kiln.as_tensor(k) is k
    assert kiln.as_tensor(k, dtype=kiln.float32) is k
    run_both(lambda T: T.as_tensor(a, dtype=T.float64))
    run_both(lambda T: T.as_tensor([1, 2]))
    same_error(lambda T: T.as_tensor(a[::-2]))
    assert kiln.as_tensor(a, device="meta").is_meta


# ---- zeros / ones / full / empty ----------------------------------------------------------

@pytest.mark.parametrize("name", ["zeros", "ones"])
@pytest.mark.parametrize("args,kwargs", [
    (((2, 3),), {}), (([2, 3],), {}), ((2, 3), {}), ((), {"size": (2, 3)}), (((),), {}), (([],), {}),
    ((0,), {}), ((2, 0, 3), {}), ((4,), {"dtype": "int16"}), ((2, 2), {"dtype": "bool"}),
    ((np.int64(2),), {}), ((3,), {"dtype": "bfloat16"}),
], ids=repr)
def test_zeros_ones(name, args, kwargs, device):
    def make(T):
        kw = {k: getattr(T, v) if k == "dtype" else v for k, v in kwargs.items()}
        return getattr(T, name)(*args, **kw, device=on(T, device))
    run_both(make)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_factories_every_dtype(dtype, device):
    run_both(lambda T: T.zeros(2, 3, dtype=getattr(T, dtype), device=on(T, device)))
    run_both(lambda T: T.ones(3, dtype=getattr(T, dtype), device=on(T, device)))
    run_both(lambda T: T.full((2, 2), 1, dtype=getattr(T, dtype), device=on(T, device)))
    run_both(lambda T: T.full((2,), True, dtype=getattr(T, dtype), device=on(T, device)))
    e = kiln.empty(2, 3, dtype=getattr(kiln, dtype), device=device)
    assert e.dtype == getattr(kiln, dtype) and tuple(e.shape) == (2, 3)
    assert e.device.type == kiln.device(device).type


@pytest.mark.parametrize("fill", [True, 3, 3.5, -2, 0.0, float("inf")], ids=repr)
def test_full_dtype_inference(fill, device):
    run_both(lambda T: T.full((2, 3), fill, device=on(T, device)))
    run_both(lambda T: T.full([2], fill, dtype=T.float64, device=on(T, device)))


@pytest.mark.parametrize("make", [
    lambda T: T.full((2,), 300, dtype=T.uint8),
    lambda T: T.full((2,), 128, dtype=T.int8),
    lambda T: T.full((2,), 2 ** 31, dtype=T.int32),
    lambda T: T.full((2,), float("nan"), dtype=T.int32),
    lambda T: T.full((2,), float("nan"), dtype=T.int64),
    lambda T: T.full((2,), 1e6, dtype=T.float16),
    lambda T: T.full((2,), 1e300, dtype=T.float32),
    lambda T: T.zeros(2, dtype=T.int16).fill_(70000),
    lambda T: T.scalar_tensor(300, dtype=T.uint8),
    lambda T: T.zeros(2, -1),
    lambda T: T.zeros(2.5),
    lambda T: T.zeros((2, 3), (4,)),
    lambda T: T.zeros(2, dtype=T.int64, requires_grad=True),
    lambda T: T.ones(2, dtype=T.bool, requires_grad=True),
], ids=range(14))
def test_factory_errors(make):
    same_error(make)


def test_full_wraps_negative_into_unsigned():
    run_both(lambda T: T.full((2,), -1, dtype=T.uint8))
    run_both(lambda T: T.full((2,), 1.5, dtype=T.int32))
    run_both(lambda T: T.full((2,), 2.5, dtype=T.bool))
    run_both(lambda T: T.zeros(2, dtype=T.bool).fill_(2))


def test_factory_keywords():
    z = kiln.zeros(2, requires_grad=True)
    assert z.requires_grad
    m = kiln.ones(2, 3, device="meta", dtype=kiln.int8)
    assert m.is_meta and m.dtype == kiln.int8 and tuple(m.shape) == (2, 3)
    assert kiln.full((2,), 1.5, device="meta").is_meta
    run_both(lambda T: T.empty_strided((2, 3), (1, 2)).fill_(1))
    assert kiln.empty_strided((2, 3), (1, 2)).stride() == (1, 2)


@pytest.mark.parametrize("args,kwargs", [
    ((1,), {}), ((True,), {}), ((2.5,), {"dtype": "float64"}), ((3,), {"dtype": "int32"}), ((3,), {"dtype": "float16"}),
], ids=repr)
def test_scalar_tensor(args, kwargs):
    run_both(lambda T: T.scalar_tensor(*args, **{k: getattr(T, v) for k, v in kwargs.items()}))


# ---- arange / linspace / eye --------------------------------------------------------------

ARANGE = [
    ((5,), {}), ((5.0,), {}), ((1, 4), {}), ((0, 1, 0.1), {}), ((1, 2.5, 0.5), {}), ((0, 10, 3), {}),
    ((10, 0, -3), {}), ((2, 2), {}), ((True,), {}), ((np.int64(3),), {}), ((5,), {"dtype": "float16"}),
    ((0, 5.5), {"dtype": "int64"}), ((0.5, 5), {"dtype": "int64"}), ((-0.5, 5, 1.5), {"dtype": "int32"}),
    ((0, 5, 1.5), {"dtype": "int64"}), ((0, 5.9, 2), {"dtype": "int64"}), ((-2.5, 2.5), {"dtype": "int64"}),
    ((0, 2 ** 62, 2 ** 61), {}), ((0, 1, 0.3), {"dtype": "float16"}), ((0, 1, 0.1), {"dtype": "float64"}),
    ((-1.0, 1.0, 0.01), {}), ((0, 3, 1), {"dtype": "uint8"}), ((-3, 0), {"dtype": "uint8"}),
    ((0, 300, 100), {"dtype": "int8"}), ((0, 10, 0.25), {"dtype": "bfloat16"}), ((), {"start": 1, "end": 3}),
    ((), {"end": 3}), ((1, 3), {"step": 0.5}), ((-7, 7, 0.7), {}), ((0, 100000, 0.1), {}),
]


@pytest.mark.parametrize("args,kwargs", ARANGE, ids=repr)
def test_arange(args, kwargs, device):
    def make(T):
        return T.arange(*args, **{k: getattr(T, v) if k == "dtype" else v for k, v in kwargs.items()},
                        device=on(T, device))
    run_both(make)


def test_arange_scalar_tensors():
    run_both(lambda T: T.arange(T.tensor(3)))
    run_both(lambda T: T.arange(T.tensor(3.0)))


@pytest.mark.parametrize("make", [
    lambda T: T.arange(0, 10, 0), lambda T: T.arange(0, -10, 1), lambda T: T.arange(float("inf")),
    lambda T: T.arange(0, float("nan")), lambda T: T.arange(0, 5, dtype=T.bool),
    lambda T: T.arange(0, 1e20, 1), lambda T: T.arange(0.5, 5, 0.5, dtype=T.int64),
], ids=range(7))
def test_arange_errors(make):
    same_error(make)


@pytest.mark.parametrize("args,dtype", [
    ((0, 1, 5), None), ((0, 10, 5), "int64"), ((0, 1, 1), None), ((0, 1, 0), None), ((3, -3, 7), None),
    ((0, 1, 3), "float64"), ((0, 10, 4), "int32"), ((10, 0, 4), "int64"), ((0, 255, 7), "uint8"),
    ((-1, 1, 11), "float16"), ((-1, 1, 11), "bfloat16"), ((-5.5, 1e3, 1000), None), ((2, 2, 4), None),
    ((0, 1, 101), "float64"),
], ids=repr)
def test_linspace(args, dtype, device):
    run_both(lambda T: T.linspace(*args, **({"dtype": getattr(T, dtype)} if dtype else {}),
                                  device=on(T, device)))


@pytest.mark.parametrize("make", [
    lambda T: T.linspace(0, 1, -1), lambda T: T.linspace(0, 1, 5, dtype=T.bool),
    lambda T: T.linspace(0, 300, 3, dtype=T.uint8),
], ids=range(3))
def test_linspace_errors(make):
    same_error(make)


@pytest.mark.parametrize("args,kwargs", [
    ((3,), {}), ((2, 3), {}), ((3, 2), {}), ((0,), {}), ((), {"n": 2, "m": 1}), ((3,), {"dtype": "bool"}),
    ((2, 3), {"dtype": "float16"}), ((4,), {"dtype": "int32"}),
], ids=repr)
def test_eye(args, kwargs, device):
    run_both(lambda T: T.eye(*args, **{k: getattr(T, v) if k == "dtype" else v for k, v in kwargs.items()},
                             device=on(T, device)))


def test_eye_errors():
    same_error(lambda T: T.eye(-1), match="n must be greater or equal to 0, got -1")
    same_error(lambda T: T.eye(2, -1), match="m must be greater or equal to 0, got -1")
    m = kiln.eye(3, device="meta")
    assert m.is_meta and tuple(m.shape) == (3, 3)


def test_ranges_on_meta():
    for make in (lambda T: T.arange(0, 1, 0.1, device="meta"), lambda T: T.linspace(0, 1, 7, device="meta")):
        torch = need_torch()
        k, t = make(kiln), make(torch)
        assert k.is_meta and tuple(k.shape) == tuple(t.shape) and str(k.dtype)[5:] == str(t.dtype)[6:]


# ---- *_like and new_* ---------------------------------------------------------------------

def like_sources(T, dtype):
    a = sample((3, 4), dtype if dtype != "bfloat16" else "float32", seed=2)
    base = T.from_numpy(a.copy())
    if dtype == "bfloat16":
        base = base.to(T.bfloat16)
    return [
        base,
        T.from_numpy(a.T.copy().T) if dtype != "bfloat16" else base,  # transposed strides
        T.from_numpy(a[:, ::2]),                                       # gappy: gets contiguous strides
        T.from_numpy(a[0:1, :]),                                       # size-1 dim keeps its stride
        T.zeros(0, 3),
        T.zeros(()),
    ]


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_like_ops(dtype):
    torch = need_torch()
    for k, t in zip(like_sources(kiln, dtype), like_sources(torch, dtype)):
        assert_match(kiln.zeros_like(k), torch.zeros_like(t), check_stride=True)
        assert_match(kiln.ones_like(k), torch.ones_like(t), check_stride=True)
        assert_match(kiln.full_like(k, 7), torch.full_like(t, 7), check_stride=True)
        assert_match(kiln.full_like(k, fill_value=1, dtype=kiln.int8), torch.full_like(t, fill_value=1, dtype=torch.int8),
                     check_stride=True)
        assert_match(kiln.ones_like(k, dtype=kiln.float64), torch.ones_like(t, dtype=torch.float64), check_stride=True)
        e = kiln.empty_like(k)
        assert e.dtype == k.dtype and e.shape == k.shape
        assert e.stride() == torch.empty_like(t).stride()


def test_like_keywords():
    run_both(lambda T: T.full_like(T.zeros(2, dtype=T.int64), 2.7))
    run_both(lambda T: T.full_like(T.zeros(2, dtype=T.int64), True))
    run_both(lambda T: T.full_like(T.zeros(2, 3), 2.5, dtype=T.int64))
    m = kiln.zeros_like(kiln.ones(3, 2), device="meta")
    assert m.is_meta and tuple(m.shape) == (3, 2)
    m2 = kiln.ones_like(kiln.zeros(3, device="meta"))
    assert m2.is_meta
    assert kiln.zeros_like(kiln.ones(2), requires_grad=True).requires_grad
    same_error(lambda T: T.full_like(T.zeros(2, dtype=T.uint8), 256))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool", "float16"])
def test_new_methods(dtype):
    def src(T):
        return T.zeros(2, dtype=getattr(T, dtype))
    run_both(lambda T: src(T).new_zeros(2))
    run_both(lambda T: src(T).new_zeros((2, 3)))
    run_both(lambda T: src(T).new_zeros(2, 3))
    run_both(lambda T: src(T).new_zeros(size=(1,)))
    run_both(lambda T: src(T).new_ones(2, dtype=T.int32))
    run_both(lambda T: src(T).new_full((2,), 3))
    run_both(lambda T: src(T).new_full((2,), True))
    run_both(lambda T: src(T).new_tensor([1, 0]))
    run_both(lambda T: src(T).new_tensor(1))
    run_both(lambda T: src(T).new_tensor([1.5], dtype=T.float64))
    e = src(kiln).new_empty(3)
    assert e.dtype == getattr(kiln, dtype) and tuple(e.shape) == (3,)
    assert kiln.zeros(2, device="meta").new_ones(3).is_meta
    assert kiln.zeros(2).new_zeros(3, device="meta").is_meta


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES)
def test_fill_and_zero(dtype, device):
    def make(T):
        x = T.from_numpy(sample((4, 3), "float32" if dtype == "bfloat16" else dtype, seed=5)).to(
            on(T, device), getattr(T, dtype))
        x.fill_(2)
        y = T.from_numpy(sample((4, 3), "float32", seed=5).T.copy().T).to(on(T, device), getattr(T, dtype))
        y.zero_()
        return x, y
    run_both(make)


# torch.Tensor(...) and the typed legacy constructors, as real model code still writes them
# (nn.Parameter(torch.Tensor(in, out)) then an init function; torch.LongTensor(list)).
@pytest.mark.parametrize("make", [
    lambda T: T.Tensor([1, 2.5]), lambda T: T.Tensor(np.arange(3)), lambda T: T.Tensor(),
    lambda T: T.LongTensor([1, 2]), lambda T: T.FloatTensor([[1, 2]]), lambda T: T.BoolTensor([1, 0]),
    lambda T: T.DoubleTensor(np.ones(2, np.float32)), lambda T: T.IntTensor(T.Size([2, 0])),
    lambda T: T.ones(2).type(T.LongTensor), lambda T: T.ones(2).type("torch.DoubleTensor"),
])
def test_legacy_constructors(make):
    run_both(make)


def test_legacy_constructor_sizes_and_types():
    torch = need_torch()
    for T in (kiln, torch):
        x = T.Tensor(2, 3)
        assert x.shape == (2, 3) and x.dtype == T.float32
        assert T.Tensor(T.Size([4])).shape == (4,)
        assert T.HalfTensor(3).dtype == T.float16
        p = T.nn.Parameter(T.Tensor(3, 4))
        assert p.shape == (3, 4) and p.requires_grad
        assert isinstance(T.ones(2), T.FloatTensor) and not isinstance(T.ones(2), T.LongTensor)
        assert isinstance(T.zeros(2, dtype=T.int64), T.LongTensor)
        base = T.ones(2)
        alias = T.Tensor(base)
        alias[0] = 5  # Tensor(t) shares t's data
        assert base[0].item() == 5
    same_error(lambda T: T.Tensor(-1))
    same_error(lambda T: T.LongTensor(T.ones(2)))
