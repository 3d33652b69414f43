"""Graph breaks that keep compiling (issue 16): the graph before a break, the breaking
instruction in Python, and a resume function (captured in turn) for the rest of the frame.

The stress test puts one break (a print, an .item() whose value flows on, a numpy call, a
data-dependent `if`) at each statement of a 30-line function in turn, and checks each variant
against eager and its graph count: one graph for each side of the break that has operations.
The same runs inside a loop (the frame runs eagerly, as torch.compile's does) and inside an
inlined helper (the break is at the helper's call in the outer frame).
"""
import io
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode

pytestmark = pytest.mark.skipif(not bytecode.supported(), reason="graph breaks resume on 3.11 to 3.13 only")

# 30 statements, each with tensor operations; `y` and `z` are live everywhere.
BODY = [
    "y = x * 2",
    "z = y + x",
    "y = y.sin()",
    "z = z * y",
    "y = y + 1.5",
    "z = z - y",
    "y = y.abs()",
    "z = z.cos()",
    "y = y * z",
    "z = z + 0.25",
    "y = y.exp() * 0.1",
    "z = z * 3",
    "y = y - z",
    "z = z.tanh()",
    "y = y + z * 2",
    "z = z.neg()",
    "y = y * 0.5",
    "z = z + y",
    "y = y.relu()",
    "z = z * z",
    "y = y + 2",
    "z = z.sigmoid()",
    "y = y / 3",
    "z = z - 1",
    "y = y + z",
    "z = z.abs()",
    "y = y * y",
    "z = z + y",
    "y = y.sqrt()",
    "z = z * 0.5",
]

# Each break: its lines (using `y`; may rebind `y`) and whether it leaves ops before it in the
# same statement (the .item()'s sum, the if's sum and comparison).
BREAKS = {
    "print": (["print('at', 1, file=SINK)"], False),
    "item": (["s = y.sum().item()", "y = y * (1.0 if s > 0 else -1.0)"], True),
    # numpy is traced into the graph (as torch.compile's trace_numpy); float() of an array computed
    # there is the break (its value is data), after the sum and tanh of the same statement.
    "numpy": (["n = np.tanh(y.sum().numpy())", "y = y + float(n)"], True),
    "if": (["if y.sum() > 0:", "    y = y + 1", "else:", "    y = y - 1"], True),
}


def _define(source, name):
    namespace = {"np": np, "kiln": kiln, "SINK": io.StringIO()}
    exec(compile(source, f"<graph-breaks {name}>", "exec"), namespace)  # noqa: S102 - test programs
    return namespace[name]


def _flat(at, kind):
    lines = BODY[:at] + BREAKS[kind][0] + BODY[at:]
    return "def fn(x, y, z):\n" + textwrap.indent("\n".join(lines + ["return y + z"]), "    ") + "\n"


def _expected_graphs(at, kind):
    before = at > 0 or BREAKS[kind][1]
    return int(before) + 1  # the code after every break position has operations


def _x():
    return kiln.from_numpy(np.random.default_rng(0).standard_normal((8,)).astype("float32"))


