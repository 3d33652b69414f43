"""nn.RNN / GRU / LSTM and their cells against torch: parameter names and shapes, state_dicts
both ways, outputs and gradients, argument errors, and the layers under kiln.compile."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx
from kiln import nn
from oracle import assert_match, both, need_torch, sample

TOL = dict(rtol=1e-4, atol=1e-5)


def load_torch_weights(tm, km):
    """Copies torch module tm's state_dict into kiln module km (names must agree)."""
    ts = tm.state_dict()
    assert list(ts) == list(km.state_dict())
    km.load_state_dict({k: kiln.from_numpy(v.detach().numpy().copy()) for k, v in ts.items()})


RNN_CASES = [
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, batch_first=True, bidirectional=True)),
    ("LSTM", dict(num_layers=2, proj_size=3, bias=False)),
    ("GRU", dict(num_layers=2, bidirectional=True)),
    ("GRU", dict(batch_first=True, bias=False)),
    ("RNN", dict(nonlinearity="relu", num_layers=2, batch_first=True)),
    ("RNN", dict(bidirectional=True)),
]


def make_pair(kind, cfg, seed=0):
    torch = need_torch()
    torch.manual_seed(seed)
    tm = getattr(torch.nn, kind)(4, 6, **cfg)
    km = getattr(nn, kind)(4, 6, **cfg)
    load_torch_weights(tm, km)
    return tm, km


@pytest.mark.parametrize("kind,cfg", RNN_CASES, ids=[f"{k}-{c}" for k, c in RNN_CASES])
def test_rnn_layers_match_torch(kind, cfg):
    torch = need_torch()
    tm, km = make_pair(kind, cfg)
    assert repr(km) == repr(tm)
    assert [(n, tuple(p.shape)) for n, p in km.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tm.named_parameters()]
    shape = (3, 5, 4) if cfg.get("batch_first") else (5, 3, 4)
    kx, tx = both(sample(shape, "float32", seed=1, low=-1, high=1))
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    kout, kh = km(kx)
    tout, th = tm(tx)
    assert_match(kout, tout, **TOL)
    assert_match(kh, th, **TOL)
    # Gradients through output and final state, w.r.t. the input and every parameter.
    kloss = (kout * kout).sum() + (kh[0].sum() if kind == "LSTM" else kh.sum())
    tloss = (tout * tout).sum() + (th[0].sum() if kind == "LSTM" else th.sum())
    kloss.backward()
    tloss.backward()
    assert_match(kx.grad, tx.grad, **TOL)
    for (name, kp), (_, tp) in zip(km.named_parameters(), tm.named_parameters()):
        assert_match(kp.grad, tp.grad, **TOL), name


@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
def test_rnn_initial_state_and_unbatched(kind):
    torch = need_torch()
    tm, km = make_pair(kind, dict(num_layers=2, bidirectional=True), seed=2)
    kx, tx = both(sample((5, 2, 4), "float32", seed=3, low=-1, high=1))
    kh, th = both(sample((4, 2, 6), "float32", seed=4, low=-1, high=1))
    if kind == "LSTM":
        kc, tc = both(sample((4, 2, 6), "float32", seed=5, low=-1, high=1))
        kh, th = (kh, kc), (th, tc)
    with torch.no_grad():
        ref = tm(tx, th)
    assert_match(km(kx, kh), ref, **TOL)
    # Unbatched (L, in) input with (layers*dirs, H) state.
    kx1, tx1 = kx[:, 0], tx[:, 0]
    kh1 = tuple(h[:, 0] for h in kh) if kind == "LSTM" else kh[:, 0]
    th1 = tuple(h[:, 0] for h in th) if kind == "LSTM" else th[:, 0]
    with torch.no_grad():
        ref = tm(tx1, th1)
    assert_match(km(kx1, kh1), ref, **TOL)


def test_rnn_state_dicts_load_both_ways_and_init():
    torch = need_torch()
    km = nn.LSTM(4, 6, num_layers=2, bidirectional=True)
    tm = torch.nn.LSTM(4, 6, num_layers=2, bidirectional=True)
    tm.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy()) for k, v in km.state_dict().items()})
    kx, tx = both(sample((3, 2, 4), "float32", seed=6))
    with torch.no_grad():
        assert_match(km(kx), tm(tx), **TOL)
    bound = 1 / np.sqrt(6)
    w = np.concatenate([p.detach().numpy().ravel() for p in km.parameters()])
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert [len(ws) for ws in km.all_weights] == [4, 4, 4, 4]
    km.flatten_parameters()  # a no-op real code calls


def test_rnn_dropout_between_layers_only_in_training():
    torch = need_torch()
    tm, km = make_pair("GRU", dict(num_layers=3, dropout=0.5))
    kx, tx = both(sample((4, 2, 4), "float32", seed=7))
    km.eval()
    tm.eval()
    with torch.no_grad():
        assert_match(km(kx), tm(tx), **TOL)
    km.train()
    a, b = km(kx)[0].detach().numpy(), km(kx)[0].detach().numpy()
    assert not np.allclose(a, b)  # fresh masks each call
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(2, 3, dropout=0.2)


CELL_CASES = [("LSTMCell", dict()), ("GRUCell", dict()), ("RNNCell", dict(nonlinearity="relu")),
              ("RNNCell", dict(bias=False))]


