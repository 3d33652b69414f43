"""Sparse COO tensors (docs/sparse.md): construction and its checks, coalesce, repr, conversions,
the sparse ops (mm/spmm/addmm/matmul, add, scaling, sum, softmax), autograd (sparse.mm's
gradients, to_dense), modules/save/load/pickle, clear errors for ops without a sparse kernel,
and kiln.compile (a frame that sees a sparse tensor runs eagerly, as under torch.compile)."""
import copy
import io
import pickle

import numpy as np
import pytest

import kiln
from oracle import need_torch

IDX = [[0, 1, 1, 0, 2], [2, 0, 2, 2, 1]]  # (0, 2) twice: uncoalesced
VAL = [3.0, 4.0, 5.0, 1.0, -2.0]


def pair(idx=IDX, val=VAL, size=(3, 3), **kw):
    torch = need_torch()
    return (kiln.sparse_coo_tensor(kiln.tensor(idx), kiln.tensor(val), size, **kw),
            torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), size, **kw))


def same_sparse(k, t, flag=True):
    """Same layout, size, dtype, entries (in order) and, unless flag=False, coalesced flag. (torch
    flags the sparse gradients of some ops uncoalesced although their indices are sorted and
    distinct; kiln's are flagged coalesced.)"""
    assert k.layout is kiln.sparse_coo and k.is_sparse and isinstance(k, kiln.Tensor)
    assert tuple(k.shape) == tuple(t.shape) and str(k.dtype)[5:] == str(t.dtype)[6:]
    assert not flag or k.is_coalesced() == t.is_coalesced()
    assert k._indices().tolist() == t._indices().tolist()
    np.testing.assert_allclose(k._values().detach().numpy(), t._values().detach().numpy(), rtol=1e-6)


def close(k, t, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=rtol, atol=atol)


def matrix(rows, cols, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal((rows, cols)).astype(dtype)


# -- construction ------------------------------------------------------------------------------

def test_construct_and_metadata():
    k, t = pair()
    same_sparse(k, t)
    assert (k.sparse_dim(), k.dense_dim(), k._nnz()) == (t.sparse_dim(), t.dense_dim(), t._nnz())
    assert k.device == kiln.device("cpu") and k.dim() == 2 and k.numel() == 9 and len(k) == 3
    assert kiln.ones(2).layout is kiln.strided and not kiln.ones(2).is_sparse
    assert repr(kiln.sparse_coo) == "kiln.sparse_coo"


def test_construct_from_lists_numpy_and_dtype():
    torch = need_torch()
    edges = np.array([[0, 1], [1, 0], [1, 1]], dtype=np.int32)  # gcn's edges.T: a transposed view
    k = kiln.sparse_coo_tensor(edges.T, kiln.ones(3), (2, 2), dtype=kiln.int64)
    t = torch.sparse_coo_tensor(edges.T, torch.ones(3), (2, 2), dtype=torch.int64)
    same_sparse(k, t)
    assert k._indices().dtype == kiln.int64
    same_sparse(kiln.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], (2, 2)),
                torch.sparse_coo_tensor([[0, 1], [1, 0]], [1, 2], (2, 2)))


def test_size_inferred_and_hybrid():
    torch = need_torch()
    same_sparse(kiln.sparse_coo_tensor(kiln.tensor(IDX), kiln.tensor(VAL)),
                torch.sparse_coo_tensor(torch.tensor(IDX), torch.tensor(VAL)))
    v = matrix(3, 2)
    k = kiln.sparse_coo_tensor(kiln.tensor([[1, 0, 1]]), kiln.tensor(v), (2, 2))
    t = torch.sparse_coo_tensor(torch.tensor([[1, 0, 1]]), torch.tensor(v), (2, 2))
    same_sparse(k, t)
    assert k.dense_dim() == 1
    same_sparse(k.coalesce(), t.coalesce())
    close(k.to_dense(), t.to_dense())


@pytest.mark.parametrize("case, message", [
    (lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL[:3]), (3, 3)),
     "indices and values must have same nnz, but got nnz from indices: 5, nnz from values: 3"),
    (lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3,)),
     "'len(size) == sparse_dim + dense_dim' is not satisfied: len(size) = 1, sparse_dim = 2, dense_dim = 0"),
    (lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3, 2), check_invariants=True),
     "size is inconsistent with indices: for dim 1, size is 2 but found index 2"),
])
def test_construct_errors_as_torch(case, message):
    torch = need_torch()
    for T in (torch, kiln):
        with pytest.raises(RuntimeError) as e:
            case(T)
        assert message in str(e.value)


