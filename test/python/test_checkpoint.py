"""kiln.utils.checkpoint: recomputation in the backward gives the gradients of the plain call
(dropout included: the random state is replayed) and torch's; checkpoint_sequential."""
import warnings

import numpy as np
import pytest

import kiln
from oracle import need_torch


def make_block(T, seed=0, p=0.0):
    rng = np.random.default_rng(seed)
    block = T.nn.Sequential(T.nn.Linear(6, 8), T.nn.GELU(), T.nn.Dropout(p), T.nn.Linear(8, 6))
    with T.no_grad():
        for prm in block.parameters():
            prm.copy_(T.from_numpy(rng.standard_normal(tuple(prm.shape)).astype(np.float32) * 0.3))
    return block


def grads(T, block, x, use, reentrant):
    x = x.clone().requires_grad_()
    calls = []

    def fn(a):
        calls.append(1)
        return block(a).tanh()

    out = T.utils.checkpoint.checkpoint(fn, x, use_reentrant=reentrant) if use else fn(x)
    (out * out).sum().backward()
    return [x.grad.numpy().copy()] + [prm.grad.numpy().copy() for prm in block.parameters()], len(calls)


@pytest.mark.parametrize("reentrant", [True, False])
def test_gradients_equal_plain_call_and_torch(reentrant):
    torch = need_torch()
    xs = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    plain, n_plain = grads(kiln, make_block(kiln), kiln.from_numpy(xs), False, reentrant)
    ckpt, n_ckpt = grads(kiln, make_block(kiln), kiln.from_numpy(xs), True, reentrant)
    ref, _ = grads(torch, make_block(torch), torch.from_numpy(xs), True, reentrant)
    assert n_plain == 1 and n_ckpt == 2  # run again in the backward
    for a, b, c in zip(plain, ckpt, ref):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(b, c, rtol=1e-5, atol=1e-6)


def test_dropout_mask_is_replayed():
    xs = kiln.from_numpy(np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32))
    kiln.manual_seed(7)
    plain, _ = grads(kiln, make_block(kiln, p=0.5), xs, False, False)
    kiln.manual_seed(7)
    ckpt, _ = grads(kiln, make_block(kiln, p=0.5), xs, True, False)
    for a, b in zip(plain, ckpt):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-7)


def test_inputs_without_grad():
    block = make_block(kiln)
    x = kiln.ones(2, 6)
    out = kiln.utils.checkpoint.checkpoint(block, x, use_reentrant=False)
    out.sum().backward()
    assert all(p.grad is not None for p in block.parameters())
    block.zero_grad(set_to_none=True)
    with pytest.warns(UserWarning, match="Gradients will be None"):
        out = kiln.utils.checkpoint.checkpoint(block, x, use_reentrant=True)
    assert not out.requires_grad


def test_warning_kwargs_and_sequential():
    torch = need_torch()
    x = kiln.ones(2, 6, requires_grad=True)
    with pytest.warns(UserWarning, match="use_reentrant"):
        kiln.utils.checkpoint.checkpoint(lambda a: a * 2, x)
    with pytest.raises(ValueError, match="Unexpected keyword"):
        kiln.utils.checkpoint.checkpoint(lambda a, scale: a * scale, x, use_reentrant=True, scale=2)
    out = kiln.utils.checkpoint.checkpoint(lambda a, scale: a * scale, x, use_reentrant=False, scale=3)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full((2, 6), 3, np.float32))
    xs = np.random.default_rng(3).standard_normal((4, 6)).astype(np.float32)
    results = []
    for T in (kiln, torch):
        seq = T.nn.Sequential(*[make_block(T, seed=i) for i in range(4)])
        xi = T.from_numpy(xs).requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = T.utils.checkpoint.checkpoint_sequential(seq, 2, xi, use_reentrant=False)
        y.sum().backward()
        results.append((y.detach().numpy(), xi.grad.numpy()))
    for a, b in zip(*results):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
