"""kiln.nn.init (statistics and formulas; the values themselves equal torch's for a seed: test_random_torch.py) and kiln.nn.utils."""
import math

import numpy as np
import pytest

import kiln
from kiln import nn
from kiln.nn import init
from oracle import assert_match, both, need_torch, sample


def test_calculate_gain_and_fans_match_torch():
    torch = need_torch()
    for nl, param in [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None), ("relu", None),
                      ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]:
        assert init.calculate_gain(nl, param) == pytest.approx(torch.nn.init.calculate_gain(nl, param))
    for shape in [(3, 4), (8, 3, 5, 5), (2, 6, 7)]:
        assert init._calculate_fan_in_and_fan_out(kiln.empty(*shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    with pytest.raises(ValueError, match="Unsupported nonlinearity"):
        init.calculate_gain("foo")
    with pytest.raises(ValueError, match="fewer than 2 dimensions"):
        init.xavier_uniform_(kiln.empty(5))


@pytest.mark.parametrize("fn,kwargs,bound,std", [
    ("xavier_uniform_", {}, math.sqrt(6 / (200 + 300)), math.sqrt(2 / (200 + 300))),
    ("xavier_normal_", {"gain": 2.0}, None, 2 * math.sqrt(2 / (200 + 300))),
    ("kaiming_uniform_", {"a": math.sqrt(5)}, math.sqrt(6 / 6 / 200), math.sqrt(2 / 6 / 200)),
    ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}, None, math.sqrt(2 / 300)),
    ("uniform_", {"a": -0.5, "b": 1.5}, None, 2 / math.sqrt(12)),
    ("normal_", {"mean": 1.0, "std": 0.1}, None, 0.1),
])
def test_initializer_statistics(fn, kwargs, bound, std):
    kiln.manual_seed(0)
    w = nn.Parameter(kiln.empty(300, 200))
    out = getattr(init, fn)(w, **kwargs)
    assert out is w
    a = w.detach().numpy()
    if bound is not None:
        assert np.abs(a).max() <= bound * (1 + 1e-6) and np.abs(a).max() > 0.98 * bound
    assert a.std() == pytest.approx(std, rel=0.02)


def test_trunc_normal_is_bounded_and_has_truncated_moments():
    kiln.manual_seed(3)
    for dtype in (kiln.float32, kiln.float64):
        w = init.trunc_normal_(kiln.empty(200000, dtype=dtype), mean=0.5, std=2.0, a=-1.0, b=3.0)
        a = w.detach().numpy()
        assert a.min() >= -1.0 and a.max() <= 3.0
        # Truncated normal on [(a-mu)/s, (b-mu)/s] = [-0.75, 1.25]: mean and std from the closed form.
        alpha, beta = -0.75, 1.25
        phi = lambda x: math.exp(-x * x / 2) / math.sqrt(2 * math.pi)  # noqa: E731
        Z = 0.5 * (math.erf(beta / math.sqrt(2)) - math.erf(alpha / math.sqrt(2)))
        mean = 0.5 + 2.0 * (phi(alpha) - phi(beta)) / Z
        var = 4.0 * (1 + (alpha * phi(alpha) - beta * phi(beta)) / Z - ((phi(alpha) - phi(beta)) / Z) ** 2)
        assert a.mean() == pytest.approx(mean, abs=0.01)
        assert a.std() == pytest.approx(math.sqrt(var), rel=0.01)


def test_constant_ones_zeros_eye_and_orthogonal():
    w = kiln.empty(3, 4)
    assert np.all(init.constant_(w, 0.25).numpy() == 0.25)
    assert np.all(init.ones_(w).numpy() == 1) and np.all(init.zeros_(w).numpy() == 0)
    assert np.array_equal(init.eye_(w).numpy(), np.eye(3, 4, dtype=np.float32))
    with pytest.raises(ValueError, match="Only tensors with 2 dimensions are supported"):
        init.eye_(kiln.empty(2, 2, 2))
    kiln.manual_seed(0)
    for shape in [(5, 3), (3, 5), (4, 2, 3)]:
        q = init.orthogonal_(kiln.empty(*shape), gain=2.0).numpy().reshape(shape[0], -1)
        small = min(q.shape)
        gram = q @ q.T if q.shape[0] == small else q.T @ q
        assert np.allclose(gram, 4.0 * np.eye(small), atol=1e-5)


def test_initializers_are_deterministic_under_manual_seed():
    draws = []
    for _ in range(2):
        kiln.manual_seed(42)
        draws.append(init.trunc_normal_(kiln.empty(50), generator=kiln.default_generator).numpy())
    assert np.array_equal(*draws)


def test_initializers_run_under_no_grad():
    w = nn.Parameter(kiln.empty(3, 3))
    init.kaiming_uniform_(w)
    assert w.requires_grad and getattr(w, "grad_fn", None) is None


# -- nn.utils -------------------------------------------------------------------------------
def with_grads(lib, seed):
    m = lib.nn.Linear(4, 3)
    for i, p in enumerate(m.parameters()):
        g = sample(tuple(p.shape), "float32", seed=seed + i)
        p.grad = lib.from_numpy(g) if lib is kiln else lib.from_numpy(g.copy())
    return m


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = need_torch()
    km, tm = with_grads(kiln, 1), with_grads(torch, 1)
    kn = nn.utils.clip_grad_norm_(km.parameters(), max_norm, norm_type=norm_type)
    tn = torch.nn.utils.clip_grad_norm_(tm.parameters(), max_norm, norm_type=norm_type)
    assert_match(kn, tn)
    for kp, tp in zip(km.parameters(), tm.parameters()):
        assert_match(kp.grad, tp.grad)


