"""Forward hooks that print activation statistics and a forward pre-hook that records shapes,
registered on submodules of the compiled model."""
import io

from cutil import init_module, randn, rng

TAGS = ["graph-break", "modules"]


def build(T):
    r = rng(31)
    sink = io.StringIO()
    shapes = []
    net = init_module(T, T.nn.Sequential(T.nn.Linear(4, 8), T.nn.ReLU(), T.nn.Linear(8, 2)))

    def stats_hook(mod, inp, out):
        print(type(mod).__name__, f"{out.abs().mean().item():.3f}", file=sink)

    def shape_hook(mod, inp):
        shapes.append(tuple(inp[0].shape))

    net[0].register_forward_hook(stats_hook)
    net[2].register_forward_pre_hook(shape_hook)

    def fn(x):
        return net(x).log_softmax(-1)

    return fn, [(randn(T, r, 3, 4),) for _ in range(2)]