def _check(fn, expected_graphs, expected_breaks=1, nargs=1, ending_graphs=None):
    """fn compiled equals eager (twice: the second call runs the cached glue), and kiln.explain
    counts as torch._dynamo.explain: `expected_graphs` graphs, a reason for each of the
    `ending_graphs` breaks with a graph before them (default: all), `expected_breaks` in all."""
    x = _x()
    args = (x, x * 0.5, x - 1)[:nargs]
    eager = fn(*args)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):  # the second call runs the cached glue and resume function
        got = compiled(*args)
        np.testing.assert_allclose(got.numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(fn)(*args)
    ending = expected_breaks if ending_graphs is None else ending_graphs
    assert (e.graph_count, len(e.break_reasons), len(e.all_break_reasons)) == (
        expected_graphs, ending, expected_breaks), str(e)
    assert e.break_graphs == sorted(e.break_graphs) and all(1 <= g <= e.graph_count for g in e.break_graphs)
    # As torch._dynamo.explain's: the splits between graphs, not the breaks.
    assert e.graph_break_count == max(expected_graphs - 1, 0), str(e)


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_break_at_each_statement(kind):
    for at in range(len(BODY)):
        # No graph before a print at the top: a break with no reason, as torch's explain.
        graphs = _expected_graphs(at, kind)
        _check(_define(_flat(at, kind), "fn"), graphs, nargs=3, ending_graphs=graphs - 1)


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_break_in_inlined_helper(kind):
    """The break is at the helper's call in the outer frame: a graph before the call, the
    helper's own frame captured when it runs (graphs around its break), a graph after."""
    for at in (0, 11, 29):
        helper = BODY[:at] + BREAKS[kind][0] + BODY[at:]
        source = ("def helper(x, y, z):\n" + textwrap.indent("\n".join(helper + ["return y, z"]), "    ") +
                  "\ndef fn(x):\n    y = x + 1\n    z = x * 3\n    y, z = helper(x, y, z)\n    return y - z\n")
        fn = _define(source, "fn")
        helper_graphs = _expected_graphs(at, kind)
        _check(fn, 2 + helper_graphs, expected_breaks=2, ending_graphs=helper_graphs)


@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_break_in_loop(kind):
    """A break inside a for loop of the top frame: the frame runs eagerly (as torch.compile's:
    a resume function would call itself once per iteration)."""
    for at in (0, 15, 29):
        lines = BODY[:at] + BREAKS[kind][0] + BODY[at:]
        source = ("def fn(x):\n    y = z = x\n    for i in range(3):\n" +
                  textwrap.indent("\n".join(lines), "        ") + "\n        x = y + z * 0.1\n    return y + z\n")
        _check(_define(source, "fn"), 0, ending_graphs=0)


_LOCALS = []


def _with_cells_and_handler(x, y=3, *rest):
    z = x + 1
    w = 5
    g = lambda: w + z  # noqa: E731 - makes w and z cells
    print("at", z)
    _LOCALS.append(sorted(sys._getframe().f_locals))  # a resumed frame's locals are readable
    try:
        q = 1 / (y - 3)
    except ZeroDivisionError:
        q = -1
    return g() + q + len(rest)


def test_resume_code_keeps_cells_handlers_and_lines():
    """A resume code object made at the print: cells refilled from arguments, the try block's
    handler still found (the exception table moved with the code), line numbers unchanged."""
    import dis
    import types

    code = _with_cells_and_handler.__code__
    call = next(i for i in dis.get_instructions(code) if i.opname == "CALL")
    target = bytecode.next_index(code, call.offset // 2)
    assert not bytecode.in_loop(code, call.offset // 2)
    rcode = bytecode.make_resume_code(code, target, [False], [True, True], "__kiln_resume_test")
    assert rcode.co_varnames[:len(code.co_varnames)] == code.co_varnames
    fn = types.FunctionType(rcode, globals(), "r")
    # locals x, y, rest, g, q; cells w, z; the print's result on the stack
    assert fn(1, 3, (), lambda: 7, None, 5, 2, None) == 6  # 7 + (-1) from the handler + 0
    assert fn(1, 4, (1, 2), lambda: 7, None, 5, 2, None) == 10.0
    assert _LOCALS[-1] == sorted(["x", "y", "rest", "g", "q", "w", "z", "__kiln_cell5", "__kiln_cell6", "__kiln_stack7"])
    lines = {i.positions.lineno for i in dis.get_instructions(rcode)} - {None}
    assert lines <= {i.positions.lineno for i in dis.get_instructions(code)}


def test_two_breaks_resume_a_resume_function():
    """The resume function after the first break breaks again: its own resume function adds
    arguments beside the ones it has (train_step_sgd failed with a duplicate argument name)."""
    def fn(x):
        y = x * 2
        print("one", file=SINK)
        y = y + 1
        print("two", file=SINK)
        return y * 3

    SINK = io.StringIO()
    _check(fn, 3, expected_breaks=2)


def test_with_over_an_untraceable_manager_runs_the_rest_eagerly():
    """`with redirect_stdout(...)`: one graph before the statement, which and the rest of the
    frame run eagerly, one break (as torch.compile's graph count on the conformance program)."""
    import contextlib

    sink = io.StringIO()

    def fn(x):
        y = x.sin() * 2
        with contextlib.redirect_stdout(sink):
            print("checkpoint")
        return (y + 1).cos()

    _check(fn, 1)


# Break programs written for either library (`T`, `SINK`), with torch._dynamo.explain's counts as
# the oracle: graph_break_count is graph_count - 1 in both, break_reasons lists every break.
_COUNTED = {
    "print_between_ops": "y = x.sin() * 2\n    print('mid', file=SINK)\n    return (y + 1).cos()",
    # graph_break_print (conformance): the `with` breaks, the rest runs eagerly: 1 graph, 0.
    "redirect_stdout": ("y = x.sin() * 2\n    with redirect_stdout(SINK):\n        print('checkpoint')\n"
                        "    return (y + 1).cos()"),
    "print_after_ops": "y = x.sin() * 2\n    print('end', file=SINK)\n    return y",
    "two_prints": ("y = x * 2\n    print('a', file=SINK)\n    y = y + 1\n    print('b', file=SINK)\n"
                   "    return y * 3"),
    # A break inside a grad-mode block: the graph before it ends the block, the resume
    # function's graph goes on inside it (freeze_finetune's `with no_grad()` around an init).
    "print_in_no_grad": ("y = x * 2\n    with no_grad():\n        z = y + 1\n        print('in', file=SINK)\n"
                         "        z = z * 3\n    return y + z"),
    "if_in_no_grad": ("y = x * 2\n    with no_grad():\n        z = y + 1\n        if z.sum() > 0:\n"
                      "            z = z * 3\n        z = z - 1\n    return y + z"),
    # A subscript whose result shape depends on the data breaks at BINARY_SUBSCR and resumes
    # after it (adv_index_write); the in-place writes into a clone before it are no view.
    "mask_read": "y = x * 2\n    d = y[y > 0]\n    return d.sum() + y",
    "mask_read_after_writes": ("a = x.clone()\n    a[x > 0] = 0.5\n    a[1:3] = 2.0\n    d = x[a > 1]\n"
                               "    return a * 2 + d.sum()"),
}


@pytest.mark.parametrize("name", sorted(_COUNTED))
def test_break_counts_equal_torch(name):
    torch = pytest.importorskip("torch")
    import contextlib

    source = "def fn(x):\n    " + _COUNTED[name] + "\n"
    counts = {}
    for lib, explain, x in ((kiln, lambda f: kiln.explain(f), _x()),
                            (torch, lambda f: torch._dynamo.explain(f), torch.ones(8))):
        namespace = {"SINK": io.StringIO(), "redirect_stdout": contextlib.redirect_stdout, "no_grad": lib.no_grad}
        exec(compile(source, f"<counted {name}>", "exec"), namespace)  # noqa: S102 - test program
        e = explain(namespace["fn"])(x)
        counts[lib.__name__] = (e.graph_count, e.graph_break_count, len(e.break_reasons))
    assert counts["kiln"] == counts["torch"], counts


def test_numpy_methods_after_a_numpy_break_resume():
    """`.numpy()` and the array's methods are traced into the graph (as torch.compile's
    trace_numpy): the break is at `float(s)`, whose value is data; the tensor code after it
    compiles in the resume function. 2 graphs, 1 break, as torch.compile."""
    def fn(x):
        y = x * 2
        n = y.numpy()
        m = n.sum(axis=0)
        s = m.max()
        return y + kiln.from_numpy(m) * float(s)

    compiled = kiln.compile(fn, backend="eager")
    for i in range(3):  # new data each call: nothing computed from the array is a constant
        x = kiln.from_numpy(np.arange(6, dtype=np.float32).reshape(3, 2) * (i + 1))
        np.testing.assert_allclose(compiled(x).numpy(), fn(x).numpy())
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count) == (2, 1), str(e)
    reasons = [r.reason for r in e.break_reasons]
    assert len(reasons) == 1 and reasons[0].startswith("float() of a numpy array"), reasons


def test_no_graph_for_a_resume_function_without_ops():
    def fn(x):
        y = x * 2
        print("inside", file=SINK)
        return y

    SINK = io.StringIO()
    _check(fn, 1)


def test_live_locals_skip_dead_and_overwritten():
    def f(a, b, c):
        print(a)
        b = 2
        return a + b

    code = f.__code__
    call = next(i for i in dis_instructions(code) if i.opname == "CALL")
    assert bytecode.live_locals(code, call.offset // 2) == [True, False, False]


def dis_instructions(code):
    import dis
    return list(dis.get_instructions(code))


# --- side effects on objects from outside the frame: replayed after the graph, no break -----

LOG = []
COUNTER = 0


class Box:
    pass


def _plain(v):
    if isinstance(v, list):
        return [_plain(a) for a in v]
    if isinstance(v, dict):
        return {k: _plain(a) for k, a in v.items()}
    return v.numpy().tolist() if hasattr(v, "numpy") else v


def test_list_append_and_dict_setitem_on_inputs_replay():
    def fn(x, acc, d):
        y = x * 2
        acc.append(y)
        acc.append(3)
        d["k"] = y + 1
        del d["old"]
        return y.sum()

    x = _x()
    # "keep" is replayed as read through the dict (d['keep']): read before the dict is cleared.
    acc, d = [], {"old": 1, "keep": [1, 2]}
    want = fn(x, acc, d)
    want_state = _plain([acc, d])
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):  # the second call runs the cached glue
        acc2, d2 = [], {"old": 1, "keep": [1, 2]}
        got = compiled(x, acc2, d2)
        np.testing.assert_allclose(got.numpy(), want.numpy())
        assert _plain([acc2, d2]) == want_state
    kiln.compiler.reset()
    e = kiln.explain(fn)(x, [], {"old": 1})
    assert not e.break_reasons and e.graph_count == 1, str(e)


def test_attribute_global_and_nonlocal_stores_replay():
    box, module = Box(), kiln.nn.Linear(2, 2)

    def make():
        seen = 0

        def fn(x):
            nonlocal seen
            global COUNTER
            y = x + 1
            box.last = y
            module.tag = "done"
            COUNTER = COUNTER + 1
            seen = seen + 2
            LOG.append(seen)
            return y * box.last
        return fn

    fn_eager, fn_compiled = make(), make()
    global COUNTER
    x = _x()
    COUNTER = 0
    LOG.clear()
    want = fn_eager(x)
    state_eager = (COUNTER, list(LOG), box.last.numpy().tolist(), module.tag)
    COUNTER = 0
    LOG.clear()
    del box.last, module.tag
    kiln.compiler.reset()
    compiled = kiln.compile(fn_compiled, backend="eager")
    got = compiled(x)
    np.testing.assert_allclose(got.numpy(), want.numpy())
    assert (COUNTER, list(LOG), box.last.numpy().tolist(), module.tag) == state_eager
    compiled(x)  # a new entry (COUNTER and the cell changed): replays again
    assert COUNTER == 2 and LOG == [2, 4]
    kiln.compiler.reset()
    e = kiln.explain(make())(x)
    assert not e.break_reasons, str(e)


def _in_no_grad(x, w, sink):
    y = x * w
    with kiln.no_grad():
        z = y + 1
        print("in", file=sink)
        z = z * 3
        with kiln.enable_grad():
            u = (x * w).sum()
            if u > -1e9:
                u = u * 2
        z = z + u
    return y + z, z, u


def test_break_inside_grad_mode_blocks_keeps_compiling(strict_capture):
    """A break (a print, a data-dependent `if`) inside `with no_grad():` and a nested
    `with enable_grad():`: the graph before it leaves the block's grad mode as eager code does
    at that point, the resume functions compile the rest of the blocks, and each value's
    requires_grad and the grad mode after the call are eager's."""
    w = kiln.tensor([1.5, -2.0, 0.5], requires_grad=True)
    x = kiln.tensor([1.0, 2.0, 3.0])
    expected = _in_no_grad(x, w, io.StringIO())
    compiled = kiln.compile(_in_no_grad)
    for _ in range(2):
        sink = io.StringIO()
        got = compiled(x, w, sink)
        assert sink.getvalue() == "in\n" and kiln.is_grad_enabled()
        for a, b in zip(got, expected):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-6)
            assert a.requires_grad == b.requires_grad
    kiln.compiler.reset()
    e = kiln.explain(_in_no_grad)(x, w, io.StringIO())
    assert (e.graph_count, e.graph_break_count) == (3, 2), str(e)


def test_a_break_raising_inside_no_grad_restores_grad_mode():
    def boom(t):
        print("boom", file=io.StringIO())  # a break inside: the call in fn is the break
        raise ValueError("boom")

    def fn(x):
        y = x + 1
        with kiln.no_grad():
            y = y * 2
            boom(y)
        return y

    compiled = kiln.compile(fn)
    for _ in range(2):
        with pytest.raises(ValueError):
            compiled(kiln.ones(3))
        assert kiln.is_grad_enabled()


def test_reset_parameters_compiled_leaves_grad_mode_on(strict_capture):
    # freeze_finetune: Linear.reset_parameters (init.uniform_ inside `with no_grad()`) called
    # from a compiled frame runs as kiln's own code, eagerly; grad mode is on afterwards.
    lin = kiln.nn.Linear(4, 3)
    kiln.compile(lambda: lin.reset_parameters())()
    assert kiln.is_grad_enabled()
    assert lin.weight.requires_grad and float(lin.weight.abs().max()) <= 0.5


def test_break_inside_a_comprehension_resumes_after_it():
    # On 3.11 a comprehension is a function made while tracing, closing over the frame's cells,
    # called with an iterator: a break inside it (print in a helper) is a break at that call,
    # and the glue makes the function and the iterator again. The frame ran eagerly before
    # (0 graphs; torch.compile: 2, the helper's resume and the code after the comprehension).
    lin = kiln.nn.Linear(3, 3)
    seen = []

    def helper(x):
        seen.append(1)
        print("in helper")
        return x + 1

    def run(x):
        scale = x * 3
        out = [helper(scale).sum() for _ in range(3)]
        return out, lin.weight.detach().clone() * 2

    x = kiln.randn(3)
    kiln.compiler.reset()
    e = kiln.explain(run)(x)
    if sys.version_info < (3, 12):  # (from 3.12 a comprehension is inlined: a break in a loop)
        assert (e.graph_count, e.graph_break_count) == (3, 2), str(e)
    kiln.compiler.reset()
    compiled = kiln.compile(run)
    for _ in range(2):
        seen.clear()
        out, w = compiled(x)
        assert len(seen) == 3 and len(out) == 3
        np.testing.assert_allclose([o.item() for o in out], [(x * 3 + 1).sum().item()] * 3, rtol=1e-6)
        np.testing.assert_array_equal(w.numpy(), lin.weight.detach().numpy() * 2)
    kiln.compiler.reset()


def test_a_closure_writing_a_cell_of_the_frame_is_not_rebuilt_at_a_break():
    # A function made while tracing that writes a variable it shares with the frame cannot be
    # made again by the glue (the resumed frame would not see its writes): no resume there.
    def run(x):
        total = x * 1

        def add(v):
            nonlocal total
            print("adding")
            total = total + v

        add(x)
        return total

    x = kiln.randn(3)
    kiln.compiler.reset()
    np.testing.assert_allclose(kiln.compile(run)(x).numpy(), (x * 2).numpy())
    kiln.compiler.reset()


def test_retain_grad_runs_the_frame_eagerly_as_torch_compile():
    # torch.compile does not resume after retain_grad() ("does not work with AOTDispatcher"):
    # with one op before it, it skips the frame; kiln does the same, so graph counts stay
    # torch's (hooks_retain_grad: 8 graphs where torch has 6), and the grad is retained. With 2
    # or more ops before it, the graph up to the statement compiles and the rest runs eagerly
    # (grad_noncontig: 2 graphs where torch has 3).
    lin = kiln.nn.Linear(4, 3)

    def two_ops(x):
        h = lin(x).tanh()
        h.retain_grad()
        (h * 2).sum().backward()
        return h.grad, (h * 3).sum()

    x = kiln.randn(2, 4)
    kiln.compiler.reset()
    e = kiln.explain(two_ops)(x)
    assert e.graph_count == 1 and ["retain_grad" in str(r) for r in e.break_reasons] == [True], str(e)
    kiln.compiler.reset()
    want = two_ops(x)
    for backend in ("eager", "inductor"):
        got = kiln.compile(two_ops, backend=backend)(x)
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy(), rtol=1e-6)
        np.testing.assert_allclose(got[1].detach().numpy(), want[1].detach().numpy(), rtol=1e-6)
        kiln.compiler.reset()

    def fn(x):
        h = lin(x)
        h.retain_grad()
        (h * 2).sum().backward()
        return h.grad

    x = kiln.randn(2, 4)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    # No graph before the break: torch's explain lists no reason; all_break_reasons has it.
    assert e.graph_count == 0 and not e.break_reasons, str(e)
    assert ["retain_grad" in str(r) for r in e.all_break_reasons] == [True], str(e)
    kiln.compiler.reset()
    np.testing.assert_array_equal(kiln.compile(fn)(x).numpy(), np.full((2, 3), 2.0, np.float32))
    kiln.compiler.reset()


