"""A VQ-VAE quantiser: nearest codebook entries by squared distance (argmin), one_hot
assignments, the straight-through estimator (z + (q - z).detach()), codebook and commitment
losses, an EMA codebook update under no_grad with bincount-free counts (one_hot.sum) and
in-place mul_/add_ on buffers, perplexity of the code usage; gradients to the encoder output."""
from cutil import randn, rng

TAGS = ["nn", "autograd", "mutation", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    F = T.nn.functional
    K, D = 6, 3
    r0 = rng(183)
    codebook = randn(T, r0, K, D)
    ema_count = T.ones(K)
    ema_sum = codebook.clone()

    def fn(z):
        flat = z.reshape(-1, D)
        d = flat.pow(2).sum(1, keepdim=True) - 2 * flat @ codebook.t() + codebook.pow(2).sum(1)
        idx = d.argmin(1)
        onehot = F.one_hot(idx, K).type(flat.dtype)
        q = (onehot @ codebook).view_as(z)
        commit = F.mse_loss(z, q.detach())
        cb_loss = F.mse_loss(q, z.detach())
        st = z + (q - z).detach()
        with T.no_grad():
            ema_count.mul_(0.9).add_(onehot.sum(0), alpha=0.1)
            ema_sum.mul_(0.9).add_(onehot.t() @ flat, alpha=0.1)
            n = ema_count.sum()
            count = (ema_count + 1e-5) / (n + K * 1e-5) * n
            codebook.copy_(ema_sum / count.unsqueeze(1))
        avg = onehot.mean(0)
        perplexity = T.exp(-(avg * T.log(avg + 1e-10)).sum())
        gz, = T.autograd.grad((st ** 2).sum() + 0.25 * commit + cb_loss, [z])
        return idx, q, perplexity, gz, codebook.clone(), ema_count.clone()

    r = rng(184)
    return fn, [(randn(T, r, 2, 5, D, requires_grad=True),), (randn(T, r, 2, 5, D, requires_grad=True),)]
