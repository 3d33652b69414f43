"""Reductions compiled by the inductor backend against PyTorch: the two-pass variance (f32/f64
var, std and layer norm lower to sum(x) then the corrected sum of squared deviations instead of a
Welford update) on data far from zero, every correction including n <= correction, several
reduced dims; and layer norm / softmax compiled to one kernel."""
import logging

import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from oracle import need_torch

pytestmark = [needs_cxx, pytest.mark.usefixtures("strict_inductor")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape,dim,shift", [((16, 1000), -1, 1e4), ((3, 5, 7), (0, 2), 0.0),
                                              ((2, 20000), 1, 100.0), ((6,), 0, -3.0)])
@pytest.mark.parametrize("correction", [0, 1, 2])
def test_var_std_far_from_zero(dtype, shape, dim, shift, correction):
    torch = need_torch()
    a = (np.random.default_rng(0).standard_normal(shape) + shift).astype(dtype)

    def fn(x):
        return x.var(dim=dim, correction=correction), x.std(dim=dim, correction=correction, keepdim=True)

    got = kiln.compile(fn, backend="inductor")(kiln.from_numpy(a))
    want = fn(torch.from_numpy(a))
    exact = fn(torch.from_numpy(a.astype(np.float64)))
    rtol = 1e-6 if dtype == "float32" else 1e-10
    for g, w, e in zip(got, want, exact):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype).split(".")[-1] == dtype
        # kiln's error against the float64 result is of the order of PyTorch's own.
        np.testing.assert_allclose(g.numpy(), e.numpy().astype(dtype), rtol=rtol, atol=0)


def test_var_with_fewer_elements_than_the_correction():
    torch = need_torch()
    a = np.arange(6, dtype=np.float32).reshape(6, 1)
    got = kiln.compile(lambda x: x.var(dim=1, correction=1), backend="inductor")(kiln.from_numpy(a))
    want = torch.from_numpy(a).var(dim=1, correction=1)
    assert np.array_equal(np.isnan(got.numpy()), np.isnan(want.numpy()))


@pytest.mark.parametrize("name", ["layer_norm", "softmax", "log_softmax", "rms_norm"])
def test_row_patterns_are_one_kernel(name, capsys):
    torch = need_torch()
    r = np.random.default_rng(1)
    x = (r.standard_normal((64, 96)) * 3 + 5).astype(np.float32)
    w, b = r.standard_normal(96).astype(np.float32), r.standard_normal(96).astype(np.float32)

    def make(T):
        F = T.nn.functional
        return {
            "layer_norm": lambda x, w, b: F.layer_norm(x, (96,), w, b),
            "softmax": lambda x, w, b: T.softmax(x * w, dim=-1),
            "log_softmax": lambda x, w, b: T.log_softmax(x + b, dim=-1),
            "rms_norm": lambda x, w, b: x * T.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w,
        }[name]

    kiln.set_logs(loops=True)
    try:
        capsys.readouterr()
        got = kiln.compile(make(kiln), backend="inductor")(*map(kiln.from_numpy, (x, w, b)))
        log = capsys.readouterr().err
    finally:
        kiln.set_logs()
    want = make(torch)(*map(torch.from_numpy, (x, w, b)))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    assert log.count("kernel @") == 1 and "extern" not in log, log
