"""Fallback kernels (kiln/compiler/fallback.py): an op without a lowering runs eagerly between
compiled segments instead of sending its whole graph back to eager mode."""
import os
import re
import shutil

import numpy as np
import pytest

import kiln
import kiln.nn as nn
from kiln.compiler import fallback, inductor

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def strict(monkeypatch, tmp_path_factory):
    path = str(tmp_path_factory.getbasetemp() / "fallback-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    monkeypatch.setattr(kiln.config, "strict", True)


def _rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _flat(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _check(fn, *args, tol=1e-5):
    want = _flat(fn(*args))
    got = _flat(kiln.compile(fn)(*args))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and tuple(g.shape) == tuple(w.shape)
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=tol, atol=tol)


def _plan(fn, *args):
    out = kiln.explain(fn)(*args)
    assert out.graph_count == 1
    return out.kernels_per_graph[0]


# take has no lowering (gather, index_select and the other indexing ops do: test_inductor_indexing.py).
def picked_loss(logits, target):
    return -kiln.log_softmax(logits, dim=-1).take(target).mean()


def test_fallback_between_two_compiled_segments():
    logits, target = _rand(16, 10), kiln.randint(0, 160, (16, 1))
    _check(picked_loss, logits, target)
    plan = _plan(picked_loss, logits, target)
    assert plan.reason == ""
    assert [op for _, op in plan.fallbacks] == ["aten.take"]
    # log_softmax's reductions before the take, the mean after it.
    assert [name for name, _ in plan.kernels] == ["s0.k0", "s1.k0"]
    assert "fallback ops (eager): 1 (aten.take)" in plan.summary()


def test_out_of_range_index_raises_as_eager():
    logits, target = _rand(4, 10), kiln.randint(0, 40, (4, 1))
    compiled = kiln.compile(picked_loss)
    compiled(logits, target)
    target[2, 0] = 40
    with pytest.raises(IndexError) as eager:
        picked_loss(logits, target)
    with pytest.raises(IndexError) as got:
        compiled(logits, target)
    assert str(got.value).endswith(str(eager.value))  # "aten.take(): ..." vs "take(): ..."
    assert "out of range" in str(got.value)


def test_multi_output_fallback_and_two_levels():
    def fn(x, idx):
        values, indices = x.sort(dim=-1)
        y = values * 2 + indices.to(kiln.float32)       # segment after the sort
        z = y.take(idx)                                  # a fallback reading that segment
        return z + x.sum(), (x * 3).exp()                # x.sum() and exp need no fallback

    x, idx = _rand(6, 8), kiln.randint(0, 8, (6, 3))
    _check(fn, x, idx)
    plan = _plan(fn, x, idx)
    assert [op for _, op in plan.fallbacks] == ["aten.sort", "aten.take"]


def test_plan_levels():
    """Lowerable nodes join the latest segment their users allow; fallbacks run as early as
    their inputs allow."""
    def fn(x, w, idx):
        a = x.take(idx)              # fallback at level 0: reads only an input
        b = (a + 1).sort(dim=1)[0]   # the add in segment 0, the sort after it
        return b * w.t()             # w.t() is read where it is used: the last segment

    steps = fallback.plan(_computed_graph(fn, _rand(4, 5), _rand(3, 4), kiln.randint(0, 5, (4, 3))))
    kinds = [(s.kind, [str(n.target) for n in s.outputs]) for s in steps]
    assert kinds[0] == ("eager", ["aten.take"])
    assert kinds[1][0] == "compiled"
    assert kinds[2] == ("eager", ["aten.sort"])
    last = steps[-1]
    assert last.kind == "compiled"
    assert any(n.target == "prims.transpose" for n in last.graph.nodes)
    assert fallback.plan(_computed_graph(lambda x: x.exp() + 1, _rand(3))) is None


def _computed_graph(fn, *args):
    """The prims graph the inductor backend compiles for fn's one captured graph."""
    captured = []

    def backend(gm, example_inputs):
        captured.append((gm, example_inputs))
        return gm.forward

    kiln.compile(fn, backend=backend)(*args)
    (gm, example_inputs), = captured
    return inductor._prepare(gm, example_inputs)[2]


def test_convolution_module_compiles_around_the_convolution():
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(),
                          nn.Linear(8 * 6 * 6, 5))
    x = _rand(2, 3, 6, 6)
    with kiln.no_grad():
        _check(model, x, tol=1e-4)
        plan = _plan(model, x)
    assert plan.reason == "" and plan.num_kernels >= 1
    assert "aten.convolution" in [op for _, op in plan.fallbacks]


