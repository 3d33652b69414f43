"""NumPy code inside compiled functions (issue 16; TorchDynamo's trace_numpy): `t.numpy()`, NumPy
functions, ufuncs, ndarray methods and operators on such arrays are traced into the graph with
NumPy's dtype rules; arrays that leave the graph are ndarrays (NumPy scalars where NumPy gives
one); what is not traced (np.random, unsupported functions, values read as Python data) is a
graph break. Each case's graph and break counts are torch.compile's (torch 2.13, checked by hand
with torch._dynamo.explain); results equal eager NumPy + kiln, dtypes and types included."""
import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode

pytestmark = pytest.mark.skipif(not bytecode.supported(), reason="graph breaks resume on 3.11 to 3.13 only")


def _x(*shape, seed=0, dtype="float32"):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _same(got, want):
    """Equal values of the same kind: tensor, ndarray, NumPy scalar (same dtype) or Python value."""
    if isinstance(want, (tuple, list)):
        assert type(got) is type(want) and len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, kiln.Tensor):
        assert got.dtype == want.dtype
        got, want = got.numpy(), want.numpy()
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert np.shape(got) == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert got == want


def _check(fn, args, graphs, breaks=0, reason=None, calls=2):
    """fn compiled equals fn eager over `calls` calls; its graphs and breaks are as given."""
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(calls):
        _same(compiled(*args), fn(*args))
    kiln.compiler.reset()
    e = kiln.explain(fn)(*args)
    assert (e.graph_count, e.graph_break_count) == (graphs, breaks), str(e)
    if reason is not None:
        assert any(reason in r.reason for r in e.break_reasons), [r.reason for r in e.break_reasons]
    return e


def test_numpy_view_ufuncs_reductions_back_to_a_tensor():
    def fn(x):
        a = x.numpy()
        b = np.sin(a) * 2 + a.sum(axis=0)
        return kiln.from_numpy(b) + 1

    e = _check(fn, (_x(4, 3),), graphs=1)
    assert e.op_count >= 4


def test_reductions_give_numpy_scalars():
    def fn(x):
        a = x.numpy()
        return np.mean(a), a.sum(), a.max(), a.std(), np.argmax(a), a.min(axis=1)

    _check(fn, (_x(4, 3),), graphs=1)


def test_numpy_dtype_rules_for_int32():
    """NumPy's promotion, not kiln's: int32 / int -> float64, sum(int32) -> int64 (torch.compile's
    own torch._numpy gives float32 for the division)."""
    def fn(x):
        a = x.numpy()
        return a / 2, a.sum(), a * 2.5, np.exp(a), a + np.int64(1), a.mean(), a // 2, a % 3, -a

    x = kiln.from_numpy(np.arange(-3, 3, dtype=np.int32))
    _check(fn, (x,), graphs=1)


def test_numpy_scalars_are_strong_python_scalars_weak():
    def fn(x):
        a = x.numpy()
        return a * np.float64(2.0), a * 2.0, a + 1, (a > 0).astype(np.float32), a.astype(np.int64)

    _check(fn, (_x(5),), graphs=1)


def test_shape_functions_and_indexing():
    def fn(x):
        a = x.numpy()
        b = a.reshape(-1)[::2]
        c = np.concatenate([a, a * 2], axis=1).T
        d = np.where(a > 0, a, 0.0)
        e = np.clip(a, -0.5, 0.5)
        f = a[1, 2], a[:, 0], np.expand_dims(a, 0).shape, a.shape, a.ndim, a.dtype
        return b, c, d, e, f, np.stack([a, a]).mean(axis=(0, 1)), a @ a.T

    _check(fn, (_x(4, 3),), graphs=1)


def test_returned_array_shares_the_tensors_memory_as_eagerly():
    def fn(x):
        a = x.numpy()
        a += 1
        return x * 2

    def run(f):
        x = _x(6)
        return f(x), x

    kiln.compiler.reset()
    got, want = run(kiln.compile(fn, backend="eager")), run(fn)
    _same(got, want)


def test_numpy_asarray_of_a_tensor():
    def fn(x):
        a = np.asarray(x)
        return kiln.as_tensor(a * 2) + kiln.tensor(np.abs(a))

    _check(fn, (_x(3, 2),), graphs=1)


def test_constant_numpy_calls_fold():
    """np.float32(0.5), np.tanh(0.5), np.zeros(3) on constants: no break (torch: 1 graph)."""
    def fn(x):
        y = x * 2
        s = np.float32(0.5)
        z = np.zeros(3)
        return y * s + float(np.tanh(0.5)), z

    _check(fn, (_x(8),), graphs=1)


def test_float_of_an_array_is_a_break():
    def fn(x):
        m = float(np.mean(x.numpy()))
        return x * m

    _check(fn, (_x(8),), graphs=2, breaks=1, reason="float() of a numpy array")


def test_branch_on_an_array_is_a_break():
    def fn(x):
        a = x.numpy()
        if a.sum() > 0:
            return x + 1
        return x - 1

    _check(fn, (_x(8),), graphs=2, breaks=1)
    _check(fn, (_x(8) - 10,), graphs=2, breaks=1)


def test_item_is_a_break_after_the_graph():
    def fn(x):
        return x.numpy().sum().item()

    _check(fn, (_x(8),), graphs=1, breaks=0, reason="ndarray.item()")