def test_construct_checks_bounds_always():
    # torch checks only with check_invariants=True and fails later; kiln checks at once
    with pytest.raises(RuntimeError, match="for dim 1, size is 2 but found index 2"):
        kiln.sparse_coo_tensor(kiln.tensor(IDX), kiln.tensor(VAL), (3, 2))
    with pytest.raises(RuntimeError, match="found negative index -1 for dim 0"):
        kiln.sparse_coo_tensor(kiln.tensor([[-1], [0]]), kiln.tensor([1.0]), (2, 2))


def test_cuda_is_refused_clearly():
    with pytest.raises(NotImplementedError, match="CPU only"):
        kiln.sparse_coo_tensor(kiln.tensor(IDX), kiln.tensor(VAL), (3, 3), device="cuda")
    k, _ = pair()
    with pytest.raises(NotImplementedError, match="CPU only"):
        k.to("cuda")


# -- coalesce, repr, conversions -----------------------------------------------------------------

def test_coalesce_sorts_and_sums_as_torch():
    torch = need_torch()
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 4, (3, 40))
    val = rng.standard_normal(40).astype(np.float32)
    k = kiln.sparse_coo_tensor(kiln.tensor(idx), kiln.tensor(val), (4, 4, 4)).coalesce()
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (4, 4, 4)).coalesce()
    same_sparse(k, t)
    assert k.coalesce() is k
    assert k.indices().tolist() == t.indices().tolist()


def test_indices_of_uncoalesced_raise_as_torch():
    k, _ = pair()
    with pytest.raises(RuntimeError, match="Cannot get indices on an uncoalesced tensor, please call .coalesce"):
        k.indices()
    with pytest.raises(RuntimeError, match="Cannot get values on an uncoalesced tensor"):
        k.values()


@pytest.mark.parametrize("make", [
    lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3, 3)),
    lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3, 3)).coalesce(),
    lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3, 3), dtype=T.float64),
    lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor(VAL), (3, 3), requires_grad=True),
    lambda T: T.sparse_coo_tensor(T.tensor(IDX), T.tensor([1, 2, 3, 4, 5]), (3, 3)),
    lambda T: T.sparse_coo_tensor(T.zeros(2, 0, dtype=T.int64), T.zeros(0), (2, 3)),
    lambda T: T.tensor([[True, False], [False, True]]).to_sparse(),
    lambda T: T.tensor([[[1.0, 2.0], [0.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]]).to_sparse(1),
])
def test_repr_as_torch(make):
    torch = need_torch()
    assert repr(make(kiln)) == repr(make(torch)).replace("torch.", "kiln.")


def test_to_sparse_as_torch():
    torch = need_torch()
    a = np.array([[0.0, 1.5, 0.0], [-0.0, np.nan, 2.0]], dtype=np.float32)
    same_sparse(kiln.tensor(a).to_sparse(), torch.tensor(a).to_sparse())
    same_sparse(kiln.tensor(a).to_sparse_coo(), torch.tensor(a).to_sparse_coo())
    b = np.array([[0.0, 1.0], [0.0, 0.0], [2.0, 0.0]], dtype=np.float32)
    same_sparse(kiln.tensor(b).to_sparse(1), torch.tensor(b).to_sparse(1))
    for T in (torch, kiln):
        with pytest.raises(RuntimeError, match="sparse_dim argument must be in >0"):
            T.tensor(b).to_sparse(0)
        s = T.tensor(b).to_sparse()
        assert s.to_sparse() is s
        with pytest.raises(RuntimeError, match="!=self.sparse_dim"):
            s.to_sparse(1)


def test_to_dense_sums_duplicates():
    k, t = pair()
    close(k.to_dense(), t.to_dense())
    assert kiln.ones(2).to_dense().layout is kiln.strided


def test_to_dtype_transpose():
    k, t = pair()
    same_sparse(k.to(kiln.float64), t.to(need_torch().float64))
    same_sparse(k.double(), t.double())
    assert k.to("cpu") is k and k.float() is k
    same_sparse(k.t(), t.t())
    same_sparse(k.transpose(0, 1), t.transpose(0, 1))
    same_sparse(k.T, t.T)
    same_sparse(kiln.t(k), need_torch().t(t))


# -- ops ---------------------------------------------------------------------------------------

