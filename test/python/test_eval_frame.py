"""The PEP 523 frame hook (kiln._C._capture): the callback protocol, cache hits running the glue
instead of the frame, SKIP, CompiledFunction as a wrapper and a method, threads, reset."""
import asyncio
import functools
import sys
import threading

import pytest

import kiln
from kiln._C import _capture as cap


@pytest.fixture(autouse=True)
def clean_state():
    cap.reset()
    yield
    cap.reset()
    assert cap.set_callback(None) is None
    assert not cap.hook_installed()


def int_guards(name="L['x']", index=0):
    g = cap.GuardTree()
    g.local(index, name).check_type(int)
    return g


def test_hit_runs_glue_not_frame():
    ran, calls = [], []

    def f(x):
        ran.append(x)
        return x + 1

    def cb(info):
        calls.append(info)
        return int_guards(), lambda x: ("glue", x)

    cf = cap.CompiledFunction(f, cb)
    assert cf(1) == ("glue", 1)
    assert cf(2) == ("glue", 2)
    assert ran == [] and len(calls) == 1
    info = calls[0]
    assert info.code is f.__code__ and info.func is f and info.args == (1,)
    assert info.globals is globals() and info.builtins["len"] is len
    assert info.is_root and info.num_entries == 0 and info.failures == []
    assert repr(info).startswith("<FrameInfo <code object f")

    assert cf("s") == ("glue", "s")  # miss: a second entry
    assert len(calls) == 2
    assert calls[1].num_entries == 1 and calls[1].failures == ["type(L['x']) is int (got str)"]


def test_entries_most_recently_used_first():
    def f(x):
        return x

    def cb(info):
        g = cap.GuardTree()
        g.local(0, "L['x']").check_type(type(info.args[0]))
        return g, lambda x: type(x).__name__

    cf = cap.CompiledFunction(f, cb)
    assert cf(1) == "int" and cf("a") == "str"
    def entries():
        return [str(g) for g, _ in cap.cache_entries(f.__code__)]

    assert entries() == ["type(L['x']) is str", "type(L['x']) is int"]
    assert cf(2) == "int"
    assert entries() == ["type(L['x']) is int", "type(L['x']) is str"]


def test_none_runs_frame_every_time():
    ran, calls = [], []

    def f(x):
        ran.append(x)
        return x * 2

    def cb(info):
        calls.append(info.code)
        return None

    cf = cap.CompiledFunction(f, cb)
    assert cf(3) == 6 and cf(4) == 8
    assert ran == [3, 4] and calls == [f.__code__, f.__code__]


def test_skip_never_calls_callback_again():
    calls = []

    def f(x):
        return x + 1

    def cb(info):
        calls.append(info.code)
        return cap.SKIP

    cf = cap.CompiledFunction(f, cb)
    assert [cf(i) for i in range(5)] == [1, 2, 3, 4, 5]
    assert calls == [f.__code__]
    assert repr(cap.SKIP) == "SKIP"


def test_skip_code_and_reset():
    calls = []

    def f(x):
        return x

    cap.skip_code(f.__code__)
    cf = cap.CompiledFunction(f, lambda info: calls.append(info) or (int_guards(), lambda x: -x))
    assert cf(1) == 1 and calls == []
    cap.reset()
    assert cf(1) == -1 and len(calls) == 1 and len(cap.cache_entries(f.__code__)) == 1
    cap.reset()
    assert cap.cache_entries(f.__code__) == []
    assert cf(2) == -2 and len(calls) == 2


def test_callback_sees_nested_frames_not_root():
    seen = []

    def inner(y):
        return y + 1

    def f(x):
        return inner(x) * 2

    def cb(info):
        seen.append((info.code.co_name, info.is_root, info.args))
        return None

    assert cap.CompiledFunction(f, cb)(1) == 4
    assert seen == [("f", True, (1,)), ("inner", False, (1,))]


def test_callback_exception_propagates_and_state_is_restored():
    ran = []

    def f(x):
        ran.append(x)

    def cb(info):
        raise ValueError("from the callback")

    cf = cap.CompiledFunction(f, cb)
    with pytest.raises(ValueError, match="from the callback"):
        cf(1)
    assert ran == []
    assert cap.set_callback(None) is None and not cap.hook_installed()


def test_glue_exception_propagates():
    def f(x):
        return x

    def glue(x):
        raise KeyError("from the glue")

    cf = cap.CompiledFunction(f, lambda info: (int_guards(), glue))
    for _ in range(2):
        with pytest.raises(KeyError, match="from the glue"):
            cf(1)
    assert len(cap.cache_entries(f.__code__)) == 1


def test_frame_exception_propagates_with_traceback():
    def f(x):
        return 1 // x

    cf = cap.CompiledFunction(f, lambda info: None)
    with pytest.raises(ZeroDivisionError) as e:
        cf(0)
    assert e.traceback[-1].name == "f"


