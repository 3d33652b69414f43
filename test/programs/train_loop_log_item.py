"""A training loop inside the compiled function: a print of the loss each step (f-string of
.item()), early stopping when the loss is small, metrics collected in a list."""
import io

from cutil import randn, rng

TAGS = ["graph-break", "training"]


def build(T):
    r = rng(21)
    sink = io.StringIO()
    w = randn(T, r, 5, 1).requires_grad_()
    history = []

    def fn(x, y):
        w.grad = None
        pred = x @ w
        loss = ((pred - y) ** 2).mean()
        loss.backward()
        lv = loss.item()
        history.append(lv)
        print(f"step loss={lv:.4f}", file=sink)
        if lv < 1e-3:
            return loss.detach(), w.grad * 0
        with T.no_grad():
            w.sub_(0.1 * w.grad)
        return loss.detach(), w.detach().clone()

    return fn, [(randn(T, r, 8, 5), randn(T, r, 8, 1)) for _ in range(3)]
