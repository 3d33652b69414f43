"""nn tier 2: scaled_dot_product_attention, MultiheadAttention and RMSNorm against torch."""
import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import assert_match, both, need_torch, sample

needs_autograd = pytest.mark.skipif(not hasattr(kiln.Tensor, "backward"), reason="autograd not built yet")
TOL = dict(rtol=1e-5, atol=1e-6)


def qkv(shape_q, shape_kv, dtype="float32", seed=0):
    return [both(sample(s, dtype, seed=seed + i, low=-2, high=2)) for i, s in enumerate((shape_q, shape_kv, shape_kv))]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", ["plain", "causal", "causal_rect", "bool_mask", "float_mask", "scale", "batch_dims",
                                  "gqa", "masked_row"])
def test_sdpa_matches_torch(case, dtype):
    torch = need_torch()
    shape_q, shape_kv = (2, 3, 5, 8), (2, 3, 7, 8)
    if case == "batch_dims":
        shape_q, shape_kv = (2, 2, 3, 5, 4), (2, 2, 3, 6, 4)
    if case == "gqa":
        shape_kv = (2, 1, 7, 8)
    (kq, tq), (kk, tk), (kv, tv) = qkv(shape_q, shape_kv, dtype)
    kwargs_k, kwargs_t = {}, {}
    if case in ("causal", "causal_rect"):
        if case == "causal":
            (kq, tq), (kk, tk), (kv, tv) = qkv((2, 3, 6, 8), (2, 3, 6, 8), dtype)
        kwargs_k = kwargs_t = {"is_causal": True}
    elif case in ("bool_mask", "masked_row"):
        m = np.random.default_rng(3).random((5, 7)) > 0.4
        m[:, 0] = True
        if case == "masked_row":
            m[2] = False  # a query that may attend to nothing: zeros in torch
        km, tm = both(m)
        kwargs_k, kwargs_t = {"attn_mask": km}, {"attn_mask": tm}
    elif case == "float_mask":
        km, tm = both(sample((3, 5, 7), dtype, seed=9))
        kwargs_k, kwargs_t = {"attn_mask": km}, {"attn_mask": tm}
    elif case == "scale":
        kwargs_k = kwargs_t = {"scale": 0.3}
    elif case == "gqa":
        kwargs_k = kwargs_t = {"enable_gqa": True}
    out = nn.functional.scaled_dot_product_attention(kq, kk, kv, **kwargs_k)
    ref = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, **kwargs_t)
    assert_match(out, ref, **(TOL if dtype == "float32" else {}))


def test_sdpa_errors_match_torch():
    torch = need_torch()
    for lib in (torch, kiln):
        q = lib.ones(2, 3, 4)
        with pytest.raises(RuntimeError, match="Explicit attn_mask should not be set when is_causal=True"):
            lib.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=lib.ones(3, 3, dtype=lib.bool), is_causal=True)
        with pytest.raises(RuntimeError, match="Expected attn_mask dtype to be bool or float or to match query dtype"):
            lib.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=lib.ones(3, 3, dtype=lib.int32))


def test_sdpa_dropout_is_seeded_and_zero_in_expectation_shift():
    q = kiln.ones(1, 64, 4)
    v = kiln.randn(1, 64, 4)
    kiln.manual_seed(1)
    a = nn.functional.scaled_dot_product_attention(q, q, v, dropout_p=0.5).numpy()
    kiln.manual_seed(1)
    b = nn.functional.scaled_dot_product_attention(q, q, v, dropout_p=0.5).numpy()
    c = nn.functional.scaled_dot_product_attention(q, q, v).numpy()
    assert np.array_equal(a, b) and not np.allclose(a, c)


MHA_CASES = [
    dict(),
    dict(batch_first=True),
    dict(bias=False),
    dict(kdim=6, vdim=5),
    dict(add_bias_kv=True, add_zero_attn=True),
]


def copy_module(tm, km):
    torch = need_torch()
    tp, kp = dict(tm.named_parameters()), dict(km.named_parameters())
    assert list(tp) == list(kp)
    with kiln.no_grad():
        for n, p in tp.items():
            kp[n].copy_(kiln.from_numpy(p.detach().numpy().copy()))
    del torch


@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("cfg", MHA_CASES, ids=[str(c) for c in MHA_CASES])
def test_multihead_attention_matches_torch(cfg, need_weights, average):
    torch = need_torch()
    torch.manual_seed(0)
    tm = torch.nn.MultiheadAttention(8, 2, **cfg)
    km = nn.MultiheadAttention(8, 2, **cfg)
    assert repr(km) == repr(tm)
    copy_module(tm, km)
    L, S, N = 4, 5, 3
    bf = cfg.get("batch_first", False)
    shape = lambda n, e: (N, n, e) if bf else (n, N, e)  # noqa: E731
    (kq, tq) = both(sample(shape(L, 8), "float32", seed=1))
    (kk, tk) = both(sample(shape(S, cfg.get("kdim", 8)), "float32", seed=2))
    (kv, tv) = both(sample(shape(S, cfg.get("vdim", 8)), "float32", seed=3))
    kpm = np.zeros((N, S), dtype=bool)
    kpm[1, -2:] = True
    (kpad, tpad) = both(kpm)
    am = np.triu(np.ones((L, S), dtype=bool), 2)
    (kam, tam) = both(am)
    kw = dict(need_weights=need_weights, average_attn_weights=average)
    tm.eval()  # the same math in torch's fast path and slow path; kiln has one
    with torch.no_grad():
        ref = tm(tq, tk, tv, key_padding_mask=tpad, attn_mask=tam, **kw)
    out = km(kq, kk, kv, key_padding_mask=kpad, attn_mask=kam, **kw)
    assert_match(out[0], ref[0], **TOL)
    if need_weights:
        assert_match(out[1], ref[1], **TOL)
    else:
        assert out[1] is None and ref[1] is None


