"""BatchNorm variants in one function: affine=False, no running stats, momentum=None (cumulative
average, read from num_batches_tracked), a module in eval mode next to ones in training mode."""
from cutil import init_module, randn, rng

TAGS = ["tier2", "nn", "batchnorm"]


def build(T):
    r = rng(41)
    nn = T.nn
    bn_plain = init_module(T, nn.BatchNorm1d(8))
    bn_noaffine = nn.BatchNorm1d(8, affine=False)
    bn_nostats = init_module(T, nn.BatchNorm2d(4, track_running_stats=False))
    bn_cumavg = init_module(T, nn.BatchNorm2d(4, momentum=None))
    bn_cumavg(randn(T, r, 3, 4, 5, 5))
    bn_cumavg.eval()
    bn_eval = init_module(T, nn.BatchNorm1d(8))
    with T.no_grad():
        bn_eval.running_mean.copy_(randn(T, r, 8, scale=0.1))
        bn_eval.running_var.copy_(randn(T, r, 8, scale=0.1).abs() + 1.0)
    bn_eval.eval()

    def fn(x, img):
        a = bn_plain(x)
        b = bn_noaffine(a * 2.0)
        c = bn_eval(b)
        d = bn_nostats(img)
        e = bn_cumavg(d + 1.0)
        return (c.sum(dim=1), e.mean(dim=(2, 3)), bn_cumavg.running_mean.clone(),
                bn_cumavg.running_var.clone(), bn_cumavg.num_batches_tracked.clone(),
                bn_plain.running_var.clone(), bn_noaffine.running_mean.clone())

    return fn, [(randn(T, r, 6, 8), randn(T, r, 3, 4, 5, 5)) for _ in range(3)]