def test_bad_answers_raise():
    def f(x):
        return x

    for answer, kind in [(1, TypeError), ((1, 2), TypeError), ((int_guards(), 3), TypeError)]:
        with pytest.raises(kind):
            cap.CompiledFunction(f, lambda info, a=answer: a)(1)
    with pytest.raises(ValueError, match="local slots"):
        cap.CompiledFunction(f, lambda info: (int_guards("L['z']", 5), f))(1)
    with pytest.raises(TypeError):
        cap.CompiledFunction(1, None)


def gen(n):
    yield from range(n)


async def coro(n):
    return n


def test_generators_and_coroutines_left_alone():
    seen = []

    def f(n):
        return list(gen(n)), asyncio.run(coro(n))

    def cb(info):
        seen.append(info.code)
        return cap.SKIP if info.code is not f.__code__ else None

    assert cap.CompiledFunction(f, cb)(3) == ([0, 1, 2], 3)
    assert f.__code__ in seen
    assert gen.__code__ not in seen and coro.__code__ not in seen


def test_glue_gets_bound_argument_slots():
    got = []

    def f(a, b=2, *args, k, m=5, **kw):
        return "frame"

    def glue(*slots):
        got.append(slots)
        return "glue"

    cf = cap.CompiledFunction(f, lambda info: (cap.GuardTree(), glue))
    assert cf(1, k=4, z=9) == "glue"
    assert cf(1, 2, 3, k=4, m=6) == "glue"
    assert got == [(1, 2, 4, 5, (), {"z": 9}), (1, 2, 4, 6, (3,), {})]


def test_cell_and_closure_arguments():
    def make(y):
        def f(x):
            return (lambda: x + y)()  # x is a cell variable, y a free one

        return f

    def cb(info):
        g = cap.GuardTree()
        g.closure_cell(0, "L['y']").check_const(info.func.__closure__[0].cell_contents)
        return g, lambda x: ("glue", x)

    f5, f6 = make(5), make(6)
    assert cap.CompiledFunction(f5, cb)(1) == ("glue", 1)
    calls = []
    assert cap.CompiledFunction(f6, lambda i: calls.append(i) or cb(i))(1) == ("glue", 1)
    assert calls[0].failures == ["L['y'] == 5 (got 6)"]


def test_nested_compiled_functions_and_disable():
    seen = []

    def helper():
        return 0

    def inner(x):
        return helper() + x

    def outer(x):
        a = c_inner(x)
        b = c_off(x)
        return a + b + helper()

    def quiet(x):
        return helper() + x

    c_inner = cap.CompiledFunction(inner, lambda info: seen.append(("cb2", info.code.co_name)))
    c_off = cap.CompiledFunction(quiet, None)
    c_outer = cap.CompiledFunction(outer, lambda info: seen.append(("cb1", info.code.co_name)))
    assert c_outer(1) == 2
    assert seen == [("cb1", "outer"), ("cb2", "inner"), ("cb2", "helper"), ("cb1", "helper")]
    assert "capture disabled" in repr(c_off)


def test_method_decorator_and_wrapper_attributes():
    calls = []

    def cb(info):
        calls.append(info.args)
        return None

    class A:
        def __init__(self, k):
            self.k = k

        def scale(self, x):
            """Scales x."""
            return self.k * x

        scale = cap.CompiledFunction(scale, cb)

    a = A(3)
    assert a.scale(2) == 6 and A.scale(a, 4) == 12
    assert calls == [(a, 2), (a, 4)]
    s = A.__dict__["scale"]
    assert s.__name__ == "scale" and s.__qualname__.endswith("A.scale") and s.__doc__ == "Scales x."
    assert s.__wrapped__ is s._fn and s._callback is cb
    assert "<CompiledFunction <function" in repr(s)
    s.extra = 1
    assert s.__dict__["extra"] == 1
    wrapped = functools.update_wrapper(cap.CompiledFunction(lambda: 1, None), A.scale)
    assert wrapped.__name__ == "scale"


def test_keyword_arguments_pass_through():
    def f(x, *, y):
        return x - y

    assert cap.CompiledFunction(f, lambda info: None)(5, y=2) == 3


def test_hook_installed_only_while_a_thread_has_a_callback():
    inside = []

    def f():
        inside.append(cap.hook_installed())

    assert not cap.hook_installed()
    cap.CompiledFunction(f, lambda info: None)()
    cap.CompiledFunction(f, None)()
    assert inside == [True, False] and not cap.hook_installed()
    cb = lambda info: None  # noqa: E731
    assert cap.set_callback(cb) is None and cap.hook_installed()
    assert cap.set_callback(None) is cb and not cap.hook_installed()

    started, release = threading.Event(), threading.Event()

    def other():
        cap.set_callback(cb)
        started.set()
        release.wait()
        cap.set_callback(None)

    t = threading.Thread(target=other)
    t.start()
    started.wait()
    assert cap.hook_installed()  # the other thread's callback keeps it installed
    release.set()
    t.join()
    assert not cap.hook_installed()


