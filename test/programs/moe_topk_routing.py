"""Mixture-of-experts routing: a softmax router, top-2 experts per token, renormalized gates,
dispatch by one_hot masks and einsum (dense, as Switch/GShard code does), a load-balancing
auxiliary loss from the router probabilities and the token fractions, gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "indexing", "einsum", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    E, D, Hd = 4, 6, 10

    class MoE(nn.Module):
        def __init__(self):
            super().__init__()
            self.router = nn.Linear(D, E, bias=False)
            self.w_in = nn.Parameter(T.zeros(E, D, Hd))
            self.w_out = nn.Parameter(T.zeros(E, Hd, D))

        def forward(self, x):
            probs = F.softmax(self.router(x), dim=-1)               # [N, E]
            gate, idx = probs.topk(2, dim=-1)
            gate = gate / gate.sum(-1, keepdim=True)
            dispatch = F.one_hot(idx, E).to(x.dtype)               # [N, 2, E]
            combine = (dispatch * gate[..., None]).sum(1)           # [N, E]
            h = F.gelu(T.einsum("nd,edh->neh", x, self.w_in))
            y = T.einsum("neh,ehd->ned", h, self.w_out)
            out = T.einsum("ne,ned->nd", combine, y)
            frac = dispatch.sum(1).mean(0)
            aux = E * (frac * probs.mean(0)).sum()
            counts = T.bincount(idx.flatten(), minlength=E)
            return out, aux, counts

    model = init_module(T, MoE(), scale=0.5)

    def fn(x):
        out, aux, counts = model(x)
        loss = out.square().mean() + 0.01 * aux
        gr, gw = T.autograd.grad(loss, [model.router.weight, model.w_in])
        return out, aux, counts, gr, gw

    r = rng(124)
    return fn, [(randn(T, r, 9, D),)]
