"""nn.functional.ctc_loss and nn.CTCLoss against torch: values and log_probs gradients over
random shapes, padded and concatenated targets, lengths as tensors, lists and tuples, every
reduction, blank index, zero_infinity, float32 and float64, unbatched inputs; the same under
kiln.compile (one graph, as torch.compile); clear errors for bad lengths and shapes."""
import os
import shutil

import numpy as np
import pytest

import kiln
import kiln.nn as nn

torch = pytest.importorskip("torch")


def _pair(a, requires_grad=False):
    k, t = kiln.from_numpy(a.copy()), torch.from_numpy(a.copy())
    if requires_grad:
        k.requires_grad_()
        t.requires_grad_()
    return k, t


def _problem(seed, T, N, C, S, dtype, blank, concatenated, impossible=False):
    """log_probs (T, N, C) and targets avoiding `blank`, with input lengths in [1, T] (and 0 for
    one sample of the larger cases) and target lengths in [0, S]; `impossible` makes one target
    longer than its input can emit (an infinite loss)."""
    r = np.random.default_rng(seed)
    logits = r.standard_normal((T, N, C)).astype(dtype) * 2
    labels = np.array([c for c in range(C) if c != blank])
    targets = r.choice(labels, size=(N, S)).astype(np.int64)
    input_lengths = r.integers(1, T + 1, size=N).astype(np.int64)
    input_lengths[0] = T
    target_lengths = np.minimum(r.integers(0, S + 1, size=N), (input_lengths + 1) // 2).astype(np.int64)
    if N > 3:
        input_lengths[3], target_lengths[3] = 0, 0
    if impossible:
        input_lengths[1], target_lengths[1] = 1, min(S, 3)
    if concatenated:
        targets = np.concatenate([targets[b, :target_lengths[b]] for b in range(N)])
    return logits, targets, input_lengths, target_lengths


def _run(lib, logits, targets, input_lengths, target_lengths, how, **kw):
    """The loss and d loss / d logits (through log_softmax, as in training)."""
    T = kiln if lib == "kiln" else torch
    x = T.from_numpy(logits.copy()).requires_grad_()
    tg = T.from_numpy(targets.copy())
    if how == "tensor":
        il, tl = T.from_numpy(input_lengths.copy()), T.from_numpy(target_lengths.copy())
    elif how == "tuple":
        il, tl = tuple(int(v) for v in input_lengths), tuple(int(v) for v in target_lengths)
    else:
        il, tl = [int(v) for v in input_lengths], [int(v) for v in target_lengths]
    loss = T.nn.functional.ctc_loss(x.log_softmax(2), tg, il, tl, **kw)
    w = T.from_numpy(np.linspace(0.5, 1.5, loss.numel()).astype(logits.dtype).reshape(tuple(loss.shape)))
    g, = T.autograd.grad((loss * w).sum(), [x])
    return loss.detach().numpy(), g.numpy()


CASES = [  # seed, T, N, C, S, dtype, blank, concatenated, lengths as, reduction, zero_infinity
    (0, 12, 4, 6, 4, np.float32, 0, False, "tensor", "mean", False),
    (1, 20, 5, 8, 6, np.float64, 0, False, "list", "none", False),
    (2, 9, 3, 5, 3, np.float64, 4, True, "tuple", "sum", False),
    (3, 15, 6, 7, 5, np.float32, 3, True, "list", "mean", False),
    (4, 30, 2, 12, 10, np.float64, 0, False, "tuple", "mean", False),
    (5, 7, 5, 4, 3, np.float64, 0, False, "tensor", "none", True),
    (6, 11, 4, 6, 4, np.float32, 5, True, "list", "sum", True),
    (7, 1, 3, 3, 1, np.float64, 0, False, "list", "none", False),
]


@pytest.mark.parametrize("case", CASES, ids=[f"case{c[0]}" for c in CASES])
def test_matches_torch(case):
    seed, T, N, C, S, dtype, blank, concatenated, how, reduction, zero_infinity = case
    problem = _problem(seed, T, N, C, S, dtype, blank, concatenated, impossible=zero_infinity)
    kw = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)
    got, got_grad = _run("kiln", *problem, how, **kw)
    want, want_grad = _run("torch", *problem, how, **kw)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(got_grad, want_grad, rtol=tol * 10, atol=tol * 10)


def test_infinite_loss_without_zero_infinity():
    problem = _problem(8, 6, 3, 5, 3, np.float64, 0, False, impossible=True)
    got, _ = _run("kiln", *problem, "list", reduction="none")
    want, _ = _run("torch", *problem, "list", reduction="none")
    assert np.isinf(got[1]) and np.isinf(want[1])
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_mean_clamps_empty_target_lengths():
    problem = _problem(9, 8, 5, 5, 3, np.float64, 0, False)
    assert 0 in problem[3]
    got, _ = _run("kiln", *problem, "tensor", reduction="mean")
    want, _ = _run("torch", *problem, "tensor", reduction="mean")
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_unbatched_and_module():
    logits, targets, il, tl = _problem(10, 10, 1, 6, 4, np.float64, 0, False)
    lk, lt = _pair(logits[:, 0].copy(), requires_grad=True)
    tk, tt = _pair(targets[0, :tl[0]].copy())
    got = nn.CTCLoss(reduction="sum")(lk.log_softmax(1), tk, kiln.tensor(int(il[0])), kiln.tensor(int(tl[0])))
    want = torch.nn.CTCLoss(reduction="sum")(lt.log_softmax(1), tt, torch.tensor(int(il[0])), torch.tensor(int(tl[0])))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    got.backward()
    want.backward()
    np.testing.assert_allclose(lk.grad.numpy(), lt.grad.numpy(), rtol=1e-10, atol=1e-12)
    none = kiln.nn.functional.ctc_loss(lk, tk, kiln.tensor(int(il[0])), kiln.tensor(int(tl[0])), reduction="none")
    assert tuple(none.shape) == ()


