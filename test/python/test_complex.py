"""Complex tensors (docs/complex.md): creation, arithmetic with torch's promotion, views, reductions,
conversions, printing and numpy, autograd (torch's conjugate Wirtinger convention), and Meta's
Llama rotary embedding eager and compiled, all against torch."""
import warnings

import numpy as np
import pytest

import kiln

torch = pytest.importorskip("torch")

DTYPES = [(kiln.complex64, torch.complex64), (kiln.complex128, torch.complex128)]


def K(t, requires_grad=False):
    """A kiln copy of a torch tensor (same values, dtype and strides for a plain layout)."""
    out = kiln.tensor(t.detach().resolve_conj().numpy())
    return out.requires_grad_() if requires_grad else out


def close(k, t, **kw):
    np.testing.assert_allclose(k.detach().numpy(), t.detach().resolve_conj().numpy(),
                               **({"rtol": 1e-5, "atol": 1e-6} | kw))


def crandn(*shape, dtype=torch.complex64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, dtype=dtype, generator=g)


# --- creation, dtypes, printing -----------------------------------------------------------------

def test_dtypes_and_aliases():
    assert kiln.cfloat is kiln.complex64 and kiln.cdouble is kiln.complex128
    assert kiln.complex64.is_complex and not kiln.float32.is_complex
    assert kiln.complex64.itemsize == 8 and kiln.complex128.itemsize == 16
    assert repr(kiln.complex128) == "kiln.complex128"
    for a, b in [(kiln.complex64, kiln.float64), (kiln.complex64, kiln.int64), (kiln.float16, kiln.complex64),
                 (kiln.complex128, kiln.float32)]:
        ta, tb = (getattr(torch, str(x).split(".")[1]) for x in (a, b))
        assert str(kiln.promote_types(a, b)).split(".")[1] == str(torch.promote_types(ta, tb)).split(".")[1]
    assert not kiln.can_cast(kiln.complex64, kiln.float64) and kiln.can_cast(kiln.float64, kiln.complex64)


def test_tensor_from_python_complex_and_back():
    data = [[1 + 2j, -3.5j], [0.25, 2 - 1j]]
    k, t = kiln.tensor(data), torch.tensor(data)
    assert k.dtype == kiln.complex64 and k.shape == (2, 2)
    close(k, t)
    assert k.tolist() == t.tolist()
    assert k[0, 1].item() == t[0, 1].item()
    assert kiln.tensor([1.0, 2.0], dtype=kiln.complex128).tolist() == [1 + 0j, 2 + 0j]
    assert repr(k) == repr(t).replace("torch", "kiln")
    d = kiln.tensor([1.5 - 2j, 3 + 0.5j], dtype=kiln.complex128)
    assert repr(d) == repr(torch.tensor([1.5 - 2j, 3 + 0.5j], dtype=torch.complex128)).replace("torch", "kiln")


def test_factories():
    for kd, td in DTYPES:
        assert kiln.zeros(2, 3, dtype=kd).tolist() == torch.zeros(2, 3, dtype=td).tolist()
        assert kiln.ones(3, dtype=kd).tolist() == torch.ones(3, dtype=td).tolist()
        assert kiln.full((2,), 2.5, dtype=kd).tolist() == torch.full((2,), 2.5, dtype=td).tolist()
        z = kiln.ones(2, dtype=kd)
        assert kiln.zeros_like(z).dtype == kd and kiln.ones_like(z).tolist() == [1 + 0j, 1 + 0j]
        assert kiln.empty(4, dtype=kd).shape == (4,)


def test_randn_complex_draws_torchs_values():
    """torch's complex randn: a normal of variance 1/2 for each part, drawn as the real pairs."""
    kiln.manual_seed(7)
    torch.manual_seed(7)
    k, t = kiln.randn(64, dtype=kiln.complex64), torch.randn(64, dtype=torch.complex64)
    close(k, t, rtol=1e-6, atol=1e-6)
    big = kiln.randn(20000, dtype=kiln.complex128)
    pairs = kiln.view_as_real(big)
    assert abs(pairs.var().item() - 0.5) < 0.03


