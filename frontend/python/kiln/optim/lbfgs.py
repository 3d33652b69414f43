"""L-BFGS (torch.optim.LBFGS): limited-memory BFGS over all parameters as one flat vector, with
an optional strong-Wolfe line search. The iteration, the two-loop recursion, the first step size
and the line search's bracketing and zoom phases make the same decisions as torch's (after
minFunc), so the same closure gives the same iterates to float rounding."""
from .. import _C
from ..autograd.grad_mode import enable_grad, no_grad
from .optimizer import Optimizer, _to_scalar

__all__ = ["LBFGS"]


def _cubic_minimum(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimizer of the cubic through (x1, f1, f1'=g1) and (x2, f2, g2), clamped to bounds
    (default: the interval between x1 and x2); the interval's middle when the cubic has none."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = d2_square.sqrt() if hasattr(d2_square, "sqrt") else d2_square ** 0.5
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


class _Point:
    """A trial step t along the search direction: loss, flat gradient, directional derivative."""

    def __init__(self, t, f, g, gtd):
        self.t, self.f, self.g, self.gtd = t, f, g, gtd


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step t along d meeting the strong Wolfe conditions (sufficient decrease c1, curvature
    c2): first bracket it, extrapolating with cubic steps, then zoom into the bracket. Returns
    (loss, flat gradient, t, evaluations)."""
    d_norm = d.abs().max()
    start = _Point(0, f, g.clone(), gtd)

    def trial(step):
        f_new, g_new = evaluate(step)
        return _Point(step, f_new, g_new, g_new.dot(d))

    prev, cur = start, trial(t)
    evals, ls_iter = 1, 0
    bracket, done = None, False
    while ls_iter < max_ls:
        if cur.f > f + c1 * cur.t * gtd or (ls_iter > 1 and cur.f >= prev.f):
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        if abs(cur.gtd) <= -c2 * gtd:
            bracket, done = [cur], True
            break
        if cur.gtd >= 0:
            bracket = [prev, _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)]
            break
        # Extrapolate: a cubic step between 1.01 t and 10 t.
        step = _cubic_minimum(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                              bounds=(cur.t + 0.01 * (cur.t - prev.t), cur.t * 10))
        prev = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
        cur = trial(step)
        evals += 1
        ls_iter += 1
    if ls_iter == max_ls:
        bracket = [start, cur]

    # Zoom: shrink the bracket [low, high] (low has the lower loss) by cubic interpolation,
    # nudged away from its ends when progress stalls.
    low, high = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
    stalled = False
    while not done and ls_iter < max_ls:
        a, b = bracket[0].t, bracket[1].t
        if abs(b - a) * d_norm < tolerance_change:
            break
        step = _cubic_minimum(a, bracket[0].f, bracket[0].gtd, b, bracket[1].f, bracket[1].gtd)
        top, bottom = max(a, b), min(a, b)
        eps = 0.1 * (top - bottom)
        if min(top - step, step - bottom) < eps:
            if stalled or step >= top or step <= bottom:
                step = top - eps if abs(step - top) < abs(step - bottom) else bottom + eps
                stalled = False
            else:
                stalled = True
        else:
            stalled = False
        cur = trial(step)
        evals += 1
        ls_iter += 1
        if cur.f > f + c1 * cur.t * gtd or cur.f >= bracket[low].f:
            bracket[high] = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
            low, high = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
        else:
            if abs(cur.gtd) <= -c2 * gtd:
                done = True
            elif cur.gtd * (bracket[high].t - bracket[low].t) >= 0:
                bracket[high] = bracket[low]
            bracket[low] = _Point(cur.t, cur.f, cur.g.clone(), cur.gtd)
    best = bracket[low]
    return best.f, best.g, best.t, evals


class LBFGS(Optimizer):
    """step(closure) runs up to max_iter L-BFGS iterations (max_eval closure calls), keeping
    the last history_size curvature pairs; the closure must compute the loss and its gradients
    (zero_grad, forward, backward) and return the loss. One parameter group only. kiln.compile
    runs the step and its closure eagerly (a graph break where compiled code calls it), as
    torch.compile runs torch.optim.LBFGS's."""

    _step_captured = False

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if hasattr(lr, "numel") and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = {"lr": lr, "max_iter": max_iter, "max_eval": max_eval, "tolerance_grad": tolerance_grad,
                    "tolerance_change": tolerance_change, "history_size": history_size,
                    "line_search_fn": line_search_fn}
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        views = [p.grad.reshape(-1) if p.grad is not None else _C._ops.zeros([p.numel()], dtype=p.dtype)
                 for p in self._params]
        return _C._ops.cat(views, 0)

    def _add_step(self, t, d):
        offset = 0
        for p in self._params:
            n = p.numel()
            p.add_(d[offset:offset + n].view_as(p), alpha=t)
            offset += n

    def _evaluate_at(self, closure, t, d):
        """The loss and flat gradient at params + t d; the parameters are put back after."""
        saved = [p.clone() for p in self._params]
        self._add_step(t, d)
        loss = float(closure())
        g = self._flat_grad()
        for p, s in zip(self._params, saved):
            p.copy_(s)
        return loss, g

    @staticmethod
    def _direction(state, g, history_size):
        """-H g by the two-loop recursion, after adding the newest curvature pair (skipped
        unless y.s > 1e-10, which keeps H positive definite)."""
        y = g.sub(state["prev_flat_grad"])
        s = state["d"].mul(state["t"])
        ys = y.dot(s)
        if ys > 1e-10:
            if len(state["old_dirs"]) == history_size:
                for key in ("old_dirs", "old_stps", "ro"):
                    state[key].pop(0)
            state["old_dirs"].append(y)
            state["old_stps"].append(s)
            state["ro"].append(1.0 / ys)
            state["H_diag"] = ys / y.dot(y)
        dirs, stps, ro = state["old_dirs"], state["old_stps"], state["ro"]
        al = state.setdefault("al", [None] * history_size)
        q = g.neg()
        for i in range(len(dirs) - 1, -1, -1):
            al[i] = stps[i].dot(q) * ro[i]
            q.add_(dirs[i], alpha=-al[i])
        r = _C._ops.mul(q, state["H_diag"])
        for i in range(len(dirs)):
            be_i = dirs[i].dot(r) * ro[i]
            r.add_(stps[i], alpha=al[i] - be_i)
        return r

    def step(self, closure):
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the model and returns the loss")
        with no_grad():
            return self._step(closure)

    def _step(self, closure):
        group = self.param_groups[0]
        lr = _to_scalar(group["lr"])
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")

        def evaluate():
            with enable_grad():
                return closure()

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        g = self._flat_grad()
        if g.abs().max() <= tolerance_grad:
            return orig_loss

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = g.neg()
                state.update(old_dirs=[], old_stps=[], ro=[], H_diag=1)
            else:
                d = self._direction(state, g, history_size)
            if state.get("prev_flat_grad") is None:
                state["prev_flat_grad"] = g.clone()
            else:
                state["prev_flat_grad"].copy_(g)
            prev_loss = loss
            state["prev_loss"] = prev_loss
            # The first step is scaled down by the gradient's size; later ones are lr.
            t = min(1.0, 1.0 / g.abs().sum()) * lr if state["n_iter"] == 1 else lr
            gtd = g.dot(d)
            if gtd > -tolerance_change:
                state["d"], state["t"] = d, t
                break
            used = 0
            if line_search_fn is not None:
                loss, g, t, used = _strong_wolfe(lambda step: self._evaluate_at(evaluate, step, d), t, d, loss, g,
                                                 gtd, max_ls=max_eval - evals)
                self._add_step(t, d)
                converged = g.abs().max() <= tolerance_grad
            else:
                self._add_step(t, d)
                converged = False
                if n_iter != max_iter:
                    loss = float(evaluate())
                    g = self._flat_grad()
                    converged = g.abs().max() <= tolerance_grad
                    used = 1
            state["d"], state["t"] = d, t
            evals += used
            state["func_evals"] += used
            if (n_iter == max_iter or evals >= max_eval or converged
                    or d.mul(t).abs().max() <= tolerance_change or abs(loss - prev_loss) < tolerance_change):
                break
        return orig_loss
