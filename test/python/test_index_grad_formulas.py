"""The derivatives: formulas of the indexing and sorting ops (ir/ops/*.yaml), evaluated
with kiln ops as written there, against PyTorch's autograd gradients for the same grad_output.
(Once kiln's autograd engine runs them, gradcheck covers them as well.)"""
import kiln
import numpy as np
import pytest
from index_helpers import check, make, torch
from oracle import sample


def torch_grads(fn, inputs, grad_out):
    """Gradients of fn(*inputs) (the floating inputs) for grad_out, from PyTorch's autograd."""
    ts = [t.detach().clone().requires_grad_(t.is_floating_point()) for t in inputs]
    out = fn(torch, *ts)
    out = out[0] if isinstance(out, tuple) else out
    wrt = [t for t in ts if t.requires_grad]
    return torch.autograd.grad(out, wrt, grad_out)


def both(a, dtype=None):
    return make(np.asarray(a), dtype)


def grad_for(shape, seed=7):
    return both(sample(shape, "float64", seed=seed))


X = sample((3, 4), "float64")
DISTINCT = np.random.default_rng(5).permutation(12).reshape(3, 4).astype(np.float64)
INDEX = np.array([[2, 0, 1, 2], [0, 0, 2, 1]])


def test_gather_index_select_take():
    x, i = both(X), both(INDEX)
    g = grad_for((2, 4))
    (expected,) = torch_grads(lambda T, a, ix: a.gather(0, ix), [x[1], i[1]], g[1])
    check(kiln.zeros(3, 4, dtype=kiln.float64).scatter_add(0, i[0], g[0]), expected)
    iv = both(np.array([2, 0, 2]))
    g = grad_for((3, 3))
    (expected,) = torch_grads(lambda T, a, ix: a.index_select(1, ix), [x[1], iv[1]], g[1])
    check(kiln.zeros(3, 4, dtype=kiln.float64).index_add(1, iv[0], g[0]), expected)
    it = both(np.array([[0, -1], [11, 0]]))
    g = grad_for((2, 2))
    (expected,) = torch_grads(lambda T, a, ix: a.take(ix), [x[1], it[1]], g[1])
    check(kiln.zeros(3, 4, dtype=kiln.float64).put(it[0], g[0], True), expected)


def test_scatter_and_scatter_add():
    x, i, src = both(X), both(INDEX), both(sample((2, 4), "float64", seed=1))
    g = grad_for((3, 4))
    gs, gsrc = torch_grads(lambda T, a, ix, s: a.scatter(0, ix, s), [x[1], i[1], src[1]], g[1])
    check(g[0].scatter(0, i[0], 0), gs)
    check(g[0].gather(0, i[0]), gsrc)
    gs, gsrc = torch_grads(lambda T, a, ix, s: a.scatter_add(0, ix, s), [x[1], i[1], src[1]], g[1])
    check(g[0], gs)
    check(g[0].gather(0, i[0]), gsrc)


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    a = X.copy()
    s = sample((2, 4), "float64", seed=2)
    a[0, 1] = 0.0  # zeros exercise prod's exact path
    s[1, 0] = 0.0
    s[0, 3] = a[2, 3]  # a tie for amax/amin
    x, i, src = both(a), both(INDEX), both(s)
    g = grad_for((3, 4))
    def op(T, aa, ix, ss):
        return aa.scatter_reduce(0, ix, ss, reduce, include_self=include_self)

    gs, gsrc = torch_grads(op, [x[1], i[1], src[1]], g[1])
    result = x[0].scatter_reduce(0, i[0], src[0], reduce, include_self=include_self)
    ks, ksrc = kiln._scatter_reduce_backward(g[0], x[0], 0, i[0], src[0], reduce, include_self, result)
    check(ks, gs)
    check(ksrc, gsrc)


def test_index_add_copy_fill():
    x, src = both(X), both(sample((3, 2), "float64", seed=3))
    iv = both(np.array([3, 1]))
    g = grad_for((3, 4))
    gs, gsrc = torch_grads(lambda T, a, ix, s: a.index_add(1, ix, s, alpha=2.5), [x[1], iv[1], src[1]], g[1])
    check(g[0], gs)
    check((g[0].index_select(1, iv[0]) * 2.5).reshape(3, 2), gsrc)
    gs, gsrc = torch_grads(lambda T, a, ix, s: a.index_copy(1, ix, s), [x[1], iv[1], src[1]], g[1])
    check(g[0].index_fill(1, iv[0], 0), gs)
    check(g[0].index_select(1, iv[0]).reshape(3, 2), gsrc)
    value = both(np.array(2.0))
    dup = both(np.array([3, 1, 3]))
    gs, gv = torch_grads(lambda T, a, ix, v: a.index_fill(1, ix, v), [x[1], dup[1], value[1]], g[1])
    check(g[0].index_fill(1, dup[0], 0), gs)
    check(g[0].index_select(1, kiln.unique(dup[0])).sum(), gv)


