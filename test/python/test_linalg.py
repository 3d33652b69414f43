"""Matrix products against PyTorch: every matmul rank case, BLAS layouts, every dtype, errors."""
import numpy as np
import pytest

import kiln
from oracle import assert_match, need_torch, sample

NUMERIC = ["float32", "float64", "float16", "bfloat16", "uint8", "int8", "int16", "int32", "int64"]
# Products sum k terms: allow for a different summation order than PyTorch's BLAS.
TOL = {"float32": (1e-4, 1e-4), "float64": (1e-10, 1e-10), "float16": (1e-2, 1e-2), "bfloat16": (2e-2, 5e-2)}


def pair(shape, dtype, seed=0, layout="contiguous"):
    """The same values as (kiln, torch) tensors; layout 'transposed' gives column-major storage
    (the last two dims swapped in memory), 'sliced' a view with gaps, 'expanded' stride-0 rows."""
    torch = need_torch()
    base = "float32" if dtype == "bfloat16" else dtype
    if layout == "transposed" and len(shape) >= 2:
        a = np.swapaxes(sample(shape[:-2] + (shape[-1], shape[-2]), base, seed), -1, -2)
    elif layout == "sliced":
        a = sample(shape[:-1] + (shape[-1] * 2,), base, seed)[..., ::2]
    elif layout == "expanded":
        a = np.broadcast_to(sample(shape[:-2] + (1, shape[-1]), base, seed), shape)
    else:
        a = sample(shape, base, seed)
    k, t = kiln.from_numpy(a), torch.from_numpy(a.copy())
    if dtype == "bfloat16":
        k, t = k.to(kiln.bfloat16), t.to(torch.bfloat16)
    return k, t


def check(k, t):
    name = str(t.dtype).split(".")[-1]
    rtol, atol = TOL.get(name, (None, None))
    assert_match(k, t, rtol=rtol, atol=atol)


def same_error(make, match=None):
    torch = need_torch()
    with pytest.raises(Exception) as caught:
        make(torch)
    kind = RuntimeError if type(caught.value) is NotImplementedError else type(caught.value)
    with pytest.raises(kind, match=match):
        make(kiln)


MATMUL_SHAPES = [
    ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((2, 3, 4), (4,)), ((2, 3, 4), (4, 5)),
    ((3,), (2, 3, 4)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 6)),
    ((5, 1, 2, 3), (4, 3, 2)), ((1, 3, 4), (2, 4, 5)), ((2, 2, 3, 4), (4,)), ((4,), (2, 2, 4, 3)),
    ((0, 3), (3, 2)), ((2, 0), (0, 2)), ((3,), (3, 0)), ((0, 2, 3), (3, 4)), ((2, 3), (0, 3, 4)),
    ((2, 3, 0), (0, 5)), ((1, 1), (1, 1)), ((1,), (1,)), ((7, 1, 5), (5, 1)),
]


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES, ids=repr)
def test_matmul_shapes(sa, sb, dtype):
    (ka, ta), (kb, tb) = pair(sa, dtype, 1), pair(sb, dtype, 2)
    check(kiln.matmul(ka, kb), need_torch().matmul(ta, tb))
    check(ka @ kb, ta @ tb)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "float16"])
@pytest.mark.parametrize("la", ["contiguous", "transposed", "sliced", "expanded"])
@pytest.mark.parametrize("lb", ["contiguous", "transposed", "sliced", "expanded"])
def test_layouts(la, lb, dtype):
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((33, 20), dtype, 3, la), pair((20, 17), dtype, 4, lb)
    check(kiln.mm(ka, kb), torch.mm(ta, tb))
    (ka, ta), (kb, tb) = pair((3, 9, 20), dtype, 5, la), pair((3, 20, 7), dtype, 6, lb)
    check(kiln.bmm(ka, kb), torch.bmm(ta, tb))
    (kv, tv) = pair((20,), dtype, 7)
    check(kiln.matmul(ka, kv), torch.matmul(ta, tv))
    check(kiln.matmul(kv, kb), torch.matmul(tv, tb))
    (km, tm), (kn, tn) = pair((9, 20), dtype, 8, la), pair((20, 7), dtype, 9, lb)
    check(kiln.matmul(ka, kn), torch.matmul(ta, tn))
    check(kiln.matmul(km, kb), torch.matmul(tm, tb))
    check(kiln.mv(km, kv), torch.mv(tm, tv))


