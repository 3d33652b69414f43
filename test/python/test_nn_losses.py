"""nn tier 2: loss functionals and modules against torch (values, reductions, errors)."""
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import assert_match, both, need_torch, sample

needs_autograd = pytest.mark.skipif(not hasattr(kiln.Tensor, "backward"), reason="autograd not built yet")
REDUCTIONS = ["none", "mean", "sum"]


def targets(shape, classes, seed, ignore=None):
    t = np.random.default_rng(seed).integers(0, classes, size=shape).astype(np.int64)
    if ignore is not None:
        t.reshape(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,kwargs", [("mse_loss", {}), ("l1_loss", {}), ("smooth_l1_loss", {}),
                                         ("smooth_l1_loss", {"beta": 0.5}), ("smooth_l1_loss", {"beta": 0.0})])
def test_pointwise_losses(name, kwargs, reduction, dtype):
    torch = need_torch()
    kx, tx = both(sample((3, 5), dtype, seed=1))
    ky, ty = both(sample((3, 5), dtype, seed=2))
    assert_match(getattr(nn.functional, name)(kx, ky, reduction=reduction, **kwargs),
                 getattr(torch.nn.functional, name)(tx, ty, reduction=reduction, **kwargs))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_weighted_mse_and_l1(reduction):
    torch = need_torch()
    (kx, tx), (ky, ty), (kw, tw) = (both(sample((4, 3), "float64", seed=s, low=0.1)) for s in (1, 2, 3))
    for name in ("mse_loss", "l1_loss"):
        assert_match(getattr(nn.functional, name)(kx, ky, reduction=reduction, weight=kw),
                     getattr(torch.nn.functional, name)(tx, ty, reduction=reduction, weight=tw))


def test_pointwise_loss_broadcast_warns_and_mismatch_raises():
    F = nn.functional
    with pytest.warns(UserWarning, match="Using a target size .* that is different to the input size"):
        out = F.mse_loss(kiln.ones(3, 1), kiln.zeros(3))
    assert out.item() == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="The size of tensor a \\(3\\) must match the size of tensor b \\(4\\)"):
            F.l1_loss(kiln.ones(3), kiln.ones(4))
    with pytest.raises(RuntimeError, match="smooth_l1_loss does not support negative values for beta"):
        F.smooth_l1_loss(kiln.ones(3), kiln.ones(3), beta=-1.0)


CE_CASES = [  # (input shape, weight, ignore_index, label_smoothing)
    ((4, 5), False, -100, 0.0), ((4, 5), True, -100, 0.0), ((6, 5), False, 2, 0.0), ((6, 5), True, -1, 0.0),
    ((4, 5), False, -100, 0.1), ((6, 5), True, -1, 0.2), ((2, 5, 3), False, -100, 0.0), ((2, 5, 3, 2), True, 1, 0.1),
    ((5,), False, -100, 0.0), ((5,), True, -100, 0.3),
]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,weighted,ignore,smoothing", CE_CASES, ids=[str(c) for c in CE_CASES])
def test_cross_entropy_and_nll_class_indices(shape, weighted, ignore, smoothing, reduction):
    torch = need_torch()
    kx, tx = both(sample(shape, "float64", seed=4))
    tshape = () if len(shape) == 1 else (shape[0],) + shape[2:]
    c = shape[0] if len(shape) == 1 else shape[1]
    kt, tt = both(targets(tshape, c, seed=5, ignore=ignore if ignore != -100 and tshape else None))
    kw, tw = both(sample((c,), "float64", seed=6, low=0.2, high=2)) if weighted else (None, None)
    kwargs = dict(ignore_index=ignore, reduction=reduction)
    assert_match(nn.functional.cross_entropy(kx, kt, kw, label_smoothing=smoothing, **kwargs),
                 torch.nn.functional.cross_entropy(tx, tt, tw, label_smoothing=smoothing, **kwargs))
    klp, tlp = kx.log_softmax(0 if len(shape) == 1 else 1), tx.log_softmax(0 if len(shape) == 1 else 1)
    assert_match(nn.functional.nll_loss(klp, kt, kw, **kwargs), torch.nn.functional.nll_loss(tlp, tt, tw, **kwargs))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape,weighted,smoothing", [((4, 5), False, 0.0), ((4, 5), True, 0.2), ((2, 3, 4), True, 0.0)])
