"""nn tier 2: module hooks, zero_grad, requires_grad_, traversal and weight tying (torch's behaviour)."""
import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import need_torch


class Scale(nn.Module):
    def forward(self, x, factor=2.0):
        return x * factor


def test_forward_pre_hook_replaces_input_and_handle_removes():
    m = Scale()
    h = m.register_forward_pre_hook(lambda mod, args: args[0] + 1)  # a single value: wrapped as args
    assert m(kiln.ones(2)).numpy().tolist() == [4.0, 4.0]
    h.remove()
    assert m(kiln.ones(2)).numpy().tolist() == [2.0, 2.0]
    h.remove()  # removing twice is harmless, as in torch


def test_forward_hook_replaces_output_and_sees_inputs():
    m = Scale()
    seen = []

    def hook(mod, args, out):
        seen.append((mod, len(args)))
        return out * 10

    with m.register_forward_hook(hook):
        assert m(kiln.ones(1)).item() == 20.0
    assert m(kiln.ones(1)).item() == 2.0  # the context manager removed it
    assert seen == [(m, 1)]


def test_hooks_with_kwargs_and_prepend_order():
    m = Scale()
    order = []
    m.register_forward_hook(lambda mod, args, out: order.append("a"))
    m.register_forward_hook(lambda mod, args, out: order.append("b"), prepend=True)
    m.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"factor": 5.0}), with_kwargs=True)
    got = []
    m.register_forward_hook(lambda mod, args, kwargs, out: got.append(kwargs["factor"]), with_kwargs=True)
    assert m(kiln.ones(1), factor=3.0).item() == 5.0
    assert order == ["b", "a"] and got == [5.0]


def test_pre_hook_with_kwargs_bad_return_raises():
    m = Scale()
    m.register_forward_pre_hook(lambda mod, args, kwargs: 3, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple of \\(new_args, new_kwargs\\)"):
        m(kiln.ones(1))


def test_always_call_hook_runs_when_forward_raises():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    calls = []
    m.register_forward_hook(lambda mod, args, out: calls.append(("always", out)), always_call=True)
    m.register_forward_hook(lambda mod, args, out: calls.append(("normal", out)))
    with pytest.raises(ValueError, match="boom"):
        m(kiln.ones(1))
    assert calls == [("always", None)]


def test_hooks_match_torch_call_sequence():
    torch = need_torch()
    logs = {}
    for lib in (torch, kiln):
        log = logs[lib.__name__] = []
        m = lib.nn.Sequential(lib.nn.Linear(2, 2), lib.nn.ReLU())
        for name, sub in m.named_children():
            sub.register_forward_pre_hook(lambda mod, args, n=name: log.append(("pre", n, len(args))))
            sub.register_forward_hook(lambda mod, args, out, n=name: log.append(("post", n, tuple(out.shape))))
        m(lib.ones(3, 2))
    assert logs["kiln"] == logs["torch"]


def test_zero_grad_set_to_none_and_in_place():
    m = nn.Linear(3, 2)
    for p in m.parameters():
        p.grad = kiln.ones(*p.shape)
    m.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.zero_grad()  # no grads: nothing to do


def test_requires_grad_and_traversal():
    torch = need_torch()
    models = {lib.__name__: lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.ReLU(), lib.nn.Linear(3, 1)))
              for lib in (torch, kiln)}
    k, t = models["kiln"], models["torch"]
    assert [n for n, _ in k.named_modules()] == [n for n, _ in t.named_modules()]
    assert [n for n, _ in k.named_children()] == [n for n, _ in t.named_children()]
    assert k.requires_grad_(False) is k
    assert not any(p.requires_grad for p in k.parameters())
    k.requires_grad_()
    assert all(p.requires_grad for p in k.parameters())
    visited = []
    k.apply(lambda mod: visited.append(type(mod).__name__))
    t_visited = []
    t.apply(lambda mod: t_visited.append(type(mod).__name__))
    assert visited == t_visited


def test_weight_tying_yields_the_parameter_once():
    torch = need_torch()
    names = {}
    for lib in (torch, kiln):
        class TinyLM(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.wte = lib.nn.Linear(4, 6, bias=False)  # stands in for an Embedding (6 x 4 weight)
                self.lm_head = lib.nn.Linear(4, 6, bias=False)
                self.lm_head.weight = self.wte.weight

        m = TinyLM()
        assert m.lm_head.weight is m.wte.weight
        params = list(m.parameters())
        assert len(params) == 1
        names[lib.__name__] = ([n for n, _ in m.named_parameters()], list(m.state_dict()))
    assert names["kiln"] == names["torch"] == (["wte.weight"], ["wte.weight", "lm_head.weight"])
