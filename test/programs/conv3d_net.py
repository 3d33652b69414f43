"""A small 3-d CNN (video/volume models) in training mode: Conv3d, BatchNorm3d, MaxPool3d,
ConvTranspose3d, AvgPool3d, AdaptiveAvgPool3d, Linear, with the loss's gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    nn = T.nn
    model = nn.Sequential(
        nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(), nn.MaxPool3d(2),
        nn.ConvTranspose3d(4, 4, 2, stride=2), nn.AvgPool3d(2, ceil_mode=True), nn.Conv3d(4, 6, (1, 2, 2)),
        nn.AdaptiveAvgPool3d((1, 2, 2)), nn.Flatten(), nn.Linear(24, 3))
    init_module(T, model)
    x = randn(T, rng(31), 2, 2, 6, 8, 8)

    def fn(x):
        loss = model(x).square().mean()
        loss.backward()
        return loss, model[0].weight.grad, model[4].weight.grad

    return fn, [(x,)]
