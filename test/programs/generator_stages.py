"""A generator over layers inside the compiled function (yield), consumed by a for loop, and a
generator expression summed."""
from cutil import init_module, randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(24)
    layers = init_module(T, T.nn.ModuleList([T.nn.Linear(6, 6) for _ in range(3)]))

    def stages(x):
        for i, layer in enumerate(layers):
            x = T.tanh(layer(x))
            yield i, x

    def fn(x):
        outs = []
        for i, h in stages(x):
            outs.append(h * (i + 1))
        reg = sum(p.pow(2).sum() for p in layers.parameters())
        return T.stack(outs).sum(0), reg

    return fn, [(randn(T, r, 2, 6),) for _ in range(2)]
