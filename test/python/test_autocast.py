"""kiln.autocast (automatic mixed precision) against torch.autocast: which ops run in the
lower-precision dtype, which in float32, which promote; gradients; the cast cache; and the same
under kiln.compile (a `with autocast()` block inside the compiled code, and a compiled function
called inside autocast)."""
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))


def _libs():
    torch = pytest.importorskip("torch")
    return kiln, torch


def _ops(T, dtype):
    """Every output of a block run under autocast(dtype): (name, tensor)."""
    r = np.random.default_rng(0)

    def arr(*shape):
        return T.from_numpy(r.standard_normal(shape).astype(np.float32))

    F = T.nn.functional
    x, w, b = arr(6, 8), arr(4, 8), arr(4)
    img, k = arr(2, 3, 8, 8), arr(5, 3, 3, 3)
    q, kk, v = arr(2, 2, 6, 4), arr(2, 2, 6, 4), arr(2, 2, 6, 4)
    xd = T.from_numpy(r.standard_normal((3, 3)))  # float64: never cast
    idx = T.tensor([1, 0, 3])
    out = []
    with T.autocast("cpu", dtype=dtype):
        y = F.linear(x, w, b)
        out += [("linear", y), ("matmul", x @ w.T), ("mm", T.mm(x, w.T)),
                ("bmm", T.bmm(q[0], kk[0].transpose(1, 2))), ("addmm", T.addmm(b, x, w.T)),
                ("conv2d", F.conv2d(img, k, padding=1)),
                ("sdpa", F.scaled_dot_product_attention(q, kk, v, is_causal=True)),
                ("cat_promote", T.cat([y, x[:, :4]], 1)), ("stack_same", T.stack([y, y])),
                ("softmax", y.softmax(-1)), ("layer_norm", F.layer_norm(y, (4,))),
                ("gelu", F.gelu(y)), ("add_mixed", y + x[:, :4]), ("sum", y.sum()),
                ("mse_loss", F.mse_loss(y, T.zeros(6, 4))),
                ("cross_entropy", F.cross_entropy(y, idx.repeat(2))),
                ("double_mm", xd @ xd), ("int_add", idx + 1),
                # written in Python by kiln, float32 under torch's autocast
                ("huber_loss", F.huber_loss(y, T.zeros(6, 4))), ("kl_div", F.kl_div(y, y.softmax(-1))),
                ("cdist", T.cdist(y, y)), ("trace", T.trace(y @ y.T)),
                ("pad_reflect", F.pad(y.unsqueeze(0), (1, 1), mode="reflect")),
                ("pad_constant", F.pad(y, (1, 1)))]
    return out


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_op_dtypes_and_values_match_torch(dtype):
    kiln_, torch = _libs()
    got = _ops(kiln_, getattr(kiln_, dtype))
    want = _ops(torch, getattr(torch, dtype))
    for (name, a), (_, b) in zip(got, want):
        assert str(a.dtype).split(".")[1] == str(b.dtype).split(".")[1], name
        tol = 1e-2 if b.dtype in (torch.bfloat16, torch.float16) else 1e-5
        np.testing.assert_allclose(a.double().numpy(), b.double().numpy(), rtol=tol, atol=tol, err_msg=name)


def test_gradients_and_cast_cache_match_torch():
    """A weight read by several lower-precision ops in one region is cast once (the cache), so
    its gradient is summed in bfloat16 at that cast, then cast back: torch's exact values."""
    kiln_, torch = _libs()

    def run(T):
        T.manual_seed(0)
        lin = T.nn.Linear(8, 8)
        h = T.randn(4, 8, requires_grad=True)
        with T.autocast("cpu"):
            y = h
            for _ in range(3):
                y = T.tanh(lin(y))
            loss = y.float().pow(2).sum()
        loss.backward()
        return [t.dtype for t in (y, lin.weight.grad, h.grad)], [t.detach().double().numpy() for t in
                                                               (loss, lin.weight.grad, lin.bias.grad, h.grad)]

    (dk, vk), (dt, vt) = run(kiln_), run(torch)
    assert [str(d).split(".")[1] for d in dk] == [str(d).split(".")[1] for d in dt]
    for a, b in zip(vk, vt):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def test_nesting_disable_and_state_functions():
    with kiln.autocast("cpu"):
        with kiln.autocast("cpu", enabled=False):
            assert not kiln.is_autocast_enabled("cpu")
            assert (kiln.ones(2, 2) @ kiln.ones(2, 2)).dtype == kiln.float32
        with kiln.autocast("cpu", dtype=kiln.float16):
            assert (kiln.ones(2, 2) @ kiln.ones(2, 2)).dtype == kiln.float16
        assert kiln.get_autocast_dtype("cpu") == kiln.bfloat16
        assert kiln.is_autocast_cpu_enabled()
    assert not kiln.is_autocast_enabled("cpu") and kiln.get_autocast_cpu_dtype() == kiln.bfloat16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kiln.autocast("cpu", dtype=kiln.float64):
            assert not kiln.is_autocast_enabled("cpu")
    assert any("not supported. Disabling autocast" in str(w.message) for w in caught)
    with pytest.raises(RuntimeError, match="unsupported autocast device_type 'xla'"):
        kiln.autocast("xla")