@pytest.mark.parametrize("kind,cfg", CELL_CASES, ids=[f"{k}-{c}" for k, c in CELL_CASES])
def test_cells_match_torch(kind, cfg):
    torch = need_torch()
    torch.manual_seed(3)
    tm, km = getattr(torch.nn, kind)(4, 5, **cfg), getattr(nn, kind)(4, 5, **cfg)
    assert repr(km) == repr(tm)
    load_torch_weights(tm, km)
    kx, tx = both(sample((3, 4), "float32", seed=8))
    kh, th = both(sample((3, 5), "float32", seed=9))
    for t in (kx, tx, kh, th):
        t.requires_grad_(True)
    kstate = (kh, kh * 0.5) if kind == "LSTMCell" else kh
    tstate = (th, th * 0.5) if kind == "LSTMCell" else th
    kout, tout = km(kx, kstate), tm(tx, tstate)
    assert_match(kout, tout, **TOL)
    assert_match(km(kx), tm(tx), **TOL)  # zero state
    assert_match(km(kx[0], tuple(s[0] for s in kstate) if kind == "LSTMCell" else kh[0]),
                 tm(tx[0], tuple(s[0] for s in tstate) if kind == "LSTMCell" else th[0]), **TOL)  # unbatched
    ksum = kout[1].sum() + kout[0].sum() if kind == "LSTMCell" else kout.sum()
    tsum = tout[1].sum() + tout[0].sum() if kind == "LSTMCell" else tout.sum()
    (ksum * 3).backward()
    (tsum * 3).backward()
    assert_match(kx.grad, tx.grad, **TOL)
    assert_match(kh.grad, th.grad, **TOL)
    assert_match(km.weight_hh.grad, tm.weight_hh.grad, **TOL)


def test_rnn_errors_match_torch():
    torch = need_torch()
    for lib in (torch, kiln):
        lstm = lib.nn.LSTM(4, 6, num_layers=2)
        with pytest.raises(ValueError, match="LSTM: Expected input to be 2D or 3D, got 4D instead"):
            lstm(lib.zeros(1, 2, 3, 4))
        with pytest.raises(RuntimeError, match="input.size\\(-1\\) must be equal to input_size. Expected 4, got 3"):
            lstm(lib.zeros(5, 2, 3))
        with pytest.raises(RuntimeError, match=r"Expected hidden\[0\] size \(2, 2, 6\), got \[1, 2, 6\]"):
            lstm(lib.zeros(5, 2, 4), (lib.zeros(1, 2, 6), lib.zeros(2, 2, 6)))
        with pytest.raises(RuntimeError, match="For unbatched 2-D input, hx and cx should also be 2-D"):
            lstm(lib.zeros(5, 4), (lib.zeros(2, 1, 6), lib.zeros(2, 1, 6)))
        with pytest.raises(ValueError, match="RNN input dtype"):
            lstm(lib.zeros(5, 2, 4, dtype=lib.float64))
        gru = lib.nn.GRU(4, 6)
        with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 2, 6\), got \[1, 3, 6\]"):
            gru(lib.zeros(5, 2, 4), lib.zeros(1, 3, 6))
        with pytest.raises(ValueError, match="Unknown nonlinearity 'gelu'"):
            lib.nn.RNN(4, 6, nonlinearity="gelu")
        with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
            lib.nn.LSTM(4, 6, proj_size=6)
        with pytest.raises(ValueError, match="proj_size argument is only supported for LSTM"):
            lib.nn.GRU(4, 6, proj_size=2)
        with pytest.raises(ValueError, match="LSTMCell: Expected input to be 1D or 2D, got 3D instead"):
            lib.nn.LSTMCell(4, 5)(lib.zeros(1, 2, 4))
        with pytest.raises(RuntimeError, match="input has inconsistent input_size: got 3 expected 4"):
            lib.nn.GRUCell(4, 5)(lib.zeros(2, 3))
        with pytest.raises(RuntimeError, match="Input batch size 2 doesn't match hidden0 batch size 3"):
            lib.nn.RNNCell(4, 5)(lib.zeros(2, 4), lib.zeros(3, 5))


class SeqModel(nn.Module):
    def __init__(self, lib):
        super().__init__()
        self.emb = lib.nn.Linear(4, 8)
        self.rnn = lib.nn.LSTM(8, 8, num_layers=2, batch_first=True)
        self.head = lib.nn.Linear(8, 3)

    def forward(self, x):
        out, (h, c) = self.rnn(self.emb(x).relu())
        return self.head(out[:, -1]) + h[-1].sum(-1, keepdim=True)


@needs_cxx
def test_lstm_model_trains_under_compile_like_eager(strict_inductor):
    """A small LSTM model: one graph with no break (torch.compile also makes one graph and no
    counted break: it stops its graph at the LSTM and runs the rest of the frame eagerly), and
    three compiled SGD steps give eager's losses."""
    x = kiln.from_numpy(sample((2, 5, 4), "float32", seed=10, low=-1, high=1))
    y = kiln.from_numpy(sample((2, 3), "float32", seed=11))
    losses = {}
    for mode in ("eager", "compiled"):
        kiln.manual_seed(0)
        model = SeqModel(kiln)
        opt = kiln.optim.SGD(model.parameters(), lr=0.1)
        fwd = model if mode == "eager" else kiln.compile(model)
        losses[mode] = []
        for _ in range(3):
            loss = ((fwd(x) - y) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[mode].append(loss.item())
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-5, atol=1e-6)
    kiln.manual_seed(0)
    explained = kiln.compiler.explain(SeqModel(kiln))(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
