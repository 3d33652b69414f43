"""Module hooks and buffers: a forward pre-hook that rescales the input, a forward hook that
edits the output and records activations, a non-persistent buffer updated in forward (a step
counter), register_buffer of a mask, hook handles removed between calls."""
from cutil import init_module, randn, rng

TAGS = ["nn", "hooks", "mutation"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    nn = T.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(6, 6)
            self.register_buffer("mask", T.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0]))
            self.register_buffer("calls", T.zeros((), dtype=T.int64), persistent=False)

        def forward(self, x):
            self.calls += 1
            return T.relu(self.lin(x)) * self.mask

    model = init_module(T, nn.Sequential(Block(), Block()))
    acts = []

    def pre_hook(mod, args):
        return (args[0] * 0.5,)

    def fwd_hook(mod, args, out):
        acts.append(out.detach().mean())
        return out + 1.0

    handles = [model[0].register_forward_pre_hook(pre_hook),
               model[1].register_forward_hook(fwd_hook)]
    state = {"n": 0}

    def fn(x):
        y = model(x)
        state["n"] += 1
        if state["n"] == 2:
            for h in handles:
                h.remove()
        return y, model[0].calls.clone(), acts[-1], list(model.state_dict().keys())

    r = rng(116)
    return fn, [(randn(T, r, 4, 6),) for _ in range(3)]
