"""Guards and the cache: what recompiles, the recompile limit, and concurrent callers."""
import threading

import numpy as np
import pytest

from capture_lib import assert_same, catch_warnings_and_logs, lib  # noqa: F401  (lib is a fixture)

FLAG = 1  # a global that a compiled function branches on


def rand(T, *shape, seed=0, dtype="float32"):
    return T.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def compiled_counting(lib, fn):
    backend, graphs = lib.counting_backend()
    return lib.compile(fn, backend=backend), graphs


def test_same_inputs_hit_the_cache(lib):
    compiled, graphs = compiled_counting(lib, lambda x: x.sin() + 1)
    for seed in range(4):  # new values, same guards
        x = rand(lib.T, 3, seed=seed)
        assert_same(compiled(x), x.sin() + 1)
    assert len(graphs) == 1


def test_dtype_change_recompiles(lib):
    def fn(x):
        return x * 2 + 1

    compiled, graphs = compiled_counting(lib, fn)
    x32, x64 = rand(lib.T, 3), rand(lib.T, 3, dtype="float64")
    assert_same(compiled(x32), fn(x32))
    assert len(graphs) == 1
    assert_same(compiled(x64), fn(x64))
    assert len(graphs) == 2
    assert_same(compiled(x32), fn(x32))  # the first entry still serves float32
    assert_same(compiled(x64), fn(x64))
    assert len(graphs) == 2


def test_shape_change_recompiles(lib):
    """A new shape gives a second entry (kiln specializes shapes; torch's second graph is
    its automatic-dynamic one, so only the first change is checked)."""
    def fn(x):
        return x.sum(dim=0) * x.shape[1]

    compiled, graphs = compiled_counting(lib, fn)
    a, b = rand(lib.T, 3, 4), rand(lib.T, 5, 4)
    assert_same(compiled(a), fn(a))
    assert_same(compiled(b), fn(b))
    assert len(graphs) == 2
    assert_same(compiled(a), fn(a))
    assert len(graphs) == 2


@pytest.mark.parametrize("first,second", [(2, 3), ("relu", "tanh"), (True, False), (None, 1.5)])
def test_constant_argument_change_recompiles(lib, first, second):
    T = lib.T

    def fn(x, c):
        if c is None:
            return x - 1
        if isinstance(c, str):
            return T.relu(x) if c == "relu" else T.tanh(x)
        return x * c

    compiled, graphs = compiled_counting(lib, fn)
    x = rand(T, 4)
    assert_same(compiled(x, first), fn(x, first))
    assert_same(compiled(x, second), fn(x, second))
    assert len(graphs) == 2
    assert_same(compiled(x, first), fn(x, first))
    assert len(graphs) == 2


def test_global_change_recompiles(lib):
    global FLAG

    def fn(x):
        return x + 1 if FLAG == 1 else x - 1

    compiled, graphs = compiled_counting(lib, fn)
    x = rand(lib.T, 3)
    try:
        assert_same(compiled(x), x + 1)
        FLAG = 2
        assert_same(compiled(x), x - 1)
        assert len(graphs) == 2
    finally:
        FLAG = 1


def test_requires_grad_change_recompiles(lib):
    def fn(x):
        return x * 3

    compiled, graphs = compiled_counting(lib, fn)
    x = rand(lib.T, 3)
    assert_same(compiled(x), fn(x))
    xg = rand(lib.T, 3).requires_grad_()
    assert_same(compiled(xg), fn(xg))  # requires_grad as eager gives it
    assert len(graphs) == 2


def test_closure_cells_are_guarded(lib):
    def make(scale):
        def fn(x):
            return x * scale
        return fn

    x = rand(lib.T, 3)
    f1, f2 = lib.compile(make(2.0)), lib.compile(make(5.0))  # one code object, two cells
    assert_same(f1(x), x * 2.0)
    assert_same(f2(x), x * 5.0)
    assert_same(f1(x), x * 2.0)


def test_reset_drops_the_cache(lib):
    compiled, graphs = compiled_counting(lib, lambda x: x - 2)
    x = rand(lib.T, 2)
    compiled(x)
    compiled(x)
    assert len(graphs) == 1
    lib.reset()
    assert_same(compiled(x), x - 2)
    assert len(graphs) == 2


