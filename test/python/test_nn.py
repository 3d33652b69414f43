"""kiln.nn: Module bookkeeping, containers, layers and functionals against torch.nn."""
from collections import OrderedDict

import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import assert_match, both, need_torch, sample


def two_layer(lib):
    m = lib.nn.Sequential(lib.nn.Linear(4, 8), lib.nn.GELU(), lib.nn.Linear(8, 2))
    return m


def copy_params(src_torch, dst_kiln):
    with kiln.no_grad():
        for (tn, tp), (kn, kp) in zip(src_torch.named_parameters(), dst_kiln.named_parameters()):
            assert tn == kn
            kp.copy_(kiln.from_numpy(tp.detach().numpy().copy()))


def test_registration_and_names_match_torch():
    torch = need_torch()
    km, tm = two_layer(kiln), two_layer(torch)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    assert list(km.state_dict()) == list(tm.state_dict())
    assert [n for n, _ in km.named_modules()] == [n for n, _ in tm.named_modules()]
    assert repr(km) == repr(tm)
    for p in km.parameters():
        assert isinstance(p, nn.Parameter) and p.requires_grad


def test_parameter_does_not_alias_flags():
    t = kiln.zeros(3)
    p = nn.Parameter(t)
    assert p.requires_grad and not t.requires_grad
    with kiln.no_grad():
        p.fill_(2.0)
    assert t.numpy().tolist() == [2.0, 2.0, 2.0]  # same memory
    assert type(p * 2).__name__ == "Tensor"


def test_buffers_and_state_dict():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", kiln.ones(2))
            self.register_buffer("scratch", kiln.zeros(2), persistent=False)
            self.w = nn.Parameter(kiln.zeros(2, 2))

    m = M()
    assert list(m.state_dict()) == ["w", "running"]
    assert [n for n, _ in m.named_buffers()] == ["running", "scratch"]
    sd = OrderedDict(w=kiln.ones(2, 2), running=kiln.full((2,), 3.0))
    res = m.load_state_dict(sd)
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert m.running.numpy().tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="Missing key"):
        m.load_state_dict(OrderedDict(w=kiln.ones(2, 2)))
    with pytest.raises(RuntimeError, match="size mismatch"):
        m.load_state_dict(OrderedDict(w=kiln.ones(3), running=kiln.ones(2)))
    res = m.load_state_dict(OrderedDict(w=kiln.ones(2, 2)), strict=False)
    assert res.missing_keys == ["running"]


def test_train_eval_and_hooks():
    m = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.5))
    assert m.training and m[1].training
    m.eval()
    assert not m.training and not m[1].training
    seen = []
    h = m.register_forward_hook(lambda mod, args, out: seen.append(tuple(out.shape)))
    m(kiln.ones(2, 3))
    h.remove()
    m(kiln.ones(2, 3))
    assert seen == [(2, 3)]


def test_containers():
    seq = nn.Sequential(nn.Identity(), nn.ReLU(), nn.Tanh())
    assert len(seq) == 3 and isinstance(seq[-1], nn.Tanh) and len(seq[1:]) == 2
    ml = nn.ModuleList([nn.ReLU()])
    ml.append(nn.SiLU())
    assert len(ml) == 2 and len(list(ml.parameters())) == 0
    md = nn.ModuleDict({"a": nn.Linear(2, 2)})
    assert "a" in md and len(list(md.parameters())) == 2
    with pytest.raises(TypeError):
        nn.Sequential().add_module("x", 3)


def test_assigning_wrong_types_raises():
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError):
        m.weight = kiln.ones(2, 2)
    with pytest.raises(AttributeError):
        m.missing_attribute


@pytest.mark.parametrize("layer", ["mlp", "layernorm", "activations"])
def test_layers_match_torch(layer):
    torch = need_torch()
    x_np = sample((5, 4), "float32", seed=3)
    kx, tx = both(x_np)
    if layer == "mlp":
        km, tm = two_layer(kiln), two_layer(torch)
    elif layer == "layernorm":
        km, tm = kiln.nn.LayerNorm(4), torch.nn.LayerNorm(4)
        with torch.no_grad():
            tm.weight.uniform_(0.5, 1.5)
            tm.bias.uniform_(-0.5, 0.5)
    else:
        km = kiln.nn.Sequential(kiln.nn.ReLU(), kiln.nn.SiLU(), kiln.nn.Sigmoid(), kiln.nn.Tanh(), kiln.nn.GELU("tanh"))
        tm = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.SiLU(), torch.nn.Sigmoid(), torch.nn.Tanh(), torch.nn.GELU("tanh"))
    copy_params(tm, km)
    with torch.no_grad():
        assert_match(km(kx), tm(tx))


def test_functionals_match_torch():
    torch = need_torch()
    kF, tF = kiln.nn.functional, torch.nn.functional
    kx, tx = both(sample((3, 5), "float32", seed=1))
    kw, tw = both(sample((4, 5), "float32", seed=2))
    kb, tb = both(sample((4,), "float32", seed=4))
    assert_match(kF.linear(kx, kw, kb), tF.linear(tx, tw, tb))
    assert_match(kF.linear(kx, kw), tF.linear(tx, tw))
    assert_match(kF.softmax(kx, dim=-1), tF.softmax(tx, dim=-1))
    assert_match(kF.log_softmax(kx, 0), tF.log_softmax(tx, 0))
    assert_match(kF.layer_norm(kx, (5,)), tF.layer_norm(tx, (5,)))
    assert_match(kF.gelu(kx, approximate="tanh"), tF.gelu(tx, approximate="tanh"))
    assert_match(kF.dropout(kx, 0.3, training=False), tF.dropout(tx, 0.3, training=False))


def test_dropout_training_scales_kept_values():
    kiln.manual_seed(0)
    x = kiln.ones(10000)
    y = nn.functional.dropout(x, 0.25, training=True).numpy()
    kept = y[y != 0]
    assert np.allclose(kept, 1 / 0.75)
    assert 0.2 < 1 - kept.size / y.size < 0.3


def test_linear_init_bounds():
    kiln.manual_seed(0)
    m = nn.Linear(100, 50)
    w = m.weight.detach().numpy()
    assert w.shape == (50, 100) and np.abs(w).max() <= 1 / np.sqrt(100) + 1e-6
    assert w.std() > 0.03
