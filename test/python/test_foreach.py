"""torch._foreach_* (kiln/_foreach.py): every overload against PyTorch, the in-place forms' return
value and effect, torch's errors, and a multi-tensor optimizer step (lion-pytorch's foreach Lion,
reduced) eager and compiled."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

SHAPES = [(3,), (2, 4), ()]


def _lists(torch, seed=0, positive=False):
    r = np.random.default_rng(seed)
    arrays = [r.uniform(0.5 if positive else -2, 2, s).astype(np.float32) for s in SHAPES]
    return [kiln.from_numpy(a.copy()) for a in arrays], [torch.from_numpy(a.copy()) for a in arrays]


def _same(got, want, rtol=1e-6):
    assert type(got) is type(want) and len(got) == len(want)
    for g, w in zip(got, want):
        assert str(g.dtype).split(".")[1] == str(w.dtype).split(".")[1]
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=1e-6)


UNARY = ["abs", "ceil", "cos", "erf", "erfc", "exp", "expm1", "floor", "frac", "lgamma", "log", "log1p",
         "neg", "reciprocal", "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "tanh", "trunc"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_and_in_place(name):
    torch = need_torch()
    k, t = _lists(torch, positive=name in ("log", "log1p", "rsqrt", "sqrt", "lgamma"))
    _same(getattr(kiln, f"_foreach_{name}")(k), getattr(torch, f"_foreach_{name}")(t), rtol=1e-5)
    got = getattr(kiln, f"_foreach_{name}_")(k)
    want = getattr(torch, f"_foreach_{name}_")(t)
    assert got is k and want is t
    _same(k, t, rtol=1e-5)


def _other(lib, kind, tensors):
    if kind == "scalar":
        return 0.75
    if kind == "scalar_list":
        return [1.5, -2, 0.25]
    if kind == "tensor":
        return lib.tensor(1.25)
    return [x * 0.5 + 1 for x in tensors]  # a list of tensors


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "clamp_max", "clamp_min", "maximum", "minimum",
                                  "pow"])
@pytest.mark.parametrize("kind", ["scalar", "scalar_list", "tensor", "list"])
def test_binary_overloads(name, kind):
    torch = need_torch()
    k, t = _lists(torch, positive=name == "pow")
    try:
        want = getattr(torch, f"_foreach_{name}")(t, _other(torch, kind, t))
    except (RuntimeError, TypeError) as error:
        with pytest.raises(type(error)):
            getattr(kiln, f"_foreach_{name}")(k, _other(kiln, kind, k))
        return
    _same(getattr(kiln, f"_foreach_{name}")(k, _other(kiln, kind, k)), want, rtol=1e-5)
    assert getattr(kiln, f"_foreach_{name}_")(k, _other(kiln, kind, k)) is k
    getattr(torch, f"_foreach_{name}_")(t, _other(torch, kind, t))
    _same(k, t, rtol=1e-5)


def test_alpha_pow_of_scalar_norm_max_lerp_addcmul():
    torch = need_torch()
    k, t = _lists(torch, positive=True)
    k2, t2 = _lists(torch, seed=1, positive=True)
    _same(kiln._foreach_add(k, k2, alpha=-0.5), torch._foreach_add(t, t2, alpha=-0.5))
    _same(kiln._foreach_add(k, kiln.tensor(2.0), alpha=3), torch._foreach_add(t, torch.tensor(2.0), alpha=3))
    _same(kiln._foreach_sub(k, k2, alpha=3), torch._foreach_sub(t, t2, alpha=3))
    _same(kiln._foreach_pow(2.0, k), torch._foreach_pow(2.0, t), rtol=1e-5)
    for ord in (2, 1, float("inf")):
        _same(kiln._foreach_norm(k, ord), torch._foreach_norm(t, ord), rtol=1e-5)
    _same(kiln._foreach_norm(k, 2, dtype=kiln.float64), torch._foreach_norm(t, 2, dtype=torch.float64))
    _same(kiln._foreach_max(k), torch._foreach_max(t))
    for weight in (0.3, [0.1, 0.5, 0.9], lambda lib, x: [y * 0.1 for y in x]):
        kw = weight(kiln, k2) if callable(weight) else weight
        tw = weight(torch, t2) if callable(weight) else weight
        _same(kiln._foreach_lerp(k, k2, kw), torch._foreach_lerp(t, t2, tw))
    for value in (0.5, [1, 2, -1], "tensor"):
        kv = kiln.tensor([1.0, 2.0, -1.0]) if value == "tensor" else value
        tv = torch.tensor([1.0, 2.0, -1.0]) if value == "tensor" else value
        for name in ("addcmul", "addcdiv"):
            got = getattr(kiln, f"_foreach_{name}")(k, k2, k2, kv)
            _same(got, getattr(torch, f"_foreach_{name}")(t, t2, t2, tv))
    kiln._foreach_addcmul_(k, k2, k2, value=0.5)
    torch._foreach_addcmul_(t, t2, t2, value=0.5)
    kiln._foreach_lerp_(k, k2, 0.25)
    torch._foreach_lerp_(t, t2, 0.25)
    _same(k, t)
    assert kiln._foreach_copy_(k, k2) is k and kiln._foreach_zero_(k2) is k2
    _same(k, list(t2))  # k2's values, copied before k2 was zeroed
    assert all(float(x.abs().sum()) == 0 for x in k2)


def test_errors_as_torch():
    k = [kiln.ones(2), kiln.ones(3)]
    with pytest.raises(RuntimeError, match="at least one tensor"):
        kiln._foreach_mul([], 2)
    with pytest.raises(RuntimeError, match="same number of elements as scalar list"):
        kiln._foreach_mul(k, [1, 2, 3])
    with pytest.raises(RuntimeError, match="same number of tensors, got 2 and 1"):
        kiln._foreach_add(k, [kiln.ones(2)])
    with pytest.raises(RuntimeError, match="0 dim"):
        kiln._foreach_mul(k, kiln.ones(2))
    with pytest.raises(TypeError):
        kiln._foreach_add(k, "x")
    with pytest.raises(TypeError, match="alpha"):
        kiln._foreach_sub(k, 1, alpha=2)
    with pytest.raises(TypeError, match="alpha"):
        kiln._foreach_sub(k, kiln.tensor(2.0), alpha=2)
    with pytest.raises(TypeError, match="invalid combination"):
        kiln._foreach_pow(k, kiln.tensor(2.0, requires_grad=True))
    with pytest.raises(TypeError, match="tuple of Tensors"):
        kiln._foreach_exp(kiln.ones(2))
    with pytest.raises(RuntimeError, match="can't be cast"):
        kiln._foreach_div_([kiln.ones(2, dtype=kiln.int64)], 2)
    with pytest.raises(RuntimeError, match="can't be cast"):
        kiln._foreach_maximum_([kiln.ones(2, dtype=kiln.int64)], 2.5)


def _foreach_lion_step(params, grads, exp_avgs, lr=1e-2, wd=0.1, beta1=0.9, beta2=0.99, lib=kiln):
    # lion-pytorch's foreach.py step, reduced to one group
    lib._foreach_mul_(params, 1.0 - lr * wd)
    updates = [t.clone() for t in exp_avgs]
    lib._foreach_lerp_(updates, grads, 1.0 - beta1)
    lib._foreach_sign_(updates)
    lib._foreach_add_(params, updates, alpha=-lr)
    lib._foreach_lerp_(exp_avgs, grads, 1.0 - beta2)


@pytest.mark.parametrize("compiled", [False, True])
def test_foreach_optimizer_step_eager_and_compiled(compiled):
    torch = need_torch()
    k, t = _lists(torch)
    kg, tg = _lists(torch, seed=2)
    ke, te = [x * 0.1 for x in kg], [x * 0.1 for x in tg]
    step = kiln.compile(_foreach_lion_step, fullgraph=True) if compiled else _foreach_lion_step
    for _ in range(3):
        step(k, kg, ke)
        _foreach_lion_step(t, tg, te, lib=torch)
    _same(k, t)
    _same(ke, te)