def test_recompile_limit(lib):
    """Past the limit the frame runs eagerly (right answers, no new graphs) and one warning
    says so, however many calls miss afterwards."""
    T = lib.T

    def fn(x):
        return (x * 2).sum(dim=-1)

    dtypes = ["float32", "float64", "float16", "int32", "int64", "int16"]
    inputs = [T.from_numpy(np.arange(6).reshape(2, 3).astype(d)) for d in dtypes]
    with lib.recompile_limit(2), catch_warnings_and_logs() as messages:
        compiled, graphs = compiled_counting(lib, fn)
        for _ in range(3):
            for x in inputs:
                assert_same(compiled(x), fn(x))
    assert len(graphs) == 2
    hits = [m for m in messages if "recompile" in m.lower() and "limit" in m.lower()]
    assert len(hits) == 1, messages
    assert "dtype" in hits[0].lower(), hits[0]  # the warning names the failing guard


def test_recompile_limit_is_per_code_object(lib):
    """Another function keeps compiling after one function hit the limit."""
    T = lib.T

    def f(x):
        return x + 1

    def g(x):
        return x - 1

    with lib.recompile_limit(1), catch_warnings_and_logs():
        cf, graphs_f = compiled_counting(lib, f)
        cg, graphs_g = compiled_counting(lib, g)
        a, b = rand(T, 2), rand(T, 2, dtype="float64")
        for x in (a, b, a, b):
            assert_same(cf(x), f(x))
        assert_same(cg(a), g(a))
    assert len(graphs_f) == 1
    assert len(graphs_g) == 1


def test_two_threads_share_one_compiled_function(lib):
    T = lib.T

    def fn(x, k):
        return (x * k).relu().sum(dim=0) + x.shape[0]

    compiled = lib.compile(fn)
    inputs = {
        0: [(rand(T, 3, 4, seed=s), 2.0) for s in range(3)],
        1: [(rand(T, 5, 2, seed=s, dtype="float64"), 3.0) for s in range(3)],
    }
    expected = {t: [fn(*a) for a in args] for t, args in inputs.items()}
    errors = []
    barrier = threading.Barrier(2)

    def worker(t):
        try:
            barrier.wait()
            for _ in range(30):
                for args, exp in zip(inputs[t], expected[t]):
                    assert_same(compiled(*args), exp, where=f"thread{t}")
        except BaseException as ex:  # reported by the main thread
            errors.append(ex)

    threads = [threading.Thread(target=worker, args=(t,)) for t in inputs]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors


def test_grad_mode_at_call_is_guarded(lib):
    T = lib.T

    def fn(x, w):
        return x * w

    compiled, graphs = compiled_counting(lib, fn)
    x, w = rand(T, 3), rand(T, 3, seed=1).requires_grad_()
    assert_same(compiled(x, w), fn(x, w))
    with T.no_grad():
        assert_same(compiled(x, w), fn(x, w))
    assert len(graphs) == 2


def test_explain_counts_ops_and_guards(lib):
    """op_count counts call_function nodes (written with library functions and operators,
    since torch's graphs keep Tensor methods as call_method nodes, which it does not count)."""
    T = lib.T

    def fn(x):
        return T.sin(x) + T.cos(x) * 2

    e = lib.explain(fn, rand(T, 3))
    assert (e.graph_count, len(e.break_reasons), len(e.graphs), e.op_count) == (1, 0, 1, 4)
    guards = e.guards if lib.is_kiln else e.out_guards
    texts = [str(g) for g in guards] if isinstance(guards, (list, tuple, set)) else [str(guards)]
    assert any("L['x']" in t for t in texts), texts


def cache_entry_checks(lib, fn):
    """The cache entries of fn's code, most recently used first, each as a function
    args -> whether its guards pass (kiln: _capture.cache_entries and GuardTree.check_frame,
    the protocol of the frame hook; torch: its debug view of the same cache)."""
    if lib.is_kiln:
        from kiln._C import _capture

        return [lambda args, g=g: g.check_frame(fn, args) is None for g, _ in _capture.cache_entries(fn.__code__)]
    from torch._dynamo.eval_frame import _debug_get_cache_entry_list

    names = fn.__code__.co_varnames[:fn.__code__.co_argcount]
    return [lambda args, e=e: e.guard_manager.check(dict(zip(names, args)))
            for e in _debug_get_cache_entry_list(fn.__code__)]


def test_cache_entries_most_recent_first(lib):
    def fn(x):
        return x * 2

    compiled = lib.compile(fn)
    a, b = (rand(lib.T, 3),), (rand(lib.T, 3, dtype="float64"),)
    compiled(*a)
    compiled(*b)
    assert [c(b) for c in cache_entry_checks(lib, fn)] == [True, False]
    assert [c(a) for c in cache_entry_checks(lib, fn)] == [False, True]
    compiled(*a)  # a hit moves its entry to the front
    assert [c(a) for c in cache_entry_checks(lib, fn)] == [True, False]
    lib.reset()
    assert cache_entry_checks(lib, fn) == []
