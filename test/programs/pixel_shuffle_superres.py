"""An ESPCN-style super-resolution net: conv features, a conv to C*r*r channels and
nn.PixelShuffle(r) to upsample, an L1 loss against a target; pixel_unshuffle as a space-to-depth
stem (its inverse round-trips), channel_shuffle-free shuffles on a channels-last input; one SGD step."""
from cutil import init_module, randn, rng

TAGS = ["nn", "conv", "training", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    r_up = 2
    net = init_module(T, T.nn.Sequential(
        T.nn.Conv2d(3 * 4, 8, 3, padding=1), T.nn.PReLU(8), T.nn.Conv2d(8, 3 * r_up * r_up * r_up * r_up, 3, padding=1),
        T.nn.PixelShuffle(r_up), T.nn.PixelShuffle(r_up)), seed=4)
    unshuffle = T.nn.PixelUnshuffle(2)
    opt = T.optim.SGD(net.parameters(), lr=0.05)

    def fn(lr_img, hr_img):
        stem = unshuffle(lr_img)                       # (N, 12, H/2, W/2)
        rt = F.pixel_shuffle(stem, 2)
        sr = net(stem)                                 # (N, 3, 2H, 2W)
        loss = F.l1_loss(sr, hr_img)
        opt.zero_grad()
        loss.backward()
        opt.step()
        cl = F.pixel_unshuffle(hr_img.contiguous(memory_format=T.channels_last), 4)
        return loss.detach(), sr.detach(), (rt - lr_img).abs().max(), cl, net[0].weight.detach().clone()

    r = rng(162)
    return fn, [(randn(T, r, 2, 3, 8, 8), randn(T, r, 2, 3, 16, 16)),
                (randn(T, r, 2, 3, 8, 8), randn(T, r, 2, 3, 16, 16))]
