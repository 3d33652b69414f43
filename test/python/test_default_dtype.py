"""kiln.set_default_dtype (torch.set_default_dtype): factories, Python floats, integer true
division, module parameters and the default complex dtype follow it, eagerly and compiled, and a
compiled graph is guarded on it (scientific code and PINNs set float64 once at the top)."""
import pytest

import kiln


@pytest.fixture
def float64_default():
    kiln.set_default_dtype(kiln.float64)
    try:
        yield
    finally:
        kiln.set_default_dtype(kiln.float32)


def test_factories_promotion_and_modules_follow_it(float64_default):
    f64 = kiln.float64
    assert kiln.get_default_dtype() == f64
    made = [kiln.zeros(2), kiln.ones(2), kiln.empty(1), kiln.rand(2), kiln.randn(2), kiln.full((2,), 1.0),
            kiln.arange(3.0), kiln.linspace(0, 1, 3), kiln.eye(2), kiln.tensor([1.0]), kiln.tensor(2.0),
            kiln.tensor([]), kiln.scalar_tensor(1), kiln.arange(3) / 2, kiln.arange(3) * 1.5,
            kiln.sqrt(kiln.tensor([4])), kiln.hann_window(4), kiln.fft.fftfreq(4)]
    assert [t.dtype for t in made] == [f64] * len(made)
    assert kiln.nn.Linear(3, 4).weight.dtype == f64 and kiln.nn.Conv2d(1, 1, 3).bias.dtype == f64
    assert kiln.tensor([1 + 2j]).dtype == kiln.complex128 and (kiln.arange(2) * 1j).dtype == kiln.complex128
    assert kiln.result_type(kiln.tensor([1]), 1.0) == f64 and kiln.finfo().eps == 2.0 ** -52
    # what does not follow it: explicit dtypes, integer factories, existing float32 tensors
    assert kiln.zeros(2, dtype=kiln.float32).dtype == kiln.float32 and kiln.arange(3).dtype == kiln.int64
    assert (kiln.ones(2, dtype=kiln.float32) * 2.5).dtype == kiln.float32


def test_rejects_non_floating_types():
    with pytest.raises(TypeError, match="only floating-point types"):
        kiln.set_default_dtype(kiln.int64)
    assert kiln.get_default_dtype() == kiln.float32


def test_compiled_graph_is_guarded_on_it():
    def fn(x):
        return x.sum() + kiln.ones(3).sum() + kiln.tensor(0.5) + (kiln.arange(4) / 3).sum()

    compiled = kiln.compile(fn)
    x = kiln.arange(4.0, dtype=kiln.float64)
    assert compiled(x).dtype == kiln.float64  # float32 factories promote with the float64 input
    kiln.set_default_dtype(kiln.float64)
    try:
        out = compiled(x)
        assert out.dtype == kiln.float64 and float(out) == pytest.approx(float(fn(x)))
        y = kiln.arange(4.0, dtype=kiln.float32)
        eager = fn(y)
        got = compiled(y)  # retraced: the graph made under float32 would give float32 factories
        assert got.dtype == eager.dtype == kiln.float64 and float(got) == pytest.approx(float(eager))
    finally:
        kiln.set_default_dtype(kiln.float32)
    y = kiln.arange(4.0, dtype=kiln.float32)
    assert compiled(y).dtype == kiln.float32


def test_training_in_float64_matches_eager(float64_default):
    kiln.manual_seed(0)
    model = kiln.nn.Sequential(kiln.nn.Linear(3, 8), kiln.nn.Tanh(), kiln.nn.Linear(8, 1))
    x, y = kiln.randn(16, 3), kiln.randn(16, 1)

    def loss_fn(x, y):
        return ((model(x) - y) ** 2).mean()

    eager = loss_fn(x, y)
    eager.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    compiled = kiln.compile(loss_fn)(x, y)
    compiled.backward()
    assert compiled.dtype == kiln.float64 and float(compiled) == pytest.approx(float(eager), rel=1e-12)
    for g, p in zip(grads, model.parameters()):
        assert float((p.grad - g).abs().max()) < 1e-12


def test_default_device_change_recompiles():
    # set_default_device / `with kiln.device(...)` decide where the graph's factories allocate:
    # a graph traced under one default is not reused under another.
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = kiln.compile(lambda x: x + kiln.zeros(2), backend=backend)
    x = kiln.ones(2)
    compiled(x)
    compiled(x)
    assert len(graphs) == 1
    kiln.set_default_device("meta")
    try:
        compiled(x.to("meta"))
    finally:
        kiln.set_default_device(None)
    assert len(graphs) == 2
    compiled(x)
    assert len(graphs) == 2
