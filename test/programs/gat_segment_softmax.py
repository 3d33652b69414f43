"""A graph attention (GAT) layer: per-edge scores from gathered source/destination features,
LeakyReLU, a softmax over each node's incoming edges done with scatter_reduce(amax) +
index_add of exponentials, messages weighted and scattered with index_add_, multi-head
reshape, and gradients."""
import numpy as np
from cutil import init_module, randn, rng, tensor

TAGS = ["indexing", "nn", "autograd", "gnn"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn, F = T.nn, T.nn.functional
    H, C = 2, 4

    class GAT(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(5, H * C, bias=False)
            self.att_src = nn.Parameter(T.zeros(1, H, C))
            self.att_dst = nn.Parameter(T.zeros(1, H, C))

        def forward(self, x, edge_index):
            src, dst = edge_index[0], edge_index[1]
            N = x.shape[0]
            h = self.lin(x).view(N, H, C)
            a_src = (h * self.att_src).sum(-1)                     # [N, H]
            a_dst = (h * self.att_dst).sum(-1)
            e = F.leaky_relu(a_src.index_select(0, src) + a_dst.index_select(0, dst), 0.2)
            idx = dst.unsqueeze(-1).expand_as(e)
            e_max = T.full((N, H), float("-inf")).scatter_reduce(0, idx, e, reduce="amax")
            ex = (e - e_max.gather(0, idx)).exp()
            denom = T.zeros(N, H).index_add(0, dst, ex)
            alpha = ex / denom[dst]
            out = T.zeros(N, H, C)
            out.index_add_(0, dst, h[src] * alpha.unsqueeze(-1))
            return out.reshape(N, H * C), alpha

    model = init_module(T, GAT())

    def fn(x, edge_index):
        out, alpha = model(x, edge_index)
        gx, ga = T.autograd.grad(F.elu(out).sum(), [x, model.att_src])
        return out, alpha, gx, ga

    r = rng(120)
    src = [0, 1, 2, 3, 4, 5, 0, 2, 4, 1, 3, 5]
    dst = [1, 2, 3, 4, 5, 0, 0, 1, 2, 3, 4, 5]
    ei = tensor(T, np.array([src, dst], dtype=np.int64))
    return fn, [(randn(T, r, 6, 5, requires_grad=True), ei)]
