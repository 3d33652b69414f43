"""A GCN training step as pytorch/examples' gcn writes it: the adjacency with self-loops,
normalized D^-1/2 (A + I) D^-1/2 with sparse diagonal matrices, and sparse features, then two
graph convolutions (`mm` of the sparse features, `spmm` of the sparse adjacency), log_softmax
and nll_loss on the training nodes; the loss and the weights' gradients. A frame that receives a
sparse tensor runs eagerly under both compilers ("Attempted to wrap sparse Tensor")."""
import numpy as np
from cutil import init_module, randint, rng

TAGS = ["sparse", "graph-break", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5
# torch.explain reports -1 breaks for a function whose frame it skips; kiln reports no graph
# split there either (0 graphs, the frames run eagerly, their reasons in break_reasons).
MAX_BREAKS = 0


def build(T):
    nn, F = T.nn, T.nn.functional
    r = rng(181)
    n, feats, classes = 40, 24, 4
    edges = r.integers(0, n, (2, 120)).astype(np.int32)  # duplicates: an uncoalesced adjacency
    adj = T.sparse_coo_tensor(edges, T.ones(edges.shape[1]), (n, n), dtype=T.int64)
    adj = T.eye(n) + adj
    degree = T.sqrt(1 / T.sum(adj, dim=1))
    degree = T.diag(degree).to_sparse()
    adj = (degree @ adj @ degree).to_sparse()
    x = T.from_numpy((r.random((n, feats)) < 0.2).astype(np.float32)).to_sparse()

    class GraphConv(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.kernel = nn.Parameter(T.zeros(n_in, n_out))
            self.bias = nn.Parameter(T.zeros(n_out))

        def forward(self, h, a):
            return T.spmm(a, T.mm(h, self.kernel)) + self.bias

    class GCN(nn.Module):
        def __init__(self):
            super().__init__()
            self.gc1, self.gc2 = GraphConv(feats, 16), GraphConv(16, classes)

        def forward(self, h, a):
            return F.log_softmax(self.gc2(F.relu(self.gc1(h, a)), a), dim=1)

    model = init_module(T, GCN(), scale=0.3)
    params = list(model.parameters())
    train = T.from_numpy(np.arange(0, n, 2))

    def fn(h, a, labels):
        out = model(h, a)
        loss = F.nll_loss(out[train], labels[train])
        return (loss,) + tuple(T.autograd.grad(loss, params))

    return fn, [(x, adj, randint(T, r, 0, classes, n))]
