"""nn.functional additions (nn/_functional_extra.py) and their modules against torch: values and
gradients for the deterministic ones, kiln.compile equal to eager, and the statistics of the
random ones (rrelu while training, alpha dropout, gumbel_softmax)."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

torch = need_torch()
rng = np.random.default_rng(0)
X = rng.standard_normal((4, 6)).astype(np.float32)
IMG = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
SEQ = rng.standard_normal((2, 6, 5)).astype(np.float32)
POS = (rng.random((4, 6)) + 0.1).astype(np.float32)
SIGN = np.where(rng.random((4, 6)) > 0.5, 1.0, -1.0).astype(np.float32)
CLS = np.array([1, 0, 5, 3], np.int64)
MULTI = np.array([[3, 0, -1, 1, 1, 1], [1, 2, 5, -1, 0, 0], [-1, 0, 0, 0, 0, 0], [0, 1, 2, 3, 4, 5]], np.int64)
COUNTS = rng.integers(0, 5, (4, 6)).astype(np.float32)

CASES = {
    "threshold": (lambda T, F, x: F.threshold(x, 0.1, -2.0), [X]),
    "hardshrink": (lambda T, F, x: F.hardshrink(x, 0.4) + F.softshrink(x, 0.3), [X]),
    "rrelu_eval": (lambda T, F, x: F.rrelu(x), [X]),
    "local_response_norm": (lambda T, F, x: F.local_response_norm(x, 3), [IMG]),
    "local_response_norm_1d": (lambda T, F, x: F.local_response_norm(x, 4, alpha=1e-2, beta=0.5, k=2.0), [SEQ]),
    "unfold": (lambda T, F, x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), [IMG]),
    "fold": (lambda T, F, x: F.fold(F.unfold(x, 3, padding=1, stride=2), (7, 6), 3, padding=1, stride=2), [IMG]),
    "fold_overlap": (lambda T, F, x: F.fold(F.unfold(x, (2, 2)), (7, 6), (2, 2)), [IMG]),
    "channel_shuffle": (lambda T, F, x: F.channel_shuffle(x[:, :, :2].repeat(1, 2, 1, 1), 3), [IMG]),
    "pdist": (lambda T, F, x: F.pdist(x) + F.pdist(x, p=1).sum(), [X]),
    "hinge_embedding": (lambda T, F, x, y: F.hinge_embedding_loss(x, y, margin=0.5), [X, SIGN]),
    "soft_margin": (lambda T, F, x, y: F.soft_margin_loss(x, y), [X, SIGN]),
    "multilabel_soft_margin": (lambda T, F, x, y: F.multilabel_soft_margin_loss(x, (y + 1) / 2), [X, SIGN]),
    "multi_margin": (lambda T, F, x, y: F.multi_margin_loss(x, y) + F.multi_margin_loss(x, y, p=2, margin=0.5,
                     weight=T.arange(6.0) / 6, reduction="sum"), [X, CLS]),
    "multilabel_margin": (lambda T, F, x, y: F.multilabel_margin_loss(x, y, reduction="none"), [X, MULTI]),
    "poisson_nll": (lambda T, F, x, y: F.poisson_nll_loss(x, y) + F.poisson_nll_loss(x.abs(), y, log_input=False,
                    full=True), [X, COUNTS]),
    "gaussian_nll": (lambda T, F, x, y, v: F.gaussian_nll_loss(x, y, v) + F.gaussian_nll_loss(x, y, v[:, 0],
                     full=True, reduction="sum"), [X, SIGN, POS]),
    "triplet_distance": (lambda T, F, a, p: F.triplet_margin_with_distance_loss(a, p, a.flip(0), swap=True) +
                         F.triplet_margin_with_distance_loss(a, p, -p, distance_function=lambda u, v: (u - v).abs().sum(-1)),
                         [X, POS]),
    "upsample": (lambda T, F, x: F.upsample_bilinear(x, scale_factor=2) + F.upsample_nearest(x, size=(14, 12)), [IMG]),
    "max_pool_with_indices": (lambda T, F, x: F.max_pool2d_with_indices(x, 2)[0] * 2 +
                              F.adaptive_max_pool2d_with_indices(x, (3, 3))[0].sum(), [IMG]),
}


GRAD_INPUTS = {"gaussian_nll": [0, 2], "triplet_distance": [0, 1]}


def run(T, name, compiled=False):
    fn, arrays = CASES[name]
    xs = [T.from_numpy(a.copy()) for a in arrays]
    # Gradients for the inputs (the prediction, and gaussian_nll's variance / triplet's positive),
    # not for targets, which torch's losses do not differentiate.
    for i in GRAD_INPUTS.get(name, [0]):
        xs[i].requires_grad_()
    call = (lambda *a: fn(T, T.nn.functional, *a))
    if compiled:
        call = kiln.compile(call)
    with pytest.warns(UserWarning) if name == "upsample" else _nothing():
        out = call(*xs)
    (out * out).sum().backward()
    return out.detach().numpy(), [x.grad.numpy() if x.grad is not None else None for x in xs]


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    (k, kg), (t, tg) = run(kiln, name), run(torch, name)
    np.testing.assert_allclose(k, t, rtol=1e-5, atol=1e-5)
    for a, b in zip(kg, tg):
        if a is None or b is None:
            assert a is None and b is None
        else:
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", ["unfold", "fold", "local_response_norm", "multi_margin", "multilabel_margin",
                                  "gaussian_nll", "pdist"])
def test_compiled_equals_eager(name):
    kiln.compiler.reset()
    (e, eg), (c, cg) = run(kiln, name), run(kiln, name, compiled=True)
    np.testing.assert_allclose(c, e, rtol=1e-5, atol=1e-6)
    for a, b in zip(cg, eg):
        if a is not None:
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_modules_match_torch():
    x = IMG
    pairs = [("Threshold", (0.1, 20.0)), ("Hardshrink", ()), ("Softshrink", (0.2,)), ("Softmax2d", ()),
             ("LocalResponseNorm", (2,)), ("ChannelShuffle", (3,)), ("Unfold", ((2, 2),)),
             ("UpsamplingNearest2d", (None, 2)), ("UpsamplingBilinear2d", ((9, 9),))]
    for name, args in pairs:
        k = getattr(kiln.nn, name)(*args)(kiln.from_numpy(x.copy()))
        t = getattr(torch.nn, name)(*args)(torch.from_numpy(x.copy()))
        np.testing.assert_allclose(k.numpy(), t.numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        assert repr(getattr(kiln.nn, name)(*args)) == repr(getattr(torch.nn, name)(*args)), name
    y = kiln.nn.Fold((7, 6), (2, 2))(kiln.nn.Unfold((2, 2))(kiln.from_numpy(x.copy())))
    assert y.shape == (2, 3, 7, 6)
    losses = [("HingeEmbeddingLoss", (X, SIGN)), ("SoftMarginLoss", (X, SIGN)), ("MultiMarginLoss", (X, CLS)),
              ("MultiLabelMarginLoss", (X, MULTI)), ("PoissonNLLLoss", (X, COUNTS))]
    for name, (a, b) in losses:
        k = getattr(kiln.nn, name)()(kiln.from_numpy(a), kiln.from_numpy(b))
        t = getattr(torch.nn, name)()(torch.from_numpy(a), torch.from_numpy(b))
        np.testing.assert_allclose(k.item(), t.item(), rtol=1e-5, err_msg=name)
    k = kiln.nn.GaussianNLLLoss()(kiln.from_numpy(X), kiln.from_numpy(SIGN), kiln.from_numpy(POS))
    t = torch.nn.GaussianNLLLoss()(torch.from_numpy(X), torch.from_numpy(SIGN), torch.from_numpy(POS))
    np.testing.assert_allclose(k.item(), t.item(), rtol=1e-5)


def test_random_ones():
    x = kiln.full((200, 200), -1.0)
    y = kiln.nn.functional.rrelu(x, 0.1, 0.3, training=True)
    slopes = -y.numpy()
    assert slopes.min() >= 0.1 and slopes.max() <= 0.3 and abs(slopes.mean() - 0.2) < 0.01
    z = kiln.nn.functional.alpha_dropout(kiln.randn(400, 400), 0.2, training=True)
    assert abs(z.mean().item()) < 0.02 and abs(z.std().item() - 1) < 0.02  # mean and variance kept
    assert kiln.equal(kiln.nn.functional.alpha_dropout(x, 0.2, training=False), x)
    d = kiln.nn.Dropout1d(0.5)(kiln.ones(8, 16, 5))
    assert ((d == 0).all(-1) | (d == 2).all(-1)).all()  # whole channels
    d3 = kiln.nn.Dropout3d(0.5)(kiln.ones(2, 8, 2, 2, 2))
    assert ((d3.flatten(2) == 0).all(-1) | (d3.flatten(2) == 2).all(-1)).all()
    logits = kiln.randn(5, 7, requires_grad=True)
    soft = kiln.nn.functional.gumbel_softmax(logits, tau=0.5)
    hard = kiln.nn.functional.gumbel_softmax(logits, hard=True)
    np.testing.assert_allclose(soft.sum(-1).detach().numpy(), 1, rtol=1e-5)
    assert ((hard == 1).sum(-1) == 1).all() and ((hard == 0) | (hard == 1)).all()
    hard.sum().backward()
    assert logits.grad is not None


def test_errors_as_torch():
    for make in [lambda T: T.nn.functional.unfold(T.ones(2, 3, 2, 2), 3),
                 lambda T: T.nn.functional.fold(T.ones(1, 5, 4), (3, 3), 2),
                 lambda T: T.nn.functional.channel_shuffle(T.ones(1, 5, 2, 2), 2),
                 lambda T: T.nn.functional.pdist(T.ones(2, 3, 4)),
                 lambda T: T.nn.functional.dropout1d(T.ones(2, 3, 4, 5), 0.5)]:
        with pytest.raises(RuntimeError):
            make(torch)
        with pytest.raises(RuntimeError):
            make(kiln)
    for make in [lambda T: T.nn.functional.multi_margin_loss(T.ones(2, 3), T.tensor([0, 1]), p=3),
                 lambda T: T.nn.functional.gaussian_nll_loss(T.ones(2, 3), T.ones(2, 3), -T.ones(2, 3))]:
        with pytest.raises(ValueError):
            make(torch)
        with pytest.raises(ValueError):
            make(kiln)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 0])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_matches_torch(mode, padding_idx, include_last_offset):
    weight = rng.standard_normal((10, 4)).astype(np.float32)
    flat = np.array([1, 2, 4, 5, 4, 3, 2, 9, 0, 0], np.int64)
    offsets = np.array([0, 3, 3, 6, 10] if include_last_offset else [0, 3, 3, 6], np.int64)  # an empty bag
    rows = np.array([[1, 2, 0], [4, 0, 9]], np.int64)
    psw = rng.random(10).astype(np.float32)
    results = []
    for T in (kiln, torch):
        w = T.from_numpy(weight.copy()).requires_grad_()
        a = T.nn.functional.embedding_bag(T.from_numpy(flat), w, T.from_numpy(offsets), mode=mode,
                                          padding_idx=padding_idx, include_last_offset=include_last_offset,
                                          per_sample_weights=T.from_numpy(psw) if mode == "sum" else None)
        b = T.nn.functional.embedding_bag(T.from_numpy(rows), w, mode=mode, padding_idx=padding_idx)
        ((a * a).sum() + (b * b).sum()).backward()
        results.append((a.detach().numpy(), b.detach().numpy(), w.grad.numpy()))
    for k, t in zip(*results):
        np.testing.assert_allclose(k, t, rtol=1e-5, atol=1e-6)


def test_embedding_bag_module_and_compile():
    bag = kiln.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2)
    assert repr(bag) == repr(torch.nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2))
    assert bag.weight[2].abs().sum().item() == 0
    x, offsets = kiln.tensor([1, 2, 3, 7, 7]), kiln.tensor([0, 2])
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(bag)(x, offsets).detach().numpy(), bag(x, offsets).detach().numpy(),
                               rtol=1e-6)
    pre = kiln.nn.EmbeddingBag.from_pretrained(kiln.ones(4, 2), mode="max")
    assert not pre.weight.requires_grad and pre(kiln.tensor([[0, 1]])).tolist() == [[1.0, 1.0]]
    with pytest.raises(ValueError, match="offsets has to be None"):
        bag(kiln.tensor([[1, 2]]), kiln.tensor([0]))


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
@pytest.mark.parametrize("compiled", [False, True])
def test_seeded_alpha_dropout_draws_torchs_mask(name, compiled):
    """torch draws the mask as noise.bernoulli_(1 - p) (the scalar-probability stream); kiln drew
    bernoulli of a tensor of probabilities: the right statistics, another mask for a seed."""
    fn = lambda F, x: getattr(F, name)(x, 0.3, True)  # noqa: E731
    kfn = kiln.compile(fn) if compiled else fn
    for seed in range(3):
        kiln.manual_seed(seed)
        torch.manual_seed(seed)
        got = kfn(kiln.nn.functional, kiln.from_numpy(IMG)).numpy()
        want = fn(torch.nn.functional, torch.from_numpy(IMG)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dims", [1, 2, 3])
@pytest.mark.parametrize("compiled", [False, True])
def test_lp_pool_as_torch(dims, compiled):
    """F.lp_pool1d/2d/3d and nn.LPPool1d/2d/3d (missing before): powers, windows, strides,
    ceil_mode, negative inputs with fractional p (nan where torch has nan), gradients."""
    x = rng.standard_normal((2, 3) + (7,) * dims).astype(np.float32)
    for p, k, s, ceil in ((1, 2, None, False), (2, 3, 2, True), (3.5, 2, 1, False)):
        kmod = getattr(kiln.nn, f"LPPool{dims}d")(p, k, s, ceil)
        tmod = getattr(torch.nn, f"LPPool{dims}d")(p, k, s, ceil)
        assert repr(kmod) == repr(tmod)
        fn = kiln.compile(kmod) if compiled else kmod
        kx = kiln.from_numpy(x.copy()).requires_grad_()
        tx = torch.from_numpy(x.copy()).requires_grad_()
        got, want = fn(kx), tmod(tx)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
        if p != 3.5:
            got.sum().backward()
            want.sum().backward()
            np.testing.assert_allclose(kx.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
