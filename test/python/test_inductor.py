"""The "inductor" backend end to end: kiln.compile(fn, backend="inductor") against eager kiln
(graphs retraced to prims, lowered to loop programs, compiled to C++ and run through
kiln._C._codegen.CompiledKernel), the kernel cache across processes, and eager fallbacks."""
import os
import shutil
import subprocess
import sys
import warnings

import numpy as np
import pytest

import kiln
from kiln._C import _codegen

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    # One cache folder for the module: graphs shared by tests compile once.
    path = str(tmp_path_factory.getbasetemp() / "inductor-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    return path


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setattr(kiln.config, "strict", True)


def _rand(*shape, seed=0, dtype=np.float32):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check(fn, *args, tol=1e-5):
    want = _flat(fn(*args))
    got = _flat(kiln.compile(fn, backend="inductor")(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)


def test_pointwise_chain_with_broadcasting(strict):
    def fn(x, y, z):
        a = (x * 2.0 + 1.0).relu()
        return kiln.sigmoid(a) * y - kiln.tanh(x) / (1.0 + z.abs())

    _check(fn, _rand(16, 32), _rand(32, seed=1), _rand(16, 1, seed=2))


def test_softmax_and_log_softmax(strict):
    def fn(x):
        return kiln.softmax(x, dim=-1), kiln.log_softmax(x, dim=0)

    _check(fn, _rand(8, 40) * 4)


def test_manual_softmax_and_layer_norm(strict):
    def fn(x, w, b):
        e = (x - x.amax(dim=-1, keepdim=True)).exp()
        sm = e / e.sum(dim=-1, keepdim=True)
        mean = x.mean(dim=-1, keepdim=True)
        var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
        ln = (x - mean) / (var + 1e-5).sqrt() * w + b
        return sm, ln

    _check(fn, _rand(12, 48), _rand(48, seed=1), _rand(48, seed=2), tol=1e-4)


def test_module_mlp(strict):
    kiln.manual_seed(0)
    mlp = kiln.nn.Sequential(kiln.nn.Linear(16, 32), kiln.nn.GELU(), kiln.nn.Linear(32, 8))
    x = _rand(5, 16)
    with kiln.no_grad():  # inference: parameters require grad, the graph needs no autograd
        want = mlp(x)
        got = kiln.compile(mlp, backend="inductor")(x)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        # Parameters are read at every call: an update after compiling is seen.
        mlp[2].bias.add_(1.0)
        np.testing.assert_allclose(kiln.compile(mlp, backend="inductor")(x).numpy(), mlp(x).numpy(),
                                   rtol=1e-4, atol=1e-5)


def test_graph_needing_autograd_runs_through_the_engine(strict):
    # A graph whose parameters require grad compiles for training (AOT autograd, test_aot.py):
    # its result has a grad_fn and backward reaches the parameters.
    kiln.manual_seed(0)
    lin = kiln.nn.Linear(4, 3)
    x = _rand(2, 4)
    out = kiln.compile(lambda x: lin(x).relu().sum(), backend="inductor")(x)
    assert out.grad_fn is not None and out.grad_fn.name() == "CompiledFunctionBackward"
    out.backward()
    want = kiln.nn.Linear(4, 3)
    with kiln.no_grad():
        want.weight.copy_(lin.weight), want.bias.copy_(lin.bias)
    want(x).relu().sum().backward()
    np.testing.assert_allclose(lin.weight.grad.numpy(), want.weight.grad.numpy(), rtol=1e-6)


def test_views_and_non_contiguous_inputs(strict):
    def fn(x, t):
        a = x.permute(0, 2, 1).reshape(4, 30)
        b = a.transpose(0, 1)[::2, 1:3] + t[:15, :2]
        return a.sin(), b * 2.0, x.flip(0).sum(dim=1)

    t = _rand(2, 20).t()  # strides (1, 20)
    _check(fn, _rand(4, 6, 5), t)


def test_reductions(strict):
    def fn(x):
        return (x.sum(dim=1), x.sum(), x.amax(dim=2), x.amin(dim=(0, 1)), x.prod(dim=1),
                x.argmax(dim=1), x.var(dim=1), x.mean(dim=2, keepdim=True))

    _check(fn, _rand(6, 10, 7) * 0.5 + 1, tol=1e-4)


def test_mixed_dtypes(strict):
    def fn(x, i, h):
        a = x + i
        w = kiln.where(a > 0.25, a, x)
        return w, a > 0, h * h, (h * h).sum(dim=0), i // 3, x.double() * 2

    i = kiln.from_numpy(np.random.default_rng(3).integers(-20, 20, (5, 9)))
    h = kiln.from_numpy(np.random.default_rng(4).uniform(0.5, 2, 9).astype(np.float16))
    _check(fn, _rand(5, 9), i, h, tol=2e-3)


def test_output_view_of_input_stays_a_view(strict):
    def fn(x):
        return x.t(), x[1:] * 2.0, x.view(-1)

    x = _rand(4, 6)
    _check(fn, x)
    t, _, v = kiln.compile(fn, backend="inductor")(x)
    assert t.data_ptr() == x.data_ptr() and v.data_ptr() == x.data_ptr()


def test_compiled_kernel_checks_inputs():
    def fn(x):
        return x * 2.0 + 1.0

    from kiln.compiler.inductor import compile_graph
    import kiln.fx as fx

    gm = fx.GraphModule({}, fx.parse("""graph @g(%x: f32[4, 6]) {
  %m = call_function aten.mul.Tensor(%x, 2.0)
  output (%m,)
}"""))
    kernel, attrs, _ = compile_graph(gm)
    assert attrs == [] and isinstance(kernel, _codegen.CompiledKernel)
    (out,) = kernel(_rand(4, 6))
    assert tuple(out.shape) == (4, 6) and out.is_contiguous()
    with pytest.raises(TypeError, match="takes 1 tensor inputs, got 2"):
        kernel(_rand(4, 6), _rand(4, 6))
    with pytest.raises(RuntimeError, match=r"compiled for float32\[4, 6\]"):
        kernel(_rand(4, 5))
    with pytest.raises(RuntimeError, match="float64"):
        kernel(_rand(4, 6, dtype=np.float64))
    with pytest.raises(RuntimeError, match="strides"):
        kernel(_rand(6, 4).t())
    with pytest.raises(TypeError, match="must be a Tensor"):
        kernel(3.0)


def _write_through_as_strided(x, y):
    # prims.as_strided has no loop lowering, and functionalize turns a write through as_strided
    # of a contiguous base into index_put, but not through as_strided of a view (the transpose
    # here): the intermediate's making, views and writes run as eager steps (fallback.py).
    h = (x * 2).view(2, 2).t()
    h.as_strided((2,), (2,)).copy_(y)
    return h.exp()


def _fallback_reading_a_written_input(x, y):
    # A fallback (convolution) reads the caller's tensor after a compiled write into it: the
    # graph cannot be cut into segments (fallback.py), so it is not compiled.
    x.view(-1)[:2].copy_(y)
    s = kiln.nn.functional.conv1d(x[None], x[None][:, :, :1])
    x.add_(s.sum())
    return s


def test_write_through_as_strided_of_a_view_runs_eagerly_between_segments(strict):
    x, y = _rand(4), _rand(2, seed=1)
    kiln.compiler.reset()
    got = kiln.compile(_write_through_as_strided, backend="inductor")(x, y)
    np.testing.assert_allclose(got.numpy(), _write_through_as_strided(x, y).numpy(), rtol=1e-6)


def test_write_through_as_strided_of_an_intermediate_compiles(strict):
    # diagonal() of an intermediate written in place, and the gradient of any as_strided view
    # (zeros, then a copy_ through their as_strided view): functionalized into index_put.
    def fn(x, y):
        h = x * 2
        h.as_strided((2,), (2,)).copy_(y)
        h.view(2, 2).diagonal().mul_(3)
        return h.exp()

    x, y = _rand(4), _rand(2, seed=1)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(fn, backend="inductor")(x, y).numpy(), fn(x, y).numpy(), rtol=1e-6)
    w = _rand(5, 5, seed=2).requires_grad_()
    w_eager = w.detach().clone().requires_grad_()
    g = lambda w: ((w @ w).diagonal() * kiln.arange(5.0)).sum()  # noqa: E731
    kiln.compile(g, backend="inductor")(w).backward()
    g(w_eager).backward()
    np.testing.assert_allclose(w.grad.numpy(), w_eager.grad.numpy(), rtol=1e-5, atol=1e-5)


def test_as_strided_offset_into_a_sliced_input_counts_from_its_storage(strict):
    # as_strided's storage_offset counts from the start of the input's storage, not from the
    # slice the input is: the traced fakes start at offset 0, so such a call runs eagerly (it was
    # read relative to the slice, silently wrong). diagonal() of the same slice stays compiled.
    def fn(x):
        return x.as_strided((2, 2), (1, 5), 3) * 2 + x.diagonal().sum(), x.as_strided((3,), (2,)) + 1

    data = _rand(6, 5)
    for x in (data[1:4, 1:4], data[2:5], data[:3, :3]):
        kiln.compiler.reset()
        for got, want in zip(kiln.compile(fn, backend="inductor")(x), fn(x)):
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    kiln.compiler.reset()
    x = data[1:4, 1:4]
    out = kiln.explain(fn)(x)
    assert any("as_strided with a storage_offset" in str(b) for b in out.all_break_reasons), out.all_break_reasons


def test_unsupported_graph_falls_back_with_warning():
    fn = _fallback_reading_a_written_input
    x, y = _rand(2, 2), _rand(2, seed=1)
    x_eager = x.clone()
    kiln.compiler.reset()
    with pytest.warns(UserWarning, match=r"(?s)backend .inductor. failed.*reads storage the graph writes"):
        got = kiln.compile(fn, backend="inductor")(x, y)
    np.testing.assert_allclose(got.numpy(), fn(x_eager, y).numpy())
    np.testing.assert_allclose(x.numpy(), x_eager.numpy())


def test_unsupported_graph_raises_in_strict_mode(strict):
    kiln.compiler.reset()  # the test above left this function's code to run eagerly
    with pytest.raises(Exception, match="reads storage the graph writes"):
        kiln.compile(_fallback_reading_a_written_input, backend="inductor")(_rand(2, 2), _rand(2, seed=1))


_SCRIPT = """
import kiln
def fn(x, y):
    return (x * y + 1.0).tanh().sum(dim=1)
x = kiln.ones(8, 16)
print(kiln.compile(fn, backend="inductor")(x, x * 2).tolist())
"""


def test_second_process_hits_the_kernel_cache(cache_dir, tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "fresh"), KILN_LOGS="output_code")
    runs = [subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout == runs[1].stdout
    assert "compiled):" in runs[0].stderr and "cache hit):" in runs[1].stderr
    assert "extern \"C\" int kiln_entry" in runs[1].stderr


def test_debug_dir_gets_loop_program_and_source(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.config, "debug_dir", str(tmp_path))

    def dumped(x):
        return x.exp() + 1.0

    kiln.compile(dumped, backend="inductor")(_rand(3, 4))
    files = {f for _, _, fs in os.walk(tmp_path) for f in fs}
    assert {"loops.kir", "output_code.cpp"} <= files


def test_new_input_strides_recompile(strict):
    def fn(x):
        return x * 2.0 + 1.0

    compiled = kiln.compile(fn, backend="inductor")
    a, b = _rand(3, 4), _rand(4, 3, seed=1).t()
    for x in (a, b, a):
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy())
