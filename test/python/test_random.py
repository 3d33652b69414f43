"""Random sampling: shapes, dtypes and errors against PyTorch, and the distributions and seeding
directly (test_random_torch.py checks the values themselves against torch for the same seed)."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

N = 200_000  # large enough for tight statistics, and above the parallel-fill threshold


def values(t):
    return (t.float() if t.dtype == kiln.bfloat16 else t).numpy().astype(np.float64)


def same_meta(make):
    """make(T) gives a tensor of the same shape and dtype in kiln and PyTorch."""
    torch = need_torch()
    k, t = make(kiln), make(torch)
    assert tuple(k.shape) == tuple(t.shape)
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    return k


def same_error(make, match=None):
    torch = need_torch()
    with pytest.raises(Exception) as caught:
        make(torch)
    kind = RuntimeError if type(caught.value) is NotImplementedError else type(caught.value)
    with pytest.raises(kind, match=match):
        make(kiln)


# ---- seeding ------------------------------------------------------------------------------

@pytest.mark.parametrize("make", [
    lambda: kiln.rand(N), lambda: kiln.randn(5, 7), lambda: kiln.randint(0, 100, (1000,)),
    lambda: kiln.randperm(50), lambda: kiln.zeros(300).uniform_(-2, 2), lambda: kiln.zeros(N).normal_(1, 3),
    lambda: kiln.zeros(99, dtype=kiln.int16).random_(), lambda: kiln.bernoulli(kiln.full((500,), 0.3)),
], ids=range(8))
def test_same_seed_same_values(make):
    kiln.manual_seed(1234)
    a = make().tolist()
    b = make().tolist()
    kiln.manual_seed(1234)
    assert make().tolist() == a
    assert make().tolist() == b
    assert a != b  # the stream moves on
    kiln.manual_seed(4321)
    assert make().tolist() != a


def test_manual_seed_returns_generator():
    g = kiln.manual_seed(7)
    assert isinstance(g, kiln.Generator) and g is kiln.default_generator
    assert kiln.initial_seed() == 7 and g.initial_seed() == 7
    assert kiln.manual_seed(-1).initial_seed() == 2 ** 64 - 1
    assert kiln.manual_seed(2 ** 64 - 1).initial_seed() == 2 ** 64 - 1
    assert kiln.manual_seed(3.0).initial_seed() == 3
    assert kiln.default_generator.manual_seed(9) is kiln.default_generator
    assert kiln.initial_seed() == 9
    same_error(lambda T: T.manual_seed(2 ** 64))
    s = kiln.seed()
    assert isinstance(s, int) and kiln.initial_seed() == s


def test_rng_state_roundtrip():
    kiln.manual_seed(5)
    kiln.rand(10)
    state = kiln.get_rng_state()
    assert state.dtype == kiln.uint8 and tuple(state.shape) == (5056,)  # torch's layout
    a = kiln.randn(20).tolist()
    kiln.rand(3)
    kiln.set_rng_state(state)
    assert kiln.randn(20).tolist() == a
    g = kiln.default_generator
    g.set_state(state)
    assert kiln.randn(20).tolist() == a
    same_error(lambda T: T.set_rng_state(T.zeros(3)))
    with pytest.raises(RuntimeError):
        kiln.set_rng_state(kiln.zeros(3, dtype=kiln.uint8))


def test_thread_count_does_not_matter():
    # One sequential stream (as torch's): a big draw equals the same draw split in two, whatever
    # the thread count.
    kiln.manual_seed(11)
    whole = kiln.rand(2 * N).numpy()
    kiln.manual_seed(11)
    first, second = kiln.rand(N).numpy(), kiln.rand(N).numpy()
    np.testing.assert_array_equal(whole, np.concatenate([first, second]))


# ---- distributions ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_rand(dtype):
    kiln.manual_seed(0)
    x = same_meta(lambda T: T.rand(N // 10, 10, dtype=getattr(T, dtype)))
    v = values(x)
    assert v.min() >= 0 and v.max() < 1
    assert abs(v.mean() - 0.5) < 0.01 and abs(v.std() - (1 / 12) ** 0.5) < 0.01
    deciles = np.histogram(v, bins=10, range=(0, 1))[0] / v.size
    # coarse dtypes put grid points unevenly into bins
    assert np.all(np.abs(deciles - 0.1) < (0.01 if dtype != "bfloat16" else 0.03))


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_randn(dtype):
    kiln.manual_seed(1)
    v = values(same_meta(lambda T: T.randn(N, dtype=getattr(T, dtype))))
    assert abs(v.mean()) < 0.01 and abs(v.std() - 1) < 0.01
    assert abs(np.mean(np.abs(v) < 1) - 0.6827) < 0.01
    assert abs(np.mean(np.abs(v) < 2) - 0.9545) < 0.01
    assert np.isfinite(v).all()


@pytest.mark.parametrize("args,dtype", [
    ((10, (N,)), None), ((3, 10, (N,)), None), ((-5, 5, (N,)), "int8"), ((0, 256, (N,)), "uint8"),
    ((0, 2, (N,)), "bool"), ((-100, 100, (N,)), "float32"), ((0, 7, (N,)), "float16"), ((0, 50, (N,)), "int32"),
    ((-(2 ** 40), 2 ** 40, (N,)), "int64"), ((1, 2, (5,)), "int16"),
], ids=repr)
def test_randint(args, dtype):
    kiln.manual_seed(2)
    kwargs = {"dtype": dtype} if dtype else {}
    x = same_meta(lambda T: T.randint(*args, **{k: getattr(T, v) for k, v in kwargs.items()}))
    low, high = (0, args[0]) if len(args) == 2 else args[:2]
    v = x.numpy().astype(np.float64)
    assert v.min() >= low and v.max() <= high - 1 and np.all(v == np.floor(v))
    if v.size == N:
        assert abs(v.mean() - (low + high - 1) / 2) < 0.01 * (high - low)
        if high - low <= 256:
            assert len(np.unique(v)) == high - low  # every value shows up


def test_randint_forms():
    same_meta(lambda T: T.randint(10, size=(3,)))
    same_meta(lambda T: T.randint(low=2, high=5, size=(3, 2)))
    same_meta(lambda T: T.randint(high=5, size=()))
    same_meta(lambda T: T.randint(5, (2, 0)))
    assert kiln.randint(3, 4, (10,)).tolist() == [3] * 10


@pytest.mark.parametrize("make", [
    lambda T: T.randint(5, 5, (2,)), lambda T: T.randint(0, 300, (3,), dtype=T.uint8),
    lambda T: T.randint(-1, 10, (3,), dtype=T.uint8), lambda T: T.randint(10), lambda T: T.randint(10, 3),
    lambda T: T.randint(0, 70000, (2,), dtype=T.float16), lambda T: T.rand(2, dtype=T.int64),
    lambda T: T.randn(2, dtype=T.int32), lambda T: T.rand(2, dtype=T.bool), lambda T: T.randperm(-1),
    lambda T: T.randperm(300, dtype=T.uint8), lambda T: T.randperm(3, dtype=T.bool),
    lambda T: T.rand_like(T.zeros(2, dtype=T.int64)), lambda T: T.randint_like(T.zeros(2, dtype=T.int8), 200),
    lambda T: T.rand(2, dtype=T.int64, requires_grad=True),
], ids=range(15))
def test_factory_errors(make):
    same_error(make)


@pytest.mark.parametrize("dtype", [None, "int32", "float32", "float64", "uint8"])
@pytest.mark.parametrize("n", [0, 1, 7, 256])
def test_randperm(n, dtype):
    kwargs = {"dtype": dtype} if dtype else {}
    x = same_meta(lambda T: T.randperm(n, **{k: getattr(T, v) for k, v in kwargs.items()}))
    assert sorted(x.tolist()) == list(range(n))
    if n == 256:
        assert x.tolist() != list(range(n))


def test_like_variants():
    torch = need_torch()
    for dtype in ["float32", "float64", "float16"]:
        same_meta(lambda T: T.rand_like(T.zeros(3, 4, dtype=getattr(T, dtype))))
        same_meta(lambda T: T.randn_like(T.zeros(3, 4, dtype=getattr(T, dtype))))
    same_meta(lambda T: T.randn_like(T.zeros(2), dtype=T.float64))
    same_meta(lambda T: T.randint_like(T.zeros(2, 3), 10))
    same_meta(lambda T: T.randint_like(T.zeros(2, dtype=T.int16), 3, 10))
    same_meta(lambda T: T.randint_like(T.zeros(2), 3, 10, dtype=T.int64))
    x = kiln.randint_like(kiln.zeros(1000, dtype=kiln.int16), 3, 10)
    assert 3 <= min(x.tolist()) and max(x.tolist()) <= 9
    a = np.zeros((4, 3), dtype=np.float32)
    assert kiln.rand_like(kiln.from_numpy(a.T)).stride() == torch.rand_like(torch.from_numpy(a.T)).stride()


def test_meta_and_requires_grad():
    m = kiln.rand(2, 3, device="meta")
    assert m.is_meta and tuple(m.shape) == (2, 3)
    assert kiln.randn(4, device="meta", dtype=kiln.float16).dtype == kiln.float16
    assert kiln.randint(5, (2,), device="meta").dtype == kiln.int64
    assert kiln.zeros(3, device="meta").normal_().is_meta
    assert kiln.randn(3, requires_grad=True).requires_grad


# ---- in-place samplers --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_uniform_(dtype):
    kiln.manual_seed(3)
    x = kiln.zeros(N, dtype=getattr(kiln, dtype))
    assert x.uniform_(-3, 5) is x
    v = values(x)
    assert v.min() >= -3 and v.max() <= 5 and abs(v.mean() - 1) < 0.05
    assert abs(v.std() - 8 / 12 ** 0.5) < 0.05
    v = values(kiln.zeros(1000, dtype=getattr(kiln, dtype)).uniform_())
    assert v.min() >= 0 and v.max() < 1
    assert values(kiln.zeros(3, dtype=getattr(kiln, dtype)).uniform_(2, 2)).tolist() == [2, 2, 2]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16"])
def test_normal_(dtype):
    kiln.manual_seed(4)
    x = kiln.zeros(N, dtype=getattr(kiln, dtype))
    assert x.normal_(2.0, 0.5) is x
    v = values(x)
    assert abs(v.mean() - 2) < 0.01 and abs(v.std() - 0.5) < 0.01
    v = values(kiln.empty(N, dtype=getattr(kiln, dtype)).normal_(mean=-1))
    assert abs(v.mean() + 1) < 0.02 and abs(v.std() - 1) < 0.02
    assert values(kiln.zeros(3, dtype=getattr(kiln, dtype)).normal_(1, 0)).tolist() == [1, 1, 1]


def test_in_place_on_views():
    # A non-contiguous target gets every element written (through a dense draw and a copy).
    a = np.zeros((300, 200), dtype=np.float32)
    k = kiln.from_numpy(a.T)
    k.uniform_(1, 2)
    assert a.min() >= 1 and a.max() < 2 and len(np.unique(a)) > 1000
    b = np.zeros((400, 6), dtype=np.float64)
    kiln.from_numpy(b[:, ::2]).normal_()
    assert np.all(b[:, 1::2] == 0) and np.all(b[:, ::2] != 0)


@pytest.mark.parametrize("make", [
    lambda T: T.zeros(3).normal_(0, -1), lambda T: T.zeros(3, dtype=T.int64).normal_(),
    lambda T: T.zeros(3, dtype=T.int64).uniform_(), lambda T: T.zeros(3).uniform_(1, 0),
    lambda T: T.zeros(3).uniform_(-float("inf"), 0), lambda T: T.zeros(3).uniform_(0, float("inf")),
    lambda T: T.zeros(3, dtype=T.float16).uniform_(0, 1e5), lambda T: T.zeros(3, dtype=T.bool).uniform_(),
    lambda T: T.zeros(3).normal_(0, float("nan")), lambda T: T.zeros(3).bernoulli_(1.5),
    lambda T: T.zeros(3).bernoulli_(-0.1), lambda T: T.bernoulli(T.full((3,), 2.0)),
    lambda T: T.bernoulli(T.ones(3, dtype=T.int64)), lambda T: T.zeros(3, dtype=T.float16).random_(0, 70000),
    lambda T: T.zeros(3, dtype=T.uint8).random_(-1, 5), lambda T: T.zeros(3).random_(5, 5),
], ids=range(16))
def test_in_place_errors(make):
    same_error(make)


def test_error_messages():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        kiln.zeros(3).normal_(0, -1)
    with pytest.raises(RuntimeError, match=r"uniform_ expects to return a \[from, to\) range, but found from=1 > to=0"):
        kiln.zeros(3).uniform_(1, 0)
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=5"):
        kiln.randint(5, 5, (2,))
    with pytest.raises(RuntimeError, match="to - 1 is out of bounds for unsigned char"):
        kiln.randint(0, 300, (3,), dtype=kiln.uint8)


@pytest.mark.parametrize("dtype,high", [("int64", 2 ** 63 - 1), ("uint8", 255), ("int8", 127), ("bool", 1),
                                        ("float32", 2 ** 24), ("float16", 2 ** 11), ("float64", 2 ** 53)])
def test_random_(dtype, high):
    kiln.manual_seed(6)
    x = kiln.zeros(20000, dtype=getattr(kiln, dtype))
    assert x.random_() is x
    v = x.numpy().astype(np.float64)
    assert v.min() >= 0 and v.max() <= high and np.all(v == np.floor(v))
    assert v.max() > high / 2  # spans the range
    v = kiln.zeros(20000, dtype=getattr(kiln, dtype)).random_(2).numpy().astype(np.float64)
    assert set(np.unique(v)) == {0.0, 1.0}
    if dtype != "bool":
        v = kiln.zeros(20000, dtype=getattr(kiln, dtype)).random_(1, 4).numpy().astype(np.float64)
        assert set(np.unique(v)) == {1.0, 2.0, 3.0}
        v = kiln.zeros(20000, dtype=getattr(kiln, dtype)).random_(1, None).numpy().astype(np.float64)
        assert v.min() >= 1 and v.max() <= high


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "float16"])
@pytest.mark.parametrize("p", [0.0, 0.25, 1.0])
def test_bernoulli_(dtype, p):
    kiln.manual_seed(7)
    x = kiln.zeros(N, dtype=getattr(kiln, dtype))
    assert x.bernoulli_(p) is x
    v = x.numpy().astype(np.float64)
    assert set(np.unique(v)) <= {0.0, 1.0} and abs(v.mean() - p) < 0.01


def test_bernoulli():
    kiln.manual_seed(8)
    p = np.repeat(np.array([0.0, 0.2, 0.9, 1.0], dtype=np.float32), N // 4)
    v = same_meta(lambda T: T.bernoulli(T.from_numpy(p.copy()))).numpy()
    for i, q in enumerate([0.0, 0.2, 0.9, 1.0]):
        assert abs(v[i * (N // 4):(i + 1) * (N // 4)].mean() - q) < 0.01
    x = same_meta(lambda T: T.bernoulli(T.zeros(N, dtype=T.float64), 0.3))
    assert abs(x.numpy().mean() - 0.3) < 0.01
    assert same_meta(lambda T: T.zeros(4, 5).bernoulli()).numpy().sum() == 0
