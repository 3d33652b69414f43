"""GRUCell and LSTMCell unrolled over a sequence in a Python loop, with a loss and gradients."""
from cutil import init_module, randn, rng

TAGS = ["nn", "rnn", "autograd", "tier2"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    nn = T.nn
    gru, lstm = init_module(T, nn.GRUCell(6, 8)), init_module(T, nn.LSTMCell(8, 5), seed=1)
    params = list(gru.parameters()) + list(lstm.parameters())

    def fn(xs, h0):
        h, c, hl = h0, T.zeros(xs.shape[1], 5), T.zeros(xs.shape[1], 5)
        outs = []
        for t in range(xs.shape[0]):
            h = gru(xs[t], h)
            hl, c = lstm(h, (hl, c))
            outs.append(hl)
        y = T.stack(outs)
        loss = y.pow(2).mean()
        grads = T.autograd.grad(loss, params)
        return y.detach(), c.detach(), grads

    r = rng(23)
    return fn, [(randn(T, r, 5, 3, 6), randn(T, r, 3, 8))]