def test_numpy_roundtrip_shares_memory():
    a = (np.arange(6) + 1j * np.arange(6)).astype(np.complex64).reshape(2, 3)
    k = kiln.from_numpy(a)
    assert k.dtype == kiln.complex64
    a[0, 0] = 5 - 5j
    assert k[0, 0].item() == 5 - 5j
    back = k.numpy()
    assert back.dtype == np.complex64 and np.shares_memory(back, a)
    assert kiln.tensor(a.astype(np.complex128)).dtype == kiln.complex128


# --- views ---------------------------------------------------------------------------------------

def test_view_as_real_and_complex_share_storage():
    z = kiln.tensor([[1 + 2j, 3 + 4j], [5 + 6j, 7 + 8j]])
    r = kiln.view_as_real(z)
    assert r.shape == (2, 2, 2) and r.stride() == (4, 2, 1) and r.dtype == kiln.float32
    r[0, 1, 1] = -1.0
    assert z[0, 1].item() == 3 - 1j
    zt = z.t()
    assert kiln.view_as_real(zt).stride() == (2, 4, 1)
    assert kiln.view_as_complex(r).data_ptr() == z.data_ptr()
    assert z.real.tolist() == [[1.0, 3.0], [5.0, 7.0]] and z.imag.tolist() == [[2.0, -1.0], [6.0, 8.0]]


@pytest.mark.parametrize("make, message", [
    (lambda T: T.zeros(3, 3), "last dimension of size 2"),
    (lambda T: T.zeros(2, 3).t(), "last dimension with stride 1"),
    (lambda T: T.zeros(3, 5)[:, :2], "stride divisible by 2"),
    (lambda T: T.zeros(2, dtype=T.int64), "scalar type: Long"),
    (lambda T: T.zeros(()), "one or more dimensions"),
])
def test_view_as_complex_errors_match_torch(make, message):
    with pytest.raises(RuntimeError, match=message):
        torch.view_as_complex(make(torch))
    with pytest.raises(RuntimeError, match=message):
        kiln.view_as_complex(make(kiln))
    with pytest.raises(RuntimeError, match="only supported for complex tensors"):
        kiln.view_as_real(kiln.zeros(2))


# --- pointwise ops, promotion --------------------------------------------------------------------

def _operands(td):
    a = crandn(3, 4, dtype=td, seed=1)
    return {
        "complex": crandn(3, 4, dtype=td, seed=2),
        "broadcast": crandn(4, dtype=td, seed=3),
        "strided": crandn(4, 3, dtype=td, seed=4).t(),
        "real": torch.randn(3, 4, generator=torch.Generator().manual_seed(5)),
        "real64": torch.randn(4, dtype=torch.float64, generator=torch.Generator().manual_seed(6)),
        "int": torch.arange(12).reshape(3, 4) + 1,
        "zero_d_c128": torch.tensor(1.5 - 0.5j, dtype=torch.complex128),
    }, a


@pytest.mark.parametrize("kd, td", DTYPES)
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_binary_ops_match_torch(kd, td, op):
    others, a = _operands(td)
    for name, b in others.items():
        for lhs, rhs in ((a, b), (b, a)):
            expected = getattr(torch, op)(lhs, rhs)
            got = getattr(kiln, op)(K(lhs), K(rhs))
            assert str(got.dtype).split(".")[1] == str(expected.dtype).split(".")[1], (op, name)
            close(got, expected, rtol=1e-4)
    for scalar in (2.5, 3, -1.5j, 2 + 1j):
        close(getattr(kiln, op)(K(a), scalar), getattr(torch, op)(a, scalar), rtol=1e-4)
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/"}[op]
    close(eval(f"2.0 {sym} K(a)"), eval(f"2.0 {sym} a"), rtol=1e-4)
    close(eval(f"K(a) {sym} 1j"), eval(f"a {sym} 1j"), rtol=1e-4)
    x = K(a).clone()
    getattr(x, op + "_")(K(others["complex"]))
    close(x, getattr(torch, op)(a, others["complex"]), rtol=1e-4)
    with pytest.raises(RuntimeError, match="can't be cast"):
        getattr(kiln.ones(3, 4), op + "_")(K(a))


