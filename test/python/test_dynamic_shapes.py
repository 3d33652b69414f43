"""Dynamic shapes in kiln.compile (docs/dynamic-shapes.md): dims that change between calls (or
all dims with dynamic=True, or marked ones) become size symbols, one compiled program serves
every size the guards admit, and whatever is not the same graph over the symbols compiles for
static sizes instead. Every compiled result is compared to eager kiln at each size."""
import os
import shutil

import numpy as np
import pytest

import kiln
from kiln.compiler import dynamic
from kiln.compiler.backends import lookup_backend

nn = kiln.nn

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")

RNG = np.random.default_rng(0)


def _t(*shape):
    return kiln.from_numpy(RNG.standard_normal(shape).astype(np.float32))


@pytest.fixture(autouse=True)
def fresh(tmp_path_factory, monkeypatch):
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path_factory.getbasetemp() / "dyn-cache"))
    kiln.compiler.reset()
    yield
    kiln.compiler.reset()


def _counting():
    """The inductor backend, counting its compiles and the ones over size symbols."""
    inductor = lookup_backend("inductor")
    counts = {"compiles": 0, "dynamic": 0, "symbols": []}

    def backend(gm, example_inputs, **kwargs):
        compiled = inductor(gm, example_inputs, **kwargs)  # (a failed try is not counted)
        counts["compiles"] += 1
        traces = getattr(gm, "kiln_dynamic", None)
        counts["dynamic"] += traces is not None
        counts["symbols"].append(traces.describe() if traces is not None else None)
        return compiled

    backend.supports_dynamic_shapes = True
    return backend, counts


def _check(fn, calls, dynamic_flag=None, rtol=1e-4, atol=1e-5):
    """Runs fn compiled over `calls` (tuples of arguments), each result against eager kiln;
    returns the compile counts."""
    backend, counts = _counting()
    compiled = kiln.compile(fn, backend=backend, dynamic=dynamic_flag)
    for args in calls:
        want, got = fn(*args), compiled(*args)
        want = want if isinstance(want, tuple) else (want,)
        got = got if isinstance(got, tuple) else (got,)
        assert len(want) == len(got)
        for w, g in zip(want, got):
            if isinstance(w, kiln.Tensor):
                assert tuple(g.shape) == tuple(w.shape)
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol)
            else:
                assert g == w
    return counts


def test_automatic_dynamic_batch_compiles_twice(capsys):
    # The conformance program dynamic_batch: the batch changes at the second call, which
    # recompiles with it symbolic; the later sizes run that graph.
    w = _t(32, 16)

    def fn(x):
        return kiln.softmax(x @ w, dim=-1).sum(dim=0)

    kiln.set_logs(recompiles=True)
    try:
        counts = _check(fn, [(_t(n, 32),) for n in (4, 8, 16, 33, 100)])
    finally:
        kiln.set_logs()
    assert counts["symbols"] == [None, "x: f32[s0, 32]"]
    assert "recompiled over size symbols: x: f32[s0, 32]" in capsys.readouterr().err


def test_dynamic_false_compiles_each_size():
    w = _t(32, 16)
    counts = _check(lambda x: (x @ w).relu(), [(_t(n, 32),) for n in (4, 8, 16)], dynamic_flag=False)
    assert counts["symbols"] == [None, None, None]