def test_strided_vectors():
    torch = need_torch()
    a = sample((40,), "float32", 8)
    ka, ta = kiln.from_numpy(a[::2]), torch.from_numpy(a.copy())[::2]
    kb, tb = kiln.from_numpy(a[1::2]), torch.from_numpy(a.copy())[1::2]
    check(kiln.dot(ka, kb), torch.dot(ta, tb))
    m = sample((6, 20), "float64", 9)
    check(kiln.mv(kiln.from_numpy(m), kiln.from_numpy(a[::2].astype(np.float64))),
          torch.mv(torch.from_numpy(m), torch.from_numpy(a[::2].astype(np.float64))))
    z = np.broadcast_to(np.float32(2.0), (20,))
    check(kiln.dot(kiln.from_numpy(z), kb), torch.dot(torch.from_numpy(z.copy()), tb))


@pytest.mark.parametrize("compiled", [False, True])
def test_batched_products_through_one_batched_gemm(compiled):
    # float32 batches run as one batched GEMM (DnnlMatmul.h sgemmBatched) when each operand steps
    # through its batch by one stride: permuted batch dims (not collapsible: the per-entry
    # loop), a broadcast operand (stride 0), transposed matrices, a batch large enough to thread.
    torch = need_torch()
    a = sample((6, 4, 33, 40), "float32", 20)
    b = sample((4, 6, 40, 24), "float32", 21)
    w = sample((40, 24), "float32", 22)
    cases = [
        lambda L, x, y, v: L.matmul(x, y.transpose(0, 1)),                 # batch dims permuted in b
        lambda L, x, y, v: L.matmul(x.transpose(-1, -2).transpose(-1, -2), v.expand(6, 4, 40, 24)),
        lambda L, x, y, v: L.bmm(x.reshape(24, 33, 40), y.transpose(0, 1).reshape(24, 40, 24)),
        lambda L, x, y, v: L.bmm(x.reshape(24, 33, 40).transpose(1, 2).contiguous().transpose(1, 2),
                                 y.reshape(24, 40, 24)),
        lambda L, x, y, v: L.matmul(x[:, ::2], y.transpose(0, 1)[:, ::2]),  # a batch stride gap
    ]
    for i, case in enumerate(cases):
        ka, kb, kw = (kiln.from_numpy(t) for t in (a, b, w))
        ta, tb, tw = (torch.from_numpy(t.copy()) for t in (a, b, w))
        fn = (lambda x, y, v, case=case: case(kiln, x, y, v))
        if compiled:
            kiln.compiler.reset()
            fn = kiln.compile(fn)
        check(fn(ka, kb, kw), case(torch, ta, tb, tw))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_compiled_16bit_products_are_gemms_equal_to_eager(dtype):
    # Compiled 16-bit mm/bmm were a naive reduction loop (a 512^3 bf16 mm: 101 ms compiled vs
    # 0.4 ms eager); now the runtime's 16-bit GEMM (bf16 on oneDNN's bf16 kernels where the CPU
    # has them, else widened to f32), accumulated in f32 and rounded once, as eager.
    dt = getattr(kiln, dtype)
    x = kiln.from_numpy(sample((3, 70, 48), "float32", 30)).to(dt)
    w = kiln.from_numpy(sample((24, 48), "float32", 31)).to(dt)
    b = kiln.from_numpy(sample((24,), "float32", 32)).to(dt)
    fns = [lambda x, w, b: kiln.nn.functional.linear(x, w, b).relu(),
           lambda x, w, b: x @ x.transpose(1, 2),
           lambda x, w, b: kiln.mm(x[1], w.t()) * 2]
    for fn in fns:
        kiln.compiler.reset()
        got, want = kiln.compile(fn)(x, w, b), fn(x, w, b)
        assert got.dtype == want.dtype == dt
        assert np.array_equal(got.float().numpy(), want.float().numpy())


def test_large_blas():
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((130, 257), "float32", 10), pair((257, 96), "float32", 11, "transposed")
    check(kiln.mm(ka, kb), torch.mm(ta, tb))
    (ka, ta), (kb, tb) = pair((4, 64, 48), "float64", 12), pair((48, 32), "float64", 13)
    check(ka @ kb, ta @ tb)