def test_cross_entropy_probability_targets(shape, weighted, smoothing, reduction):
    torch = need_torch()
    kx, tx = both(sample(shape, "float32", seed=1))
    p = np.random.default_rng(2).random(shape).astype(np.float32)
    kp, tp = both(p / p.sum(axis=1, keepdims=True))
    kw, tw = both(sample((shape[1],), "float32", seed=3, low=0.5, high=2)) if weighted else (None, None)
    assert_match(nn.functional.cross_entropy(kx, kp, kw, reduction=reduction, label_smoothing=smoothing),
                 torch.nn.functional.cross_entropy(tx, tp, tw, reduction=reduction, label_smoothing=smoothing))


def test_cross_entropy_gpt_style_ignore_minus_one():
    torch = need_torch()
    logits = sample((2, 8, 11), "float32", seed=8)
    labels = targets((2, 8), 11, seed=9)
    labels[:, -2:] = -1
    (kl, tl), (ky, ty) = both(logits), both(labels)
    assert_match(nn.functional.cross_entropy(kl.view(-1, 11), ky.view(-1), ignore_index=-1),
                 torch.nn.functional.cross_entropy(tl.view(-1, 11), ty.view(-1), ignore_index=-1))


def test_cross_entropy_all_ignored_mean_is_nan():
    out = nn.functional.cross_entropy(kiln.randn(3, 4), kiln.tensor([-100, -100, -100]))
    assert np.isnan(out.item())


