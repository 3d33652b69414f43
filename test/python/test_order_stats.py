"""quantile / nanquantile / nanmedian, unique(dim=) and unique_consecutive, histc and
combinations (Python compositions of table ops, frontend/python/kiln/_quantiles.py and
_indexing.py) against PyTorch: values, indices, shapes and dtypes, gradients, and a compiled run."""
import numpy as np
import pytest

import kiln
from oracle import need_torch


def check(fn, *arrays, rtol=1e-6, atol=1e-6):
    torch = need_torch()
    got = fn(kiln, *[kiln.from_numpy(a.copy()) for a in arrays])
    want = fn(torch, *[torch.from_numpy(a.copy()) for a in arrays])
    got, want = (got, want) if isinstance(got, (tuple, list)) else ((got,), (want,))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert tuple(g.shape) == tuple(w.shape) and str(g.dtype)[5:] == str(w.dtype)[6:], (g, w)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol, equal_nan=True)


R = np.random.default_rng(13)
X = R.standard_normal((4, 9)).astype(np.float32)
XN = X.copy()
XN[0, 1], XN[2, 3], XN[2, 7] = np.nan, np.nan, np.nan


@pytest.mark.parametrize("mode", ["linear", "lower", "higher", "midpoint", "nearest"])
def test_quantile_modes_dims_and_keepdim(mode):
    check(lambda T, x: [T.quantile(x, 0.3, interpolation=mode), x.quantile(T.tensor([0.0, 0.25, 0.5, 1.0]), dim=1,
                                                                          interpolation=mode),
                        T.quantile(x, T.tensor([0.1, 0.9]), dim=0, keepdim=True, interpolation=mode),
                        T.quantile(x, T.tensor([0.5]), keepdim=True, interpolation=mode),
                        T.quantile(x.double(), 0.75, dim=-1, interpolation=mode)], X)


def test_nanquantile_nanmedian_and_nan_propagation():
    check(lambda T, x: [T.nanquantile(x, 0.5, dim=1), x.nanquantile(T.tensor([0.2, 0.7]), dim=1, keepdim=True),
                        T.quantile(x, 0.5, dim=1), T.nanquantile(x, 0.4), x.nanmedian(), *T.nanmedian(x, dim=1),
                        *T.nanmedian(x, 0, keepdim=True)], XN)


def test_quantile_gradient_and_errors():
    torch = need_torch()
    grads = []
    for T in (kiln, torch):
        x = T.from_numpy(X.copy()).requires_grad_()
        grads.append(T.autograd.grad(T.quantile(x, T.tensor([0.35, 0.8]), dim=1).sum(), x)[0].numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-6)
    x = kiln.from_numpy(X)
    for call, message in [(lambda: kiln.quantile(x, 1.5), r"in the range \[0, 1\]"),
                          (lambda: kiln.quantile(x.long(), 0.5), "float or double"),
                          (lambda: kiln.quantile(x, kiln.tensor([0.5], dtype=kiln.float64)), "same dtype"),
                          (lambda: kiln.quantile(x, 0.5, interpolation="cubic"), "interpolation")]:
        with pytest.raises(RuntimeError, match=message):
            call()


def test_unique_along_a_dim_and_unique_consecutive():
    rows = R.integers(0, 3, (8, 3)).astype(np.int64)
    runs = np.array([1, 1, 2, 2, 3, 1, 1, 2], dtype=np.int64)
    check(lambda T, m: [*T.unique(m, dim=0, return_inverse=True, return_counts=True), m.unique(dim=1),
                        *T.unique_consecutive(m, dim=0, return_inverse=True, return_counts=True)], rows)
    check(lambda T, c: [T.unique_consecutive(c), *T.unique_consecutive(c, return_inverse=True, return_counts=True),
                        *c.reshape(2, 4).unique_consecutive(return_counts=True)], runs)


def test_histc_bins_edges_and_range():
    # values on the bin edges (integers with 6 bins over [-3, 3]) and outside the range
    edges = np.round(R.standard_normal(200) * 3).astype(np.float32)
    check(lambda T, x: [T.histc(x, bins=6, min=-3, max=3), x.histc(bins=13, min=-3, max=3), x.histc(bins=5),
                        x.double().histc(10, -2.5, 4), T.histc(x[:0], bins=4)], edges)


def test_combinations_and_compiled():
    v = np.arange(1, 6, dtype=np.float32)
    check(lambda T, x: [T.combinations(x), T.combinations(x, r=3), T.combinations(x, 2, with_replacement=True),
                        T.combinations(x, r=1)], v)
    f = kiln.compile(lambda x: (kiln.quantile(x, 0.25, dim=1), kiln.combinations(x[0]).prod(1)))
    q, c = f(kiln.from_numpy(X))
    np.testing.assert_allclose(q.numpy(), np.quantile(X, 0.25, axis=1), rtol=1e-6)
    assert c.shape == (36,)
