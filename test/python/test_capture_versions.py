"""The per-version layer of frame capture (issue 17): every instruction CPython's `dis` lists for
the running interpreter is handled by the tracer or declared a graph break with a reason, the
version-specific instructions trace, and a Python kiln does not know yet runs eagerly."""
import dis
import sys
import warnings

import pytest

import kiln
from kiln.compiler import hook


def real_opnames():
    """The opnames of this interpreter's bytecode: not unused numbers, not the pseudo-instructions
    (3.12+ list them from 256 on: SETUP_FINALLY, JUMP, ...; the compiler replaces them)."""
    return [name for op, name in enumerate(dis.opname) if op < 256 and not name.startswith("<")]


def test_every_opcode_is_handled_or_declared_unsupported():
    support = kiln._C._capture.opcode_support()
    missing = [name for name in real_opnames() if name not in support]
    assert not missing, f"Python {sys.version_info[:2]}: opcodes neither handled nor declared unsupported: {missing}"
    for name, reason in support.items():
        assert reason is None or (isinstance(reason, str) and reason), name


def test_binary_op_numbering_matches_the_tracer():
    # frontend/capture/Bytecode.h: kNbAdd = 0, kNbMultiply = 5, kNbInplaceAdd = 13, and the
    # operator names of BINARY_OP's argument in this order.
    names = [name for name, _symbol in dis._nb_ops]  # noqa: SLF001 - CPython's table
    assert len(names) == 26
    assert (names[0], names[5], names[13]) == ("NB_ADD", "NB_MULTIPLY", "NB_INPLACE_ADD")


def test_an_unhandled_opcode_is_a_graph_break_with_its_reason():
    def fn(x):
        import math  # IMPORT_NAME: declared unsupported

        return x * math.pi

    out = kiln.explain(fn)(kiln.ones(3))
    assert len(out.all_break_reasons) >= 1
    assert any("import" in str(r) for r in out.all_break_reasons), out.all_break_reasons


class Base:
    def scale(self, x):
        return x * 2


class Child(Base):
    def scale(self, x):
        return super().scale(x) + 1  # 3.12+: LOAD_SUPER_ATTR


def test_version_specific_instructions_trace_in_one_graph():
    """Slices (3.12's BINARY_SLICE/STORE_SLICE), inlined comprehensions (PEP 709's
    LOAD_FAST_AND_CLEAR), f-strings (3.13's FORMAT_SIMPLE/FORMAT_WITH_SPEC), super() (3.12's
    LOAD_SUPER_ATTR), keyword calls (3.13's CALL_KW), closures (3.13's SET_FUNCTION_ATTRIBUTE)
    and paired locals (3.13's LOAD_FAST_LOAD_FAST) in one frame, with no break."""
    child = Child()

    def fn(x, y):
        ys = [y, y + 1, y + 2]
        parts = [t * 2 for t in ys[1:]]  # comprehension over a slice
        ys[0:1] = [x]  # STORE_SLICE
        k = 3
        tag = f"{k}-{k!r:>3}"
        add = lambda t, *, d=len(tag): t + d  # noqa: E731 - defaults, closure-free lambda
        z = add(x, d=1.0) + parts[0] - parts[-1]
        w = child.scale(z)
        return w + ys[0], tag

    x, y = kiln.ones(3), kiln.arange(3).float()
    expected = fn(x, y)
    out = kiln.explain(fn)(x, y)
    assert (out.graph_count, len(out.break_reasons)) == (1, 0), out.break_reasons
    got = kiln.compile(fn, backend="eager", fullgraph=True)(x, y)
    assert got[1] == expected[1]
    assert (got[0] - expected[0]).abs().max().item() == 0