@pytest.mark.parametrize("dtype", NUMERIC)
def test_mm_bmm_mv_dot(dtype):
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((5, 6), dtype, 1), pair((6, 4), dtype, 2)
    check(kiln.mm(ka, kb), torch.mm(ta, tb))
    check(ka.mm(kb), ta.mm(tb))
    (ka, ta), (kb, tb) = pair((3, 5, 6), dtype, 3), pair((3, 6, 4), dtype, 4)
    check(kiln.bmm(ka, kb), torch.bmm(ta, tb))
    (km, tm), (kv, tv) = pair((5, 6), dtype, 5), pair((6,), dtype, 6)
    check(kiln.mv(km, kv), torch.mv(tm, tv))
    check(km.mv(vec=kv), tm.mv(vec=tv))
    (kx, tx), (ky, ty) = pair((7,), dtype, 7), pair((7,), dtype, 8)
    check(kiln.dot(kx, ky), torch.dot(tx, ty))
    check(kx.dot(ky), tx.dot(ty))


@pytest.mark.parametrize("dtype", NUMERIC)
@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (2, 0), (0, -1.5)], ids=repr)
def test_addmm_family(dtype, beta, alpha):
    torch = need_torch()
    if dtype in ("uint8", "int8", "int16", "int32", "int64"):
        beta, alpha = int(beta), int(alpha)
    (km, tm), (kn, tn) = pair((4, 6), dtype, 1), pair((6, 5), dtype, 2)
    for shape in [(4, 5), (5,), (1, 5), (4, 1), ()]:
        ks, ts = pair(shape, dtype, 3)
        check(kiln.addmm(ks, km, kn, beta=beta, alpha=alpha), torch.addmm(ts, tm, tn, beta=beta, alpha=alpha))
    kv, tv = pair((6,), dtype, 4)
    for shape in [(4,), (1,), ()]:
        ks, ts = pair(shape, dtype, 5)
        check(kiln.addmv(ks, km, kv, beta=beta, alpha=alpha), torch.addmv(ts, tm, tv, beta=beta, alpha=alpha))
    (kb1, tb1), (kb2, tb2) = pair((2, 4, 6), dtype, 6), pair((2, 6, 5), dtype, 7)
    for shape in [(2, 4, 5), (4, 5), (1, 5), ()]:
        ks, ts = pair(shape, dtype, 8)
        check(kiln.baddbmm(ks, kb1, kb2, beta=beta, alpha=alpha), torch.baddbmm(ts, tb1, tb2, beta=beta, alpha=alpha))


@pytest.mark.parametrize("shape", [(4, 8, 3, 6), (3, 1, 5, 7), (5, 6, 4, 1)])
def test_products_never_read_recycled_output_memory(shape):
    # bmm/mm write a fresh result without zeroing it first (the batched oneDNN product never
    # reads it; the per-matrix BLAS calls get zeros): memory recycled from a NaN-filled tensor of
    # the same size must not leak into the result.
    b, m, k, n = shape
    a, w = kiln.rand(b, m, k), kiln.rand(b, k, n)
    expected = np.matmul(a.numpy(), w.numpy())
    for _ in range(3):
        junk = kiln.full((b, m, n), float("nan"))
        del junk
        out = kiln.bmm(a, w)
        np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)
        junk = kiln.full((m, n), float("nan"))
        del junk
        np.testing.assert_allclose(kiln.mm(a[0], w[0]).numpy(), expected[0], rtol=1e-5, atol=1e-5)