@pytest.mark.parametrize("kd, td", DTYPES)
def test_unary_ops_match_torch(kd, td):
    a = crandn(5, 3, dtype=td, seed=8)
    for name in ["neg", "exp", "abs", "angle", "conj", "reciprocal"]:
        close(getattr(kiln, name)(K(a)), getattr(torch, name)(a).resolve_conj(), rtol=1e-5)
    close(-K(a), -a)
    close(K(a).abs(), a.abs())
    close(kiln.angle(kiln.tensor([-2.0, 0.0, 3.0])), torch.angle(torch.tensor([-2.0, 0.0, 3.0])))
    assert not K(a).conj().is_conj() and K(a).resolve_conj().dtype == kd
    assert K(a).is_complex() and kiln.is_complex(K(a)) and not kiln.ones(2).is_complex()


@pytest.mark.parametrize("kd, td", DTYPES)
def test_complex_and_polar(kd, td):
    real_t = torch.float64 if td == torch.complex128 else torch.float32
    re, im = torch.randn(3, 1, dtype=real_t), torch.randn(4, dtype=real_t)
    close(kiln.complex(K(re), K(im)), torch.complex(re, im))
    mag, ang = torch.rand(5, dtype=real_t), torch.randn(5, dtype=real_t)
    close(kiln.polar(K(mag), K(ang)), torch.polar(mag, ang))
    with pytest.raises(RuntimeError, match="Expected object of scalar type"):
        kiln.complex(kiln.ones(2), kiln.ones(2, dtype=kiln.float64))


def test_comparisons_and_closeness():
    a = crandn(6, seed=9)
    b = a.clone()
    b[2] += 1e-3j
    ka, kb = K(a), K(b)
    assert (ka == kb).tolist() == (a == b).tolist() and (ka != kb).tolist() == (a != b).tolist()
    assert kiln.isclose(ka, kb).tolist() == torch.isclose(a, b).tolist()
    assert kiln.allclose(ka, kb, atol=1e-2) and not kiln.allclose(ka, kb)
    kiln.testing.assert_close(ka, ka.clone())
    with pytest.raises(AssertionError, match="not close"):
        kiln.testing.assert_close(ka, kb)


# --- layout ops, reductions, conversions ---------------------------------------------------------

@pytest.mark.parametrize("kd, td", DTYPES)
def test_layout_ops_and_reductions(kd, td):
    a = crandn(2, 3, 4, dtype=td, seed=10)
    k = K(a)
    cases = [
        lambda T, x: x.reshape(6, 4), lambda T, x: x.transpose(0, 2).contiguous(), lambda T, x: x.flatten(1),
        lambda T, x: x[:, 1:, ::2], lambda T, x: x.permute(2, 0, 1).clone(), lambda T, x: x.unsqueeze(1).expand(2, 5, 3, 4),
        lambda T, x: T.cat([x, x[:1]], 0), lambda T, x: T.stack([x, x], -1), lambda T, x: x.sum(),
        lambda T, x: x.sum(dim=(0, -1)), lambda T, x: x.mean(1, keepdim=True), lambda T, x: x.mean(),
    ]
    for case in cases:
        close(case(kiln, k), case(torch, a), rtol=1e-5)
    assert kiln.cat([k, K(a.real)], 0).dtype == kd


def test_zero_dim_complex_reductions_and_cat():
    """Regression: a 0-d complex tensor's pairs have a dim of their own, which sum(dim=0) reduced
    and cat joined."""
    z = kiln.tensor(1 + 2j)
    assert z.sum(0).item() == 1 + 2j and z.mean(-1, keepdim=True).item() == 1 + 2j
    with pytest.raises(RuntimeError, match="zero-dimensional tensor cannot be concatenated"):
        kiln.cat([z, z])
    assert kiln.tensor([np.complex64(1 + 1j), 2]).tolist() == [1 + 1j, 2 + 0j]


