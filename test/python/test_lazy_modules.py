"""Lazy modules (LazyLinear, LazyConv*, LazyConvTranspose*, LazyBatchNorm*, LazyInstanceNorm*)
against PyTorch: materialization on the first call (shapes, values after the same seed, the
class they become), state_dict of lazy and materialized modules, errors, and kiln.compile."""
import copy

import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import assert_match, both, need_torch, sample


def pair(shape, seed=0):
    return both(sample(shape, "float32", seed, -2, 2))


CASES = [  # (class name, constructor args, input shape)
    ("LazyLinear", (5,), (3, 7)),
    ("LazyLinear", (4, False), (2, 3, 6)),
    ("LazyConv1d", (4, 3), (2, 3, 9)),
    ("LazyConv2d", (4, 3, 2, 1), (2, 3, 8, 7)),
    ("LazyConv2d", (6, 3), (4, 8, 7)),                 # unbatched
    ("LazyConv3d", (4, 2), (2, 3, 4, 5, 4)),
    ("LazyConvTranspose1d", (4, 3, 2), (2, 3, 5)),
    ("LazyConvTranspose2d", (4, 3), (2, 3, 5, 4)),
    ("LazyConvTranspose3d", (2, 2, 2), (1, 3, 3, 3, 2)),
    ("LazyBatchNorm1d", (), (4, 3)),
    ("LazyBatchNorm2d", (), (2, 3, 4, 5)),
    ("LazyBatchNorm3d", (), (2, 3, 2, 3, 4)),
    ("LazyInstanceNorm1d", (), (2, 3, 5)),
    ("LazyInstanceNorm2d", (), (2, 3, 4, 5)),
    ("LazyInstanceNorm3d", (), (2, 3, 2, 3, 4)),
]


@pytest.mark.parametrize("case", range(len(CASES)))
def test_first_call_materializes_as_torch(case):
    torch = need_torch()
    name, args, shape = CASES[case]
    kiln.manual_seed(case)
    torch.manual_seed(case)
    km, tm = getattr(nn, name)(*args), getattr(torch.nn, name)(*args)
    assert km.has_uninitialized_params()
    assert isinstance(km.weight, nn.UninitializedParameter)
    assert repr(km.weight) == repr(tm.weight) == "<UninitializedParameter>"
    kx, tx = pair(shape, case)
    kiln.manual_seed(10 + case)
    torch.manual_seed(10 + case)
    kout, tout = km(kx), tm(tx)
    assert type(km).__name__ == type(tm).__name__ == name[len("Lazy"):]
    assert not km.has_uninitialized_params() if hasattr(km, "has_uninitialized_params") else True
    assert type(km.weight) is nn.Parameter
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert [n for n, _ in km.named_buffers()] == [n for n, _ in tm.named_buffers()]
    for (_, kp), (_, tp) in zip(km.state_dict().items(), tm.state_dict().items()):
        assert_match(kp, tp, rtol=1e-5, atol=1e-6)
    assert_match(kout, tout, rtol=1e-4, atol=1e-5)
    assert repr(km) == repr(tm)
    # The materialized parameters train: they are the module's, with gradients.
    kout.sum().backward()
    assert km.weight.grad is not None and km.weight.grad.shape == km.weight.shape


def test_parameters_keep_their_identity_through_materialization():
    m = nn.LazyLinear(3)
    w = m.weight
    m(kiln.ones(2, 4))
    assert m.weight is w and type(w) is nn.Parameter and w.requires_grad
    assert tuple(w.shape) == (3, 4)
    assert isinstance(m, nn.Linear) and m.in_features == 4
    assert not m._forward_pre_hooks


def test_state_dict_of_lazy_and_materialized_modules():
    torch = need_torch()
    lazy = nn.LazyLinear(3)
    sd = lazy.state_dict()
    assert set(sd) == {"weight", "bias"} and all(nn.parameter.is_lazy(v) for v in sd.values())
    # A materialized state loads into a lazy module: the placeholders take its shapes.
    src = nn.Linear(4, 3)
    dst = nn.LazyLinear(3)
    dst.load_state_dict(src.state_dict())
    assert tuple(dst.weight.shape) == (4, 3)[::-1]
    assert_match(dst.weight, src.weight)
    x = kiln.ones(2, 4)
    assert_match(dst(x), src(x))
    assert type(dst) is nn.Linear
    # A lazy state into a lazy module: nothing to copy.
    nn.LazyLinear(3).load_state_dict(nn.LazyLinear(3).state_dict())
    # A lazy state into a materialized module: torch's error.
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        nn.Linear(4, 3).load_state_dict(nn.LazyLinear(3).state_dict())
    with pytest.raises(RuntimeError, match="Can't access the shape of an uninitialized parameter"):
        torch.nn.Linear(4, 3).load_state_dict(torch.nn.LazyLinear(3).state_dict())
    bn = nn.LazyBatchNorm2d()
    assert set(bn.state_dict()) == {"weight", "bias", "running_mean", "running_var", "num_batches_tracked"}
    bn.load_state_dict(nn.BatchNorm2d(5).state_dict())
    assert tuple(bn.running_mean.shape) == (5,)


