"""Comprehension frames captured on their own (3.11 calls `[f(x) for x in xs]` as a function of
`.0`, the iterator; from 3.12 it is inlined), and which frames are worth capturing at all, as
TorchDynamo decides (has_tensor_in_frame). Counts are torch.compile's, measured with torch 2.13."""
import io
import sys

import numpy as np
import pytest

import kiln

# From 3.12 a comprehension is part of its frame (PEP 709): the frame below runs eagerly (a
# break in its loop) and so does the comprehension, as with torch.compile.
OWN_FRAME = sys.version_info < (3, 12)


@pytest.fixture(autouse=True)
def _fresh_caches():
    kiln.compiler.reset()
    yield
    kiln.compiler.reset()


SINK = io.StringIO()
# In each function below, a break inside a loop makes the frame run eagerly; its comprehensions'
# frames are captured on their own.


def over_range(t, n):
    for _ in range(2):
        print(end="", file=SINK)
    return [t * i for i in range(n)]


def over_list(t):
    for _ in range(2):
        print(end="", file=SINK)
    return [t * o for o in [1.0, 2.0, 3.0]]


def over_tuple_of_tensors(t, u):
    for _ in range(2):
        print(end="", file=SINK)
    scale = t.sum()  # a tensor in the comprehension's scope
    return [v * scale for v in (t, u)]


def tensors_only_in_the_iterator(t):
    for _ in range(2):
        print(end="", file=SINK)
    out = [t, t + 1]
    return [o * 2 for o in out]


def counts(fn, *args):
    e = kiln.explain(fn)(*args)
    return e.graph_count


def same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-6)


@pytest.mark.parametrize("fn,args", [
    (over_range, (kiln.randn(3), 4)),
    (over_list, (kiln.randn(3),)),
    (over_tuple_of_tensors, (kiln.randn(3), kiln.randn(3))),
])
def test_a_comprehension_over_an_iterator_argument_compiles(fn, args):
    assert counts(fn, *args) == (1 if OWN_FRAME else 0)
    kiln.compiler.reset()
    same(kiln.compile(fn)(*args), fn(*args))


def test_a_comprehension_with_tensors_only_in_its_iterator_runs_eagerly():
    # TorchDynamo's has_tensor_in_frame: `.0` is an iterator, not a tensor, and nothing else in
    # the comprehension's scope is one (torch.compile: 0 graphs).
    t = kiln.randn(3)
    assert counts(tensors_only_in_the_iterator, t) == 0
    same(kiln.compile(tensors_only_in_the_iterator)(t), tensors_only_in_the_iterator(t))


def test_the_iterators_items_are_guarded():
    compiled = kiln.compile(over_range)
    t = kiln.randn(2)
    for n in (3, 3, 5, 0, 3):  # another range recompiles (or hits the first entry again)
        same(compiled(t, n), over_range(t, n))
    compiled = kiln.compile(over_tuple_of_tensors)
    for shape in ((3,), (3,), (2, 2)):  # the tuple's tensors are graph inputs, their shapes guarded
        t, u = kiln.randn(*shape), kiln.randn(*shape)
        same(compiled(t, u), over_tuple_of_tensors(t, u))


def test_iterator_guards():
    def two(a, b):
        return a, b

    g = kiln._C._capture.GuardTree()
    it = g.local(0, "L['.0']")
    it.check_type(type(iter([])))
    it.check_iter_remaining(2)
    it.iter_item(1).check_const(3)
    assert g.check_frame(two, (iter([2, 3]), None)) is None
    consumed = iter([1, 2, 3])
    next(consumed)
    assert g.check_frame(two, (consumed, None)) is None
    assert g.check_frame(two, (iter([2, 4]), None)) == "L['.0'].remaining[1] == 3 (got 4)"
    assert g.check_frame(two, (iter([3]), None)) == "L['.0'] has 2 items left (got 1)"
    assert g.check_frame(two, (iter((2, 3)), None)).startswith("type(L['.0']) is list_iterator")

    r = kiln._C._capture.GuardTree()
    r.local(0, "L['.0']").check_range_iter(1, 2, 3)
    assert str(r) == "list(L['.0']) == list(range(1, 7, 2))"
    assert r.check_frame(two, (iter(range(1, 7, 2)), None)) is None
    started = iter(range(-1, 7, 2))
    next(started)
    assert r.check_frame(two, (started, None)) is None
    assert r.check_frame(two, (iter(range(1, 9, 2)), None)) is not None
    assert r.check_frame(two, (iter(range(1, 7, 3)), None)) is not None
    assert r.check_frame(two, (iter([1, 3, 5]), None)) is not None