def test_a_subscript_break_resumes_with_inputs_that_carry_history():
    # `h = w * 2; d = w[mask]` breaks at the subscript; the resume function gets h (requires
    # grad, no leaf) and writes into it in place: its fake must not be a leaf either (a leaf
    # that requires grad refuses in-place ops, which made the whole frame run eagerly).
    def fn(w, idx):
        h = w * 2
        d = w[w > 0]
        h[idx] = h[idx] + d.sum()
        return (h * h).sum()

    def run(f):
        w = kiln.from_numpy(np.arange(-3.0, 5.0, dtype=np.float32)).requires_grad_()
        out = f(w, kiln.tensor([1, 4]))
        out.backward()
        return out.detach().numpy(), w.grad.numpy()

    want = run(fn)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):
        got = run(compiled)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)
    kiln.compiler.reset()
    e = kiln.explain(fn)(kiln.randn(8, requires_grad=True), kiln.tensor([1, 4]))
    assert (e.graph_count, len(e.break_reasons)) == (2, 1), str(e)


def test_a_subscript_break_inside_no_grad_keeps_grad_mode():
    # dqn_update: `x[mask]` and `z[mask] = ...` under no_grad broke at the subscript; resuming
    # there lost the block's grad mode and the loss after it did not require grad. Inside a
    # `with` block the subscript and the rest of the frame run eagerly.
    target = kiln.nn.Linear(3, 2)

    def fn(x, w, mask):
        y = (x @ w).gather(1, kiln.zeros(4, 1, dtype=kiln.int64))
        z = kiln.zeros(4)
        with kiln.no_grad():
            sel = x[mask]
            z[mask] = target(sel).max(1).values
        expected = z * 0.9 + 1
        loss = kiln.nn.SmoothL1Loss()(y, expected.unsqueeze(1))
        loss.backward()
        return loss.detach()

    def run(f):
        x = kiln.from_numpy(np.arange(12.0, dtype=np.float32).reshape(4, 3) / 10)
        w = kiln.from_numpy(np.ones((3, 2), dtype=np.float32)).requires_grad_()
        out = f(x, w, kiln.tensor([True, False, True, True]))
        return out.numpy(), w.grad.numpy()

    want = run(fn)
    kiln.compiler.reset()
    compiled = kiln.compile(fn)
    for _ in range(2):
        got = run(compiled)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
        np.testing.assert_allclose(got[1], want[1], rtol=1e-5)


