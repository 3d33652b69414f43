"""GroupNorm as a module and by hand (view into groups, var_mean, affine), on 3-d and 4-d
inputs, with gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    gn = init_module(T, nn.GroupNorm(3, 6))

    def manual(x, groups, w, b, eps=1e-5):
        N, C = x.shape[:2]
        g = x.reshape(N, groups, -1)
        var, mean = T.var_mean(g, dim=-1, keepdim=True, unbiased=False)
        y = ((g - mean) / T.sqrt(var + eps)).view_as(x)
        shape = [1, C] + [1] * (x.dim() - 2)
        return y * w.view(shape) + b.view(shape)

    def fn(x, x3):
        a = gn(x)
        m = manual(x, 3, gn.weight, gn.bias)
        c = nn.functional.group_norm(x3, 2)
        gx, gw = T.autograd.grad((a * m).sum() + c.sum(), [x, gn.weight])
        return a.detach(), m.detach(), c, gx, gw

    r = rng(36)
    return fn, [(randn(T, r, 2, 6, 4, 3, requires_grad=True), randn(T, r, 3, 4, 5))]
