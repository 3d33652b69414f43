"""InfoNCE / CLIP-style contrastive loss: normalize, temperature, symmetric cross entropy over
the similarity matrix with arange targets; gradients through both towers."""
from cutil import init_module, randn, rng

TAGS = ["training", "autograd", "nn", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    img, txt = init_module(T, nn.Linear(10, 8)), init_module(T, nn.Linear(12, 8), seed=3)
    log_temp = nn.Parameter(T.tensor(2.0))

    def fn(a, b):
        za = F.normalize(img(a), dim=-1)
        zb = F.normalize(txt(b), dim=1)
        logits = za @ zb.t() * log_temp.exp()
        labels = T.arange(a.shape[0], device=a.device)
        loss = (F.cross_entropy(logits, labels) + F.cross_entropy(logits.t(), labels)) / 2
        loss.backward()
        acc = (logits.argmax(dim=1) == labels).float().mean()
        g = (img.weight.grad.clone(), log_temp.grad.clone())
        img.weight.grad, txt.weight.grad, log_temp.grad = None, None, None
        img.bias.grad, txt.bias.grad = None, None
        return loss.detach(), acc, g

    r = rng(24)
    return fn, [(randn(T, r, 6, 10), randn(T, r, 6, 12)) for _ in range(2)]