def test_addmm_beta_zero_ignores_nan():
    torch = need_torch()
    nan_k, nan_t = kiln.full((2, 5), float("nan")), torch.full((2, 5), float("nan"))
    check(kiln.addmm(nan_k, kiln.ones(2, 3), kiln.ones(3, 5), beta=0), torch.addmm(nan_t, torch.ones(2, 3), torch.ones(3, 5), beta=0))
    check(kiln.addmm(nan_k.half(), kiln.ones(2, 3).half(), kiln.ones(3, 5).half(), beta=0),
          torch.addmm(nan_t.half(), torch.ones(2, 3).half(), torch.ones(3, 5).half(), beta=0))
    for dtype in ("float32", "float64", "int64"):
        fill = 7 if dtype == "int64" else float("nan")
        kd, td = getattr(kiln, dtype), getattr(torch, dtype)
        check(kiln.addmv(kiln.full((2,), fill, dtype=kd), kiln.ones(2, 3, dtype=kd), kiln.ones(3, dtype=kd), beta=0),
              torch.addmv(torch.full((2,), fill, dtype=td), torch.ones(2, 3, dtype=td), torch.ones(3, dtype=td), beta=0))
        check(kiln.baddbmm(kiln.full((2, 1, 1), fill, dtype=kd), kiln.ones(2, 2, 3, dtype=kd), kiln.ones(2, 3, 1, dtype=kd), beta=0),
              torch.baddbmm(torch.full((2, 1, 1), fill, dtype=td), torch.ones(2, 2, 3, dtype=td), torch.ones(2, 3, 1, dtype=td),
                            beta=0))


def test_addmm_inplace():
    torch = need_torch()
    (ks, ts), (km, tm), (kn, tn) = pair((4, 5), "float32", 1), pair((4, 3), "float32", 2), pair((3, 5), "float32", 3)
    r = ks.addmm_(km, kn, beta=0.5)
    assert r is ks
    ts.addmm_(tm, tn, beta=0.5)
    check(ks, ts)
    with pytest.raises(RuntimeError):
        kiln.ones(5).addmm_(km, kn)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "bool", "int8", "float16"])
def test_outer(dtype):
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((4,), dtype, 1), pair((3,), dtype, 2)
    check(kiln.outer(ka, kb), torch.outer(ta, tb))
    check(ka.ger(kb), ta.ger(tb))
    (kc, tc) = pair((3,), "float64", 3)
    check(kiln.outer(ka, kc), torch.outer(ta, tc))


def test_rmatmul():
    torch = need_torch()
    (ka, ta), (kb, tb) = pair((2, 3), "float32", 1), pair((3, 4), "float32", 2)
    check(kb.__rmatmul__(ka), tb.__rmatmul__(ta))
    with pytest.raises(TypeError):
        kiln.ones(2) @ 3
    with pytest.raises(TypeError):
        3 @ kiln.ones(2)


def test_meta():
    # Shapes as on the CPU (whose results are checked against PyTorch above).
    for sa, sb in MATMUL_SHAPES:
        k = kiln.matmul(kiln.empty(sa, device="meta"), kiln.empty(sb, device="meta"))
        assert k.is_meta and k.shape == kiln.matmul(kiln.ones(sa), kiln.ones(sb)).shape
    m = kiln.addmm(kiln.empty(5, device="meta"), kiln.empty(2, 3, device="meta"), kiln.empty(3, 5, device="meta"))
    assert m.is_meta and tuple(m.shape) == (2, 5)
    with pytest.raises(RuntimeError, match="same device"):
        kiln.mm(kiln.empty(2, 3, device="meta"), kiln.ones(3, 4))