def test_clip_grad_norm_edges():
    torch = need_torch()
    assert nn.utils.clip_grad_norm_([nn.Parameter(kiln.ones(2))], 1.0).item() == 0.0  # no grads
    p = nn.Parameter(kiln.ones(2))
    p.grad = kiln.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        nn.utils.clip_grad_norm_(p, 1.0, error_if_nonfinite=True)
    tp = torch.nn.Parameter(torch.ones(2))
    tp.grad = torch.tensor([float("inf"), 1.0])
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        torch.nn.utils.clip_grad_norm_(tp, 1.0, error_if_nonfinite=True)


def test_clip_grad_value_and_vector_round_trip():
    torch = need_torch()
    km, tm = with_grads(kiln, 5), with_grads(torch, 5)
    assert nn.utils.clip_grad_value_(km.parameters(), 0.7) is None
    torch.nn.utils.clip_grad_value_(tm.parameters(), 0.7)
    for kp, tp in zip(km.parameters(), tm.parameters()):
        assert_match(kp.grad, tp.grad)
    vec = nn.utils.parameters_to_vector(km.parameters())
    assert tuple(vec.shape) == (15,)
    new = kiln.arange(15, dtype=kiln.float32)
    nn.utils.vector_to_parameters(new, km.parameters())
    assert np.array_equal(nn.utils.parameters_to_vector(km.parameters()).detach().numpy(), new.numpy())
    with pytest.raises(TypeError, match="expected kiln.Tensor"):
        nn.utils.vector_to_parameters([1.0], km.parameters())
    kx, tx = both(sample((2, 4), "float32", seed=0))
    with torch.no_grad():
        tm.weight.copy_(torch.arange(12, dtype=torch.float32).view(3, 4))
        tm.bias.copy_(torch.arange(12, 15, dtype=torch.float32))
    assert_match(km(kx), tm(tx))


# ---- nn.utils.rnn.pad_sequence ---------------------------------------------------------------

@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("side", ["left", "right"])
def test_pad_sequence_matches_torch(batch_first, side):
    torch = need_torch()
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 1, 0, 3)]
    ks = [kiln.from_numpy(a).requires_grad_() for a in arrays]
    ts = [torch.from_numpy(a).requires_grad_() for a in arrays]
    k = kiln.nn.utils.rnn.pad_sequence(ks, batch_first=batch_first, padding_value=-1.0, padding_side=side)
    t = torch.nn.utils.rnn.pad_sequence(ts, batch_first=batch_first, padding_value=-1.0, padding_side=side)
    np.testing.assert_array_equal(k.detach().numpy(), t.detach().numpy())
    w = rng.standard_normal(tuple(t.shape)).astype(np.float32)
    (k * kiln.from_numpy(w)).sum().backward()
    (t * torch.from_numpy(w)).sum().backward()
    for a, b in zip(ks, ts):
        np.testing.assert_array_equal(a.grad.numpy(), b.grad.numpy())
    compiled = kiln.compile(lambda *xs: kiln.nn.utils.rnn.pad_sequence(list(xs), batch_first=batch_first,
                                                                         padding_side=side))
    np.testing.assert_array_equal(compiled(*[x.detach() for x in ks]).numpy(),
                                  torch.nn.utils.rnn.pad_sequence([x.detach() for x in ts], batch_first=batch_first,
                                                                  padding_side=side).numpy())
    rows = kiln.nn.utils.rnn.unpad_sequence(k, kiln.tensor([4, 1, 0, 3]), batch_first=batch_first)
    if side == "right":
        for r, a in zip(rows, arrays):
            np.testing.assert_array_equal(r.detach().numpy(), a)


def test_pad_sequence_errors():
    with pytest.raises(RuntimeError, match="trailing dims"):
        kiln.nn.utils.rnn.pad_sequence([kiln.ones(2, 3), kiln.ones(2, 4)])
    with pytest.raises(ValueError, match="padding_side"):
        kiln.nn.utils.rnn.pad_sequence([kiln.ones(2)], padding_side="middle")


def test_sparse_init_and_total_norm_clipping_as_torch():
    """nn.init.sparse_ (normal draws, then a randperm per column as torch's) and the torch 2.6
    split of clip_grad_norm_: nn.utils.get_total_norm and clip_grads_with_norm_."""
    from oracle import need_torch

    torch = need_torch()
    for sparsity in (0.1, 0.5):
        kiln.manual_seed(3)
        torch.manual_seed(3)
        got = kiln.nn.init.sparse_(kiln.empty(6, 5), sparsity, std=0.2)
        want = torch.nn.init.sparse_(torch.empty(6, 5), sparsity, std=0.2)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
        assert ((got == 0).sum(0) >= int(np.ceil(sparsity * 6))).all()
    with pytest.raises(ValueError, match="2 dimensions"):
        kiln.nn.init.sparse_(kiln.empty(2, 3, 4), 0.5)
    results = []
    for lib in (kiln, torch):
        ps = [lib.nn.Parameter(lib.ones(3, 2)), lib.nn.Parameter(lib.ones(4))]
        for i, p in enumerate(ps):
            p.grad = lib.arange(float(p.numel())).reshape(p.shape) * (i + 1)
        total = lib.nn.utils.get_total_norm([p.grad for p in ps], norm_type=3.0)
        lib.nn.utils.clip_grads_with_norm_(ps, 2.0, total)
        results.append((total.item(), [p.grad.numpy().copy() for p in ps], lib.nn.utils.get_total_norm(ps[0].grad).item()))
    (kt, kg, k1), (tt, tg, t1) = results
    np.testing.assert_allclose(kt, tt, rtol=1e-6)
    np.testing.assert_allclose(k1, t1, rtol=1e-6)
    for a, b in zip(kg, tg):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert kiln.nn.utils.get_total_norm([]).item() == 0.0
