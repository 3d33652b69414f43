"""Indexing ops compiled by the inductor backend (compiler/lowering/Indexing.cpp): reads
and writes through index tensors are `indirect` loop IR ops, checked against the indexed size;
an out-of-range index makes the compiled program raise the error eager raises."""
import os
import shutil

import numpy as np
import pytest

import kiln
import kiln.nn as nn
import kiln.nn.functional as F
from kiln.compiler import inductor

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def strict(monkeypatch, tmp_path_factory):
    path = str(tmp_path_factory.getbasetemp() / "indexing-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)


def _rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _ints(high, *shape, low=0, seed=1):
    return kiln.from_numpy(np.random.default_rng(seed).integers(low, high, shape).astype(np.int64))


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _plan(fn, *args):
    out = kiln.explain(fn)(*args)
    assert out.graph_count == 1
    return out.kernels_per_graph[0]


def _check(fn, *args, tol=1e-5, compiled_ops=()):
    """fn compiled equals fn eager, and the ops in compiled_ops are compiled, not fallbacks."""
    want = _flat(fn(*args))
    got = _flat(kiln.compile(fn)(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)
    fallbacks = [op for _, op in _plan(fn, *args).fallbacks]
    for op in compiled_ops:
        assert op not in fallbacks, f"{op} ran as a fallback: {fallbacks}"


def _raises_as_eager(fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    with pytest.raises(Exception) as got:
        kiln.compile(fn)(*args)
    assert type(got.value) is type(eager.value), (got.value, eager.value)
    assert str(eager.value) in str(got.value) or str(got.value) in str(eager.value), (got.value, eager.value)


def test_gather_and_cross_entropy_compile_into_few_kernels():
    def cross_entropy(logits, target):
        return -kiln.log_softmax(logits, dim=-1).gather(1, target).mean()

    logits, target = _rand(16, 10), _ints(10, 16, 1)
    _check(cross_entropy, logits, target, compiled_ops=["aten.gather"])
    plan = _plan(cross_entropy, logits, target)
    assert plan.fallbacks == [] and plan.num_kernels <= 2
    _check(lambda x, t: F.cross_entropy(x, t), logits, _ints(10, 16), compiled_ops=["aten.gather"])


def test_gather_dims_and_negative_dim():
    x = _rand(3, 5, 4)
    _check(lambda x, i: kiln.gather(x, 0, i) * 2, x, _ints(3, 2, 5, 4), compiled_ops=["aten.gather"])
    _check(lambda x, i: kiln.gather(x.exp(), -1, i), x, _ints(4, 3, 5, 7), compiled_ops=["aten.gather"])
    _check(lambda x, i: kiln.gather(x.transpose(0, 1), 1, i), x, _ints(3, 5, 2, 4))


def test_index_select_and_embedding():
    x, idx = _rand(6, 5), _ints(6, 4)
    _check(lambda x, i: kiln.index_select(x, 0, i) + 1, x, idx, compiled_ops=["aten.index_select"])
    _check(lambda x, i: kiln.index_select(x, 1, i).relu(), x, _ints(5, 7), compiled_ops=["aten.index_select"])
    w = _rand(10, 8)
    _check(lambda w, i: F.embedding(i, w) * 3, w, _ints(10, 2, 5), compiled_ops=["aten.embedding"])


def test_advanced_indexing():
    x = _rand(5, 6, 7)
    a, b = _ints(5, 4, low=-5, seed=2), _ints(6, 4, low=-6, seed=3)
    _check(lambda x, a: x[a] * 2, x, a, compiled_ops=["aten.index.Tensor"])
    _check(lambda x, a, b: x[a, b], x, a, b, compiled_ops=["aten.index.Tensor"])
    _check(lambda x, b: x[:, b], x, b, compiled_ops=["aten.index.Tensor"])
    c = _ints(7, 3, 1, low=-7, seed=4)
    _check(lambda x, a, c: x[a, :, c], x, a, c)  # non-adjacent: the index dims go first


def test_index_put_scatter_and_scatter_add():
    x, src = _rand(5, 4), _rand(6, 4, seed=5)
    idx = _ints(5, 6)  # duplicates: accumulate adds them all
    _check(lambda x, i, v: kiln.index_put(x, (i,), v, accumulate=True), x, idx, src,
           compiled_ops=["aten.index_put"])
    uniq = kiln.from_numpy(np.array([4, 0, 2], dtype=np.int64))
    _check(lambda x, i, v: kiln.index_put(x, (i,), v), x, uniq, _rand(3, 4, seed=6),
           compiled_ops=["aten.index_put"])
    sidx = _ints(5, 3, 4, seed=7)
    _check(lambda x, i, s: kiln.scatter_add(x, 0, i, s), x, sidx, src, compiled_ops=["aten.scatter_add"])
    perm = kiln.from_numpy(np.array([[0, 1, 2, 3], [3, 0, 1, 2]], dtype=np.int64))
    _check(lambda x, i, s: kiln.scatter(x, 1, i, s) * 2, x, perm, src, compiled_ops=["aten.scatter.src"])


def test_out_of_range_indices_raise_as_eager():
    x = _rand(4, 6)
    bad = _ints(6, 4, 3)
    bad[1, 2] = 6
    _raises_as_eager(lambda x, i: kiln.gather(x, 1, i), x, bad)
    neg = _ints(4, 3)
    neg[0] = -5
    _raises_as_eager(lambda x, i: x[i], x, neg)
    _raises_as_eager(lambda x, i: kiln.index_select(x, 0, i), x, _ints(4, 3) + 4)
    _raises_as_eager(lambda w, i: F.embedding(i, w), x, _ints(4, 2, 2) - 1 - 4)
    _raises_as_eager(lambda x, i, s: kiln.scatter_add(x, 0, i, s), x, _ints(4, 3, 6) * 2, _rand(3, 6))
    # In range after wrapping: -4 is row 0, as eager reads it.
    ok = kiln.from_numpy(np.array([-4, 3], dtype=np.int64))
    _check(lambda x, i: x[i], x, ok)


def test_compiled_kernel_reports_the_index_and_size():
    x = _rand(3, 4)
    idx = kiln.from_numpy(np.array([[0], [7], [1]], dtype=np.int64))
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension 1 with size 4"):
        kiln.compile(lambda x, i: kiln.gather(x, 1, i))(x, idx)


def test_embedding_training_compiles_the_backward():
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.fc = nn.Linear(8, 3)

        def forward(self, tokens):
            return self.fc(self.emb(tokens)).sum()

    kiln.manual_seed(0)
    model = Model()
    tokens = _ints(20, 4, 5)  # duplicates: gradients of a row add up
    model(tokens).backward()
    want = model.emb.weight.grad.numpy().copy()
    model.emb.weight.grad = None
    compiled = kiln.compile(model)
    compiled(tokens).backward()
    np.testing.assert_allclose(model.emb.weight.grad.numpy(), want, rtol=1e-5, atol=1e-5)
    plan = kiln.explain(model)(tokens).kernels_per_graph[0]
    assert type(plan).__name__ == "TrainingPlan" and plan.reason == "", plan
    # The embedding (forward) and its backward (an accumulating indirect store) are compiled.
    assert plan.forward.fallbacks == [] and plan.backward.fallbacks == []


def test_roll_and_flip_of_3d_tensors():
    # Fuzz seed 1000082: roll decomposes into index_select, whose kernel copied rows of meta
    # tensors while the graph was retraced (a crash).
    x = _rand(8, 5, 3)
    _check(lambda x: kiln.roll(x, 3, 0) * 2, x)
    _check(lambda x: kiln.flip(x, (0, 2)) + 1, x)