def test_result_strides():
    torch = need_torch()
    f = lambda T, *s: T.ones(*s)  # noqa: E731
    for sa, sb in [((1, 2, 3), (1, 3, 4)), ((3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((2, 3, 4), (4,))]:
        assert kiln.matmul(f(kiln, *sa), f(kiln, *sb)).stride() == torch.matmul(f(torch, *sa), f(torch, *sb)).stride()


def f(T, *shape, dt="float32"):
    return T.ones(shape, dtype=getattr(T, dt))


@pytest.mark.parametrize("make,match", [
    (lambda T: T.mm(f(T, 2, 3), f(T, 4, 5)), r"mat1 and mat2 shapes cannot be multiplied \(2x3 and 4x5\)"),
    (lambda T: T.mm(f(T, 2, 3), f(T, 3, 5, dt="float64")), "expected m1 and m2 to have the same dtype, but got: float != double"),
    (lambda T: T.mm(f(T, 2, 3, dt="int32"), f(T, 3, 5, dt="int64")), "int != long int"),
    (lambda T: T.mm(f(T, 3), f(T, 3, 5)), "self must be a matrix"),
    (lambda T: T.mm(f(T, 2, 3), f(T, 3)), "mat2 must be a matrix"),
    (lambda T: T.mm(f(T, 2, 3, dt="bool"), f(T, 3, 5, dt="bool")), "not implemented for 'Bool'"),
    (lambda T: T.bmm(f(T, 2, 3, 4), f(T, 3, 4, 5)), r"Expected size for first two dimensions of batch2 tensor to be: \[2, 4\] but got: \[3, 4\]."),
    (lambda T: T.bmm(f(T, 3, 4), f(T, 2, 4, 5)), "batch1 must be a 3D tensor"),
    (lambda T: T.bmm(f(T, 2, 3, 4), f(T, 4, 5)), "batch2 must be a 3D tensor"),
    (lambda T: T.bmm(f(T, 2, 3, 4), f(T, 2, 4, 5, dt="float64")), "expected scalar type Float but found Double"),
    (lambda T: T.bmm(f(T, 2, 3, 4, dt="bool"), f(T, 2, 4, 5, dt="bool")), "not implemented for 'Bool'"),
    (lambda T: T.mv(f(T, 2, 3), f(T, 4)), r"size mismatch, got input \(2\), mat \(2x3\), vec \(4\)"),
    (lambda T: T.mv(f(T, 3), f(T, 3)), "vector \\+ matrix @ vector expected, got 1, 1, 1"),
    (lambda T: T.mv(f(T, 2, 3), f(T, 3, dt="float64")), "addmv input tensors must have the same dtype, but got Double, Float, and Double"),
    (lambda T: T.dot(f(T, 3), f(T, 4)), r"inconsistent tensor size, expected tensor \[3\] and src \[4\]"),
    (lambda T: T.dot(f(T, 3, 1), f(T, 3)), "1D tensors expected, but got 2D and 1D tensors"),
    (lambda T: T.dot(f(T, 3), f(T, 3, dt="float64")), "dot : expected both vectors to have same dtype, but found Float and Double"),
    (lambda T: T.dot(f(T, 3, dt="bool"), f(T, 3, dt="bool")), "not implemented for 'Bool'"),
    (lambda T: T.matmul(f(T), f(T, 2, 2)), "both arguments to matmul need to be at least 1D, but they are 0D and 2D"),
    (lambda T: T.matmul(f(T, 3), f(T, 4)), "inconsistent tensor size"),
    (lambda T: T.matmul(f(T, 4), f(T, 2, 3)), r"\(1x4 and 2x3\)"),
    (lambda T: T.matmul(f(T, 2, 3, 4), f(T, 5, 6)), r"\(6x4 and 5x6\)"),
    (lambda T: T.matmul(f(T, 2, 3, 4), f(T, 5)), r"size mismatch, got input \(6\), mat \(6x4\), vec \(5\)"),
    (lambda T: T.matmul(f(T, 2, 3, 4), f(T, 3, 4, 5)), r"The size of tensor a \(2\) must match the size of tensor b \(3\) at non-singleton dimension 0"),
    (lambda T: T.matmul(f(T, 2, 3, 4), f(T, 2, 5, 6)), r"batch2 tensor to be: \[2, 4\] but got: \[2, 5\]"),
    (lambda T: T.matmul(f(T, 3), f(T, 2, 4, 5)), r"batch2 tensor to be: \[2, 3\] but got: \[2, 4\]"),
    (lambda T: T.matmul(f(T, 2, 3, 4), f(T, 2, 4, 5, dt="float64")), "expected scalar type Float but found Double"),
    (lambda T: T.matmul(f(T, 2, 3, dt="bool"), f(T, 3, 2, dt="bool")), "not implemented for 'Bool'"),
    (lambda T: T.addmm(f(T, 3, 5), f(T, 2, 3), f(T, 3, 5)), r"The expanded size of the tensor \(2\) must match the existing size \(3\) at non-singleton dimension 0"),
    (lambda T: T.addmm(f(T, 2, 3, 5), f(T, 2, 3), f(T, 3, 5)), "must be greater or equal to the number of dimensions"),
    (lambda T: T.addmm(f(T, 2, 5, dt="float64"), f(T, 2, 3), f(T, 3, 5)), "self and mat2 must have the same dtype, but got Double and Float"),
    (lambda T: T.addmm(f(T, 2, 5), f(T, 2, 3, dt="float64"), f(T, 3, 5)), "mat1 and mat2 must have the same dtype, but got Double and Float"),
    (lambda T: T.addmm(f(T, 2, 5), f(T, 3), f(T, 3, 5)), "mat1 must be a matrix, got 1-D tensor"),
    (lambda T: T.addmv(f(T, 3), f(T, 2, 3), f(T, 3)), r"size mismatch, got input \(3\), mat \(2x3\), vec \(3\)"),
    (lambda T: T.addmv(f(T, 2, 1), f(T, 2, 3), f(T, 3)), "vector \\+ matrix @ vector expected, got 2, 2, 1"),
    (lambda T: T.baddbmm(f(T, 2, 3, 5, dt="float64"), f(T, 2, 3, 4), f(T, 2, 4, 5)), "Input dtypes must be the same, got: input double, batch1: float, batch2: float"),
    (lambda T: T.baddbmm(f(T, 4, 3, 5), f(T, 2, 3, 4), f(T, 2, 4, 5)), r"The expanded size of the tensor \(2\) must match the existing size \(4\)"),
    (lambda T: T.outer(f(T, 2, 1), f(T, 3)), "outer: Expected 1-D argument self, but got 2-D"),
    (lambda T: T.outer(f(T, 2), f(T)), "outer: Expected 1-D argument vec2, but got 0-D"),
], ids=range(39))
def test_errors(make, match):
    same_error(make, match)


# kiln.linalg's norms (torch.linalg.norm / vector_norm / matrix_norm in real model code).
LINALG_NORMS = [
    ("vector_norm", dict(), (3, 4, 5)), ("vector_norm", dict(ord=1, dim=(0, 2)), (3, 4, 5)),
    ("vector_norm", dict(ord=float("inf"), dim=-1, keepdim=True), (3, 4)), ("vector_norm", dict(ord=0, dim=1), (3, 4)),
    ("vector_norm", dict(ord=3, dtype="float64"), (5,)), ("matrix_norm", dict(), (2, 3, 4)),
    ("matrix_norm", dict(ord=1), (2, 3, 4)), ("matrix_norm", dict(ord=-1, keepdim=True), (3, 4)),
    ("matrix_norm", dict(ord=float("inf"), dim=(2, 0)), (3, 4, 5)), ("matrix_norm", dict(ord=float("-inf")), (4, 3)),
    ("norm", dict(), (3, 4, 5)), ("norm", dict(ord=1), (6,)), ("norm", dict(ord=float("inf")), (3, 4)),
    ("norm", dict(dim=1), (3, 4)), ("norm", dict(ord=1, dim=(0, 1), keepdim=True), (3, 4)),
]


@pytest.mark.parametrize("fn,kw,shape", LINALG_NORMS, ids=repr)
def test_linalg_norms_match_pytorch(fn, kw, shape):
    torch = need_torch()
    a = sample(shape, "float32", 3)
    kk = {k: getattr(kiln, v) if k == "dtype" else v for k, v in kw.items()}
    kt = {k: getattr(torch, v) if k == "dtype" else v for k, v in kw.items()}
    want = getattr(torch.linalg, fn)(torch.from_numpy(a), **kt)
    assert_match(getattr(kiln.linalg, fn)(kiln.from_numpy(a), **kk), want, rtol=1e-5, atol=1e-5)
    kiln.compiler.reset()  # the lambda's code object is shared by every case
    compiled = kiln.compile(lambda x: getattr(kiln.linalg, fn)(x, **kk), fullgraph=True)
    assert_match(compiled(kiln.from_numpy(a)), want, rtol=1e-5, atol=1e-5)


def test_linalg_norm_errors():
    same_error(lambda T: T.linalg.vector_norm(T.ones(3, dtype=T.int64)), "floating point")
    same_error(lambda T: T.linalg.norm(T.ones(2, 2, 2), ord=1), "1D or 2D")
    same_error(lambda T: T.linalg.matrix_norm(T.ones(3)), "at least 2 dimensions")
    # the spectral norms come from singular values (kiln/_lapack.py): rank-1 ones(3, 3) has one, 3
    assert kiln.linalg.matrix_norm(kiln.ones(3, 3), ord="nuc").item() == pytest.approx(3.0)
