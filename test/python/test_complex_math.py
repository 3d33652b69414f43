"""Complex matmul/mm/bmm/einsum, log/sqrt/sin/cos/tanh/pow, where/gather/cumsum/prod against PyTorch:
values, gradients of a real loss (torch's conjugate Wirtinger convention), and kiln.compile."""
import numpy as np
import pytest

import kiln
from oracle import need_torch


def complex_pair(shape, seed, dtype="complex128"):
    torch = need_torch()
    r = np.random.default_rng(seed)
    z = (r.standard_normal(shape) + 1j * r.standard_normal(shape)).astype(dtype)
    return kiln.from_numpy(z.copy()), torch.from_numpy(z.copy())


def close(k, t, tol=1e-10):
    np.testing.assert_allclose(k.detach().numpy(), t.detach().numpy(), rtol=tol, atol=tol)
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]


UNARY = ["log", "sqrt", "sin", "cos", "tanh", "exp"]
BINARY = {
    "matmul": lambda T, a, b: a @ b,
    "mm": lambda T, a, b: a.mm(b),
    "bmm": lambda T, a, b: a.unsqueeze(0).expand(2, 3, 3).bmm(b.unsqueeze(0).expand(2, 3, 3)),
    "einsum": lambda T, a, b: T.einsum("ij,jk->ik", a, b),
    "pow": lambda T, a, b: a ** b,
    "pow_scalar": lambda T, a, b: a ** 2.5 + a ** 2,
    "rpow": lambda T, a, b: 1.5 ** a,
    "where": lambda T, a, b: T.where(a.real > 0, a, b),
    "gather": lambda T, a, b: a.gather(1, T.tensor([[0, 2], [1, 1], [2, 0]])),
    "cumsum": lambda T, a, b: a.cumsum(0) + b.cumsum(-1),
    "prod": lambda T, a, b: a.prod(0) + b.prod(-1, keepdim=True).squeeze(-1) + a.prod() + b[:, :0].prod(1),
}


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("dtype", ["complex64", "complex128"])
def test_unary_values_and_gradients(name, dtype):
    torch = need_torch()
    kz, tz = complex_pair((3, 4), 1, dtype)
    tol = 1e-5 if dtype == "complex64" else 1e-10
    close(getattr(kz, name)(), getattr(tz, name)(), tol)
    kz.requires_grad_(True)
    tz.requires_grad_(True)
    w = np.random.default_rng(2).standard_normal((3, 4, 2)).astype("float32" if dtype == "complex64" else "float64")
    (kiln.view_as_real(getattr(kz, name)()) * kiln.from_numpy(w)).sum().backward()
    (torch.view_as_real(getattr(tz, name)()) * torch.from_numpy(w)).sum().backward()
    close(kz.grad, tz.grad, tol * 10)


@pytest.mark.parametrize("name", list(BINARY))
def test_binary_values_and_gradients(name):
    torch = need_torch()
    (ka, ta), (kb, tb) = complex_pair((3, 3), 3), complex_pair((3, 3), 4)
    fn = BINARY[name]
    close(fn(kiln, ka, kb), fn(torch, ta, tb))
    for t in (ka, kb, ta, tb):
        t.requires_grad_(True)
    kout, tout = fn(kiln, ka, kb), fn(torch, ta, tb)
    w = np.random.default_rng(5).standard_normal(tuple(tout.shape) + (2,))
    (kiln.view_as_real(kout) * kiln.from_numpy(w)).sum().backward()
    (torch.view_as_real(tout) * torch.from_numpy(w)).sum().backward()
    for k, t in ((ka, ta), (kb, tb)):
        if t.grad is None:
            assert k.grad is None or not bool((k.grad != 0).any())
        else:
            close(k.grad, t.grad, 1e-9)


def test_pow_at_zero_as_torch():
    torch = need_torch()
    base = [0j, 0j, -4 + 0j, complex(-4, -0.0), 0j]
    exponent = [0j, 1 + 0j, 0.5 + 0j, 2 + 0j, 0.5 + 3j]
    k = kiln.tensor(base) ** kiln.tensor(exponent)
    t = torch.tensor(base) ** torch.tensor(exponent)
    np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-6, atol=1e-6)
    close(kiln.tensor([complex(-4, -0.0)]).sqrt(), torch.tensor([complex(-4, -0.0)]).sqrt())


def test_complex_ops_compile_to_one_graph():
    torch = need_torch()

    def fn(T, a, b):
        z = (a @ b).tanh() + a.sqrt() * b.log()
        return T.view_as_real(T.where(z.real > 0, z, z.cos()).cumsum(0))

    (ka, ta), (kb, tb) = complex_pair((3, 3), 6), complex_pair((3, 3), 7)
    close(kiln.compile(lambda a, b: fn(kiln, a, b))(ka, kb), fn(torch, ta, tb))
    explain = kiln.explain(lambda a, b: fn(kiln, a, b))(ka, kb)
    assert explain.graph_break_count == 0, explain.break_reasons


def test_still_unsupported_complex_ops_raise_clearly():
    z = kiln.ones(3, dtype=kiln.complex64)
    with pytest.raises(NotImplementedError, match="\"asin\" not implemented for 'ComplexFloat'"):
        z.asin()


def test_prod_dim_out_of_range_is_an_index_error():
    with pytest.raises(IndexError, match="Dimension out of range"):
        kiln.ones(2, 3, dtype=kiln.complex64).prod(2)
