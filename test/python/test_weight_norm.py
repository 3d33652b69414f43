"""nn.utils.weight_norm / spectral_norm (hooks) and nn.utils.parametrize / parametrizations against
torch: parameter names, forwards and gradients over training steps (the power iteration's random
start copied from torch's), removal, and kiln.compile of a parametrized module."""
import warnings

import numpy as np
import pytest

import kiln
from oracle import need_torch

torch = need_torch()
rng = np.random.default_rng(0)
X = rng.standard_normal((5, 4)).astype(np.float32)


def pair(make):
    torch.manual_seed(0)
    t = make(torch)
    k = make(kiln)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        state = {name: kiln.from_numpy(v.detach().numpy().copy()) for name, v in t.state_dict().items()}
    k.load_state_dict(state)
    return k, t


def steps(k, t, n=3):
    kopt, topt = kiln.optim.SGD(k.parameters(), lr=0.1), torch.optim.SGD(t.parameters(), lr=0.1)
    for _ in range(n):
        ko, to = k(kiln.from_numpy(X)), t(torch.from_numpy(X))
        np.testing.assert_allclose(ko.detach().numpy(), to.detach().numpy(), rtol=1e-5, atol=1e-6)
        kopt.zero_grad()
        topt.zero_grad()
        (ko ** 2).sum().backward()
        (to ** 2).sum().backward()
        kopt.step()
        topt.step()
    for (kn, kp), (tn, tp) in zip(sorted(k.named_parameters()), sorted(t.named_parameters())):
        assert kn == tn
        np.testing.assert_allclose(kp.detach().numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_hook(dim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        k, t = pair(lambda T: T.nn.utils.weight_norm(T.nn.Linear(4, 3), dim=dim))
    assert sorted(n for n, _ in k.named_parameters()) == sorted(n for n, _ in t.named_parameters())
    steps(k, t)
    kiln.nn.utils.remove_weight_norm(k)
    torch.nn.utils.remove_weight_norm(t)
    assert sorted(n for n, _ in k.named_parameters()) == ["bias", "weight"]
    np.testing.assert_allclose(k.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-5)


def test_spectral_norm_hook():
    k, t = pair(lambda T: T.nn.utils.spectral_norm(T.nn.Linear(4, 3)))
    assert sorted(k.state_dict()) == sorted(t.state_dict())
    steps(k, t)
    k.eval()
    t.eval()
    np.testing.assert_allclose(k(kiln.from_numpy(X)).detach().numpy(), t(torch.from_numpy(X)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    kiln.nn.utils.remove_spectral_norm(k)
    assert sorted(n for n, _ in k.named_parameters()) == ["bias", "weight"]


@pytest.mark.parametrize("which", ["weight_norm", "spectral_norm"])
def test_parametrizations(which):
    k, t = pair(lambda T: getattr(T.nn.utils.parametrizations, which)(T.nn.Linear(4, 3)))
    assert sorted(k.state_dict()) == sorted(t.state_dict())
    assert type(k).__name__ == type(t).__name__ == "ParametrizedLinear"
    steps(k, t)
    kiln.nn.utils.parametrize.remove_parametrizations(k, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(t, "weight")
    assert type(k) is kiln.nn.Linear and not kiln.nn.utils.parametrize.is_parametrized(k)
    np.testing.assert_allclose(k.weight.detach().numpy(), t.weight.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_custom_parametrization_and_compile():
    class Symmetric(kiln.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).transpose(0, 1)

    layer = kiln.nn.Linear(4, 4)
    kiln.nn.utils.parametrize.register_parametrization(layer, "weight", Symmetric())
    w = layer.weight
    np.testing.assert_array_equal(w.detach().numpy(), w.detach().numpy().T)
    x = kiln.from_numpy(X)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(layer)(x).detach().numpy(), layer(x).detach().numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="does not have a parameter"):
        kiln.nn.utils.parametrize.register_parametrization(layer, "scale", Symmetric())
