"""Automatic dynamic numbers: an int or float argument compiles as a constant at the first call
and, once a recompile finds it changed, as a graph input (kiln._traced_numbers), so later values
reuse the graph, as torch.compile's automatic dynamic SymInt/SymFloat inputs. Recompile counts,
values equal to eager, guards (type only; 0 and 1 not specialized, as PyTorch for plain ints),
and the uses that need the value (branches, range, indices) specializing it instead."""
import pytest

import kiln
from oracle import need_torch


pytestmark = pytest.mark.usefixtures("strict_capture")


def counting(fn):
    """fn compiled with a backend that counts the graphs it is given (and runs them as traced)."""
    graphs = []

    def backend(gm, examples, **kwargs):
        graphs.append(gm)
        return gm.forward

    return kiln.compile(fn, backend=backend), graphs


def same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
        return
    if isinstance(a, kiln.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert kiln.equal(a, b), (a, b)
        return
    assert type(a) is type(b) and a == b, (a, b)


def run(fn, calls):
    compiled, graphs = counting(fn)
    for args in calls:
        same(compiled(*args), fn(*args))
    return len(graphs)


X = kiln.arange(12.0).reshape(3, 4) / 7


def scaled(x, step):
    return x / (1.0 + 0.1 * step)


def test_changed_int_becomes_a_graph_input():
    # The first call specializes step; the recompile at step=1 makes it an input that every
    # later value reuses (0 and 1 are not specialized, as PyTorch's plain ints).
    assert run(scaled, [(X, s) for s in range(6)]) == 2


def test_int_arithmetic_keeps_python_types_and_values():
    def f(x, n):
        return x * (n / 3) + (n // 2) - n % 3 + n ** 2, -n + 1, float(n) * 0.5, int(n * 0.5)

    assert run(f, [(X, n) for n in (2, 7, 11, -4)]) == 2


def test_changed_float_becomes_a_graph_input():
    def f(x, s):
        return x * s + s * 2, s - 1.0

    assert run(f, [(X, s) for s in (0.5, 0.7, 0.9, -3.25)]) == 2


def test_number_with_integer_and_bool_tensors_promotes_as_a_python_scalar():
    def f(x, n):
        return (x.to(kiln.int32) * n) // 2 + (x > 0.5) * n, x.to(kiln.int32) + n * 0.5

    assert run(f, [(X, n) for n in (2, 3, 4)]) == 2


def test_inplace_tensor_update_by_a_dynamic_number_writes_the_tensor():
    def f(x, n):
        y = x.clone()
        z = y
        y += n
        y *= n * 0.5
        return z

    assert run(f, [(X, n) for n in (2, 3, 4)]) == 2


def test_returned_and_stored_numbers_are_python_numbers_again():
    class Holder:
        pass

    holder = Holder()

    def f(x, n):
        holder.doubled = n * 2
        return x + n, n + 1, n

    compiled, graphs = counting(f)
    for n in (2, 3, 4):
        out = compiled(X, n)
        assert type(out[1]) is int and out[1] == n + 1 and out[2] == n
        same(out[0], X + n)
        assert type(holder.doubled) is int and holder.doubled == 2 * n
    assert len(graphs) == 2


def test_guard_fails_on_a_type_change():
    def f(x, n):
        return x * n

    compiled, graphs = counting(f)
    for n, want in ((2, 1), (3, 2), (2.5, 3), (4, 3), (1.5, 3), (True, 4)):
        same(compiled(X, n), f(X, n))
        assert len(graphs) == want, n


def test_values_the_trace_needs_stay_specialized():
    def ranged(x, n):
        for i in range(n):
            x = x + i
        return x

    def branch(x, n):
        return x + 1 if n > 3 else x - 1

    def indexed(x, a):
        return x[a] * 2

    # Each distinct value compiles once: the int is a constant again after its dynamic trace
    # failed (never a wrong value).
    assert run(ranged, [(X, n) for n in (2, 3, 4, 3)]) == 3
    assert run(indexed, [(X, a) for a in (0, 1, 2, 1)]) == 3


def test_comparison_of_a_dynamic_int_guards_its_range():
    # As PyTorch guards a SymInt's comparison: n=2 static, n=3 dynamic with `n <= 3` guarded,
    # n=4 recompiles for `n > 3`, and 5 and 1 reuse those graphs.
    def branch(x, n):
        return x + n if n > 3 else x - n

    compiled, graphs = counting(branch)
    for n, want in ((2, 1), (3, 2), (4, 3), (5, 3), (1, 3), (-7, 3)):
        same(compiled(X, n), branch(X, n))
        assert len(graphs) == want, n
    guards = kiln.explain(branch)(X, 3).guards
    assert guards is not None

    def flipped(x, n):
        return x * 2 if 3 >= n and n != 2 else x + 1

    # `n != 2` holding is not one range: n stays a constant.
    assert run(flipped, [(X, n) for n in (1, 3, 4, 5)]) == 4


def test_ints_that_do_not_fit_64_bits_stay_constants():
    def f(x, n):
        return x * (n % 1000)

    compiled, graphs = counting(f)
    for n in (2, 3, 2 ** 70 + 5, 4, -(2 ** 64)):
        same(compiled(X, n), f(X, n))


def test_division_that_may_be_by_zero_keeps_eager_errors():
    def f(x, n):
        return x.to(kiln.int64) // n

    compiled, _ = counting(f)
    for n in (2, 3):
        same(compiled(X * 7, n), f(X * 7, n))
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        compiled(X * 7, 0)

    def g(x, n):
        return x * (3 / n)

    compiled, _ = counting(g)
    for n in (2, 3):
        same(compiled(X, n), g(X, n))
    with pytest.raises(ZeroDivisionError):
        compiled(X, 0)


def test_isinstance_of_a_dynamic_number():
    def f(x, n):
        if isinstance(n, int) and not isinstance(n, float) and type(n) is int:
            return x * n
        return x

    assert run(f, [(X, n) for n in (2, 3, 4)]) == 2


def test_dynamic_int_in_a_resume_function_and_before_a_break():
    def f(x, n):
        y = x * n
        k = int(y.sum().item())
        return y + n + k

    compiled, graphs = counting(f)
    for n in (2, 3, 4, 5):
        same(compiled(X, n), f(X, n))
    assert len(graphs) <= 4  # torch.compile: 4


def test_recompile_log_says_the_number_is_an_input(capsys):
    compiled, _ = counting(scaled)
    kiln.set_logs(recompiles=True)
    try:
        for s in range(3):
            compiled(X, s)
    finally:
        kiln.set_logs()
    err = capsys.readouterr().err
    assert "L['step'] == 0 (got 1)" in err
    assert "graph inputs (automatic dynamic): step" in err


def test_explain_of_a_loop_breaking_at_item_calling_a_helper_with_the_step():
    # reinforce's shape: the loop breaks at .item() (the frame runs eagerly, as with
    # torch.compile) and the helper called with step = 0..5 compiles 2 graphs (torch: 2/1).
    def choose(state, step):
        logits = state / (1.0 + 0.1 * step)
        return logits.argmax()

    def episode(state):
        actions = []
        for step in range(6):
            a = choose(state, step).item()
            actions.append(a)
            state = state.roll(1) + a
        return state, actions

    explain = kiln.explain(episode)(X[0])
    assert (explain.graph_count, explain.graph_break_count) == (2, 1), explain.break_reasons
    same(kiln.compile(episode)(X[0])[0], episode(X[0])[0])


def test_graph_counts_match_torch_compile():
    torch = need_torch()
    from torch._dynamo.utils import counters

    def programs(T):
        x = T.ones(3, 4)
        return {
            "mul": (lambda x, n: x * n, [(x, n) for n in (0, 1, 2, 3)]),
            "arith": (lambda x, s: x * (1.0 + 0.1 * s), [(x, s) for s in (2, 3, 4)]),
            "float": (lambda x, s: x * s, [(x, s) for s in (0.5, 0.7, 0.9)]),
            "types": (lambda x, n: x * n, [(x, 2), (x, 3), (x, 2.5), (x, 4)]),
            "range": (lambda x, n: sum(x * i for i in range(n)), [(x, n) for n in (2, 3, 4)]),
        }

    for name, (fn, calls) in programs(torch).items():
        torch._dynamo.reset()
        counters.clear()
        tc = torch.compile(fn, backend="eager")
        for args in calls:
            tc(*args)
        want = counters["stats"]["unique_graphs"]
        kfn, kcalls = programs(kiln)[name]
        kiln.compiler.reset()
        assert run(kfn, kcalls) == want, name