def test_live_views_of_graph_values_are_remade_from_their_bases():
    # A tensor live at a break that views a value an inference graph computes, with the value
    # live too, comes back as a view of it (remade after the call, as AOT autograd regenerates
    # an output aliasing an intermediate): writes through it reach the value, and the frame
    # keeps compiling, where it used to run eagerly.
    def alias(x):
        y = x * 2.0
        row = y[1][1:]           # a view of y, both live after the break
        n = float(np.tanh(y[0].sum().numpy()))  # float() of a traced array: a break
        row.fill_(n)             # must write into y
        return y + 1.0, row

    # A lone view in a training graph (its base not live) is handed on as a graph output, as
    # AOT autograd's unsafe view (it ran the whole frame eagerly; torch.compile makes 2 graphs).
    def train(x):
        s = x.sort(dim=1).values
        med = s[:, 2]
        loss = (s * 2.0).sum() + med.sum()
        g, = kiln.autograd.grad(loss, x, retain_graph=True)
        return med, g, (med * 3.0).sum()

    x = kiln.from_numpy(np.random.default_rng(3).standard_normal((3, 5)).astype("float32"))
    for fn, args, graphs in ((alias, (x,), 2), (train, (x.detach().requires_grad_(),), 2)):
        want = fn(*args)
        kiln.compiler.reset()
        compiled = kiln.compile(fn, backend="eager")
        for _ in range(2):
            got = compiled(*args)
            for w, g in zip(want, got):
                np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(), rtol=1e-5, atol=1e-6)
        kiln.compiler.reset()
        e = kiln.explain(fn)(*args)
        assert (e.graph_count, len(e.break_reasons)) == (graphs, 1), str(e)


