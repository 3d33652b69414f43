"""SegNet-style pooling indices: MaxPool2d(return_indices=True) in the encoder and MaxUnpool2d
with those indices (and output_size) in the decoder; AdaptiveMaxPool2d/1d with return_indices,
MaxPool1d + MaxUnpool1d; gradients through the unpooling."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    enc = init_module(T, T.nn.Conv2d(2, 4, 3, padding=1), seed=9)
    dec = init_module(T, T.nn.Conv2d(4, 2, 3, padding=1), seed=10)
    pool = T.nn.MaxPool2d(2, stride=2, return_indices=True)
    unpool = T.nn.MaxUnpool2d(2, stride=2)
    amp = T.nn.AdaptiveMaxPool2d((3, 2), return_indices=True)

    def fn(x, s):
        h = T.relu(enc(x))
        p, idx = pool(h)
        u = unpool(p, idx, output_size=h.size())
        y = dec(u)
        a, aidx = amp(h)
        a1, a1idx = F.adaptive_max_pool1d(s, 4, return_indices=True)
        p1, i1 = F.max_pool1d(s, 3, stride=2, return_indices=True)
        u1 = F.max_unpool1d(p1, i1, 3, stride=2, output_size=[s.shape[-1]])
        loss = y.square().mean() + a.sum() + (u1 * s).sum() + a1.mean()
        gx, gs = T.autograd.grad(loss, [x, s])
        return y.detach(), idx, a.detach(), aidx, a1.detach(), a1idx, u1.detach(), gx, gs

    r = rng(165)
    return fn, [(randn(T, r, 2, 2, 7, 6, requires_grad=True), randn(T, r, 2, 3, 11, requires_grad=True))]
