"""try/except in compiled code (issue 16's hunt): an exception the traced code raises inside a
`try` block (a missing dict key, a missing attribute, a `raise` in a helper) goes to the block's
`except` clauses as CPython sends it, so the frame stays one graph, as torch.compile's (it was a
graph break at the raising instruction: 0 graphs where torch has 1). One no clause matches is
raised again: the call runs eagerly and the user gets it. Results and graph counts are checked
against eager and torch.compile."""
import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode
from oracle import need_torch

pytestmark = [pytest.mark.skipif(not bytecode.supported(), reason="exception tables exist on 3.11 to 3.13"),
              pytest.mark.usefixtures("strict_capture")]


class Stop(Exception):
    pass


def _programs(T):
    options = {"scale": 2.0}
    lin = T.nn.Linear(4, 4)
    with T.no_grad():
        lin.weight.copy_(T.from_numpy(np.eye(4, dtype=np.float32) * 0.5))
        lin.bias.zero_()

    def check(x):
        if x.dim() != 2:
            raise ValueError("expects 2-D")
        return x

    def stop_early(x):
        raise Stop()

    def missing_key(x):
        try:
            shift = options["shift"]
        except KeyError:
            shift = 0.5
        return x * options["scale"] + shift

    def missing_attribute(x):
        try:
            b = lin.extra_bias
        except AttributeError:
            b = None
        y = lin(x)
        return y if b is None else y + b

    def raised_in_helper(x):
        try:
            check(x.unsqueeze(0))
        except ValueError:
            x = x * 3
        return x + 1

    def tuple_clause_bound(x):
        try:
            v = [1, 2][5]
        except (KeyError, IndexError) as e:  # noqa: F841 - bound, not read
            v = 7
        return x * v

    def user_class(x):
        y = x.sin()
        try:
            stop_early(y)
            y = y * 100
        except Stop:
            y = y - 1
        return y.cos()

    def else_and_finally(x):
        out = [x]
        try:
            y = x * 2
        except KeyError:
            y = x
        else:
            y = y + 1
        finally:
            out.append(x.exp())
        return y + out[-1]

    return {"missing_key": missing_key, "missing_attribute": missing_attribute,
            "raised_in_helper": raised_in_helper, "tuple_clause_bound": tuple_clause_bound,
            "user_class": user_class, "else_and_finally": else_and_finally}


NAMES = ["missing_key", "missing_attribute", "raised_in_helper", "tuple_clause_bound", "user_class",
         "else_and_finally"]


@pytest.mark.parametrize("name", NAMES)
def test_caught_exceptions_keep_one_graph_as_torch(name):
    torch = need_torch()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    torch._dynamo.reset()
    t = torch._dynamo.explain(_programs(torch)[name])(torch.from_numpy(x))
    want = _programs(kiln)[name](kiln.from_numpy(x))
    compiled = kiln.compile(_programs(kiln)[name])
    for _ in range(2):
        np.testing.assert_allclose(compiled(kiln.from_numpy(x)).detach().numpy(), want.detach().numpy(), rtol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(_programs(kiln)[name])(kiln.from_numpy(x))
    assert (e.graph_count, e.graph_break_count) == (t.graph_count, t.graph_break_count), str(e)


def test_an_exception_no_clause_matches_reaches_the_caller():
    def fn(x, d):
        try:
            return x * d["missing"]
        except IndexError:
            return x

    compiled = kiln.compile(fn)
    for _ in range(2):
        with pytest.raises(KeyError):
            compiled(kiln.ones(2), {})
    np.testing.assert_allclose(compiled(kiln.ones(2), {"missing": 3.0}).numpy(), [3.0, 3.0])


def test_what_raised_is_guarded():
    """A missing attribute or dict key caught by an except clause is guarded missing: once it
    exists the call recompiles and reads it (without the guard the first graph answered), and
    after it is deleted the first graph serves again."""
    class Holder:
        pass

    holder, options = Holder(), {}

    def fn(x):
        try:
            s = holder.scale
        except AttributeError:
            s = 3.0
        try:
            b = options["shift"]
        except KeyError:
            b = 0.5
        return x * s + b

    compiled = kiln.compile(fn)
    x = kiln.ones(2)
    for setup, want in [(lambda: None, 3.5), (lambda: setattr(holder, "scale", 5.0), 5.5),
                        (lambda: options.update(shift=10.0), 15.0), (lambda: delattr(holder, "scale"), 13.0),
                        (lambda: options.clear(), 3.5)]:
        setup()
        np.testing.assert_allclose(compiled(x).numpy(), [want, want])
        np.testing.assert_allclose(fn(x).numpy(), [want, want])


def test_an_error_of_a_call_run_on_fakes_is_a_break_not_handled():
    """A library call run for real on fakes may fail where the real call would not: its error
    inside a try block is a graph break (the call runs eagerly), never an exception the trace
    handles (it would take the except path where eager code may not)."""
    lin = kiln.nn.Linear(4, 3)

    def fn(x):
        try:
            y = lin(x)
        except RuntimeError:
            y = x.sum(-1, keepdim=True).expand(x.shape[0], 3)
        return y * 2

    for x in (kiln.ones(2, 5), kiln.ones(2, 4)):
        kiln.compiler.reset()
        np.testing.assert_allclose(kiln.compile(fn)(x).detach().numpy(), fn(x).detach().numpy(), rtol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(fn)(kiln.ones(2, 5))
    assert any("shapes cannot be multiplied" in r.reason for r in e.all_break_reasons), str(e)