def test_views_of_a_training_graph_output_are_remade_from_it():
    # A module output live at a break with a forward hook's `out.detach()` of it and a view of
    # it (the base is an output already, so remaking the views adds no output of the graph's
    # autograd node): the graph before the break compiles, as torch.compile's; the frame ran
    # eagerly. The views stay views of the output, and grads flow through the view.
    def fn(x, w):
        out = x @ w
        d = out.detach()
        row = out[0]
        n = float(np.tanh(0.5))
        print(end="")  # a break (np.tanh of a constant is not: it is traced)
        return out * n, d, row.sum(), d._base is out

    rng = np.random.default_rng(5)
    x = kiln.from_numpy(rng.standard_normal((3, 4)).astype("float32"))
    w0 = rng.standard_normal((4, 2)).astype("float32")
    want_w = kiln.from_numpy(w0).requires_grad_()
    want = fn(x, want_w)
    (want[0].sum() + want[2]).backward()
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):
        w = kiln.from_numpy(w0).requires_grad_()
        got = compiled(x, w)
        (got[0].sum() + got[2]).backward()
        for a, b in zip(want[:3], got[:3]):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert got[3] == want[3]
        np.testing.assert_allclose(w.grad.numpy(), want_w.grad.numpy(), rtol=1e-5)
    kiln.compiler.reset()
    e = kiln.explain(fn)(x, kiln.from_numpy(w0).requires_grad_())
    assert (e.graph_count, len(e.break_reasons)) == (2, 1), str(e)