def test_custom_fwd_bwd():
    """custom_fwd(cast_inputs=float32): the function runs in float32 with autocast off, even
    inside an autocast region; its backward runs under the forward's autocast state."""
    class Square(kiln.autograd.Function):
        @staticmethod
        @kiln.amp.custom_fwd(device_type="cpu", cast_inputs=kiln.float32)
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            assert not kiln.is_autocast_enabled("cpu")
            return x @ w

        @staticmethod
        @kiln.amp.custom_bwd(device_type="cpu")
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return g @ w.T, x.T @ g

    x = kiln.ones(2, 3, dtype=kiln.bfloat16, requires_grad=True)
    w = kiln.ones(3, 2, requires_grad=True)
    with kiln.autocast("cpu"):
        y = Square.apply(x, w)
    assert y.dtype == kiln.float32
    y.sum().backward()
    assert x.grad.dtype == kiln.bfloat16 and x.grad.tolist() == [[2.0] * 3] * 2


def test_compiled_autocast_block_one_graph_equals_eager():
    def f(x, w):
        h = x * 2
        with kiln.autocast("cpu"):
            y = kiln.nn.functional.linear(h, w).relu()
            s = y.softmax(-1)
        return s.float() + h[:, :4], y

    r = np.random.default_rng(1)
    x = kiln.from_numpy(r.standard_normal((5, 8)).astype(np.float32))
    w = kiln.from_numpy(r.standard_normal((4, 8)).astype(np.float32))
    kiln.compiler.reset()
    report = kiln.explain(f)(x, w)
    assert (report.graph_count, report.graph_break_count) == (1, 0)
    eager, compiled = f(x, w), kiln.compile(f)(x, w)
    assert compiled[1].dtype == kiln.bfloat16 and not kiln.is_autocast_enabled("cpu")
    for a, b in zip(eager, compiled):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.float().numpy(), b.float().numpy())


def test_compiled_function_called_inside_and_outside_autocast_recompiles():
    calls = []

    def backend(gm, example_inputs):
        calls.append(1)
        return gm

    def f(x, w):
        return (x @ w).relu()

    x, w = kiln.randn(4, 4), kiln.randn(4, 4)
    g = kiln.compile(f, backend=backend)
    assert g(x, w).dtype == kiln.float32
    with kiln.autocast("cpu"):
        out = g(x, w)
        assert out.dtype == kiln.bfloat16
        np.testing.assert_array_equal(out.float().numpy(), f(x, w).float().numpy())
    assert g(x, w).dtype == kiln.float32 and len(calls) == 2
    c = kiln.compile(f)
    with kiln.autocast("cpu"):
        np.testing.assert_array_equal(c(x, w).float().numpy(), f(x, w).float().numpy())


@pytest.mark.parametrize("model", ["gpt", "cnn"])
def test_training_under_autocast_matches_torch(model):
    """Three AdamW steps of the GPT-style model and the CNN with the forward under
    autocast(bfloat16), eager and compiled, against torch: losses equal within bfloat16 noise."""
    kiln_, torch = _libs()
    from training_models import cnn, gpt_classes

    def run(T, compiled):
        T.manual_seed(0)
        r = np.random.default_rng(0)
        if model == "gpt":
            m = gpt_classes(T)(vocab_size=32, block_size=8, n_layer=1, n_head=2, n_embd=16)
            idx = r.integers(0, 32, size=(2, 8)).astype(np.int64)
            x, y = T.from_numpy(idx.copy()), T.from_numpy(np.roll(idx, -1, 1).copy())

            def loss_fn():
                return m(x, y)[1]
        else:
            m = cnn(T)
            x = T.from_numpy(r.standard_normal((4, 3, 16, 16)).astype(np.float32))
            y = T.from_numpy(r.integers(0, 10, 4).astype(np.int64))

            def loss_fn():
                return T.nn.functional.cross_entropy(m(x), y)
        opt = T.optim.AdamW(m.parameters(), lr=1e-3)
        f = T.compile(loss_fn) if compiled else loss_fn
        losses = []
        for _ in range(3):
            opt.zero_grad()
            with T.autocast("cpu", dtype=T.bfloat16):
                loss = f()
            assert loss.dtype == T.float32
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses

    want = run(torch, False)
    np.testing.assert_allclose(run(kiln_, False), want, rtol=2e-3)
    np.testing.assert_allclose(run(kiln_, True), want, rtol=2e-3)


def test_get_autocast_dtype_keeps_the_dtype_alive():
    """Regression: _get_autocast_dtype stole a reference to the shared dtype object, so repeated
    calls freed it (heap corruption, a crash in a later test)."""
    before = sys.getrefcount(kiln.bfloat16)
    for _ in range(2000):
        kiln.get_autocast_dtype("cpu")
    assert sys.getrefcount(kiln.bfloat16) >= before  # a stolen reference per call: 2000 fewer


def test_warnings_of_wrapped_losses_point_at_the_caller():
    """kl_div and the legacy size_average/reduce warnings name the user's line, not kiln's
    autocast wrapper around the loss."""
    F, x = kiln.nn.functional, kiln.zeros(2, 3)
    for call in (lambda: F.kl_div(x, x), lambda: F.margin_ranking_loss(x, x, x, size_average=True)):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        assert caught and all(w.filename == __file__ for w in caught), [(w.filename, str(w.message)) for w in caught]