def test_mm_family_as_torch():
    torch = need_torch()
    k, t = pair()
    d = matrix(3, 4)
    kd, td = kiln.tensor(d), torch.tensor(d)
    for kf, tf in [(kiln.mm, torch.mm), (kiln.spmm, torch.spmm), (kiln.sparse.mm, torch.sparse.mm),
                   (kiln.matmul, torch.matmul), (lambda a, b: a @ b, lambda a, b: a @ b),
                   (lambda a, b: a.mm(b), lambda a, b: a.mm(b))]:
        close(kf(k, kd), tf(t, td))
    close(kiln.matmul(k, kiln.ones(3)), torch.matmul(t, torch.ones(3)))
    e = matrix(5, 3, seed=1)
    close(kiln.tensor(e) @ k, torch.tensor(e) @ t)
    close(kiln.mm(kiln.tensor(e), k), torch.mm(torch.tensor(e), t))
    c = matrix(3, 4, seed=2)
    close(kiln.addmm(kiln.tensor(c), k, kd), torch.addmm(torch.tensor(c), t, td))
    close(kiln.addmm(kiln.tensor(c), k, kd, beta=0.5, alpha=2), torch.addmm(torch.tensor(c), t, td, beta=0.5, alpha=2))
    close(kiln.sparse.addmm(kiln.tensor(c), k, kd), torch.sparse.addmm(torch.tensor(c), t, td))


def test_mm_errors():
    k, _ = pair()
    with pytest.raises(RuntimeError, match="Expected dim 0 size 3, got 2"):
        kiln.sparse.mm(k, kiln.ones(2, 2))
    with pytest.raises(RuntimeError, match="expected scalar type Float but found Double"):
        kiln.sparse.mm(k, kiln.ones(3, 2, dtype=kiln.float64))
    with pytest.raises(NotImplementedError, match="sparse @ sparse"):
        k @ k


def test_add_mul_sum_as_torch():
    torch = need_torch()
    k, t = pair()
    same_sparse(k + k, t + t)
    one = ([[1], [1]], [9.0])
    k1, t1 = pair(*one)
    same_sparse(k + k1, t + t1)  # torch's merge order
    same_sparse(k1 + k, t1 + t)
    same_sparse(k.coalesce() + k1, t.coalesce() + t1)
    same_sparse(k.coalesce() + k.coalesce(), t.coalesce() + t.coalesce())
    same_sparse(kiln.add(k, k, alpha=2), torch.add(t, t, alpha=2))
    same_sparse((k - k.double()).coalesce(), (t - t.double()).coalesce())
    d = matrix(3, 3)
    close(kiln.tensor(d) + k, torch.tensor(d) + t)
    close(kiln.eye(3) + kiln.sparse_coo_tensor(kiln.tensor(IDX), kiln.ones(5), (3, 3), dtype=kiln.int64),
          torch.eye(3) + torch.sparse_coo_tensor(torch.tensor(IDX), torch.ones(5), (3, 3), dtype=torch.int64))
    for T, s in ((kiln, k), (torch, t)):
        with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported. Use add\(dense, sparse\)"):
            s + T.ones(3, 3)
    same_sparse(k * 2.5, t * 2.5)
    same_sparse(2 * k, 2 * t)
    same_sparse(kiln.mul(k, kiln.tensor(3.0)), torch.mul(t, torch.tensor(3.0)))
    same_sparse(k / 2, t / 2)
    same_sparse(-k, -t)
    ki, ti = pair(val=[1, 2, 3, 4, 5])
    same_sparse(ki * 2.5, ti * 2.5)
    close(kiln.sparse.sum(k), torch.sparse.sum(t))
    close(k.sum(), t.sum())
    same_sparse(kiln.sparse.sum(k, 1), torch.sparse.sum(t, 1))
    same_sparse(kiln.sparse.sum(k, dim=0), torch.sparse.sum(t, dim=0))
    same_sparse(k.sum(1), t.sum(1))
    close(kiln.sparse.sum(k, (0, 1)), torch.sparse.sum(t, (0, 1)))
    assert kiln.sparse.sum(ki).dtype == kiln.int64


def test_softmax_as_torch():
    torch = need_torch()
    rng = np.random.default_rng(5)
    idx, val = rng.integers(0, 5, (2, 12)), rng.standard_normal(12).astype(np.float32)
    k = kiln.sparse_coo_tensor(kiln.tensor(idx), kiln.tensor(val), (5, 5))
    t = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (5, 5))
    for dim in (0, 1, -1):
        same_sparse(kiln.sparse.softmax(k, dim), torch.sparse.softmax(t, dim))
        k_log, t_log = kiln.sparse.log_softmax(k, dim), torch.sparse.log_softmax(t, dim)
        assert k_log._indices().tolist() == t_log._indices().tolist()
        close(k_log._values(), t_log._values())


