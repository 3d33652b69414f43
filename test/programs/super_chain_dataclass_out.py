"""super() chains across three module classes, a dataclass output, a NamedTuple output and
isinstance dispatch on the input type."""
from dataclasses import dataclass
from typing import NamedTuple

from cutil import init_module, randn, rng

TAGS = ["modules"]


def build(T):
    r = rng(27)

    @dataclass
    class Out:
        logits: object
        hidden: object

    class Pair(NamedTuple):
        a: object
        b: object

    class Base(T.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = T.nn.Linear(4, 4)

        def forward(self, x):
            return self.lin(x)

    class Mid(Base):
        def forward(self, x):
            return T.relu(super().forward(x))

    class Top(Mid):
        def forward(self, x):
            h = super().forward(x)
            return Out(logits=h.sum(-1), hidden=h)

    m = init_module(T, Top())

    def prep(x):
        if isinstance(x, (list, tuple)):
            return T.stack(list(x))
        if isinstance(x, dict):
            return x["x"]
        return x

    def fn(x, y):
        o = m(prep(x))
        o2 = m(prep({"x": y}))
        p = Pair(o.logits, o2.hidden)
        return p.a * 2, p.b.mean(), isinstance(o, Out)

    return fn, [(randn(T, r, 3, 4), randn(T, r, 2, 4)) for _ in range(2)]