def test_numpy_random_is_a_break():
    """Drawn by NumPy's own generator, the numbers equal eager's (torch.compile draws them with
    torch's generator instead, so they differ from eager; kiln keeps NumPy's stream)."""
    def fn(x):
        y = x * 2
        return y + kiln.from_numpy(np.random.rand(8))

    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    np.random.seed(3)
    want = fn(_x(8))
    np.random.seed(3)
    got = compiled(_x(8))
    _same(got, want)
    kiln.compiler.reset()
    e = kiln.explain(fn)(_x(8))
    assert any("np.random.rand is not traced" in r.reason for r in e.break_reasons), str(e)


def test_unsupported_function_breaks_naming_it():
    def fn(x):
        a = x.numpy() * 2
        return np.fft.fft(a)

    kiln.compiler.reset()
    e = kiln.explain(fn)(_x(8))
    assert any("numpy function" in r.reason and "fft" in r.reason for r in e.break_reasons), str(e)
    _same(kiln.compile(fn, backend="eager")(_x(8)), fn(_x(8)))


def test_fullgraph_raises_at_a_numpy_break():
    def fn(x):
        return float(x.numpy().sum())

    kiln.compiler.reset()
    with pytest.raises(Exception, match="float\\(\\) of a numpy array"):
        kiln.compile(fn, backend="eager", fullgraph=True)(_x(8))


def test_numpy_of_a_tensor_that_requires_grad_raises_as_eagerly():
    def fn(x):
        return x.numpy() * 2

    x = _x(4)
    x.requires_grad_()
    with pytest.raises(RuntimeError, match="requires grad"):
        fn(x)
    kiln.compiler.reset()
    with pytest.raises(RuntimeError, match="requires grad"):
        kiln.compile(fn, backend="eager")(x)


def test_function_of_ndarrays():
    """A NumPy-written function compiled with ndarray arguments: one graph, ndarray results,
    guarded on the arrays' dtype and shape (a new shape recompiles)."""
    def fn(a, b):
        return np.sqrt(np.abs(a)) + a.T @ b, (a * b).sum(axis=1)

    r = np.random.default_rng(1)
    a = r.standard_normal((3, 3)).astype(np.float32)
    b = r.standard_normal((3, 3)).astype(np.float32)
    _check(fn, (a, b), graphs=1)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for shape in ((3, 3), (4, 4), (3, 3)):
        a = r.standard_normal(shape)
        _same(compiled(a, a), fn(a, a))


def test_ndarray_live_across_a_break_keeps_compiling():
    def fn(x):
        a = x.numpy() * 2
        print("between", file=_SINK)
        return kiln.from_numpy(a + 1)

    _check(fn, (_x(4),), graphs=2, breaks=1, reason="print")


def test_isinstance_and_type_of_traced_arrays():
    def fn(x):
        a = x.numpy()
        s = a.sum()
        return isinstance(a, np.ndarray), type(s) is np.float32, isinstance(s, np.ndarray), a * 1

    _check(fn, (_x(3),), graphs=1)


class _Sink:
    def write(self, text):
        pass


_SINK = _Sink()


def test_negative_step_slices():
    def fn(x):
        a = x.numpy()
        return a[::-1], a[:, ::-2], a[2:0:-1, 1], np.argsort(a, axis=1, kind="stable")

    _check(fn, (_x(4, 5),), graphs=1)


def test_numpy_call_that_changes_numpy_state_is_a_break():
    """On constants, only NumPy's pure functions run at the trace: np.seterr would take effect
    once, at the trace."""
    def fn(x):
        y = x * 2
        old = np.seterr(all="ignore")
        np.seterr(**old)
        return y + 1

    before = np.geterr()
    try:
        e = _check(fn, (_x(4),), graphs=2, breaks=1)
        assert "np.seterr is not traced" in e.break_reasons[0].reason
    finally:
        np.seterr(**before)


def test_median_outer_diff():
    def fn(x, i):
        a, b = x.numpy(), i.numpy()
        return (np.median(a), np.median(a, axis=0), np.median(a[:3], axis=1, keepdims=True),
                np.median(b), np.outer(a[0], a[1]), np.diff(a, axis=0), np.diff(b, n=2))

    i = kiln.from_numpy(np.array([5, 1, 4, 4, 9, 2], dtype=np.int32))
    _check(fn, (_x(4, 5), i), graphs=1)


MEAN = np.array([0.5, -0.25, 1.0], dtype=np.float32)
LABELS = np.array(["a", "b"])


def test_global_arrays_and_conversions():
    """A global array is a graph constant viewing its memory (a write to it is seen by the next
    call); kiln.tensor/as_tensor of arrays with dtype=; an array of a dtype kiln lacks stays an
    object (its len() is a constant)."""
    def fn(x):
        a = x.numpy() - MEAN
        t = kiln.tensor(a, dtype=kiln.float64) + kiln.as_tensor(MEAN * 2, dtype=kiln.float64)
        return t, kiln.from_numpy(a).sum() + len(LABELS)

    _check(fn, (_x(4, 3),), graphs=1)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    compiled(_x(4, 3))
    old = MEAN.copy()
    try:
        MEAN[0] = 7.0
        _same(compiled(_x(4, 3)), fn(_x(4, 3)))
    finally:
        MEAN[:] = old


def test_python_lists_with_traced_arrays():
    """Python data mixed with traced arrays is made by graph ops (NumPy's dtype for it: a list of
    ints is int64, so float32 * [1, 2, 3] is float64)."""
    def fn(x):
        a = x.numpy()
        return a * [1, 2, 3], np.concatenate([a, [[1.0, 2.0, 3.0]]]), np.maximum(a, [0.1, 0.2, 0.3])

    _check(fn, (_x(4, 3),), graphs=1)