def test_masked_select_and_scatter():
    x = both(X)
    m = both(sample((3, 4), "bool", seed=4))
    n = int(m[0].sum().item())
    g = grad_for((n,))
    (expected,) = torch_grads(lambda T, a, mm: a.masked_select(mm), [x[1], m[1]], g[1])
    check(kiln._masked_select_backward(g[0], x[0], m[0]), expected)
    # A broadcast mask: the gradient comes in the broadcast shape, summed to self's by the engine.
    mb = both(sample((2, 3, 4), "bool", seed=5))
    gb = grad_for((int(mb[0].sum().item()),))
    (expected,) = torch_grads(lambda T, a, mm: a.masked_select(mm), [x[1], mb[1]], gb[1])
    check(kiln._masked_select_backward(gb[0], x[0], mb[0]).sum(0), expected)
    src = both(sample((14,), "float64", seed=6))
    g = grad_for((3, 4))
    gs, gsrc = torch_grads(lambda T, a, mm, s: a.masked_scatter(mm, s), [x[1], m[1], src[1]], g[1])
    check(g[0].masked_fill(m[0], 0), gs)
    check(kiln._masked_scatter_backward(g[0], m[0], [14]), gsrc)


def test_put():
    x, src = both(X), both(sample((3,), "float64", seed=8))
    i = both(np.array([5, -1, 5]))
    g = grad_for((3, 4))
    for accumulate in [False, True]:
        gs, gsrc = torch_grads(lambda T, a, ix, s: a.put(ix, s, accumulate), [x[1], i[1], src[1]], g[1])
        check(g[0] if accumulate else g[0].put(i[0], kiln.zeros_like(src[0]), False), gs)
        check(g[0].take(i[0]).reshape(3), gsrc)


SELECTIONS = [
    (lambda T, a: a.sort(1), True, 1),
    (lambda T, a: a.sort(0, descending=True), True, 0),
    (lambda T, a: a.topk(2, 1), True, 1),
    (lambda T, a: a.topk(2, 0, largest=False), True, 0),
    (lambda T, a: a.kthvalue(2, 1), False, 1),
    (lambda T, a: a.kthvalue(2, 0, keepdim=True), True, 0),
    (lambda T, a: a.median(1), False, 1),
    (lambda T, a: a.mode(-1), False, -1),
]


@pytest.mark.parametrize("case", range(len(SELECTIONS)))
def test_value_selecting_ops(case):
    fn, keepdim, dim = SELECTIONS[case]
    x = both(DISTINCT)
    values, indices = fn(kiln, x[0])
    g = grad_for(tuple(values.shape))
    (expected,) = torch_grads(fn, [x[1]], g[1])
    check(kiln._value_selecting_reduction_backward(g[0], dim, indices, [3, 4], keepdim), expected)


def test_median_all():
    for a in [DISTINCT, np.array([[1.0, 2.0, 2.0], [2.0, 5.0, 0.0]]), np.array([1.0, np.nan, 3.0])]:
        x = both(a)
        g = both(np.array(1.5))
        (expected,) = torch_grads(lambda T, t: t.median(), [x[1]], g[1])
        result = x[0].median()
        mask = x[0].isnan() if result.isnan().item() else x[0] == result
        check(mask * (g[0] / mask.sum()), expected)  # median's formula


@pytest.mark.parametrize("row", [[1.5, -2.0, 3.0, 0.5], [1.5, 0.0, 3.0, 0.5], [0.0, 2.0, 0.0, 4.0],
                                 [2.0, 3.0, 0.0, 0.0]])
def test_cumprod_backward_with_zeros(row):
    # cumprod_backward is exact where the input holds zeros (one or several per row).
    x = both(np.array([row, row[::-1]]))
    g = grad_for((2, 4))
    for dim in [1, 0]:
        (expected,) = torch_grads(lambda T, a, d=dim: a.cumprod(d), [x[1]], g[1])
        check(kiln._cumprod_backward(g[0], x[0], dim, x[0].cumprod(dim)), expected)
