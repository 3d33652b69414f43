"""Graph breaks kiln made where torch.compile traces on (issue 16, session 14): each test pins
the graph and break counts torch.compile gets on the same code, and the results against eager."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn


pytestmark = pytest.mark.usefixtures("strict_capture")


def _counts(fn, *args):
    e = kiln.explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def _close(a, b, atol=1e-5):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=1e-5, atol=atol)


# nn.utils.weight_norm's forward pre-hook (WeightNorm) sets `module.weight` from weight_g and
# weight_v before each forward. Run for real while tracing, it read the real parameters (a
# break at every weight-normed layer: a WaveNet stack made 8 graphs, torch.compile 1).
def test_weight_norm_hook_traces_into_one_graph():
    warnings.simplefilter("ignore", FutureWarning)
    kiln.manual_seed(0)
    convs = nn.ModuleList([nn.utils.weight_norm(nn.Conv1d(3, 3, 2, dilation=d)) for d in (1, 2)])

    def fn(x):
        for conv in convs:
            x = kiln.tanh(conv(nn.functional.pad(x, (conv.dilation[0], 0))))
        return x.sum(dim=2)

    assert _counts(fn, kiln.randn(2, 3, 8)) == (1, 0)
    compiled = kiln.compile(fn)
    for _ in range(3):
        x = kiln.randn(2, 3, 8)
        with kiln.no_grad():
            convs[0].weight_g.mul_(1.5)  # the weight is recomputed from the parameters at each call
        got = compiled(x)
        # The hook's store is replayed: the module's weight is the real computed tensor.
        assert convs[1].weight.device.type == "cpu" and convs[1].weight.grad_fn is not None
        _close(got, fn(x))
    got.sum().backward()
    assert convs[0].weight_v.grad is not None and convs[0].weight_g.grad.shape == (3, 1, 1)


def test_setattr_builtin_on_a_module_is_a_replayed_store():
    lin = nn.Linear(3, 3)

    def fn(x):
        y = lin(x)
        setattr(lin, "last_scale", 2.0)
        return y * lin.last_scale

    x = kiln.randn(2, 3)
    assert _counts(fn, x) == (1, 0)
    lin.last_scale = 0.0
    _close(kiln.compile(fn)(x), lin(x) * 2.0)
    assert lin.last_scale == 2.0


# kiln.set_printoptions of constants is a call replayed after the graph (torch.compile traces its
# stores into PRINT_OPTS): it used to be a break at the call.
def test_set_printoptions_is_replayed_after_the_graph():
    def fn(x, precision):
        y = x * 3
        kiln.set_printoptions(precision=4)
        kiln.set_printoptions(precision=precision)
        return y + 1, f"{y}"

    x = kiln.tensor([1.0 / 7, 2.0 / 7])
    try:
        assert _counts(fn, x, 2) == (1, 0)
        compiled = kiln.compile(fn)
        for precision in (2, 3):
            kiln.set_printoptions(profile="default")
            got, text = compiled(x, precision)
            assert kiln.get_printoptions()["precision"] == precision  # replayed, in order
            want, eager_text = fn(x, precision)
            assert text == eager_text and ("0.43," if precision == 2 else "0.429,") in text
            _close(got, want)
    finally:
        kiln.set_printoptions(profile="default")


def test_set_printoptions_after_an_fstring_of_a_tensor_stays_a_break():
    # The glue formats f-strings after the graph: one made before the call would see the new
    # options, so that call is a break.
    def fn(x):
        y = x * 3
        before = f"{y}"
        kiln.set_printoptions(precision=2)
        after = f"{y}"
        kiln.set_printoptions(profile="default")
        return y + 1, before, after

    x = kiln.tensor([1.0 / 7, 2.0 / 7])
    try:
        assert _counts(fn, x) == (2, 1)
        got = kiln.compile(fn)(x)
        want = fn(x)
        assert got[1] == want[1] and got[2] == want[2] and got[1] != got[2]
    finally:
        kiln.set_printoptions(profile="default")


# A logging call is a break at the call, as with torch.compile: traced, a disabled logger's
# level check was specialized and an enabled one's handlers ran once, at the trace.
def test_logging_calls_break_like_torch():
    import io
    import logging

    log = logging.getLogger("kiln_test_graph_breaks_more2")
    stream = io.StringIO()
    log.addHandler(logging.StreamHandler(stream))
    log.setLevel(logging.INFO)
    log.propagate = False

    def fn(x):
        y = x.sin()
        log.info("step %d", 3)
        return y.cos()

    x = kiln.randn(4)
    assert _counts(fn, x) == (2, 1)
    compiled = kiln.compile(fn)
    for _ in range(2):
        _close(compiled(x), x.sin().cos())
    assert stream.getvalue().count("step 3") == 3  # explain's call and the two compiled ones


def test_spectral_norm_hook_traces_into_one_graph():
    # The same for spectral_norm's pre-hook: its power iteration updates the u/v buffers in place.
    def model():
        kiln.manual_seed(0)
        return nn.utils.spectral_norm(nn.Linear(4, 3))

    def fn(m, x):
        return m(x).sum(dim=1)

    x = kiln.randn(2, 4)
    assert _counts(fn, model(), x) == (1, 0)
    compiled_model, eager_model = model(), model()
    compiled = kiln.compile(fn)
    for _ in range(3):
        _close(compiled(compiled_model, x), fn(eager_model, x))
        _close(compiled_model.weight_u, eager_model.weight_u)


def test_dynamo_graph_break_splits_the_graph_as_torch():
    """kiln._dynamo.graph_break() (torch._dynamo.graph_break, which kiln lacked: an
    AttributeError) is a break at the call: the graph before it and the resume function's graph
    after it (torch.compile: 2 graphs, 1 break); eagerly it does nothing; fullgraph raises."""
    def fn(x):
        a = x.sin() * 2
        kiln._dynamo.graph_break()
        return a.cos() + 1

    x = kiln.randn(5)
    want = fn(x)
    compiled = kiln.compile(fn)
    for _ in range(2):
        _close(compiled(x), want)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count, len(e.break_reasons)) == (2, 1, 1), str(e)
    assert "graph_break()" in e.break_reasons[0].reason
    kiln.compiler.reset()
    with pytest.raises(kiln.compiler.Unsupported, match="graph_break"):
        kiln.compile(fn, fullgraph=True)(x)
