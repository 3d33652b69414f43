"""An inner optimisation loop with a data-dependent stop (while loss > tol) and a best-loss
tracker kept as a Python float."""
from cutil import randn, rng

TAGS = ["graph-break", "control-flow"]


def build(T):
    r = rng(32)

    def fn(a, b):
        x = T.zeros(a.shape[1])
        best = float("inf")
        steps = 0
        loss = ((a @ x - b) ** 2).mean()
        while loss > 0.05 and steps < 20:
            grad = 2 * a.t() @ (a @ x - b) / a.shape[0]
            x = x - 0.1 * grad
            loss = ((a @ x - b) ** 2).mean()
            best = min(best, loss.item())
            steps += 1
        return x, best, steps

    return fn, [(randn(T, r, 10, 3), randn(T, r, 10)) for _ in range(2)]