def test_fstrings_of_tensors_are_formatted_after_the_graph():
    # `f"loss {loss:.4f}"` and `"{:.3f}".format(t)` of tensors are strings made after the graph
    # from its outputs (TorchDynamo's StringFormatVariable): no break, one graph; they used to
    # break (the rest of the frame ran eagerly). `f"{t!r}"` is repr() of a tensor: still a break.
    def fn(x, log):
        y = x * 2.0
        loss = y.sum()
        log.append(f"loss {loss:.4f} of {{y}} {y} {'n'}")
        log.append("{:.3f}|{n}".format(loss, n=y.mean()))
        return y + 1.0, f"{loss:.2f}"

    def with_repr(x):
        y = x + 1.0
        s = f"{y!r}"
        return y * 2.0, s

    x = kiln.from_numpy(np.arange(6, dtype="float32").reshape(2, 3))
    want_log = []
    want = fn(x, want_log)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager", fullgraph=True)
    for _ in range(2):
        log = []
        got = compiled(x, log)
        assert log == want_log and got[1] == want[1]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
    e = kiln.explain(with_repr)(x)  # (a break at the FORMAT_VALUE: the rest runs eagerly)
    assert (e.graph_count, len(e.break_reasons)) == (1, 1), str(e)
    assert kiln.compile(with_repr, backend="eager")(x)[1] == with_repr(x)[1]