def test_segments_compile_as_one_shared_object(tmp_path, monkeypatch):
    """The compiled segments between a graph's fallbacks are one C++ source (the prelude once,
    each segment in its namespace with its own entry) and one g++ run, not one per segment."""
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path))
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 3, padding=1),
                          nn.Tanh(), nn.Conv2d(8, 4, 1), nn.Sigmoid(), nn.Flatten(), nn.Linear(4 * 36, 5))
    x = _rand(2, 3, 6, 6)
    with kiln.no_grad():
        _check(model, x, tol=1e-4)
    sources = sorted((tmp_path / "kernels").glob("*.cpp"))
    assert len(sources) == 1
    text = sources[0].read_text()
    segments = re.findall(r"^namespace kiln_segment(\d+) \{$", text, re.M)
    assert len(segments) >= 3
    assert re.findall(r'extern "C" int kiln_entry_(\d+)\(', text) == segments
    # Compiled again (a fresh process, as far as the caches go): the segments' schedules come from
    # the graph cache (no lowering, no scheduling) and the source is the same whatever thread
    # finished first, so the kernel cache finds it.
    kiln.compiler.reset()
    scheduled = []
    monkeypatch.setattr(inductor, "_scheduled_program", lambda g: scheduled.append(g) or 1 / 0)
    with kiln.no_grad():
        _check(model, x, tol=1e-4)
    assert scheduled == [] and sorted((tmp_path / "kernels").glob("*.cpp")) == sources


@pytest.mark.parametrize("case", ["conv_slice", "conv_cat", "pool_slice"])
def test_a_fallback_reads_a_gradient_written_into_a_slice(case):
    # The backward of a slice (or cat) writes the incoming gradient into zeros in place, and an
    # op without a lowering (convolution_backward, the adaptive pool's backward) reads that
    # buffer: it runs after the segment that finished writing it. (Raised "reads storage the
    # graph writes in place" and, outside strict mode, ran the whole backward eagerly.)
    w = kiln.ones(2, 4, 3, 3) * 0.5
    fns = {
        "conv_slice": lambda x, s: nn.functional.conv2d(x * s.view(1, 4, 1, 1), w).flatten(1)[:, :6],
        "conv_cat": lambda x, s: kiln.cat([nn.functional.conv2d(x * s.view(1, 4, 1, 1), w), x[:, :2, :3, :3]], 1)[:, 1:],
        "pool_slice": lambda x, s: nn.functional.adaptive_avg_pool2d(x * s.view(1, 4, 1, 1), 5)[:, :, 1:4],
    }
    fn = fns[case]
    grads = []
    for f in (kiln.compile(fn), fn):
        x, s = _rand(2, 4, 5, 5).requires_grad_(), _rand(4, seed=1).requires_grad_()
        y = f(x, s)
        (y * _rand(*y.shape, seed=2)).sum().backward()
        grads.append((y.detach(), x.grad, s.grad))
    for got, want in zip(*grads):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_in_place_write_then_a_fallback_reading_it_is_cut_into_segments(strict):
    # The write into the input runs in the segment before the fallback that reads it (before
    # the sweep's fallback-planner fix, such graphs were refused and ran eagerly).
    def fn(x, idx):
        x.add_(1)
        return x.take(idx) * 2

    idx = kiln.randint(0, 5, (3, 2))
    x, x_eager = _rand(3, 5), _rand(3, 5)
    kiln.compiler.reset()
    plan = kiln.explain(fn)(x.clone(), idx).kernels_per_graph[0]
    assert plan.fallbacks == [("take", "aten.take")] and plan.num_kernels >= 2, plan
    got = kiln.compile(fn)(x, idx)
    want = fn(x_eager, idx)
    np.testing.assert_allclose(got.numpy(), want.numpy())
    np.testing.assert_allclose(x.numpy(), x_eager.numpy())


def test_write_into_an_input_no_fallback_touches_is_cut():
    def fn(x, y, idx):
        y.mul_(2)
        return x.take(idx) + y.sum()

    x, idx = _rand(3, 5), kiln.randint(0, 5, (3, 2))
    y, y_eager = _rand(4, seed=1), _rand(4, seed=1)
    got = kiln.compile(fn)(x, y, idx)
    want = fn(x, y_eager, idx)
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), y_eager.numpy())


