"""kiln.device as PyTorch has it: construction from a device or an index, the factories' default
device (set_default_device, `with kiln.device(...)`), Module.to_empty after a meta-device build,
and Module conversions keeping their Parameter objects (an optimizer made before `.to()`)."""
import pytest

import kiln


def test_device_constructors():
    d = kiln.device("cpu")
    assert kiln.device(d) == d and str(kiln.device(d)) == "cpu"
    assert str(kiln.device(0)) == "cuda:0" and kiln.device(1).index == 1
    with pytest.raises(Exception, match="negative"):
        kiln.device(-1)


def test_default_device_context_and_setter():
    assert kiln.get_default_device() == kiln.device("cpu")
    base = kiln.empty(2)
    with kiln.device("meta"):
        assert kiln.get_default_device() == kiln.device("meta")
        assert kiln.zeros(3).is_meta and kiln.randn(2, 2).is_meta and kiln.arange(4).is_meta
        assert kiln.tensor([1.0, 2.0]).is_meta
        assert kiln.full((2,), 1.0, device=None).is_meta  # an explicit None is the default too
        assert kiln.zeros(2, device="cpu").device == kiln.device("cpu")  # an explicit device wins
        assert kiln.zeros_like(base).device == kiln.device("cpu")  # *_like keep their input's
        with kiln.device("cpu"):  # nested blocks restore the outer default
            assert not kiln.ones(1).is_meta
        assert kiln.ones(1).is_meta
    assert not kiln.zeros(1).is_meta and kiln.get_default_device() == kiln.device("cpu")
    kiln.set_default_device("meta")
    try:
        assert kiln.randn(3).is_meta
    finally:
        kiln.set_default_device(None)
    assert not kiln.randn(3).is_meta
    with pytest.raises(TypeError, match="set_default_device"):
        kiln.set_default_device(1.5)


def test_meta_build_then_to_empty():
    with kiln.device("meta"):
        net = kiln.nn.Sequential(kiln.nn.Linear(4, 8), kiln.nn.BatchNorm1d(8), kiln.nn.Linear(8, 2))
    assert all(p.is_meta for p in net.parameters()) and net[1].running_mean.is_meta
    net.to_empty(device="cpu")
    assert not any(p.is_meta for p in net.parameters()) and not net[1].running_mean.is_meta
    for m in net:
        m.reset_parameters()
    assert net(kiln.randn(3, 4)).shape == (3, 2)


def test_module_conversion_keeps_parameters_for_the_optimizer():
    # Found with pytorch/examples code: `opt = SGD(model.parameters()); model.to(device)` trained
    # nothing in kiln (conversions made new Parameter objects; the optimizer stepped the old ones).
    kiln.manual_seed(0)
    model = kiln.nn.Linear(3, 1)
    opt = kiln.optim.SGD(model.parameters(), lr=0.1)
    w = model.weight
    model.to("cpu")
    model.float()
    assert model.weight is w
    x, y = kiln.randn(8, 3), kiln.randn(8, 1)
    before = model.weight.detach().clone()
    kiln.nn.functional.mse_loss(model(x), y).backward()
    opt.step()
    assert not kiln.equal(model.weight, before)
    model.double()  # a dtype change replaces the data (and the gradient's), not the object
    assert model.weight is w and w.dtype == kiln.float64 and w.grad.dtype == kiln.float64
    assert isinstance(w, kiln.nn.Parameter) and w.requires_grad


def test_module_conversion_matches_torch():
    torch = pytest.importorskip("torch")
    for T in (kiln, torch):
        m = T.nn.Linear(2, 2)
        w = m.weight
        m.double()
        assert (m.weight is w) and w.dtype == T.float64