def test_global_settings_in_compiled_code_are_breaks():
    # kiln.manual_seed / set_printoptions called in traced code took effect once, at the trace:
    # from the second call on, rand drew other numbers than eager's. They are breaks at the call
    # now; an f-string of a tensor before set_printoptions keeps the options it was made under.
    def fn(x):
        kiln.manual_seed(3)
        a = x + kiln.rand(3)
        s = f"{a}"
        kiln.set_printoptions(precision=2)
        t = f"{a}"
        kiln.set_printoptions(profile="default")
        return a * 2.0, s, t

    x = kiln.ones(3)
    want = fn(x)
    kiln.compiler.reset()
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(3):
        got = compiled(x)
        assert got[1:] == want[1:]
        np.testing.assert_allclose(got[0].numpy(), want[0].numpy())
    e = kiln.explain(fn)(x)
    assert [r.reason.split(" (")[0] for r in e.all_break_reasons] == [
        "kiln.manual_seed()", "kiln.set_printoptions()", "kiln.set_printoptions()"], str(e)


def test_one_hot_with_num_classes_traces_and_without_breaks():
    # one_hot(y, num_classes=k) is one graph, as with torch.compile (its range check read the
    # data of the fake: a break at each call); num_classes=-1 reads the data: a break.
    F = kiln.nn.functional

    def given(y):
        return F.one_hot(y, num_classes=4).float() * 2.0, F.one_hot(y, 5).sum(0)

    def inferred(y):
        z = y * 1
        return F.one_hot(z).float() + 1.0

    y = kiln.from_numpy(np.array([0, 3, 1, 3], dtype="int64"))
    got = kiln.compile(given, backend="eager", fullgraph=True)(y)
    for g, w in zip(got, given(y)):
        np.testing.assert_array_equal(g.numpy(), w.numpy())
    e = kiln.explain(inferred)(y)
    assert (e.graph_count, len(e.break_reasons)) == (2, 1), str(e)
    np.testing.assert_array_equal(kiln.compile(inferred, backend="eager")(y).numpy(), inferred(y).numpy())
    with pytest.raises(RuntimeError, match="smaller than num_classes"):
        F.one_hot(y, 3)  # eager still checks


