"""CvT's projection (vit-pytorch): a depthwise conv on a channels-last input (an einops
rearrange's output), batch norm in training, a 1x1 conv, then reshapes that are views only for
a contiguous tensor, and attention over them. Batch norm keeps the channels-last layout (eager,
meta and decomposition alike), so the graph compiles instead of falling back."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "conv"]
RTOL, ATOL = 1e-4, 1e-5
MAX_BREAKS = 0


def build(T):
    r = rng(62)
    nn = T.nn
    dw = init_module(T, nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False))
    bn = nn.BatchNorm2d(8)
    pw = init_module(T, nn.Conv2d(8, 16, 1, bias=False))
    out = init_module(T, nn.Conv2d(8, 8, 1))

    def fn(x):
        x = x.permute(0, 3, 1, 2)  # channels-last data seen as NCHW
        q, k = pw(bn(dw(x))).chunk(2, dim=1)
        b, _, hgt, wid = q.shape
        q = q.reshape(b * 2, 4, hgt * wid).transpose(1, 2)
        k = k.reshape(b * 2, 4, hgt * wid).transpose(1, 2)
        attn = (q @ k.transpose(1, 2) * 0.5).softmax(-1)
        o = (attn @ k).transpose(1, 2).reshape(b, 8, hgt, wid)
        return out(o), bn.running_mean.clone()

    return fn, [(randn(T, r, 2, 6, 6, 8),)]