@pytest.mark.parametrize("call,exc,msg", [
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1, 2, 3, 4])), ValueError,
     r"Expected input batch_size \(3\) to match target batch_size \(4\)\."),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.zeros(4)), ValueError,
     r"Expected input batch_size \(3\) to match target batch_size \(4\)\."),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1, 2, 7])), IndexError, "Target 7 is out of bounds."),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1, -3, 2])), IndexError, "Target -3 is out of bounds."),
    (lambda L: L.nn.functional.nll_loss(L.randn(3, 5), L.tensor([1, 2, 5])), IndexError, "Target 5 is out of bounds."),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1.0, 2.0, 3.0])), RuntimeError,
     "expected target dtype to be Long or Byte, but got Float"),
    (lambda L: L.nn.functional.cross_entropy(L.randn(2, 5, 3), L.tensor([[1, 2], [3, 4]])), RuntimeError,
     r"Expected target size \[2, 3\], got \[2, 2\]"),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1, 2, 3]), weight=L.ones(4)), RuntimeError,
     r"weight tensor should be defined either for all 5 classes or no classes but got weight tensor of shape: \[4\]"),
    (lambda L: L.nn.functional.nll_loss(L.tensor(1.0), L.tensor(0)), ValueError, r"Expected 1 or more dimensions \(got 0\)"),
    (lambda L: L.nn.functional.cross_entropy(L.randn(3, 5), L.tensor([1, 2, 3]), label_smoothing=1.5), RuntimeError,
     "label_smoothing must be between 0.0 and 1.0. Got: 1.5"),
    (lambda L: L.nn.functional.binary_cross_entropy(L.rand(3), L.rand(4)), ValueError,
     r"Using a target size \(.*\[4\]\)\) that is different to the input size \(.*\[3\]\)\) is deprecated"),
    (lambda L: L.nn.functional.binary_cross_entropy(L.tensor([1.5]), L.rand(1)), RuntimeError,
     "all elements of input should be between 0 and 1"),
    (lambda L: L.nn.functional.binary_cross_entropy(L.rand(3), L.tensor([1, 0, 1])), RuntimeError,
     "Found dtype Long but expected Float"),
    (lambda L: L.nn.functional.binary_cross_entropy_with_logits(L.rand(3), L.rand(4)), ValueError,
     r"Target size \(.*\[4\]\)\) must be the same as input size \(.*\[3\]\)\)"),
    (lambda L: L.nn.functional.mse_loss(L.ones(3), L.ones(3), reduction="bogus"), ValueError,
     "bogus is not a valid value for reduction"),
])
def test_loss_errors_match_torch(call, exc, msg):
    torch = need_torch()
    for lib in (torch, kiln):
        with pytest.raises(exc, match=msg):
            call(lib)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_binary_cross_entropy(reduction):
    torch = need_torch()
    p = np.random.default_rng(0).random((4, 3))
    p[0, 0], p[0, 1] = 0.0, 1.0  # log clamped at -100
    (kp, tp), (ky, ty), (kw, tw) = both(p), both(np.random.default_rng(1).random((4, 3))), both(sample((4, 3), "float64", seed=2, low=0))
    for w in ((None, None), (kw, tw)):
        assert_match(nn.functional.binary_cross_entropy(kp, ky, w[0], reduction=reduction),
                     torch.nn.functional.binary_cross_entropy(tp, ty, w[1], reduction=reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_cross_entropy_with_logits(reduction, dtype):
    torch = need_torch()
    kx, tx = both(sample((4, 3), dtype, seed=0, low=-30, high=30))
    ky, ty = both(np.random.default_rng(1).random((4, 3)).astype(dtype))
    kw, tw = both(sample((3,), dtype, seed=2, low=0))
    kpw, tpw = both(sample((3,), dtype, seed=3, low=0.5, high=3))
    for (a, b), (c, d) in [((None, None), (None, None)), ((kw, tw), (None, None)), ((None, None), (kpw, tpw)),
                           ((kw, tw), (kpw, tpw))]:
        assert_match(nn.functional.binary_cross_entropy_with_logits(kx, ky, a, reduction=reduction, pos_weight=c),
                     torch.nn.functional.binary_cross_entropy_with_logits(tx, ty, b, reduction=reduction, pos_weight=d))


def test_loss_modules_match_torch():
    torch = need_torch()
    kx, tx = both(sample((4, 5), "float32", seed=1))
    kt, tt = both(targets((4,), 5, seed=2))
    kw, tw = both(sample((5,), "float32", seed=3, low=0.5))
    pairs = [
        (nn.CrossEntropyLoss(kw, ignore_index=1, label_smoothing=0.1), torch.nn.CrossEntropyLoss(tw, ignore_index=1, label_smoothing=0.1), kt, tt),
        (nn.NLLLoss(reduction="sum"), torch.nn.NLLLoss(reduction="sum"), kt, tt),
    ]
    for km, tm, a, b in pairs:
        assert repr(km) == repr(tm)
        assert list(km.state_dict()) == list(tm.state_dict())
        assert_match(km(kx, a), tm(tx, b))
    ky, ty = both(sample((4, 5), "float32", seed=4))
    kp, tp = both(np.random.default_rng(5).random((4, 5)).astype(np.float32))
    for name, kwargs in [("MSELoss", {}), ("L1Loss", {"reduction": "sum"}), ("SmoothL1Loss", {"beta": 0.5}),
                         ("BCEWithLogitsLoss", {})]:
        km, tm = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
        assert repr(km) == repr(tm)
        (a, b) = (kp, tp) if name == "BCEWithLogitsLoss" else (ky, ty)
        assert_match(km(kx, a), tm(tx, b))
    km, tm = nn.BCELoss(), torch.nn.BCELoss()
    assert_match(km(kp, kp), tm(tp, tp))
    km = nn.BCEWithLogitsLoss(pos_weight=kiln.ones(5))
    assert list(km.state_dict()) == list(torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(5)).state_dict())
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated, please use reduction='sum'"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
        assert torch.nn.MSELoss(size_average=False).reduction == "sum"


@needs_autograd
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_cross_entropy_gradient_matches_torch(smoothing):
    torch = need_torch()
    kx, tx = both(sample((6, 5), "float64", seed=1))
    kt, tt = both(targets((6,), 5, seed=2, ignore=-1))
    kx.requires_grad_(True)
    tx.requires_grad_(True)
    nn.functional.cross_entropy(kx, kt, ignore_index=-1, label_smoothing=smoothing).backward()
    torch.nn.functional.cross_entropy(tx, tt, ignore_index=-1, label_smoothing=smoothing).backward()
    assert_match(kx.grad, tx.grad)


@pytest.mark.parametrize("reduction", REDUCTIONS + ["batchmean"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div_matches_torch(reduction, log_target):
    torch = need_torch()
    kx, tx = both(np.log(np.random.default_rng(1).dirichlet(np.ones(5), size=4)))
    p = np.random.default_rng(2).dirichlet(np.ones(5), size=4)
    p[0, 0] = 0.0  # 0 * log 0 = 0
    kt, tt = both(np.log(p) if log_target else p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_match(nn.functional.kl_div(kx, kt, reduction=reduction, log_target=log_target),
                     torch.nn.functional.kl_div(tx, tt, reduction=reduction, log_target=log_target))
    assert repr(nn.KLDivLoss(log_target=log_target)) == repr(torch.nn.KLDivLoss(log_target=log_target))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_huber_loss_matches_torch(reduction):
    torch = need_torch()
    kx, tx = both(sample((4, 5), "float64", seed=1))
    ky, ty = both(sample((4, 5), "float64", seed=2))
    for delta in (1.0, 0.3):
        assert_match(nn.functional.huber_loss(kx, ky, reduction=reduction, delta=delta),
                     torch.nn.functional.huber_loss(tx, ty, reduction=reduction, delta=delta))
        assert_match(nn.HuberLoss(reduction, delta)(kx, ky), torch.nn.HuberLoss(reduction, delta)(tx, ty))


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_metric_learning_losses_match_torch(reduction):
    torch = need_torch()
    ka, ta = both(sample((6, 5), "float32", seed=1))
    kp, tp = both(sample((6, 5), "float32", seed=2))
    kn, tn = both(sample((6, 5), "float32", seed=3))
    ky, ty = both(np.array([1, -1, 1, 1, -1, -1], dtype=np.float32))
    for kw in (dict(), dict(margin=0.5, p=1, swap=True), dict(p=3, eps=0.0)):
        assert_match(nn.functional.triplet_margin_loss(ka, kp, kn, reduction=reduction, **kw),
                     torch.nn.functional.triplet_margin_loss(ta, tp, tn, reduction=reduction, **kw), rtol=1e-5, atol=1e-6)
    assert_match(nn.TripletMarginLoss(margin=0.3, swap=True, reduction=reduction)(ka, kp, kn),
                 torch.nn.TripletMarginLoss(margin=0.3, swap=True, reduction=reduction)(ta, tp, tn), rtol=1e-5, atol=1e-6)
    assert_match(nn.functional.margin_ranking_loss(ka[:, 0], kp[:, 0], ky, margin=0.2, reduction=reduction),
                 torch.nn.functional.margin_ranking_loss(ta[:, 0], tp[:, 0], ty, margin=0.2, reduction=reduction))
    assert_match(nn.MarginRankingLoss(0.1, reduction=reduction)(ka[:, 1], kp[:, 1], ky),
                 torch.nn.MarginRankingLoss(0.1, reduction=reduction)(ta[:, 1], tp[:, 1], ty))
    for margin in (0.0, 0.3):
        assert_match(nn.functional.cosine_embedding_loss(ka, kp, ky, margin=margin, reduction=reduction),
                     torch.nn.functional.cosine_embedding_loss(ta, tp, ty, margin=margin, reduction=reduction),
                     rtol=1e-5, atol=1e-6)
    assert_match(nn.CosineEmbeddingLoss(reduction=reduction)(ka[0], kp[0], ky[0]),
                 torch.nn.CosineEmbeddingLoss(reduction=reduction)(ta[0], tp[0], ty[0]), rtol=1e-5, atol=1e-6)


def test_pairwise_distance_matches_torch_and_compiles():
    torch = need_torch()
    ka, ta = both(sample((4, 6), "float32", seed=1))
    kb, tb = both(sample((6,), "float32", seed=2))
    F, TF = nn.functional, torch.nn.functional
    for kw in (dict(), dict(p=1.0, keepdim=True), dict(p=float("inf"), eps=0.0)):
        assert_match(F.pairwise_distance(ka, kb, **kw), TF.pairwise_distance(ta, tb, **kw), rtol=1e-5, atol=1e-6)
    assert_match(F.pairwise_distance(kb, kb.flip(0)), TF.pairwise_distance(tb, tb.flip(0)), rtol=1e-5, atol=1e-6)
    assert_match(nn.PairwiseDistance(p=1.5)(ka, kb), torch.nn.PairwiseDistance(p=1.5)(ta, tb), rtol=1e-5, atol=1e-6)
    # compiled with autograd: the triplet loss of a small embedding net trains as in eager
    ka.requires_grad_()
    ta.requires_grad_()
    kiln.compiler.reset()
    kloss = kiln.compile(lambda a, b: F.triplet_margin_loss(a, b, a.flip(0), swap=True), fullgraph=True)(ka, kb.expand(4, 6))
    tloss = TF.triplet_margin_loss(ta, tb.expand(4, 6), ta.flip(0), swap=True)
    kloss.backward()
    tloss.backward()
    assert_match(kloss.detach(), tloss.detach(), rtol=1e-5, atol=1e-6)
    assert_match(ka.grad, ta.grad, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("call,msg", [
    (lambda T: T.nn.functional.triplet_margin_loss(T.ones(2, 3), T.ones(2, 3), T.ones(3)), "same number of dimensions"),
    (lambda T: T.nn.functional.margin_ranking_loss(T.ones(2, 3), T.ones(2, 3), T.ones(2)), "same dimension"),
    (lambda T: T.nn.functional.cosine_embedding_loss(T.ones(2, 3), T.ones(2, 3), T.ones(2, 1)), "multi-target"),
    (lambda T: T.nn.functional.cosine_embedding_loss(T.ones(3), T.ones(3), T.ones(2)), "1D target tensor expects 2D"),
])
def test_metric_learning_loss_errors_match_torch(call, msg):
    torch = need_torch()
    with pytest.raises(RuntimeError, match=msg):
        call(torch)
    with pytest.raises(RuntimeError, match=msg):
        call(kiln)


# gaussian/poisson NLL, hinge embedding, soft margin, multilabel soft margin and multi margin losses
# (kiln/nn/_losses.py): values and input gradients against torch, functional and module forms.
def _extra_loss_cases(lib, x):
    F, nn_ = lib.nn.functional, lib.nn
    r = np.random.default_rng(7)
    tgt = lib.from_numpy(r.standard_normal((6, 4)).astype(np.float32))
    var = lib.from_numpy(r.uniform(0.0, 2.0, (6, 4)).astype(np.float32))  # some below eps after clamp
    counts = lib.from_numpy(r.poisson(2.0, (6, 4)).astype(np.float32))
    pm1 = lib.from_numpy(np.where(r.standard_normal((6, 4)) > 0, 1.0, -1.0).astype(np.float32))
    multi = lib.from_numpy((r.standard_normal((6, 4)) > 0).astype(np.float32))
    y = lib.from_numpy(np.array([0, 3, 2, 1, 2, 0]))
    w = lib.from_numpy(np.array([1.0, 2.0, 0.5, 1.5], dtype=np.float32))
    return [
        F.gaussian_nll_loss(x, tgt, var),
        F.gaussian_nll_loss(x, tgt, var[:, 0], full=True, reduction="sum"),
        F.gaussian_nll_loss(x, tgt, var[:, :1], reduction="none"),
        nn_.GaussianNLLLoss(reduction="none")(x, tgt, 0.5),
        F.poisson_nll_loss(x, counts),
        F.poisson_nll_loss(x.abs() + 0.1, counts, log_input=False, full=True, reduction="none"),
        nn_.PoissonNLLLoss(full=True, reduction="sum")(x, counts),
        F.hinge_embedding_loss(x, pm1, margin=0.5),
        nn_.HingeEmbeddingLoss(reduction="none")(x, pm1),
        F.soft_margin_loss(x, pm1),
        nn_.SoftMarginLoss(reduction="none")(x, pm1),
        F.multilabel_soft_margin_loss(x, multi),
        nn_.MultiLabelSoftMarginLoss(weight=w, reduction="none")(x, multi),
        F.multi_margin_loss(x, y),
        F.multi_margin_loss(x[0], y[:1], margin=0.3, reduction="none"),
        nn_.MultiMarginLoss(p=2, margin=0.7, weight=w, reduction="none")(x, y),
        nn_.MultiMarginLoss(reduction="sum")(x, y),
    ]


def test_extra_losses_and_gradients_match_torch():
    torch = need_torch()
    a = sample((6, 4), "float32", seed=3, low=-2, high=2)
    k, t = both(a)
    k.requires_grad_(True)
    t.requires_grad_(True)
    outs_k, outs_t = _extra_loss_cases(kiln, k), _extra_loss_cases(torch, t)
    assert_match(outs_k, outs_t, rtol=1e-5, atol=1e-6)
    gk, = kiln.autograd.grad(sum(o.sum() for o in outs_k), k)
    gt, = torch.autograd.grad(sum(o.sum() for o in outs_t), t)
    assert_match(gk, gt, rtol=1e-5, atol=1e-6)


def test_extra_losses_compile_like_eager():
    x = kiln.from_numpy(sample((6, 4), "float32", seed=4, low=-2, high=2))
    want = _extra_loss_cases(kiln, x)
    got = kiln.compile(lambda x: _extra_loss_cases(kiln, x))(x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


def test_extra_loss_errors_match_torch():
    torch = need_torch()
    for lib in (kiln, torch):
        F = lib.nn.functional
        x = lib.zeros(3, 4)
        with pytest.raises(ValueError, match="var has negative entry"):
            F.gaussian_nll_loss(x, x, -lib.ones(3, 4))
        with pytest.raises(ValueError, match="var is of incorrect size"):
            F.gaussian_nll_loss(x, x, lib.ones(2, 4))
        with pytest.raises(ValueError, match="only p == 1 and p == 2 supported"):
            F.multi_margin_loss(x, lib.zeros(3, dtype=lib.long), p=3)
        with pytest.raises(ValueError, match="weight must be one-dimensional"):
            F.multi_margin_loss(x, lib.zeros(3, dtype=lib.long), weight=lib.ones(2, 2))
