"""A Siamese / metric-learning step with loss modules: nn.Bilinear scoring of pairs,
nn.CosineEmbeddingLoss, nn.TripletMarginLoss (swap=True), nn.MarginRankingLoss,
nn.PairwiseDistance and nn.CosineSimilarity modules, summed and back-propagated into the shared
encoder; an Adam step."""
import numpy as np

from cutil import init_module, randn, rng, tensor

TAGS = ["loss", "nn", "training", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    enc = init_module(T, T.nn.Sequential(T.nn.Linear(6, 8), T.nn.ReLU(), T.nn.Linear(8, 5)), seed=11)
    bil = init_module(T, T.nn.Bilinear(5, 5, 3), seed=12)
    cos_loss = T.nn.CosineEmbeddingLoss(margin=0.2)
    trip = T.nn.TripletMarginLoss(margin=0.5, p=2, swap=True)
    rank = T.nn.MarginRankingLoss(margin=0.1, reduction="sum")
    pdist = T.nn.PairwiseDistance(p=1.5, keepdim=True)
    cos = T.nn.CosineSimilarity(dim=1, eps=1e-6)
    params = list(enc.parameters()) + list(bil.parameters())
    opt = T.optim.Adam(params, lr=0.01)

    def fn(a, p, n, same):
        ea, ep, en = enc(a), enc(p), enc(n)
        score = bil(ea, ep)                        # (B, 3)
        l1 = cos_loss(ea, ep, same)
        l2 = trip(ea, ep, en)
        l3 = rank(cos(ea, ep), cos(ea, en), T.ones(a.shape[0]))
        d = pdist(ea, en)
        loss = l1 + l2 + 0.1 * l3 + score.pow(2).mean() + 0.01 * d.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.detach(), l1.detach(), l2.detach(), l3.detach(), d.detach(), score.detach(), bil.weight.detach().clone()

    r = rng(166)
    same = tensor(T, np.array([1, -1, 1, -1], dtype=np.float32))
    return fn, [(randn(T, r, 4, 6), randn(T, r, 4, 6), randn(T, r, 4, 6), same),
                (randn(T, r, 4, 6), randn(T, r, 4, 6), randn(T, r, 4, 6), same)]
