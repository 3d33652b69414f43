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


@pytest.mark.parametrize("shape,orthogonal_map", [
    ((4, 4), None), ((5, 3), None), ((3, 5), None), ((4, 4), "cayley"), ((5, 3), "matrix_exp"),
    ((3, 3), "householder")])
@pytest.mark.parametrize("compiled", [False, True])
def test_orthogonal_parametrization_trains_as_torch(shape, orthogonal_map, compiled):
    """parametrizations.orthogonal (was NotImplementedError): the matrix_exp / cayley / householder
    maps, the trivialization's base (a non-square weight completed by torch's randn draw), three
    SGD steps through it, eager and compiled, equal to torch; the weight stays orthogonal."""
    torch = need_torch()
    res = []
    for lib in (torch, kiln):
        lib.manual_seed(0)
        m = lib.nn.Linear(shape[1], shape[0])
        with lib.no_grad():
            m.weight.copy_(lib.from_numpy(np.random.default_rng(1).standard_normal(shape).astype(np.float32)))
        lib.nn.utils.parametrizations.orthogonal(m, orthogonal_map=orthogonal_map)
        x = lib.from_numpy(np.random.default_rng(2).standard_normal((2, shape[1])).astype(np.float32))
        opt = lib.optim.SGD(m.parameters(), lr=0.1)

        def step():
            opt.zero_grad()
            loss = (m(x) ** 2).sum()
            loss.backward()
            opt.step()
            return loss.detach()

        fn = kiln.compile(step) if compiled and lib is kiln else step
        losses = [float(fn()) for _ in range(3)]
        res.append((losses, m.weight.detach().numpy(), sorted(n for n, _ in m.named_parameters())))
    (tl, tw, tn), (kl, kw, kn) = res
    np.testing.assert_allclose(kl, tl, rtol=1e-5)
    np.testing.assert_allclose(kw, tw, rtol=1e-5, atol=1e-5)
    assert kn == tn
    small = min(shape)
    gram = kw @ kw.T if shape[0] <= shape[1] else kw.T @ kw
    np.testing.assert_allclose(gram, np.eye(small), atol=1e-5)


def test_orthogonal_parametrization_errors_as_torch():
    with pytest.raises(ValueError, match="Expected a matrix or batch of matrices"):
        kiln.nn.utils.parametrizations.orthogonal(kiln.nn.LayerNorm(3))
    with pytest.raises(ValueError, match="orthogonal_map has to be one of"):
        kiln.nn.utils.parametrizations.orthogonal(kiln.nn.Linear(3, 3), orthogonal_map="qr")
    with pytest.raises(NotImplementedError, match="use_trivialization=False"):
        kiln.nn.utils.parametrizations.orthogonal(kiln.nn.Linear(3, 3), use_trivialization=False)
