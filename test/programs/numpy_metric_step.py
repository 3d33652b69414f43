"""A training step that computes its accuracy and confidence with NumPy between the forward and
the backward: the numpy code is traced into the forward's graph (torch.compile's trace_numpy)."""
import numpy as np

from cutil import init_module, randn, rng, tensor

TAGS = ["numpy", "graph-break", "tier2"]
RTOL = 1e-4


def build(T):
    r = rng(31)
    model = init_module(T, T.nn.Sequential(T.nn.Linear(12, 16), T.nn.ReLU(), T.nn.Linear(16, 4)))
    opt = T.optim.SGD(model.parameters(), lr=0.05)

    def fn(x, y):
        opt.zero_grad()
        logits = model(x)
        loss = T.nn.functional.cross_entropy(logits, y)
        scores = logits.detach().numpy()
        pred = scores.argmax(axis=1)
        acc = (pred == y.numpy()).mean()
        conf = np.exp(scores - scores.max(axis=1, keepdims=True))
        conf = conf.max(axis=1) / conf.sum(axis=1)
        loss.backward()
        opt.step()
        return loss.detach(), acc, T.from_numpy(conf)

    def batch():
        return randn(T, r, 10, 12), tensor(T, r.integers(0, 4, size=10).astype(np.int64))

    return fn, [batch(), batch(), batch()]
