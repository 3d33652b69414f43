"""A spatial transformer network: a localisation net regresses a 2x3 affine theta (initialised to
the identity), F.affine_grid + F.grid_sample (bilinear/nearest, zeros/border/reflection padding,
align_corners both ways) warp the input; gradients reach theta's net and the image."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    loc = init_module(T, T.nn.Sequential(T.nn.Conv2d(1, 4, 3), T.nn.MaxPool2d(2), T.nn.ReLU(),
                                         T.nn.Flatten(), T.nn.Linear(4 * 3 * 3, 6)), seed=5)
    with T.no_grad():
        loc[-1].weight.mul_(0.1)
        loc[-1].bias.copy_(T.tensor([1.0, 0, 0, 0, 1, 0]))

    def fn(x, y):
        theta = loc(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, list(x.size()), align_corners=False)
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        g2 = F.affine_grid(theta, [x.shape[0], 1, 5, 4], align_corners=True)
        near = F.grid_sample(y, g2, mode="nearest", padding_mode="border", align_corners=True)
        refl = F.grid_sample(y, grid * 1.3, mode="bilinear", padding_mode="reflection", align_corners=False)
        loss = warped.square().mean() + refl.mean()
        gx, gw = T.autograd.grad(loss, [x, loc[0].weight])
        return theta.detach(), warped.detach(), near, refl.detach(), gx, gw

    r = rng(163)
    return fn, [(randn(T, r, 2, 1, 8, 8, requires_grad=True), randn(T, r, 2, 3, 8, 8))]
