"""affine_grid and grid_sample against torch: every padding mode, bilinear and nearest, both
align_corners; gradients for the input and the affine parameters; a spatial-transformer step
compiled equal to eager."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

torch = need_torch()
rng = np.random.default_rng(0)
IMG = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
THETA = np.array([[[0.9, 0.2, 0.1], [-0.1, 1.1, 0.05]], [[1.3, 0.0, 0.3], [0.4, 0.7, -0.6]]], np.float32)


def sample(T, mode, padding_mode, align_corners):
    x = T.from_numpy(IMG.copy()).requires_grad_()
    theta = T.from_numpy(THETA.copy()).requires_grad_()
    grid = T.nn.functional.affine_grid(theta, [2, 3, 4, 7], align_corners=align_corners) * 1.3
    y = T.nn.functional.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    (y * y).sum().backward()
    theta_grad = theta.grad.numpy() if theta.grad is not None else np.zeros(THETA.shape, np.float32)
    return y.detach().numpy(), x.grad.numpy(), theta_grad


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_matches_torch(mode, padding_mode, align_corners):
    for k, t in zip(sample(kiln, mode, padding_mode, align_corners), sample(torch, mode, padding_mode, align_corners)):
        np.testing.assert_allclose(k, t, rtol=1e-5, atol=2e-5 * max(1.0, float(np.abs(t).max())))


def test_spatial_transformer_compiled_equals_eager():
    def stn(x, theta):
        grid = kiln.nn.functional.affine_grid(theta, list(x.shape), align_corners=False)
        return kiln.nn.functional.grid_sample(x, grid, align_corners=False).relu().mean()

    kiln.compiler.reset()
    x, theta = kiln.from_numpy(IMG.copy()), kiln.from_numpy(THETA.copy())
    report = kiln.explain(stn)(x, theta)
    assert report.graph_count == 1 and report.graph_break_count == 0
    np.testing.assert_allclose(kiln.compile(stn)(x, theta).item(), stn(x, theta).item(), rtol=1e-5)


def test_errors():
    with pytest.raises(NotImplementedError, match="bicubic"):
        kiln.nn.functional.grid_sample(kiln.ones(1, 1, 2, 2), kiln.zeros(1, 2, 2, 2), mode="bicubic")
    with pytest.raises(ValueError, match="padding_mode"):
        kiln.nn.functional.grid_sample(kiln.ones(1, 1, 2, 2), kiln.zeros(1, 2, 2, 2), padding_mode="wrap")
    with pytest.raises(ValueError, match="Nx2x3"):
        kiln.nn.functional.affine_grid(kiln.zeros(1, 3, 3), [1, 1, 2, 2])