def test_two_threads_one_with_one_without_callback():
    counts = {"frame": 0}
    seen_threads = set()

    def f(x):
        counts["frame"] += 1
        return x

    def cb(info):
        seen_threads.add(threading.get_ident())
        return int_guards(), lambda x: -x

    compiled, plain = cap.CompiledFunction(f, cb), cap.CompiledFunction(f, None)
    results = {}

    def run(fn, key):
        results[key] = [fn(i) for i in range(1, 3001)]

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=run, args=a) for a in [(compiled, "c"), (plain, "p")]]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old)
    assert results["c"] == [-i for i in range(1, 3001)]
    assert results["p"] == list(range(1, 3001))
    assert counts["frame"] == 3000 and len(seen_threads) == 1
    assert not cap.hook_installed()


def test_no_reference_leaks_on_hit_and_miss():
    o = object()

    def f(x):
        return None

    g = cap.GuardTree()
    g.local(0, "L['x']").check_id(o)
    hit = cap.CompiledFunction(f, lambda info: (g, lambda x: None))
    miss = cap.CompiledFunction(lambda x: None, lambda info: None)
    hit(o)
    before = sys.getrefcount(o)
    for _ in range(1000):
        hit(o)
        miss(o)
    assert sys.getrefcount(o) == before


def test_tensor_guards_through_the_hook():
    def f(x):
        return x + 1

    def cb(info):
        g = cap.GuardTree()
        g.local(0, "L['x']").check_tensor(info.args[0])
        return g, lambda x: "hit"

    cf = cap.CompiledFunction(f, cb)
    assert cf(kiln.ones(2)) == "hit" and cf(kiln.zeros(2)) == "hit"
    assert len(cap.cache_entries(f.__code__)) == 1
    cf(kiln.ones(3))
    assert len(cap.cache_entries(f.__code__)) == 2


def test_set_callback_directly_and_class_bodies_left_alone():
    seen = []

    def f(x):
        class Local:
            y = x

        return Local.y

    def cb(info):
        seen.append((info.code.co_name, info.is_root))
        return None

    with pytest.raises(TypeError):
        cap.set_callback(3)
    assert cap.set_callback(cb) is None
    try:
        assert f(2) == 2
    finally:
        assert cap.set_callback(None) is cb
    assert seen == [("f", False)]  # the class body (a frame with a locals dict) is not offered


def test_frame_info_for_a_call():
    def f(a, *rest, k=1):
        return a

    info = cap.FrameInfo(f, (1, 2, (3,)))
    assert info.code is f.__code__ and info.func is f and info.args == (1, 2, (3,))
    assert info.globals is globals() and info.is_root and info.num_entries == 0 and info.failures == []
    with pytest.raises(ValueError):
        cap.FrameInfo(f, (1,))
    with pytest.raises(TypeError):
        cap.FrameInfo(len, ())


# From 3.12 a hit runs the glue in the frame CPython pushed for the function (FrameLayout.h:
# reuseForGlue), growing it on the thread's data stack where the glue needs more room.

def _roomy_glue(x):
    a, b, c, d, e = x, x + 1, x + 2, x + 3, x + 4  # more locals and stack than f's frame
    return [a, b, c, d, e, sum((a, b, c, d, e))]


def test_glue_in_the_frame_at_every_data_stack_depth():
    """Called from every recursion depth up to a few data-stack chunks, the function's frame
    lands at a chunk's end somewhere, where it cannot grow: the glue is called instead."""
    def f(x):
        return x

    cf = cap.CompiledFunction(f, lambda info: (int_guards(), _roomy_glue))

    def down(n, x):
        return cf(x) if n == 0 else down(n - 1, x)

    o = 7
    before = sys.getrefcount(o)
    for depth in range(0, 700, 3):
        assert down(depth, o) == [7, 8, 9, 10, 11, 45]
    assert sys.getrefcount(o) == before
    assert down(900, 1) == [1, 2, 3, 4, 5, 15]  # the data stack is still consistent


def test_reset_while_the_glue_runs_and_its_frame_outlives_it():
    """reset() drops the entry whose glue is running (the frame holds the glue), and a frame
    object the glue made survives its return."""
    def f(x):
        return x

    def glue(x):
        cap.reset()
        frame = sys._getframe()
        return frame, x * 2

    cf = cap.CompiledFunction(f, lambda info: (int_guards(), glue))
    for i in range(3):
        frame, doubled = cf(i)
        assert doubled == 2 * i and frame.f_code is glue.__code__
        assert cap.cache_entries(f.__code__) == []