def test_unsupported_ops_name_op_shape_dtype():
    k, _ = pair()
    with pytest.raises(NotImplementedError, match=r"'aten::exp' .*SparseCPU.*sparse kiln.float32 of size \[3, 3\]"):
        k.exp()
    with pytest.raises(NotImplementedError, match=r"aten::cat"):
        kiln.cat([k, k])
    with pytest.raises(NotImplementedError, match=r"aten::relu"):
        kiln.relu(k)
    with pytest.raises(NotImplementedError, match=r"indexing is not supported for sparse tensors"):
        k[0]
    with pytest.raises(NotImplementedError, match=r"sparse tensors .* are not supported as an index"):
        kiln.ones(3)[k]
    with pytest.raises(TypeError, match="can't convert Sparse layout tensor to numpy"):
        k.numpy()


# -- autograd ----------------------------------------------------------------------------------

def test_sparse_mm_gradients_as_torch():
    torch = need_torch()
    k, t = pair(requires_grad=True)
    d = matrix(3, 2)
    kd, td = kiln.tensor(d).requires_grad_(), torch.tensor(d).requires_grad_()
    w = matrix(3, 2, seed=4)
    (kiln.sparse.mm(k, kd) * kiln.tensor(w)).sum().backward()
    (torch.sparse.mm(t, td) * torch.tensor(w)).sum().backward()
    close(kd.grad, td.grad)
    same_sparse(k.grad, t.grad, flag=False)  # sparse, S's coalesced pattern (one value per location)
    assert k.is_leaf and k.grad_fn is None


def test_mm_gradient_to_dense_operand_only():
    torch = need_torch()
    k, t = pair()
    d = matrix(3, 2)
    kd, td = kiln.tensor(d).requires_grad_(), torch.tensor(d).requires_grad_()
    kiln.spmm(k, kd).pow(2).sum().backward()
    torch.spmm(t, td).pow(2).sum().backward()
    close(kd.grad, td.grad)
    ks, _ = pair(requires_grad=True)
    with pytest.raises(NotImplementedError, match="use kiln.sparse.mm"):
        kiln.mm(ks, kd)


def test_to_dense_and_scaling_backward_as_torch():
    torch = need_torch()
    w = matrix(3, 3, seed=6)
    for f in (lambda s: s.to_dense(), lambda s: (s * 2).to_dense(), lambda s: s.coalesce().to_dense(),
              lambda s: (s + s).to_dense()):
        k, t = pair(requires_grad=True)
        (f(k) * kiln.tensor(w)).sum().backward()
        (f(t) * torch.tensor(w)).sum().backward()
        same_sparse(k.grad, t.grad, flag=False)
    k, t = pair(requires_grad=True)
    kiln.sparse.sum(k).backward()
    torch.sparse.sum(t).backward()
    same_sparse(k.grad, t.grad, flag=False)


def test_gradient_reaches_values_tensor():
    torch = need_torch()
    kv, tv = kiln.tensor(VAL).requires_grad_(), torch.tensor(VAL).requires_grad_()
    k = kiln.sparse_coo_tensor(kiln.tensor(IDX), kv, (3, 3))
    t = torch.sparse_coo_tensor(torch.tensor(IDX), tv, (3, 3))
    assert k.requires_grad and not k.is_leaf and not kv.grad
    d = matrix(3, 2)
    kiln.sparse.mm(k, kiln.tensor(d)).sum().backward()
    torch.sparse.mm(t, torch.tensor(d)).sum().backward()
    close(kv.grad, tv.grad)


# -- modules, save/load, pickle ------------------------------------------------------------------

