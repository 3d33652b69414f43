"""Graph breaks kiln made where torch.compile traces on (issue 16, session 16): each test pins
the graph and break counts torch.compile gets on the same code, and the results against eager."""
import numpy as np
import pytest

import kiln
from kiln import nn


pytestmark = pytest.mark.usefixtures("strict_capture")


def _counts(fn, *args):
    e = kiln.explain(fn)(*args)
    return e.graph_count, e.graph_break_count


def _close(a, b, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy()), np.asarray(b.detach().numpy()), rtol=1e-5, atol=atol)


# nn.Embedding(max_norm=...) renormalized the looked-up rows from the indices' data (numpy): a
# break (torch.compile: one graph, embedding_renorm_ is an op). Traced, the write into the weight
# under no_grad must keep the weight's gradient, as eagerly.
def _embedding_step(emb):
    def step(ids):
        out = emb(ids)
        (out * out).sum().backward()
        return out.detach(), emb.weight.detach().clone(), emb.weight.grad.clone()
    return step


def _embedding_with_long_rows():
    emb = nn.Embedding(6, 3, max_norm=1.0)
    with kiln.no_grad():
        emb.weight.copy_(kiln.arange(18.0).reshape(6, 3) / 4 - 1)
    return emb


def test_embedding_max_norm_training_step_is_one_graph_with_eager_values_and_grads():
    ids = kiln.tensor([[1, 2, 2], [4, 1, 0]])  # repeats: each row renormalized once
    want = _embedding_step(_embedding_with_long_rows())(ids)
    emb = _embedding_with_long_rows()
    assert _counts(lambda i: emb(i).sum(), ids) == (1, 0)
    assert _counts(_embedding_step(emb), ids) == (2, 1)  # as torch: a break at backward()
    emb = _embedding_with_long_rows()
    got = kiln.compile(_embedding_step(emb))(ids)
    for g, w in zip(got, want):
        _close(g, w)
    norms = np.linalg.norm(got[1].numpy(), axis=1)
    assert np.all(norms[[0, 1, 2, 4]] <= 1.0 + 1e-6) and norms[5] > 1.0  # rows not looked up stay


def test_a_no_grad_write_into_a_parameter_keeps_its_gradient_in_a_compiled_graph():
    def make():
        lin = nn.Linear(3, 2, bias=False)
        with kiln.no_grad():
            lin.weight.copy_(kiln.arange(6.0).reshape(2, 3))
        return lin

    def step(lin, x):
        with kiln.no_grad():
            lin.weight.mul_(2)
        lin(x).pow(2).sum().backward()
        return lin.weight.detach().clone(), lin.weight.grad.clone()

    x = kiln.ones(4, 3)
    want = step(make(), x)
    lin = make()
    got = kiln.compile(lambda x: step(lin, x))(x)
    for g, w in zip(got, want):
        _close(g, w)
    assert lin.weight.grad_fn is None and lin.weight.is_leaf


# pack_padded_sequence / pad_packed_sequence read the lengths' values (they shape the packed
# data): run on fakes while tracing, a break at each (torch.compile breaks there too, and runs the
# LSTM's frame eagerly). The lengths, a small CPU int64 input, are read for real and their values
# guarded: one graph, recompiled for other lengths.
def _packed_lstm():
    kiln.manual_seed(3)
    lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)
    rnn = nn.utils.rnn

    def fn(x, lengths):
        packed = rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, (h, _) = lstm(packed)
        padded, out_len = rnn.pad_packed_sequence(out, batch_first=True)
        return padded, out_len, h
    return fn


def test_packed_lstm_over_an_input_of_lengths_is_one_graph_guarded_on_the_lengths():
    fn = _packed_lstm()
    x = kiln.randn(3, 5, 3)
    lengths = kiln.tensor([2, 5, 3])
    assert _counts(fn, x, lengths) == (1, 0)
    kiln.compiler.reset()
    compiled = kiln.compile(fn)
    for lens in ([2, 5, 3], [4, 1, 4], [2, 5, 3]):
        lengths = kiln.tensor(lens)
        for g, w in zip(compiled(x, lengths), fn(x, lengths)):
            _close(g, w, atol=1e-5)
    guards = kiln.explain(fn)(x, kiln.tensor([4, 1, 4])).guards
    assert any(".tolist() == [4, 1, 4]" in str(g) for g in guards), guards


def test_packed_lstm_gradients_match_eager():
    fn = _packed_lstm()
    x = kiln.randn(3, 5, 3)
    lengths = kiln.tensor([2, 5, 3])

    def loss(x, lengths):
        padded, _, h = fn(x, lengths)
        return padded.sum() + (h * h).sum()

    xe, xc = x.clone().requires_grad_(), x.clone().requires_grad_()
    want = kiln.autograd.grad(loss(xe, lengths), xe)[0]
    got = kiln.autograd.grad(kiln.compile(loss)(xc, lengths), xc)[0]
    _close(got, want, atol=1e-5)


def test_a_lengths_tensor_written_in_place_before_packing_is_not_read_stale():
    rnn = nn.utils.rnn

    def fn(x, lengths):
        lengths.add_(1)
        return rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False).data.sum()

    x = kiln.randn(2, 4, 3)
    want = fn(x, kiln.tensor([1, 2]))
    got = kiln.compile(fn)(x, kiln.tensor([1, 2]))
    _close(got, want)


def test_lengths_that_change_again_after_a_recompile_break_instead_of_recompiling_per_value(capsys):
    fn = _packed_lstm()
    x = kiln.randn(3, 5, 3)
    compiled = kiln.compile(fn)
    kiln.set_logs(recompiles=True)
    try:
        for lens in ([2, 5, 3], [4, 1, 4], [3, 3, 5], [5, 2, 1], [1, 1, 1]):
            lengths = kiln.tensor(lens)
            for g, w in zip(compiled(x, lengths), fn(x, lengths)):
                _close(g, w, atol=1e-5)
    finally:
        kiln.set_logs(recompiles=False)
    # The first compile is specialized to [2, 5, 3]; the recompile after the values changed
    # breaks at the packing and serves every later value.
    assert capsys.readouterr().err.count("Recompiling _packed_lstm.<locals>.fn (") == 1


def test_a_named_tuple_argument_is_guarded_by_its_items_not_its_identity(capsys):
    # A PackedSequence handed to a resume function (or any named tuple argument) was guarded by
    # identity: every call with a new object recompiled, until the recompile limit.
    from collections import namedtuple
    Pair = namedtuple("Pair", ["a", "b"])

    def fn(p):
        return p.a * 2 + p[1]

    compiled = kiln.compile(fn)
    kiln.set_logs(recompiles=True)
    try:
        for _ in range(3):
            p = Pair(kiln.randn(3), kiln.randn(3))
            _close(compiled(p), fn(p))
        packed = nn.utils.rnn.pack_padded_sequence(kiln.randn(2, 3, 1), [3, 2], batch_first=True)
        assert isinstance(kiln.compile(lambda s: s)(packed), nn.utils.rnn.PackedSequence)
    finally:
        kiln.set_logs()
    assert "Recompiling" not in capsys.readouterr().err
    _close(compiled(Pair(kiln.ones(2), kiln.ones(2))), kiln.full([2], 3.0))  # other sizes: recompiled