def test_unknown_python_warns_once_and_runs_eagerly(monkeypatch):
    """On a Python kiln does not know (faked here), kiln.compile warns once and runs eagerly."""
    monkeypatch.setattr(hook, "capture_supported", lambda: False)
    monkeypatch.setattr(hook, "_warned_unsupported_python", False)
    monkeypatch.setattr(kiln.config, "strict", False)
    calls = []

    def backend(gm, example_inputs):
        calls.append(gm)
        return gm

    def fn(x):
        return x.sin() + 1

    x = kiln.ones(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        f = kiln.compile(fn, backend=backend)
        g = kiln.compile(lambda t: t * 2, backend=backend)
        assert (f(x) - fn(x)).abs().max().item() == 0
        assert (g(x) - x * 2).abs().max().item() == 0
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 1 and "does not support Python" in messages[0], messages
    assert calls == []  # nothing was captured


def test_unknown_python_raises_in_strict_mode(monkeypatch):
    monkeypatch.setattr(hook, "capture_supported", lambda: False)
    monkeypatch.setattr(kiln.config, "strict", True)
    with pytest.raises(kiln.compiler.Unsupported, match="does not support Python"):
        kiln.compile(lambda t: t + 1)
    monkeypatch.setattr(kiln.config, "strict", False)
    with pytest.raises(kiln.compiler.Unsupported, match="does not support Python"):
        kiln.compile(lambda t: t + 1, fullgraph=True)


def test_list_slice_store_and_delete_trace():
    """`xs[a:b] = ...` and `del xs[::2]` on a list made in the frame (3.11 stopped the trace with
    std::bad_cast; 3.12 compiles the store to STORE_SLICE)."""
    def fn(x):
        xs = [x, x + 1, x + 2, x + 3]
        xs[1:3] = [x * 10]
        xs[::2] = [x - 1, x - 2]
        ys = list(xs)
        del ys[::2]
        del xs[:1]
        return xs, ys

    x = kiln.ones(2)
    out = kiln.explain(fn)(x)
    assert (out.graph_count, len(out.break_reasons)) == (1, 0), out.break_reasons
    got, expected = kiln.compile(fn, backend="eager")(x), fn(x)
    assert [t.tolist() for t in got[0]] == [t.tolist() for t in expected[0]]
    assert [t.tolist() for t in got[1]] == [t.tolist() for t in expected[1]]


def test_a_frame_answered_from_the_cache_is_released():
    """3.12+ hand the eval function the frame to clear and pop (FrameLayout.h): a cache hit that
    runs the glue instead must release the frame's code, function and arguments, every call."""
    import gc

    def fn(x, scale):
        return x * scale

    compiled = kiln.compile(fn, backend="eager")
    x, scale = kiln.ones(3), 2.5
    compiled(x, scale)
    compiled(x, scale)  # a cache hit from here on
    gc.collect()
    before = [sys.getrefcount(o) for o in (fn.__code__, x, scale)]
    for _ in range(200):
        compiled(x, scale)
    gc.collect()
    assert [sys.getrefcount(o) for o in (fn.__code__, x, scale)] == before


def test_a_generator_made_while_tracing_is_not_reused_by_the_glue():
    """`[... for p in model.parameters()]`: parameters() runs for real while tracing (kiln's
    own code) and returns a generator, which iterating stops the trace. The break's glue must
    not keep that generator as a constant: from the second call on it came back exhausted and
    the list empty (train_step_sgd on 3.12)."""
    model = kiln.nn.Linear(3, 2)

    def fn(x):
        y = model(x).sum()
        return y, [p.detach() * 2 for p in model.parameters()]

    f = kiln.compile(fn, backend="eager")
    x = kiln.ones(4, 3)
    for _ in range(3):
        y, ps = f(x)
        assert len(ps) == 2
        assert (y - fn(x)[0]).abs().item() == 0


G = 2.0


def _control_flow_mix(x, ys, k=3, *, flag=None):
    out = x
    fs = [lambda t, i=i: t * i for i in range(3)]  # lambdas made in an (inlined, 3.12+) comprehension
    for g in fs:
        out = g(out) + 1
    d = {str(i): x * i for i in range(2)}
    s = {i % 2 for i in range(5)}
    nested = [[a * b for b in range(2)] for a in range(3)]
    i = 0
    while True:
        i += 1
        if i == 2:
            continue
        if i > 4:
            break
        out = out + i
    if (n := len(ys)) > 1 and 0 < k < 5:
        out = out * n
    a, *rest = ys
    out = out + a if flag is None else out - a
    assert k > 0
    try:
        out = out / 2
    except ZeroDivisionError:
        out = out * 0
    with kiln.no_grad():
        z = out * G
    return out + z + sum(rest) + d["1"], len(s), nested[2][1], f"{k:>4}|{k!r}|{G:.2f}", not flag


def test_control_flow_of_each_version_traces_whole():
    """Loops with continue/break, chained comparisons, walrus, star unpacking, try, with, nested
    and closure-making comprehensions: one graph on every version, equal to eager."""
    x = kiln.ones(2, 4)
    ys = [kiln.ones(4) * 2, kiln.ones(4), kiln.ones(4) * 3]
    out = kiln.explain(_control_flow_mix)(x, ys)
    assert (out.graph_count, len(out.break_reasons)) == (1, 0), out.break_reasons
    expected = _control_flow_mix(x, ys)
    got = kiln.compile(_control_flow_mix, backend="eager", fullgraph=True)(x, ys)
    assert (got[0] - expected[0]).abs().max().item() == 0 and got[1:] == expected[1:]
