"""`with` over user context managers in compiled code (issue 16's hunt): a
@contextlib.contextmanager generator (its frame runs to the yield at the `with`, the rest at the
block's end) and a class with __enter__/__exit__ are traced, as torch.compile traces them (it was a
break at the `with`, 0 graphs where torch has 1). A graph break inside such a block is a break at
the `with` statement: the graph before it compiles, the statement and the rest run eagerly.
Results, side effects in order and graph counts are checked against eager and torch.compile."""
import contextlib
import io

import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode
from oracle import need_torch

pytestmark = [pytest.mark.skipif(not bytecode.supported(), reason="graph breaks resume on 3.11 to 3.13 only"),
              pytest.mark.usefixtures("strict_capture")]


def _programs(T, events, state):
    sink = io.StringIO()

    @contextlib.contextmanager
    def section(name):
        events.append(name)
        yield name.upper()
        events.append("/" + name)

    @contextlib.contextmanager
    def scaled(value):
        old = state["scale"]
        state["scale"] = value
        try:
            yield
        finally:
            state["scale"] = old

    class Timer:
        def __init__(self, label):
            self.label = label

        def __enter__(self):
            events.append("enter " + self.label)
            return self

        def __exit__(self, *exc):
            events.append("exit " + self.label)
            return False

    def generator_first(x):
        with section("fwd") as tag:
            h = x.relu() * 2
        events.append(tag)
        return h + 1

    def setting_read_inside(x):
        with scaled(3.0):
            y = x * state["scale"]
        return y + state["scale"]

    def class_manager(x):
        a = x.sin()
        with Timer("t") as t:
            h = a.cos() * len(t.label)
        return h + 1

    def nested(x):
        with Timer("outer"), section("inner"):
            y = x.exp()
        with T.no_grad(), scaled(0.5):
            z = y * state["scale"]
        return z

    def break_inside(x):
        a = x.sin() * 2
        with section("log"):
            print("inside", file=sink)
            b = a.cos()
        return b + 1

    return {"generator_first": generator_first, "setting_read_inside": setting_read_inside,
            "class_manager": class_manager, "nested": nested, "break_inside": break_inside}


@pytest.mark.parametrize("name", ["generator_first", "setting_read_inside", "class_manager", "nested",
                                  "break_inside"])
def test_user_context_managers_trace_as_torch(name):
    torch = need_torch()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    torch_events, torch_state = [], {"scale": 1.0}
    torch._dynamo.reset()
    want_counts = torch._dynamo.explain(_programs(torch, torch_events, torch_state)[name])(torch.from_numpy(x))
    want_counts = (want_counts.graph_count, want_counts.graph_break_count)

    eager_events, eager_state = [], {"scale": 1.0}
    want = _programs(kiln, eager_events, eager_state)[name](kiln.from_numpy(x))
    events, state = [], {"scale": 1.0}
    compiled = kiln.compile(_programs(kiln, events, state)[name])
    for _ in range(2):
        got = compiled(kiln.from_numpy(x))
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
        assert events == eager_events and state == eager_state == {"scale": 1.0}
        events.clear()
    kiln.compiler.reset()
    e = kiln.explain(_programs(kiln, [], {"scale": 1.0})[name])(kiln.from_numpy(x))
    assert (e.graph_count, e.graph_break_count) == want_counts, str(e)
    if name == "break_inside":
        assert e.graph_count == 1 and "print()" in str(e.break_reasons[0]), str(e)