def test_dynamic_true_views_reductions_and_user_sizes():
    # One graph from the first call: reshape by the sizes the code reads (b, s), a head split,
    # transpose, bmm, softmax, layer norm, var, cat and broadcasting, all over s0 (and a
    # static feature dim).
    ln = _t(16)

    def fn(x, mask):
        b, s, d = x.shape
        h = kiln.nn.functional.layer_norm(x, [d], ln)
        q = h.reshape(b, s, 4, d // 4).transpose(1, 2)
        a = kiln.softmax((q @ q.transpose(-2, -1)).masked_fill(mask, float("-inf")), dim=-1) @ q
        y = a.transpose(1, 2).reshape(b, s, d)
        v = y.var(dim=-1, keepdim=True)
        return kiln.cat([y * v, x[:, :1, :].expand(b, s, d)], dim=-1)

    def call(s):
        return _t(2, s, 16), kiln.from_numpy(np.triu(np.ones((s, s), dtype=bool), 1))

    counts = _check(fn, [call(s) for s in (8, 9, 13, 30)], dynamic_flag=True, atol=1e-4)
    # The feature dim d is pinned by the layer norm's weight (a trace at another d fails), so
    # it is specialized; batch and sequence stay symbolic (the mask shares the sequence's).
    assert counts["symbols"] == ["x: f32[s0, s1, 16]; mask: b8[s1, s1]"]


def test_mark_dynamic_and_guards():
    def fn(x):
        return (x * 2).sum(dim=1)

    backend, counts = _counting()
    compiled = kiln.compile(fn, backend=backend)
    x = _t(5, 7)
    kiln.compiler.mark_dynamic(x, 0)
    compiled(x)
    for n in (3, 64):
        np.testing.assert_allclose(compiled(_t(n, 7)).numpy().shape, (n,))
    assert counts["symbols"] == ["x: f32[s0, 7]"]
    # A changed static dim recompiles (and becomes symbolic: automatic dynamic).
    compiled(_t(5, 9))
    assert counts["compiles"] == 2
    with pytest.raises(IndexError):
        kiln.compiler.mark_dynamic(x, 2)


def test_sizes_zero_and_one_are_specialized():
    counts = _check(lambda x: x.exp() + 1, [(_t(1, 4),), (_t(3, 4),), (_t(6, 4),), (_t(1, 4),)],
                    dynamic_flag=True)
    # The size-1 dim is static in the first graph; the size-3 call compiles over both dims
    # (distinct sizes: two symbols); size 6 reuses it, size 1 the first graph.
    assert counts["symbols"] == ["x: f32[1, s0]", "x: f32[s0, s1]"]


def test_duck_sizing_guards_equal_sizes():
    def fn(x, y):
        return x @ y.transpose(0, 1)

    # x and y share s0 at the first call (both 4 rows); a call where they differ fails the
    # guard and compiles again.
    counts = _check(fn, [(_t(4, 8), _t(4, 8)), (_t(6, 8), _t(6, 8)), (_t(5, 8), _t(7, 8))],
                    dynamic_flag=True)
    assert counts["compiles"] == 2


def test_size_dependent_branch_compiles_static():
    # The graph differs between the probes (the branch), so each size compiles statically.
    def fn(x):
        if x.shape[0] > 100:
            return x * 2
        return x * 3

    counts = _check(fn, [(_t(4, 3),), (_t(200, 3),), (_t(5, 3),)], dynamic_flag=True)
    # Dim 0 is specialized (each size compiles), dim 1 stays symbolic.
    assert counts["symbols"] == ["x: f32[4, s0]", "x: f32[200, s0]", "x: f32[5, s0]"]


def test_size_returned_as_python_value_is_computed_from_the_inputs():
    # A size (or an int computed from sizes) returned as a Python value is read from the inputs
    # at each call, as torch.compile returns a SymInt: one graph over the symbols, where each
    # call used to recompile (until the recompile limit) because the traced value was baked in.
    def fn(x):
        n, d = x.shape
        return x + 1, x.shape[0] * 2, {"n": n, "k": [-(n - d) // 3 % 5, abs(d - n)]}, x.shape

    counts = _check(fn, [(_t(4, 3),), (_t(6, 3),), (_t(9, 2),)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, s1]"]
    # Automatic dynamic: the second size recompiles over the symbol, no later size compiles.
    counts = _check(lambda x: (x.sum(), x.shape[0]), [(_t(n, 3),) for n in (4, 5, 6, 7, 8, 4)])
    assert counts["symbols"] == [None, "x: f32[s0, 3]"]


def test_size_returned_as_a_float_compiles_static():
    # A float computed from a size has no integer expression: each size compiles statically.
    counts = _check(lambda x: (x + 1, x.shape[0] / 2), [(_t(4, 3),), (_t(6, 3),)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[4, s0]", "x: f32[6, s0]"]


def test_mean_over_symbolic_dim():
    # mean divides by the symbolic count: the fill value of a prims.full that is an integer
    # polynomial of the sizes at every probe, written as its expression ("s0") and converted
    # at run time, so one graph serves every size.
    counts = _check(lambda x: x.mean(dim=0), [(_t(n, 5),) for n in (4, 6, 9)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, s1]"]
    counts = _check(lambda x: x.mean(), [(_t(n, 5),) for n in (4, 6, 9, 2000)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, s1]"]


def test_fill_value_fitted_as_size_expression():
    points = [(2,), (3,), (4096,), (4095,), (5,), (1366,)]
    texts = [f"%full = call_function prims.full([], {10.0 * p[0]!r}, dtype=f32) : f32[]\n" for p in points]
    assert dynamic.generalize(texts, points, ["s0"]) == \
        '%full = call_function prims.full([], "10*s0", dtype=f32) : f32[]\n'
    # A fraction of a size (1/n) is no polynomial with integer coefficients: not generalized.
    texts = [f"%full = call_function prims.full([], {1.0 / p[0]!r}, dtype=f32) : f32[]\n" for p in points]
    with pytest.raises(dynamic.DynamicUnsupported):
        dynamic.generalize(texts, points, ["s0"])


def test_guard_range_recompiles_beyond_max():
    backend, counts = _counting()
    compiled = kiln.compile(lambda x: x + 1, backend=backend, dynamic=True)
    compiled(_t(3))
    big = dynamic.MIN_MAX_SIZE + 1
    assert tuple(compiled(_t(big)).shape) == (big,)
    assert counts["compiles"] == 2


def test_fitter():
    points = [(8,), (2,), (4096,), (3,), (4095,), (5,), (1366,)]
    f = dynamic.Fitter(points, ["s0"])
    assert f.fit([3 * p[0] * p[0] - 1 for p in points]) == "-1 + 3*s0*s0"
    assert f.fit([min(p[0], 64) for p in points]) is None  # a clamp is not a polynomial
    assert f.fit([p[0] // 2 for p in points]) is None
    two = dynamic.Fitter([(8, 5), (2, 3), (9, 11), (4, 7), (3, 2), (6, 13), (12, 4), (10, 10)], ["s0", "s1"])
    pts = two.points
    assert two.fit([4 * a * b + a for a, b in pts]) == "s0 + 4*s0*s1"


def test_slices_with_constant_bounds_stay_right():
    # x[:6] on a symbolic dim is min(s0, 6) rows and x[2:] is s0 - 2: the clamp is not one
    # polynomial over the probes, so that dim is specialized; the rest stays symbolic.
    counts = _check(lambda x: (x[:6] * 2, x[2:] + 1), [(_t(n, 3),) for n in (4, 8, 10, 5)], dynamic_flag=True)
    assert counts["symbols"] == [f"x: f32[{n}, s0]" for n in (4, 8, 10, 5)]


def test_symbolic_strided_views_feed_gemms():
    # The projections read reshapes and head transposes of symbolic sizes as strided views
    # (no copies): the program over s0 has as many kernels as the static one.
    from kiln.compiler import inductor

    w = _t(16, 48)

    def fn(x):
        q, k, v = (x.reshape(-1, 16) @ w).reshape(x.shape[0], 3, 4, 4).permute(1, 2, 0, 3).unbind(0)
        return kiln.softmax(q @ k.transpose(-2, -1), dim=-1) @ v

    programs = []
    schedule = inductor._codegen.schedule

    def spy(text):
        programs.append(schedule(text)[0])
        return schedule(text)

    inductor._codegen.schedule, saved = spy, schedule
    try:
        _check(fn, [(_t(n, 16),) for n in (5, 9, 12)])
        kiln.compiler.reset()
        _check(fn, [(_t(12, 16),)], dynamic_flag=False)
    finally:
        inductor._codegen.schedule = saved
    symbolic, static = programs[1], programs[-1]
    assert "s0" in symbolic and symbolic.count("kernel @") == static.count("kernel @")
    assert symbolic.count(" view(") == static.count(" view(")


def test_slice_start_from_a_size_is_fitted():
    # The last two rows: the slice's start (s0 - 2) is an argument lowering reads; it differs
    # at the probes while every size is constant, and is fitted as a size expression (the
    # traced call's start kept would read the wrong rows at other sizes): one graph.
    counts = _check(lambda x: x[x.shape[0] - 2:] * 2, [(_t(n, 3),) for n in (4, 8, 6)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, s1]"]


def test_size_argument_positions():
    line = "  %slice = call_function prims.slice(%mm, [0, 0], [1, 32], [1, 1]) : f32[1, 32]"
    starts, limits = line.index("[0, 0]") + 1, line.index("[1, 32]") + 1
    assert not dynamic._size_argument(line, starts) and dynamic._size_argument(line, limits)
    iota = "  %i = call_function prims.iota(8, start=2, step=1) : i64[s0]"
    assert dynamic._size_argument(iota, iota.index("8"))
    assert not dynamic._size_argument(iota, iota.index("2"))


def test_size_equality_branch_specializes():
    # `x.shape[0] == 10` holds at no probe point, so the probes alone would see one graph (x * 3)
    # and run it at size 10 too; the comparison on the size (a SizeInt) specializes dim 0.
    def fn(x):
        b, n = x.shape
        if b == 10:
            return x * 2
        return x * 3

    counts = _check(fn, [(_t(k, 3),) for k in (4, 10, 6)], dynamic_flag=True)
    assert counts["symbols"] == [f"x: f32[{n}, s0]" for n in (4, 10, 6)]


def test_size_int_records_comparisons():
    dynamic.begin_trace()
    s = dynamic.SizeInt(8, [0])
    t = s * 2 + dynamic.SizeInt(3, [1]) - 1
    assert isinstance(t, dynamic.SizeInt) and t == 18 and t.symbols == {0, 1}
    assert dynamic.compared_symbols() == {0, 1}
    dynamic.begin_trace()
    assert [s // 3, s % 3, -s] == [2, 2, -8] and dynamic.compared_symbols() == {0}


def test_symbolic_guards_text_and_failures(capsys):
    backend, counts = _counting()
    compiled = kiln.compile(lambda x, y: x + y, backend=backend, dynamic=True)
    kiln.set_logs(guards=True, recompiles=True)
    try:
        compiled(_t(4, 3), _t(4, 3))
        compiled(_t(6, 3), _t(6, 3))          # same graph
        compiled(_t(6, 3), _t(6, 3).transpose(0, 1).contiguous().transpose(0, 1))  # not contiguous
        compiled(_t(5, 3), _t(7, 3)[:5])     # a view, contiguous: passes
    finally:
        kiln.set_logs()
    err = capsys.readouterr().err
    assert "check_tensor(L['x'], Tensor, float32, device=cpu, size=[s0, s1], contiguous, 2 <= s <= 4096" in err
    assert "L['y'] is contiguous (got stride [1, 6])" in err
    assert counts["compiles"] == 2


def test_embedding_gather_index_select_over_symbols():
    # Token embedding at changing batch and sequence lengths, a gather over a log_softmax of
    # symbolic rows (cross entropy's), an index_select of symbolic rows; an index out of range
    # still raises as eager does.
    weight = _t(50, 8)

    def fn(tokens, logits, target):
        e = kiln.nn.functional.embedding(tokens, weight)
        lp = kiln.log_softmax(logits, dim=-1).gather(1, target.unsqueeze(1))
        return e.sum(dim=1), -lp.sum(), logits.index_select(0, target % 3)

    def call(b, s):
        tokens = kiln.from_numpy(RNG.integers(0, 50, (b, s)))
        target = kiln.from_numpy(RNG.integers(0, 10, (b,)))
        return tokens, _t(b, 10), target

    counts = _check(fn, [call(3, 5), call(4, 7), call(6, 9), call(5, 8)])
    assert counts["symbols"][-1] is not None and counts["compiles"] == 2
    tokens, logits, target = call(5, 8)
    tokens[0, 0] = 50
    backend, _ = _counting()
    compiled = kiln.compile(fn, backend=backend)
    with pytest.raises(IndexError):
        compiled(tokens, logits, target)


def test_causal_mask_buffer_bounds_the_range():
    # nanoGPT's pattern: a block_size x block_size causal mask buffer sliced to the sequence
    # length. The frame does not trace beyond block_size (masked_fill's shapes differ), so the
    # guarded range is found by bisection: 2 <= s <= 16, and one graph serves every length.
    nn = kiln.nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(8, 24)
            self.register_buffer("bias", kiln.from_numpy(np.tril(np.ones((16, 16), np.float32))).view(1, 16, 16))

        def forward(self, x):
            b, t, c = x.size()
            q, k, v = self.qkv(x).split(c, dim=2)
            att = (q @ k.transpose(-2, -1)).masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
            return kiln.softmax(att, dim=-1) @ v

    model = Attention()
    with kiln.no_grad():
        counts = _check(model, [(_t(2, t, 8),) for t in range(5, 17)], atol=1e-4)
    assert counts["symbols"] == [None, "x: f32[2, s0, 8]"]


def test_comparison_true_over_the_guarded_range_does_not_specialize():
    # makemore's Transformer: `assert t <= self.block_size` before slicing the causal mask. The
    # range is bisected to 2 <= s <= 16, where the assert always holds: one graph for every
    # length (PyTorch decides such comparisons by value ranges), not one per length.
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.block_size = 16
            self.register_buffer("bias", kiln.from_numpy(np.tril(np.ones((16, 16), np.float32))))

        def forward(self, x):
            b, t, c = x.size()
            assert t <= self.block_size, f"length {t} > block size {self.block_size}"
            assert t * 2 - 1 < 40 and t  # arithmetic on the size, and a truth test
            return (x @ x.transpose(-2, -1)).masked_fill(self.bias[:t, :t] == 0, 0.0)

    with kiln.no_grad():
        counts = _check(Model(), [(_t(2, t, 8),) for t in range(3, 17)], atol=1e-4)
    assert counts["symbols"] == [None, "x: f32[2, s0, 8]"]


def test_comparison_that_changes_over_the_range_specializes():
    # `t < 8` is true for some sizes of the range and false for others: each size compiles.
    def fn(x):
        return x * 2 if x.shape[0] < 8 else x * 3

    counts = _check(fn, [(_t(n, 4),) for n in (4, 5, 9, 12)])
    assert counts["symbols"] == [None, None, None, None]


def test_loop_over_a_size_specializes_before_fitting_the_range(monkeypatch):
    # makemore's RNN: `for i in range(t)` unrolls t steps. The size specializes from a trace at
    # the call's sizes, not after traces at the largest sizes of the range (thousands of steps:
    # a minute of tracing for the second call).
    from kiln.compiler import frame_callback

    traced_sizes = []
    trace = frame_callback._trace_frame

    def recording(frame_info, options):
        traced_sizes.extend(n for sizes in (options.get("sizes") or {}).values() for n in sizes)
        return trace(frame_info, options)

    monkeypatch.setattr(frame_callback, "_trace_frame", recording)
    cell = nn.Linear(8, 8)

    def fn(x):
        h = x[:, 0]
        for i in range(x.shape[1]):
            h = kiln.tanh(cell(h) + x[:, i])
        return h

    with kiln.no_grad():
        counts = _check(fn, [(_t(2, t, 8),) for t in (3, 4, 5)], atol=1e-5)
    assert counts["symbols"] == [None, None, None]
    assert max(traced_sizes, default=0) <= 8


def test_roll_along_a_symbolic_dim():
    # makemore's MLP: `idx = torch.roll(idx, 1, 1); idx[:, 0] = BLANK` over a growing sequence.
    # roll gathers from an iota starting at size - shift: that start is fitted over the symbols.
    def fn(x):
        y = kiln.roll(x, 1, 1)
        y[:, 0] = 27.0
        return kiln.roll(y, 2, 1) * 0.5

    counts = _check(fn, [(_t(4, n),) for n in (5, 6, 9, 17, 33)])
    assert counts["symbols"] == [None, "x: f32[4, s0]"]


def test_probe_size_equal_to_a_constant_is_probed_around():
    # At the probe size 3, roll's `full([], s0)` and the constant 3 of `idx * 3` are one node:
    # that probe's graph has fewer nodes. The frame is probed again without that size.
    def fn(idx):
        idx = kiln.roll(idx, 1, 1)
        idx[:, 0] = 7
        return idx * 3

    counts = _check(fn, [(kiln.arange(4 * n).view(4, n),) for n in (5, 6, 9, 17, 30)])
    assert counts["symbols"] == [None, "idx: i64[4, s0]"]


def test_short_guarded_range_has_enough_probe_sizes():
    # A 12-long causal mask bounds the range to 2 <= s <= 12, whose curated probe sizes are
    # mostly the program's own (12, 11, 2, 8): every size of a short range may be probed.
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte, self.head = nn.Embedding(11, 8), nn.Linear(8, 11)
            self.register_buffer("bias", kiln.tril(kiln.ones(12, 12)).view(1, 12, 12))

        def forward(self, idx):
            t = idx.shape[1]
            x = self.wte(idx)
            att = (x @ x.transpose(-2, -1)).masked_fill(self.bias[:, :t, :t] == 0, float("-inf"))
            return self.head(kiln.softmax(att, dim=-1) @ x)

    with kiln.no_grad():
        counts = _check(Model(), [(kiln.arange(2 * n).view(2, n) % 11,) for n in range(3, 13)], atol=1e-5)
    assert counts["symbols"] == [None, "idx: i64[2, s0]"]


def test_last_position_select_along_a_symbolic_dim():
    # A language model's `logits[:, -1, :]` over a growing sequence: the slice starts at s0 - 1,
    # fitted over the symbols (the select's view feeds a matmul). A start that a clamp bends at
    # the low end (x[:, -3:] at s0 = 2 starts at 0, not -1) does not fit: static sizes.
    w = _t(8, 5)
    counts = _check(lambda x: kiln.tanh(x[:, -1, :] @ w), [(_t(2, n, 8),) for n in (5, 6, 9, 17)])
    assert counts["symbols"] == [None, "x: f32[2, s0, 8]"]
    counts = _check(lambda x: x[:, -3:, :] * 2, [(_t(3, n, 8),) for n in (5, 6, 9)])
    assert counts["symbols"] == [None, None, None]


def test_size_int_comparison_over_a_range():
    dynamic.begin_trace((2, 16))
    s = dynamic.SizeInt(8, [0], "{s0}")
    assert s <= 16 and s * 2 - 1 < 40 and s and not (s > 16) and s != 1
    assert dynamic.compared_symbols() == set()
    assert s < 9 and dynamic.compared_symbols() == {0}
    dynamic.begin_trace((2, 16))
    assert s == dynamic.SizeInt(8, [0], "{s0}") and dynamic.compared_symbols() == set()  # always equal
    assert s == 8 and dynamic.compared_symbols() == {0}
    dynamic.begin_trace((2, 16))
    assert s + dynamic.SizeInt(3, [1], "{s1}") < 100 and dynamic.compared_symbols() == {0, 1}
    dynamic.begin_trace((2, 16))
    assert dynamic.SizeInt(8, [0]) <= 16 and dynamic.compared_symbols() == {0}  # source unknown
    dynamic.begin_trace((2, 16))
    dynamic.record_loop_bound(s)
    dynamic.record_loop_bound(8)
    assert dynamic.loop_bound_symbols() == dynamic.compared_symbols() == {0}
    dynamic.begin_trace()


def test_graph_cache_keys_on_the_symbolic_graph(monkeypatch):
    # A second compile of the same program over symbols (after reset: as another process
    # would) comes from the graph cache: nothing is lowered again.
    from kiln.compiler import inductor

    w = _t(8, 4)

    def fn(x):
        return (x @ w).relu()

    calls = [(_t(n, 8),) for n in (3, 5, 7)]
    _check(fn, calls, dynamic_flag=True)
    kiln.compiler.reset()
    lowered = []
    monkeypatch.setattr(inductor._codegen, "lower", lambda g, _lower=inductor._codegen.lower: lowered.append(1) or _lower(g))
    counts = _check(fn, calls, dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, 8]"] and lowered == []


def test_outputs_viewing_inputs_over_symbols():
    # Outputs that are inputs or views of them (returned eagerly as views, aliasing the inputs)
    # are taken with their geometry fitted over the symbols; the rest is the compiled program.
    def fn(x, y):
        return x, x.transpose(0, 1)[1:], y.reshape(-1), (x * 2).sum(dim=1)

    counts = _check(fn, [(_t(n, 3), _t(2, n)) for n in (4, 7, 9)], dynamic_flag=True)
    assert counts["symbols"] == ["x: f32[s0, s1]; y: f32[s2, s0]"]
    backend, _ = _counting()
    compiled = kiln.compile(fn, backend=backend, dynamic=True)
    x, y = _t(5, 3), _t(2, 5)
    compiled(x, y)
    outs = compiled(x, y)
    assert outs[0] is x or outs[0].data_ptr() == x.data_ptr()
    x.mul_(0)  # the views see the write
    assert float(outs[1].abs().sum()) == 0.0


def test_dims_that_compiled_static_are_not_probed_again(monkeypatch):
    # A constant that is no polynomial of dim 0 (n // 2) keeps it static; later recompiles
    # (automatic dynamic) do not trace the frame at probe sizes again for it.
    from kiln.compiler import frame_callback

    traces = []
    real = frame_callback.trace_frame
    monkeypatch.setattr(frame_callback, "trace_frame", lambda info, options: traces.append(options) or real(info, options))
    counts = _check(lambda x: (x * (x.shape[0] // 2)).sum(dim=0), [(_t(n, 5),) for n in (4, 6, 9, 11)])
    assert counts["symbols"] == [None] * 4
    probing = [i for i, o in enumerate(traces) if "sizes" in o]
    assert probing and max(probing) < len(traces) - 2  # only the first recompile probed


def test_scatter_index_put_and_advanced_indexing_over_symbols():
    # The writes through computed indices (scatter_add, index_put with and without accumulate,
    # scatter) and advanced indexing reads, over a symbolic number of rows: one compile over
    # the symbols, equal to eager; an index out of range at a new size still raises.
    def fn(x, idx, rows):
        n = x.shape[0]
        a = kiln.zeros(n, 4).scatter_add(0, idx, x[:, :4])
        b = x.index_put((rows,), kiln.ones(2, 8) * 2, accumulate=True)
        c = x.index_put((rows,), kiln.ones(8))
        reverse = (n - 1 - kiln.arange(n)).unsqueeze(1).expand(n, 4)  # distinct rows per column
        d = kiln.zeros(n, 4).scatter(0, reverse, x[:, 4:])
        return a, b, c, d, x[rows] * 3, x[rows, 1:3].sum()

    def call(n):
        # (distinct rows: index_put without accumulate keeps one of duplicate writes)
        return _t(n, 8), kiln.from_numpy(RNG.integers(0, n, (n, 4))), kiln.from_numpy(np.array([-1, 1]))

    counts = _check(fn, [call(n) for n in (5, 6, 9, 13)])
    assert counts["compiles"] == 2 and counts["symbols"][-1] is not None
    x, idx, rows = call(7)
    idx[3, 1] = 7
    backend, _ = _counting()
    compiled = kiln.compile(fn, backend=backend)
    compiled(*call(5))
    with pytest.raises(RuntimeError, match="out of bounds"):
        compiled(x, idx, rows)


def test_symbolic_gemm_sizes_beyond_int_range_raise():
    # BLAS takes int sizes: a symbolic M beyond INT_MAX makes the program return 2 before any
    # memory is touched, with the op and its sizes in the error (called through ctypes with
    # a size no test could allocate).
    import ctypes

    from kiln._C import _codegen

    text = """program @p(%x: f32[s0, 4], %w: f32[4, 4]) {
  kernel @k0 {
    %mm: f32[s0, 4] = extern mm(%x, %w)
  }
  output %mm
}
"""
    program, _ = _codegen.schedule(text)
    source = _codegen.emit_cpp(program)
    assert "INT32_MAX" in source
    path, _ = _codegen.compile_source(source)

    from kiln_context import KilnContext

    class Error(ctypes.Structure):  # KilnError (codegen/CppPrelude.cpp)
        _fields_ = [("set", ctypes.c_int), ("index", ctypes.c_int64), ("size", ctypes.c_int64),
                    ("message", ctypes.c_char_p)]

    entry = ctypes.CDLL(path).kiln_entry
    entry.restype = ctypes.c_int
    error = Error()
    ctx = KilnContext(num_threads=1, error=ctypes.addressof(error))
    inputs, outputs = (ctypes.c_void_p * 2)(), (ctypes.c_void_p * 1)()
    sizes = (ctypes.c_int64 * 1)(2 ** 31 + 5)
    assert entry(ctypes.byref(ctx), inputs, outputs, sizes) == 2
    assert error.set == 1 and error.index == 2 ** 31 + 5 and error.size == 2 ** 31 - 1
    message = error.message.decode()
    assert message.startswith("RuntimeError: extern mm (%mm)") and "m = s0, n = 4, k = 4" in message


def test_random_draws_over_symbols():
    # Draws run eagerly at each call (in program order, from kiln's generator) with their shapes
    # fitted over the symbols: the same values as eager at every size, one compile.
    F = kiln.nn.functional

    def fn(x):
        return F.dropout(x, 0.5) * 2 + kiln.rand(x.shape[0], 3).sum(dim=1, keepdim=True) + kiln.randn(3, x.shape[0]).t()

    backend, counts = _counting()
    compiled = kiln.compile(fn, backend=backend, dynamic=True)
    for n in (6, 9, 4, 130):
        x = _t(n, 3)
        kiln.manual_seed(n)
        got = compiled(x)
        kiln.manual_seed(n)
        np.testing.assert_allclose(got.numpy(), fn(x).numpy(), rtol=1e-5, atol=1e-5)
    assert counts["compiles"] == 1 and counts["symbols"] == ["x: f32[s0, 3]"]


def test_explain_shows_symbolic_dims():
    # kiln.explain probes a call whose inputs are marked dynamic as a compile would and lists
    # each graph's symbolic inputs with their types; unmarked calls stay static.
    w = _t(64, 16)

    def fn(x):
        return kiln.softmax(x @ w, dim=-1).sum(dim=0)

    x = _t(12, 64)
    kiln.compiler.mark_dynamic(x, 0)
    out = kiln.explain(fn)(x)
    assert out.dynamic_per_graph == ["x: f32[s0, 64]"]
    assert "Graph 1: x: f32[s0, 64]" in str(out)
    assert kiln.explain(fn)(_t(12, 64)).dynamic_per_graph == [None]


def _per_graph(counts_by_graph):
    """A counting backend keeping, per graph (its first placeholder name and op count), how many
    times it compiled and how many of those were over size symbols."""
    inductor = lookup_backend("inductor")

    def backend(gm, example_inputs, **kwargs):
        compiled = inductor(gm, example_inputs, **kwargs)
        key = tuple(n.target for n in gm.graph.nodes if n.op == "call_function")
        static, dyn = counts_by_graph.get(key, (0, 0))
        counts_by_graph[key] = (static + (getattr(gm, "kiln_dynamic", None) is None),
                                dyn + (getattr(gm, "kiln_dynamic", None) is not None))
        return compiled

    backend.supports_dynamic_shapes = True
    return backend


def test_graphs_around_a_break_and_with_fallbacks_compile_twice(capsys):
    # A model with a print in its forward (a graph break: the graph before it and the resume
    # function's graph) and an op without a lowering (sort, run eagerly between compiled
    # segments), called at growing sizes: each graph compiles once static, then once over s0.
    # The sizes the print shows are read from the graph's output at each call (not the first
    # call's sizes baked into the glue).
    def fn(x, w):
        y = (x @ w).relu()
        print("step", y.shape, x.shape[0])
        return (y * 2).sum(1) + x.sort(1)[0][:, 0] * y.mean()

    counts = {}
    compiled = kiln.compile(fn, backend=_per_graph(counts))
    w = _t(16, 16)
    for n in (4, 5, 6, 7, 9, 12):
        x = _t(n, 16)
        got = compiled(x, w)
        printed = capsys.readouterr().out
        np.testing.assert_allclose(got.numpy(), fn(x, w).numpy(), rtol=1e-5, atol=1e-6)
        assert printed == capsys.readouterr().out == f"step kiln.Size([{n}, 16]) {n}\n"
    assert len(counts) == 2 and all(c == (1, 1) for c in counts.values()), counts


@pytest.mark.parametrize("grad", [True, False])
def test_explain_counts_the_graphs_a_symbolic_compile_makes(grad):
    # kiln.explain runs the eager backend (static sizes) but counts as a compile over size
    # symbols would: a module's forward called at batch 6, 2, 4, 5 from a loop that runs eagerly
    # is 2 graphs (the second symbolic), as torch._dynamo.explain counts (torch 2.13: 2 / 1).
    # Training graphs included, and sizes are remembered from a first compile that did not
    # probe (it counted 4; vit_train's eval loop after its training steps, one too many).
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 2)

        def forward(self, x):
            return self.lin(x).relu() * 2

    m = M()
    xs = [_t(n, 3) for n in (6, 2, 4, 5)]

    def run(xs):
        out = []
        with kiln.set_grad_enabled(grad):
            for x in xs:
                out.append(m(x).sum().item())
        return out

    want = run(xs)
    e = kiln.explain(run)(xs)
    assert (e.graph_count, e.graph_break_count) == (2, 1), str(e)
    assert e.dynamic_per_graph[1] == "x: f32[s0, 3]"
    np.testing.assert_allclose(kiln.compile(run, backend="eager")(xs), want, rtol=1e-5)