def test_internal_op_matches_torch():
    logits, targets, il, tl = _problem(11, 9, 4, 6, 4, np.float64, 0, False)
    lp = torch.from_numpy(logits).log_softmax(2)
    nll, alpha = kiln._ctc_loss(kiln.from_numpy(lp.numpy().copy()), kiln.from_numpy(targets), list(il), list(tl))
    want_nll, want_alpha = torch._ctc_loss(lp, torch.from_numpy(targets), list(il), list(tl))
    np.testing.assert_allclose(nll.numpy(), want_nll.numpy(), rtol=1e-12)
    assert tuple(alpha.shape) == tuple(want_alpha.shape)
    for b in range(4):  # log_alpha inside each sample's lengths
        a, w = alpha.numpy()[b, :il[b], :2 * tl[b] + 1], want_alpha.numpy()[b, :il[b], :2 * tl[b] + 1]
        np.testing.assert_allclose(a, w, rtol=1e-12)


# --- compiled -----------------------------------------------------------------------------

@pytest.fixture
def strict(monkeypatch, tmp_path_factory):
    path = str(tmp_path_factory.getbasetemp() / "ctc-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)
    kiln.compiler.reset()
    yield
    kiln.compiler.reset()


needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None, reason="no C++ compiler")


@needs_cxx
@pytest.mark.parametrize("how,concatenated", [("list", False), ("list", True), ("tensor", False)])
def test_compiled_equals_eager(strict, how, concatenated):
    logits, targets, il, tl = _problem(12, 10, 4, 6, 4, np.float32, 0, concatenated)
    F = kiln.nn.functional
    lengths = ((kiln.from_numpy(il), kiln.from_numpy(tl)) if how == "tensor"
               else ([int(v) for v in il], [int(v) for v in tl]))

    def step(x, tg, il, tl):
        loss = F.ctc_loss((x * 1.5).log_softmax(2), tg, il, tl, reduction="mean")
        g, = kiln.autograd.grad(loss, [x])
        return loss, g

    x = kiln.from_numpy(logits).requires_grad_()
    tg = kiln.from_numpy(targets)
    want = step(x, tg, *lengths)
    got = kiln.compile(step)(x, tg, *lengths)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(step)(x, tg, *lengths)
    assert (e.graph_count, e.graph_break_count) == (1, 0), [str(r)[:200] for r in e.break_reasons]


@needs_cxx
def test_compiled_backward_through_module(strict):
    logits, targets, il, tl = _problem(13, 8, 3, 5, 3, np.float64, 0, False, impossible=True)
    crit = nn.CTCLoss(zero_infinity=True)
    lengths = (kiln.from_numpy(il), kiln.from_numpy(tl))

    def loss_of(x, tg):
        return crit(x.log_softmax(2), tg, *lengths)

    xs = [kiln.from_numpy(logits).requires_grad_() for _ in range(2)]
    want = loss_of(xs[0], kiln.from_numpy(targets))
    got = kiln.compile(loss_of)(xs[1], kiln.from_numpy(targets))
    np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-12)
    want.backward()
    got.backward()
    np.testing.assert_allclose(xs[1].grad.numpy(), xs[0].grad.numpy(), rtol=1e-10, atol=1e-12)
    assert np.isfinite(xs[1].grad.numpy()).all()


# --- errors ---------------------------------------------------------------------------------

def _call(**over):
    logits, targets, il, tl = _problem(14, 6, 3, 5, 3, np.float32, 0, False)
    args = dict(log_probs=kiln.from_numpy(logits).log_softmax(2), targets=kiln.from_numpy(targets),
                input_lengths=[int(v) for v in il], target_lengths=[int(v) for v in tl])
    args.update(over)
    return kiln.nn.functional.ctc_loss(**args)


@pytest.mark.parametrize("over,match", [
    (dict(blank=5), "blank must be in label range"),
    (dict(input_lengths=[7, 6, 6]), r"input_lengths\[0\] = 7 is outside \[0, 6\]"),
    (dict(input_lengths=[6, -1, 6]), r"input_lengths\[1\] = -1"),
    (dict(input_lengths=[6, 6]), "input_lengths must have 3 values"),
    (dict(target_lengths=[3, 4, 1]), "Expected tensor to have size at least 4 at dimension 1"),
    (dict(target_lengths=[3, -2, 1]), r"target_lengths\[1\] = -2 is negative"),
    (dict(targets=kiln.zeros(3, 3)), "'targets' to have one of the following scalar types"),
    (dict(targets=kiln.full((3, 3), 9, dtype=kiln.int64)), "not a class index"),
    (dict(targets=kiln.ones(5, dtype=kiln.int64), target_lengths=[2, 2, 2]), "Expected tensor to have size 6"),
    (dict(log_probs=kiln.zeros(6, 3, 5, 2)), r"\(T, N, C\)"),
    (dict(reduction="avg"), "not a valid value for reduction"),
])
def test_errors(over, match):
    with pytest.raises((RuntimeError, ValueError, IndexError), match=match):
        _call(**over)


def test_integer_log_probs_rejected():
    with pytest.raises(RuntimeError, match="float32 or float64"):
        _call(log_probs=kiln.zeros(6, 3, 5, dtype=kiln.int64))
