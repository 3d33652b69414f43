"""L-BFGS as scientific code uses it: optimizer.step(closure) where the closure zeroes the
gradients, computes a least-squares + L2 loss and calls backward; once with the default line
search and once with line_search_fn="strong_wolfe"; the loss returned by step and the fitted
parameters."""
from cutil import randn, rng

TAGS = ["training", "optim", "tier2"]
RTOL, ATOL = 1e-3, 1e-4


def build(T):
    r = rng(169)
    w1 = T.zeros(3, 1, requires_grad=True)
    w2 = T.zeros(3, 1, requires_grad=True)
    opt1 = T.optim.LBFGS([w1], lr=0.5, max_iter=5, history_size=4)
    opt2 = T.optim.LBFGS([w2], lr=1, max_iter=10, line_search_fn="strong_wolfe")

    def fn(x, y):
        def closure1():
            opt1.zero_grad()
            loss = ((x @ w1 - y) ** 2).mean() + 0.01 * (w1 ** 2).sum()
            loss.backward()
            return loss

        def closure2():
            opt2.zero_grad()
            loss = ((T.tanh(x @ w2) - y) ** 2).mean()
            loss.backward()
            return loss

        l1 = opt1.step(closure1)
        l2 = opt2.step(closure2)
        return l1.detach(), l2.detach(), w1.detach().clone(), w2.detach().clone()

    x = randn(T, r, 10, 3)
    y = randn(T, r, 10, 1, scale=0.5)
    return fn, [(x, y), (x, y)]