def test_copies_and_conversions():
    a = crandn(3, 2, seed=11)
    k = K(a)
    x = kiln.zeros(3, 2, dtype=kiln.complex64)
    x.copy_(k)
    close(x, a)
    x.copy_(kiln.ones(3, 2))
    assert x.tolist() == [[1 + 0j] * 2] * 3
    close(k.to(kiln.complex128), a.to(torch.complex128))
    assert k.to(kiln.complex128).dtype == kiln.complex128
    close(kiln.ones(2, 2).type_as(k), torch.ones(2, 2).type_as(a))
    with pytest.warns(UserWarning, match="discards the imaginary part"):
        f = k.float()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        close(f, a.float())
    assert k.type() == "kiln.ComplexFloatTensor"


def test_unsupported_ops_raise_naming_op_and_dtype():
    z = kiln.ones(2, 2, dtype=kiln.complex64)
    with pytest.raises(NotImplementedError, match="\"asin\" not implemented for 'ComplexFloat'"):
        kiln.asin(z)
    with pytest.raises(NotImplementedError, match="\"cumprod\" not implemented for 'ComplexFloat'"):
        z.cumprod(0)
    with pytest.raises(NotImplementedError, match="'ComplexDouble'"):
        kiln.ones(2, dtype=kiln.complex128) < 1
    with pytest.raises(TypeError, match="rounding_mode"):
        kiln.div(z, z, rounding_mode="floor")


# --- autograd: torch's conjugate Wirtinger convention --------------------------------------------

def _real_loss(T, out, weights):
    """A real loss of a complex or real result: a random real linear function of its parts."""
    parts = T.view_as_real(out) if out.is_complex() else out
    return (parts * weights).sum()


@pytest.mark.parametrize("kd, td", DTYPES)
@pytest.mark.parametrize("name, fn", [
    ("mul", lambda T, z, w, r: z * w), ("div", lambda T, z, w, r: z / w), ("add_real", lambda T, z, w, r: z + r),
    ("mul_real", lambda T, z, w, r: r * z), ("exp", lambda T, z, w, r: T.exp(z)), ("abs", lambda T, z, w, r: z.abs()),
    ("angle", lambda T, z, w, r: T.angle(z)), ("real_imag", lambda T, z, w, r: z.real * 2 - z.imag),
    ("conj", lambda T, z, w, r: T.conj(z) * w), ("sum", lambda T, z, w, r: (z * w).sum(0)),
    ("mean", lambda T, z, w, r: z.mean(-1, keepdim=True) - z), ("polar", lambda T, z, w, r: T.polar(r.abs(), r) * z),
    ("complex", lambda T, z, w, r: T.complex(r, r * 3) / z), ("reciprocal", lambda T, z, w, r: T.reciprocal(z)),
    ("layout", lambda T, z, w, r: T.cat([z, w.t().contiguous().t()], 1).reshape(6, 4).transpose(0, 1)[1:, ::2]),
    ("stack_expand", lambda T, z, w, r: T.stack([z, w], 0).unsqueeze(1).expand(2, 3, 3, 4).sum(1)),
    ("to", lambda T, z, w, r: z.to(T.complex128) * w.to(T.complex128) + r.to(T.complex64)),
])
def test_gradients_match_torch(kd, td, name, fn):
    real_t = torch.float64 if td == torch.complex128 else torch.float32
    z, w = crandn(3, 4, dtype=td, seed=12), crandn(3, 4, dtype=td, seed=13)
    r = torch.randn(3, 4, dtype=real_t, generator=torch.Generator().manual_seed(14))
    tz, tw, tr = (x.clone().requires_grad_() for x in (z, w, r))
    tout = fn(torch, tz, tw, tr)
    weights = torch.randn(torch.view_as_real(tout).shape if tout.is_complex() else tout.shape,
                          dtype=real_t, generator=torch.Generator().manual_seed(15))
    _real_loss(torch, tout, weights).backward()
    kz, kw, kr = (K(x, requires_grad=True) for x in (z, w, r))
    kout = fn(kiln, kz, kw, kr)
    _real_loss(kiln, kout, K(weights)).backward()
    for k, t in ((kz, tz), (kw, tw), (kr, tr)):
        if t.grad is None:
            assert k.grad is None
        else:
            assert k.grad.dtype == K(t.grad).dtype
            close(k.grad, t.grad, rtol=1e-4, atol=1e-5)