class WithSparse(kiln.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("adj", kiln.sparse_coo_tensor(kiln.tensor(IDX), kiln.tensor(VAL), (3, 3)))
        self.lin = kiln.nn.Linear(2, 2)

    def forward(self, x):
        return kiln.sparse.mm(self.adj, self.lin(x))


def test_sparse_buffer_state_dict_roundtrip():
    a, b = WithSparse(), WithSparse()
    with kiln.no_grad():
        b.adj.copy_(kiln.sparse_coo_tensor(kiln.tensor([[0], [1]]), kiln.tensor([7.0]), (3, 3)))
    b.load_state_dict(a.state_dict())
    assert b.adj._indices().tolist() == IDX and b.adj._values().tolist() == VAL
    x = kiln.ones(3, 2)
    close(a(x), b(x))
    a.double()
    assert a.adj.dtype == kiln.float64 and a.adj.is_sparse


def test_save_load_pickle_and_torch_interop(tmp_path):
    torch = need_torch()
    k, t = pair()
    buf = io.BytesIO()
    kiln.save({"adj": k, "c": k.coalesce()}, buf)
    buf.seek(0)
    loaded = kiln.load(buf)
    same_sparse(loaded["adj"], t)
    same_sparse(loaded["c"], t.coalesce())
    buf.seek(0)
    from_torch = torch.load(buf)  # kiln writes torch's format
    same_sparse(loaded["adj"], from_torch["adj"])
    path = tmp_path / "t.pt"
    torch.save({"adj": t}, path)
    same_sparse(kiln.load(path)["adj"], t)
    same_sparse(pickle.loads(pickle.dumps(k)), t)
    deep = copy.deepcopy(k)
    same_sparse(deep, t)
    assert deep._values() is not k._values()


# -- kiln.compile ------------------------------------------------------------------------------

def test_compiled_frame_with_sparse_runs_eagerly_and_right():
    k, _ = pair()
    d = kiln.tensor(matrix(3, 2))

    def fn(adj, x):
        return kiln.spmm(adj, x.relu()).sum(1)

    expected = fn(k, d)
    explained = kiln.explain(fn)(k, d)
    # An eager frame: its reason ends no graph, so it is in all_break_reasons (as torch's explain).
    assert explained.graph_count == 0
    assert any("Attempted to wrap sparse Tensor" in str(r) for r in explained.all_break_reasons)
    close(kiln.compile(fn)(k, d), expected)


def test_compiled_to_sparse_breaks_and_stays_right():
    def fn(x):
        s = (x * 2).to_sparse()
        return s.to_dense() + 1

    x = kiln.tensor([[0.0, 1.0], [2.0, 0.0]])
    close(kiln.compile(fn)(x), fn(x))
    explained = kiln.explain(fn)(x)
    assert any("makes a sparse tensor" in str(r) for r in explained.break_reasons)


def test_compiled_sparse_global_keeps_graph_before_the_break():
    # as torch.compile: the dense code before the sparse global compiles (1 graph, no split)
    adj, _ = pair()

    def fn(x):
        y = x * 2 + 1
        return kiln.spmm(adj, y).relu().sum(1)

    x = kiln.tensor(matrix(3, 2))
    explained = kiln.explain(fn)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    close(kiln.compile(fn)(x), fn(x))


def test_fullgraph_raises_at_a_sparse_tensor():
    adj, _ = pair()

    def fn(a, x):
        return kiln.spmm(a, x).relu()

    with pytest.raises(Exception, match="Attempted to wrap sparse Tensor"):
        kiln.compile(fn, fullgraph=True)(adj, kiln.ones(3, 2))


def test_parameter_of_sparse_is_refused():
    adj, _ = pair()
    with pytest.raises(NotImplementedError, match="of a sparse tensor"):
        kiln.nn.Parameter(adj)
    with pytest.raises(NotImplementedError, match="across layouts"):
        kiln.nn.Parameter(kiln.ones(3, 3)).data = adj


@pytest.mark.parametrize("n, m, nnz, k", [(60, 50, 40, 3), (6, 5, 25, 4)])  # scatter path, GEMM path
def test_sparse_mm_both_paths_with_gradients(n, m, nnz, k):
    torch = need_torch()
    r = np.random.default_rng(n)
    idx = np.stack([r.integers(0, n, nnz), r.integers(0, m, nnz)])
    val = r.standard_normal(nnz).astype(np.float32)
    d, w = matrix(m, k, seed=1), matrix(n, k, seed=2)
    ks = kiln.sparse_coo_tensor(kiln.tensor(idx), kiln.tensor(val), (n, m), requires_grad=True)
    ts = torch.sparse_coo_tensor(torch.tensor(idx), torch.tensor(val), (n, m), requires_grad=True)
    kd, td = kiln.tensor(d).requires_grad_(), torch.tensor(d).requires_grad_()
    ko, to = kiln.sparse.mm(ks, kd), torch.sparse.mm(ts, td)
    close(ko, to)
    (ko * kiln.tensor(w)).sum().backward()
    (to * torch.tensor(w)).sum().backward()
    close(kd.grad, td.grad)
    same_sparse(ks.grad, ts.grad.coalesce(), flag=False)


def test_autograd_grad_of_sparse_is_refused_clearly():
    k, _ = pair(requires_grad=True)
    loss = kiln.sparse.mm(k, kiln.ones(3, 2)).sum()
    with pytest.raises(NotImplementedError, match="autograd.grad with respect to a sparse tensor"):
        kiln.autograd.grad(loss, [k])
    with pytest.raises(NotImplementedError, match="backward from a sparse tensor|backward\\(\\) from a sparse"):
        k.backward()