def test_uninitialized_placeholders_errors_and_conversions():
    torch = need_torch()
    p = nn.UninitializedParameter()
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        p.shape
    with pytest.raises(RuntimeError, match="Can't access the shape"):
        torch.nn.UninitializedParameter().shape
    m = nn.LazyLinear(3).double()
    assert nn.parameter.is_lazy(m.weight) and m.weight.dtype == kiln.float64
    m(kiln.ones(2, 5, dtype=kiln.float64))
    assert m.weight.dtype == kiln.float64
    c = copy.deepcopy(nn.LazyConv2d(4, 3))
    assert nn.parameter.is_lazy(c.weight)
    with pytest.raises(RuntimeError, match="Expected 3D \\(unbatched\\) or 4D \\(batched\\) input to LazyConv2d"):
        nn.LazyConv2d(4, 3)(kiln.ones(2, 3, 4, 5, 6))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.LazyConv2d(4, 3, groups=2)(kiln.ones(1, 3, 5, 5))


def test_custom_lazy_module_with_the_mixin():
    class Lazy(nn.modules.lazy.LazyModuleMixin, nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.UninitializedParameter()

        def initialize_parameters(self, x):
            self.w.materialize((x.shape[-1],))
            with kiln.no_grad():
                self.w.fill_(2.0)

        def forward(self, x):
            return x * self.w

    m = Lazy()
    np.testing.assert_allclose(m(kiln.ones(2, 3)).detach().numpy(), np.full((2, 3), 2.0))
    assert type(m) is Lazy and not m.has_uninitialized_params()


def test_lazy_model_under_compile_matches_torch():
    torch = need_torch()

    def build(T):
        return T.nn.Sequential(T.nn.LazyConv2d(4, 3, padding=1), T.nn.LazyBatchNorm2d(), T.nn.ReLU(),
                               T.nn.Flatten(), T.nn.LazyLinear(5))

    kiln.manual_seed(3)
    torch.manual_seed(3)
    km, tm = build(kiln), build(torch)
    kx, tx = pair((2, 3, 6, 6), 5)
    compiled = kiln.compile(km)
    kiln.manual_seed(4)
    torch.manual_seed(4)
    kout, tout = compiled(kx), torch.compile(tm, backend="eager")(tx)
    assert_match(kout, tout, rtol=1e-4, atol=1e-5)
    assert [type(m).__name__ for m in km] == [type(m).__name__ for m in tm]
    kx2, tx2 = pair((2, 3, 6, 6), 6)
    assert_match(compiled(kx2), tm(tx2), rtol=1e-4, atol=1e-5)
    explain = kiln.explain(km)(kx2)
    assert explain.graph_break_count == 0, explain.break_reasons


def test_first_call_under_compile_is_traced_with_eager_values():
    """The first call of lazy layers compiles (the tracer runs the initialization hook, outside
    the graph, as torch.compile does): one graph, no break, and the parameters drawn from the
    generator as the eager first call draws them."""
    def build():
        kiln.manual_seed(11)
        m = nn.Sequential(nn.LazyLinear(6), nn.Tanh(), nn.LazyLinear(3), nn.LazyBatchNorm1d())
        return m.eval()

    x = kiln.randn(4, 5)
    eager = build()
    want = eager(x)
    compiled_model = build()
    explain = kiln.explain(compiled_model)(x)
    assert (explain.graph_count, explain.graph_break_count) == (1, 0), explain.break_reasons
    compiled_model = build()
    got = kiln.compile(compiled_model)(x)
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-6, atol=1e-6)
    for a, b in zip(eager.parameters(), compiled_model.parameters()):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert [type(m).__name__ for m in compiled_model] == ["Linear", "Tanh", "Linear", "BatchNorm1d"]


def test_lazy_initialization_error_under_compile_is_the_eager_one():
    m = nn.LazyConv1d(4, 3, groups=2)
    with pytest.raises(ValueError, match="divisible by groups"):
        kiln.compile(m)(kiln.randn(2, 3, 8))


def test_data_assignment_of_another_shape_or_dtype():
    torch = need_torch()
    for T in (kiln, torch):
        p = T.nn.Parameter(T.zeros(2))
        p.grad = T.ones(2)
        p.data = T.arange(12.0).reshape(3, 4)
        assert tuple(p.shape) == (3, 4) and p.requires_grad and p.is_leaf
        assert p.grad is not None and tuple(p.grad.shape) == (2,)
        p.data = T.ones(3, dtype=T.float64)
        assert p.dtype == T.float64
    with pytest.raises(TypeError, match="data must be a Tensor"):
        kiln.zeros(2).data = [1.0]