def test_hook_handle_remove_is_replayed_not_run_at_the_trace():
    # handle.remove() in traced code ran for real at the trace (kiln's own code): the hook was
    # gone before the trace after it, and the graph before the break lost the hook's store into
    # `acts`. It is traced now: its pops are side effects replayed after the graph.
    lin = kiln.nn.Linear(3, 2)
    acts = {}

    def hook(module, inp, out):
        acts["out"] = out.detach()

    def fn(x, handle):
        y = lin(x)
        handle.remove()
        n = float(np.tanh(0.5))
        print(end="")  # a break (np.tanh of a constant is not: it is traced)
        seen = sorted(acts)
        acts.clear()
        return lin(x) * n, seen, len(acts), len(lin._forward_hooks)

    x = kiln.randn(4, 3)
    want = fn(x, lin.register_forward_hook(hook))
    compiled = kiln.compile(fn, backend="eager")
    for _ in range(2):
        kiln.compiler.reset()
        got = compiled(x, lin.register_forward_hook(hook))
        assert got[1:] == want[1:] == (["out"], 0, 0)
        np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy(), rtol=1e-6)


def test_stateless_modules_made_in_compiled_code_trace():
    # `nn.Unfold(...)(x)` in traced code: a stateless kiln module made from constants is called
    # in the graph, as TorchDynamo inlines a new module's __init__ (it was a break); one with
    # parameters, one that leaves the frame, or an attribute store on it is a break.
    nn = kiln.nn

    def stateless(x):
        cols = nn.Unfold(kernel_size=2)(x)
        return nn.Flatten()(nn.ReLU()(cols)) * 2.0

    def leaves(x):
        act = nn.ReLU()
        return act(x) + 1.0, act

    def stateful(x):
        return nn.Linear(3, 2)(x)

    def store(x):
        act = nn.Softmax(dim=0)
        act.dim = 1
        return act(x * 2.0)

    x = kiln.randn(1, 2, 3, 3)
    got = kiln.compile(stateless, backend="eager", fullgraph=True)(x)
    np.testing.assert_allclose(got.numpy(), stateless(x).numpy(), rtol=1e-6)
    y = kiln.randn(2, 3)
    for fn, arg in ((leaves, y), (stateful, y), (store, y)):
        kiln.compiler.reset()
        e = kiln.explain(fn)(arg)
        assert len(e.all_break_reasons) == 1, (fn.__name__, str(e))
    kiln.compiler.reset()
    out, act = kiln.compile(leaves, backend="eager")(y)
    assert isinstance(act, nn.ReLU) and act is not kiln.compile(leaves, backend="eager")(y)[1]
    np.testing.assert_allclose(kiln.compile(store, backend="eager")(y).numpy(), store(y).numpy(), rtol=1e-6)