@pytest.mark.parametrize("training", [False, True])
def test_batch_norm_decomposes_and_compiles_around_the_convolution(training):
    """native_batch_norm decomposes (eval: the running statistics normalize; training: batch
    statistics, and the running statistics are written in place as eagerly)."""
    def make():
        kiln.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
        m.train(training)
        m[1].running_mean.copy_(kiln.randn(4))
        m[1].running_var.copy_(kiln.rand(4) + 0.5)
        return m

    eager, compiled = make(), make()
    x = _rand(2, 3, 6, 6)
    with kiln.no_grad():
        for _ in range(2):
            want = eager(x)
            got = kiln.compile(compiled)(x)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-5)
        for name in ("running_mean", "running_var"):
            np.testing.assert_allclose(getattr(compiled[1], name).numpy(),
                                       getattr(eager[1], name).numpy(), rtol=1e-5, atol=1e-6)
        assert int(compiled[1].num_batches_tracked) == int(eager[1].num_batches_tracked)
        plan = _plan(compiled, x)
    assert [op for _, op in plan.fallbacks] == ["aten.convolution"]
    assert plan.num_kernels >= 1


def test_value_read_by_a_fallback_and_returned():
    """A node both returned and read by an early fallback is computed before that fallback (it
    was put in the last segment, after the fallback that needs it)."""
    def fn(table, n_rows):
        rows = kiln.arange(4)
        return kiln.nn.functional.embedding(rows, table) * 2, rows

    _check(fn, _rand(6, 3), 4)


def test_fallback_writing_its_arguments_runs_when_an_output_views_an_input():
    """An optimizer step compiled with an output aliasing an input (a training step's
    `loss.detach()`) lost its `_fused_adam_` calls: the compiled part kept only the ancestors of
    the computed outputs and copy_to writes, and the Adam state it returned stayed zero. Writes
    of ops without a functional form are kept like copy_to's."""
    params = [_rand(4, 3, seed=1), _rand(3, seed=2)]
    grads = [_rand(4, 3, seed=3), _rand(3, seed=4)]

    def step(loss, g0, g1):
        out = []
        with kiln.no_grad():
            for p, g in zip(params, (g0, g1)):
                count = kiln._C._ops.full([], 0.0, dtype=kiln.float32)
                avg, avg_sq = kiln.zeros_like(p), kiln.zeros_like(p)
                kiln._C._ops._fused_adam_(p, g, avg, avg_sq, None, count, lr=0.01)
                out += [count, avg, avg_sq]
        return out + [loss.detach()]

    loss = kiln.ones(()).requires_grad_() * 2
    start = [p.clone() for p in params]
    want, want_params = step(loss, *grads), [p.clone() for p in params]
    for p, s in zip(params, start):
        p.copy_(s)
    got = kiln.compile(step)(loss, *grads)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g.detach().numpy(), w.detach().numpy())
    for p, w in zip(params, want_params):
        np.testing.assert_array_equal(p.numpy(), w.numpy())


def _conv_net(x, w1, w2):
    F = nn.functional
    h = F.max_pool2d(F.relu(F.conv2d(x, w1, padding=1)), 2)
    return F.relu(F.conv2d(h, w2, stride=2, padding=1)).mean(dim=(2, 3))


def test_convolutions_run_channels_last_between_segments():
    """A float32 convolution whose result only compiled code reads runs channels-last: its
    input is written NHWC by the segment before it (or converted there, for a graph input), and
    the segment after it reads the NHWC result through its strides."""
    args = (_rand(2, 3, 8, 8, seed=1), _rand(4, 3, 3, 3, seed=2), _rand(5, 4, 3, 3, seed=3))
    with kiln.no_grad():
        _check(_conv_net, *args, tol=1e-4)
    steps = fallback.plan(_computed_graph(_conv_net, *args))
    convs = [s for s in steps if s.kind == "eager"]
    assert [str(s.outputs[0].target) for s in convs] == ["aten.convolution"] * 2
    assert all(s.layouts[0] == "channels_last" for s in convs)
    # Segment 0 only converts x; segment 1 (relu + pool) writes the pool NHWC for conv 2 and
    # reads conv 1's NHWC result; segment 2 reads conv 2's.
    segments = [s for s in steps if s.kind == "compiled"]
    assert [s.layouts for s in segments] == [[None], ["channels_last"], ["channels_last"]]
    for s in segments[:2]:
        assert isinstance(s.outputs[-1], fallback._ChannelsLast)
    strides = [n.type for n in segments[1].graph.placeholders()]
    assert "strides=[256, 1, 32, 4]" in str(strides[0])


