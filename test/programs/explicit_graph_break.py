"""torch._dynamo.graph_break() between two stages and a torch.compiler.disable'd helper that
prints: each stage compiles around them."""
import io

from cutil import randn, rng

TAGS = ["graph-break"]


def build(T):
    r = rng(30)
    sink = io.StringIO()

    @T.compiler.disable
    def debug_stats(t):
        print("mean", float(t.mean()), file=sink)
        return t.std()

    def fn(x):
        a = x.sin() * 2
        T._dynamo.graph_break()
        b = a.cos() + 1
        s = debug_stats(b)
        return b * s, (a + b).sum()

    return fn, [(randn(T, r, 6),) for _ in range(2)]