# --- Llama's rotary embedding (Meta's llama/model.py), eager and compiled -----------------------

def precompute_freqs_cis(T, dim, end, theta=10000.0):
    freqs = 1.0 / (theta ** (T.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = T.arange(end, device=freqs.device)
    freqs = T.outer(t, freqs).float()
    return T.polar(T.ones_like(freqs), freqs)


def reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)


def apply_rotary_emb(T, xq, xk, freqs_cis):
    xq_ = T.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = T.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = reshape_for_broadcast(freqs_cis, xq_)
    xq_out = T.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = T.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def rope_attention(T, x, wq, wk, wv, freqs_cis):
    """Llama's Attention.forward without the KV cache: projections, RoPE, causal softmax."""
    bsz, seqlen, dim = x.shape
    heads, head_dim = 2, dim // 2
    xq = (x @ wq).view(bsz, seqlen, heads, head_dim)
    xk = (x @ wk).view(bsz, seqlen, heads, head_dim)
    xv = (x @ wv).view(bsz, seqlen, heads, head_dim)
    xq, xk = apply_rotary_emb(T, xq, xk, freqs_cis=freqs_cis[:seqlen])
    xq, xk, xv = xq.transpose(1, 2), xk.transpose(1, 2), xv.transpose(1, 2)
    scores = (xq @ xk.transpose(2, 3)) / head_dim ** 0.5
    mask = T.triu(T.full((seqlen, seqlen), float("-inf")), diagonal=1)
    probs = T.softmax(scores + mask, dim=-1)
    return (probs @ xv).transpose(1, 2).reshape(bsz, seqlen, dim)


def _rope_inputs():
    g = torch.Generator().manual_seed(16)
    return [torch.randn(*s, generator=g) for s in ((2, 6, 16), (16, 16), (16, 16), (16, 16))]


def test_precompute_freqs_cis_matches_torch():
    close(precompute_freqs_cis(kiln, 8, 12), precompute_freqs_cis(torch, 8, 12), rtol=1e-5)


@pytest.mark.parametrize("compiled", [False, True])
def test_llama_rope_attention_forward_and_backward(compiled, strict_inductor):
    inputs = _rope_inputs()
    t_in = [x.clone().requires_grad_() for x in inputs]
    t_out = rope_attention(torch, *t_in, precompute_freqs_cis(torch, 8, 12))
    t_out.pow(2).sum().backward()

    freqs_cis = precompute_freqs_cis(kiln, 8, 12)

    def forward(x, wq, wk, wv):
        return rope_attention(kiln, x, wq, wk, wv, freqs_cis)

    k_in = [K(x, requires_grad=True) for x in inputs]
    fn = kiln.compile(forward, fullgraph=True) if compiled else forward
    k_out = fn(*k_in)
    close(k_out, t_out, rtol=1e-4, atol=1e-5)
    k_out.pow(2).sum().backward()
    for k, t in zip(k_in, t_in):
        close(k.grad, t.grad, rtol=1e-3, atol=1e-3)
    if compiled:
        report = kiln.explain(forward)(*[K(x) for x in inputs])
        assert report.graph_count == 1 and report.graph_break_count == 0


def test_compiled_complex_inputs_and_outputs(strict_inductor):
    """A graph that takes and returns complex tensors: the complex values stay eager (view_as_real
    and its inverse run between the compiled real segments)."""
    def f(z, w, x):
        return (z * w + x).exp() / w, (z.abs() + x).sum()

    z, w = crandn(4, 3, seed=17), crandn(4, 3, seed=18)
    x = torch.randn(4, 3, generator=torch.Generator().manual_seed(19))
    expected = f(z, w, x)
    got = kiln.compile(f, fullgraph=True)(K(z), K(w), K(x))
    close(got[0], expected[0], rtol=1e-4)
    close(got[1], expected[1], rtol=1e-4)


def test_compiled_unsupported_complex_op_raises_the_eager_error(strict_inductor):
    """An op with no complex kernel fails while tracing as it does eagerly (the Complex key's
    fallback refuses it on meta tensors too): the user gets the op's error, not a crash."""
    def f(z):
        return kiln.asin(z * 2)

    for fullgraph in (False, True):
        with pytest.raises(NotImplementedError, match="\"asin\" not implemented for 'ComplexFloat'"):
            kiln.compile(f, fullgraph=fullgraph)(kiln.ones(3, dtype=kiln.complex64))


# --- kiln.fft (eager DFTs written in real ops) ---------------------------------------------------

@pytest.mark.parametrize("name, make, kwargs", [
    ("fft", lambda: torch.randn(3, 8), {}), ("fft", lambda: crandn(3, 7, seed=20), {"norm": "ortho"}),
    ("ifft", lambda: crandn(2, 5, seed=21), {"n": 8}), ("rfft", lambda: torch.randn(4, 9), {"n": 11}),
    ("rfft", lambda: torch.randn(6, 4), {"dim": 0, "norm": "forward"}),
    ("irfft", lambda: torch.fft.rfft(torch.randn(3, 8)), {}), ("irfft", lambda: crandn(3, 5, seed=22), {"n": 9}),
    ("fftn", lambda: torch.randn(4, 6, 5), {}), ("rfftn", lambda: torch.randn(4, 6, 5), {"dim": (0, 2)}),
    ("ifft2", lambda: crandn(3, 4, 6, dtype=torch.complex128, seed=23), {}),
    ("fftshift", lambda: torch.randn(4, 5), {}), ("ifftshift", lambda: torch.randn(4, 5), {"dim": 1}),
])
def test_fft_matches_torch(name, make, kwargs):
    x = make()
    got, expected = getattr(kiln.fft, name)(K(x), **kwargs), getattr(torch.fft, name)(x, **kwargs)
    assert got.shape == expected.shape and got.dtype == K(expected).dtype
    scale = expected.abs().max().item()
    close(got, expected, rtol=1e-5, atol=1e-5 * scale)
    close(kiln.fft.fftfreq(7, 0.5), torch.fft.fftfreq(7, 0.5))
    close(kiln.fft.rfftfreq(8), torch.fft.rfftfreq(8))


def test_fft_gradients_match_torch():
    """A spectral loss (|rfft(x)|, then a real part of an inverse transform) differentiates."""
    x = torch.randn(3, 10, generator=torch.Generator().manual_seed(24))
    tx, kx = x.clone().requires_grad_(), K(x, requires_grad=True)
    for T, v in ((torch, tx), (kiln, kx)):
        spectrum = T.fft.rfft(v)
        (spectrum.abs().sum() + T.fft.irfft(spectrum * 1j, n=10).pow(2).sum()).backward()
    close(kx.grad, tx.grad, rtol=1e-4, atol=1e-4)


def test_inverse_hyperbolics_and_sinc_of_complex_inputs_as_torch():
    """asinh/acosh/atanh/sinc converted a complex input to float32 (the imaginary parts dropped,
    only a warning): wrong values. Now complex formulas (principal branches); other real-only
    composites refuse complex inputs by name."""
    from oracle import need_torch
    import warnings

    torch = need_torch()
    rng = np.random.default_rng(0)
    z = (rng.standard_normal(64) * 3 + 1j * rng.standard_normal(64) * 3)
    for dtype in (np.complex64, np.complex128):
        for name in ("asinh", "acosh", "atanh", "sinc"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                got = getattr(kiln, name)(kiln.from_numpy(z.astype(dtype))).numpy()
            want = getattr(torch, name)(torch.from_numpy(z.astype(dtype))).numpy()
            assert got.dtype == want.dtype
            np.testing.assert_allclose(got, want, rtol=1e-4 if dtype == np.complex64 else 1e-10, atol=1e-5, err_msg=name)
    with pytest.raises(NotImplementedError, match=r"deg2rad.*ComplexFloat"):
        kiln.deg2rad(kiln.from_numpy(z.astype(np.complex64)))