def test_graph_input_converted_for_a_convolution_is_read_as_it_came_later():
    # torchvision's ConvNeXt block: x -> depthwise conv -> ... -> + x. The first segment makes a
    # channels-last copy of x for the convolution; the last segment, compiled for x's own NCHW
    # strides, was handed that copy ("input ... is float32[...] with strides [24576, 1, ...], but
    # the program was compiled for ... [24576, 256, 16, 1]").
    F = nn.functional

    def block(x, w, b):
        h = F.conv2d(x, w, b, padding=3, groups=8).permute(0, 2, 3, 1)
        h = F.layer_norm(h, (8,)).permute(0, 3, 1, 2)
        return h * 0.5 + x

    args = (_rand(2, 8, 6, 6, seed=7), _rand(8, 1, 7, 7, seed=8), _rand(8, seed=9))
    with kiln.no_grad():
        _check(block, *args, tol=1e-4)


def test_convolution_result_returned_keeps_eager_layout():
    # A result the caller sees keeps eager's NCHW layout; the one only the program reads does not
    # need to.
    F = nn.functional

    def fn(x, w):
        y = F.conv2d(x, w, padding=1)
        return y, F.conv2d(y.relu(), w, padding=1)

    x, w = _rand(2, 4, 5, 5, seed=4), _rand(4, 4, 3, 3, seed=5)
    with kiln.no_grad():
        _check(fn, x, w, tol=1e-4)
        got = kiln.compile(fn)(x, w)
    assert got[0].stride() == fn(x, w)[0].stride() == (100, 25, 5, 1)


def test_eager_convolution_of_a_channels_last_input_is_channels_last():
    torch = pytest.importorskip("torch")
    a = np.random.default_rng(6).standard_normal((2, 3, 9, 7)).astype(np.float32)
    w = np.random.default_rng(7).standard_normal((5, 3, 3, 3)).astype(np.float32)
    outs = []
    for T in (kiln, torch):
        x = T.from_numpy(a).permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
        outs.append(T.nn.functional.conv2d(x, T.from_numpy(w), padding=1, stride=(1, 2)))
    assert tuple(outs[0].stride()) == tuple(outs[1].stride())
    np.testing.assert_allclose(outs[0].numpy(), outs[1].numpy(), rtol=1e-5, atol=1e-5)


def _typed(graph, op, target, args, type_text):
    node = graph.call_function(target, args) if op == "call_function" else graph.placeholder(target)
    node.type = type_text
    return node


@pytest.mark.parametrize("case", ["prims", "complex read", "complex unread", "complex tuple", "no lowering",
                                  "unlowered prim", "getitem of lowered"])
def test_fallback_scan_agrees_with_is_fallback(case):
    # plan()'s one-pass scan (_any_fallback: types read once, only non-prims targets tested)
    # must answer any(is_fallback(n)) on every graph: complex values read or made, ops without
    # a lowering, and complex placeholders nothing reads.
    from kiln.fx import Graph
    g = Graph()
    x = _typed(g, "placeholder", "x", (), "f32[1, 1, 4, 4]")
    out = [_typed(g, "call_function", "prims.mul", (x, x), "f32[1, 1, 4, 4]")]
    if case == "complex read":
        z = _typed(g, "placeholder", "z", (), "c64[4, 4]")
        out.append(_typed(g, "call_function", "prims.mul", (z, z), "c64[4, 4]"))
    elif case == "complex unread":
        _typed(g, "placeholder", "z", (), "c128[4, 4]")
    elif case in ("complex tuple", "getitem of lowered"):
        made = "c64" if case == "complex tuple" else "f32"
        pool = _typed(g, "call_function", "aten.max_pool2d_with_indices", (x, [2, 2]),
                      f"({made}[1, 1, 2, 2], i64[1, 1, 2, 2])")
        out.append(_typed(g, "call_function", "operator.getitem", (pool, 1), "i64[1, 1, 2, 2]"))
    elif case == "no lowering":
        out.append(_typed(g, "call_function", "aten.sort", (x,), "(f32[1, 1, 4, 4], i64[1, 1, 4, 4])"))
    elif case == "unlowered prim":
        out.append(_typed(g, "call_function", "prims.as_strided", (x, [4], [1], 0), "f32[4]"))
    g.output(tuple(out))
    nodes = list(g.nodes)
    want = any(fallback.is_fallback(n) for n in nodes)
    assert fallback._any_fallback(nodes) == want
    assert want == (case not in ("prims", "complex unread", "getitem of lowered"))
