"""Per-sample gradients of a small MLP with functional_call + vmap(grad(...)) inside a compiled
function (the torch.func tutorial's recipe)."""
from cutil import init_module, randn, rng

TAGS = ["functorch", "autograd"]
RTOL, ATOL = 1e-4, 1e-5


def build(T):
    r = rng(61)
    model = init_module(T, T.nn.Sequential(T.nn.Linear(6, 8), T.nn.Tanh(), T.nn.Linear(8, 3)), seed=61)
    from_func = T.func

    def loss_one(params, x, y):
        out = from_func.functional_call(model, params, (x.unsqueeze(0),))
        return T.nn.functional.cross_entropy(out, y.unsqueeze(0))

    def fn(x, y):
        params = {k: v.detach() for k, v in model.named_parameters()}
        grads = from_func.vmap(from_func.grad(loss_one), in_dims=(None, 0, 0))(params, x, y)
        return [grads[k] for k in sorted(grads)]

    def make():
        return randn(T, r, 5, 6), T.from_numpy(r.integers(0, 3, size=(5,)).astype("int64"))

    return fn, [make(), make()]