@pytest.mark.parametrize("need_weights", [True, False])
def test_multihead_self_attention_causal_and_unbatched(need_weights):
    torch = need_torch()
    torch.manual_seed(1)
    tm, km = torch.nn.MultiheadAttention(8, 4, batch_first=True), nn.MultiheadAttention(8, 4, batch_first=True)
    copy_module(tm, km)
    kx, tx = both(sample((2, 6, 8), "float32", seed=4))
    mask = np.triu(np.ones((6, 6), dtype=bool), 1)
    km_, tm_ = both(mask)
    with torch.no_grad():
        ref = tm(tx, tx, tx, attn_mask=tm_, is_causal=True, need_weights=need_weights)
    out = km(kx, kx, kx, attn_mask=km_, is_causal=True, need_weights=need_weights)
    assert_match(out[0], ref[0], **TOL)
    kx1, tx1 = both(sample((6, 8), "float32", seed=5))  # unbatched (L, E)
    with torch.no_grad():
        ref = tm(tx1, tx1, tx1, need_weights=need_weights)
    out = km(kx1, kx1, kx1, need_weights=need_weights)
    assert_match(out[0], ref[0], **TOL)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        km(kx, kx, kx, is_causal=True)


def test_multihead_attention_parameters_and_init():
    torch = need_torch()
    km, tm = nn.MultiheadAttention(16, 4, kdim=8, vdim=8), torch.nn.MultiheadAttention(16, 4, kdim=8, vdim=8)
    assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    m = nn.MultiheadAttention(64, 4)
    w = m.in_proj_weight.detach().numpy()
    bound = np.sqrt(6.0 / (64 + 3 * 64))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert np.all(m.in_proj_bias.detach().numpy() == 0) and np.all(m.out_proj.bias.detach().numpy() == 0)
    with pytest.raises(AssertionError, match="embed_dim must be divisible by num_heads"):
        nn.MultiheadAttention(10, 3)


# -- RMSNorm ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("shape,normalized,eps", [((3, 8), (8,), None), ((2, 3, 4), (3, 4), 1e-5), ((4, 6), [6], 0.1)])
def test_rms_norm_matches_torch(shape, normalized, eps, dtype):
    torch = need_torch()
    kx, tx = both(sample(shape, dtype, seed=1, low=-1e-2 if eps is None else -3, high=1e-2 if eps is None else 3), dtype)
    kw, tw = both(sample(tuple(normalized), dtype, seed=2), dtype)
    assert_match(nn.functional.rms_norm(kx, normalized, kw, eps), torch.nn.functional.rms_norm(tx, normalized, tw, eps))
    assert_match(nn.functional.rms_norm(kx, normalized, eps=eps), torch.nn.functional.rms_norm(tx, normalized, eps=eps))


def test_rms_norm_module_and_errors():
    torch = need_torch()
    for args in [((2, 3),), (4,), ([4], 1e-5, False)]:
        km, tm = nn.RMSNorm(*args), torch.nn.RMSNorm(*args)
        assert repr(km) == repr(tm)
        assert list(km.state_dict()) == list(tm.state_dict())
    km, tm = nn.RMSNorm(4), torch.nn.RMSNorm(4)
    kx, tx = both(sample((3, 4), "float32", seed=3))
    with torch.no_grad():
        assert_match(km(kx), tm(tx))
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match=r"Given normalized_shape=\[4\], expected input with shape \[\*4\], but got input of size"):
            lib.nn.functional.rms_norm(lib.ones(2, 3), [4])


@needs_autograd
def test_sdpa_and_rms_norm_gradients_match_torch():
    torch = need_torch()
    (kq, tq), (kk, tk), (kv, tv) = qkv((2, 4, 8), (2, 4, 8), "float64")
    for t in (kq, tq, kk, tk, kv, tv):
        t.requires_grad_(True)
    nn.functional.scaled_dot_product_attention(kq, kk, kv, is_causal=True).sum().backward()
    torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True).sum().backward()
    for a, b in ((kq, tq), (kk, tk), (kv, tv)):
        assert_match(a.grad, b.grad)
    kx, tx = both(sample((3, 5), "float64", seed=3))
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    (nn.functional.rms_norm(kx, [5]) ** 2).sum().backward()
    (torch.nn.functional.rms_norm(tx, [5]) ** 2).sum().backward()
    assert_match(kx.grad, tx.grad)
