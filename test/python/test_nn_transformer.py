"""nn.Transformer and its encoder/decoder layers against torch with the same weights (a torch
state_dict loaded into the kiln module): post/pre-norm, activations, batch_first, masks, and an
encoder under kiln.compile."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from kiln import nn
from oracle import assert_match, both, need_torch, sample

TOL = dict(rtol=1e-4, atol=2e-5)


def load(tm, km):
    ts = tm.state_dict()
    assert list(ts) == list(km.state_dict())
    km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in ts.items()})


def pair(lib_args, seed=0, **kw):
    torch = need_torch()
    name, args = lib_args
    torch.manual_seed(seed)
    tm = getattr(torch.nn, name)(*args, **kw)
    km = getattr(nn, name)(*args, **kw)
    load(tm, km)
    return tm, km


def padding_mask(n, s):
    m = np.zeros((n, s), dtype=bool)
    m[1, -2:] = True
    return both(m)


ENC_CASES = [dict(), dict(norm_first=True, activation="gelu", batch_first=True), dict(bias=False, activation="gelu")]


@pytest.mark.parametrize("cfg", ENC_CASES, ids=[str(c) for c in ENC_CASES])
def test_encoder_matches_torch(cfg):
    torch = need_torch()
    torch.manual_seed(0)
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **cfg)
    tm = torch.nn.TransformerEncoder(tl, 2, norm=torch.nn.LayerNorm(8), enable_nested_tensor=False)
    kl = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, **cfg)
    km = nn.TransformerEncoder(kl, 2, norm=nn.LayerNorm(8), enable_nested_tensor=False)
    load(tm, km)
    bf = cfg.get("batch_first", False)
    S, N = 5, 3
    kx, tx = both(sample((N, S, 8) if bf else (S, N, 8), "float32", seed=1))
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    kpad, tpad = padding_mask(N, S)
    kmask = nn.Transformer.generate_square_subsequent_mask(S)
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(S)
    assert_match(kmask, tmask)
    kout = km(kx, mask=kmask, src_key_padding_mask=kpad)
    tout = tm(tx, mask=tmask, src_key_padding_mask=tpad)
    assert_match(kout, tout, **TOL)
    (kout ** 2).sum().backward()
    (tout ** 2).sum().backward()
    assert_match(kx.grad, tx.grad, **TOL)
    for (n, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert_match(kp.grad, tp.grad, **TOL)
    # Layer alone, causal hint with a bool mask, and unbatched input.
    bool_mask = np.triu(np.ones((S, S), dtype=bool), 1)
    kb, tb = both(bool_mask)
    load(tl, kl)  # the layers the encoders were cloned from
    with torch.no_grad():
        assert_match(kl(kx, src_mask=kb, is_causal=True), tl(tx, src_mask=tb, is_causal=True), **TOL)
        assert_match(km(kx[0] if bf else kx[:, 0]), tm(tx[0] if bf else tx[:, 0]), **TOL)


@pytest.mark.parametrize("cfg", [dict(), dict(norm_first=True, batch_first=True, activation="gelu")])
def test_transformer_matches_torch(cfg):
    torch = need_torch()
    tm, km = pair(("Transformer", ()), d_model=8, nhead=2, num_encoder_layers=2, num_decoder_layers=2,
                  dim_feedforward=16, dropout=0.0, **cfg)
    assert [n for n, _ in km.named_parameters()] == [n for n, _ in tm.named_parameters()]
    bf = cfg.get("batch_first", False)
    S, T, N = 6, 4, 2
    ksrc, tsrc = both(sample((N, S, 8) if bf else (S, N, 8), "float32", seed=2))
    ktgt, ttgt = both(sample((N, T, 8) if bf else (T, N, 8), "float32", seed=3))
    kpad, tpad = padding_mask(N, S)
    kw_k = dict(tgt_mask=nn.Transformer.generate_square_subsequent_mask(T), src_key_padding_mask=kpad,
                memory_key_padding_mask=kpad)
    kw_t = dict(tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(T), src_key_padding_mask=tpad,
                memory_key_padding_mask=tpad)
    ksrc.requires_grad_(True)
    tsrc.requires_grad_(True)
    kout, tout = km(ksrc, ktgt, **kw_k), tm(tsrc, ttgt, **kw_t)
    assert_match(kout, tout, **TOL)
    kout.sum().backward()
    tout.sum().backward()
    assert_match(ksrc.grad, tsrc.grad, **TOL)


def test_transformer_init_callable_activation_and_errors():
    torch = need_torch()
    m = nn.Transformer(16, 4, 1, 1, 32)
    w = m.encoder.layers[0].linear1.weight.detach().numpy()
    bound = np.sqrt(6 / (16 + 32))  # xavier_uniform over every matrix
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=lambda x: x * 0.5)
    assert layer.activation_relu_or_gelu == 0
    tl = torch.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation=lambda x: x * 0.5)
    load(tl, layer)
    kx, tx = both(sample((3, 2, 8), "float32", seed=4))
    with torch.no_grad():
        assert_match(layer(kx), tl(tx), **TOL)
    for lib in (torch, kiln):
        with pytest.raises(RuntimeError, match="activation should be relu/gelu, not tanh"):
            lib.nn.TransformerEncoderLayer(8, 2, activation="tanh")
        t = lib.nn.Transformer(8, 2, 1, 1, 16)
        with pytest.raises(RuntimeError, match="the batch number of src and tgt must be equal"):
            t(lib.zeros(3, 2, 8), lib.zeros(3, 4, 8))
        with pytest.raises(RuntimeError, match="the feature number of src and tgt must be equal to d_model"):
            t(lib.zeros(3, 2, 6), lib.zeros(3, 2, 6))


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, 16)
        layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2)
        self.head = nn.Linear(16, 3)

    def forward(self, x, pad):
        return self.head(self.encoder(self.embed(x), src_key_padding_mask=pad).mean(1))


@needs_cxx
def test_encoder_model_trains_under_compile_like_eager(strict_inductor):
    """One graph, no break (torch.compile: the same), and compiled Adam steps give eager's losses."""
    x = kiln.from_numpy(sample((2, 5, 4), "float32", seed=5))
    pad = kiln.from_numpy(np.array([[False] * 5, [False] * 3 + [True] * 2]))
    losses = {}
    for mode in ("eager", "compiled"):
        kiln.manual_seed(0)
        model = Classifier()
        opt = kiln.optim.Adam(model.parameters(), lr=1e-2)
        fwd = model if mode == "eager" else kiln.compile(model)
        losses[mode] = []
        for _ in range(3):
            loss = (fwd(x, pad) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[mode].append(loss.item())
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-4, atol=1e-6)
    explained = kiln.compiler.explain(Classifier())(x, pad)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
