"""kiln.compile's Python side: backends, config, logs, glue code, the frame callback's policy,
explain's output and OptimizedModule. The frame hook (kiln._C._capture) is not needed: the
callback is driven with hand-built frame infos and trace results (protocols 1 and 2 of the
capture design), the way the hook and trace_frame call and answer it."""
import copy
import json
import logging
import os
import subprocess
import sys
import traceback
import types
import warnings

import kiln
import numpy as np
import pytest
from kiln import fx, nn
from kiln.compiler import frame_callback, glue, optimized_module, skip_policy
from kiln.compiler.explain import ExplainRecorder

SKIP = object()  # stands for kiln._C._capture.SKIP in the callback tests


@pytest.fixture(autouse=True)
def clean_state():
    kiln.compiler.reset()
    saved = (kiln.config.strict, kiln.config.recompile_limit, kiln.config.verbose)
    yield
    kiln.config.strict, kiln.config.recompile_limit, kiln.config.verbose = saved
    kiln.set_logs()
    kiln.compiler.reset()


# -- public surface, config, backends ------------------------------------------------------------

def test_public_names_and_config_defaults():
    assert kiln.compile is kiln.compiler.compile and kiln.explain is kiln.compiler.explain
    for name in ("disable", "reset", "list_backends", "register_backend", "Unsupported", "OptimizedModule"):
        assert hasattr(kiln.compiler, name)
    assert kiln.config.strict is False and kiln.config.recompile_limit == 8 and kiln.config.verbose is False
    assert "recompile_limit" in kiln.config.__doc__ and "strict" in kiln.config.__doc__


def test_backend_registry():
    assert "eager" in kiln.compiler.list_backends()
    assert kiln.compiler.list_backends() == sorted(kiln.compiler.list_backends())
    with pytest.raises(kiln.compiler.InvalidBackend, match=r"'no_such'.*\['aot_eager', 'eager'"):
        kiln.compile(lambda x: x, backend="no_such")
    with pytest.raises(kiln.compiler.InvalidBackend):
        kiln.compiler.lookup_backend(3)

    def mine(gm, example_inputs):
        return gm.forward

    assert kiln.compiler.lookup_backend(mine) is mine
    try:
        assert kiln.compiler.register_backend(name="test_mine")(mine) is mine
        assert "test_mine" in kiln.compiler.list_backends()
        assert kiln.compiler.lookup_backend("test_mine") is mine
        with pytest.raises(ValueError, match="already registered"):
            kiln.compiler.register_backend(lambda gm, inputs: gm, name="test_mine")
    finally:
        kiln.compiler.backends._BACKENDS.pop("test_mine", None)
    with pytest.raises(TypeError, match="callable"):
        kiln.compiler.register_backend(3, name="three")


def test_mode_and_options_are_exclusive():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        kiln.compile(lambda x: x, mode="default", options={})


# -- logs -----------------------------------------------------------------------------------------

def test_set_logs_levels_and_output(capsys):
    kiln.set_logs(graph=True, recompiles=logging.DEBUG)
    assert logging.getLogger("kiln.graph").getEffectiveLevel() == logging.INFO
    assert logging.getLogger("kiln.recompiles").getEffectiveLevel() == logging.DEBUG
    assert not logging.getLogger("kiln.guards").isEnabledFor(logging.INFO)
    logging.getLogger("kiln.graph").info("hello %d", 3)
    logging.getLogger("kiln.guards").info("hidden")
    assert capsys.readouterr().err == "[kiln.graph] hello 3\n"
    kiln.set_logs()
    assert not logging.getLogger("kiln.graph").isEnabledFor(logging.INFO)
    with pytest.raises(ValueError, match="unknown kiln log.*'graphs'.*graph, guards"):
        kiln.set_logs(graphs=True)
    with pytest.raises(TypeError):
        kiln.set_logs(graph="yes")


def test_logs_spec_parsing():
    from kiln._logging import parse_logs_spec

    assert parse_logs_spec("graph, +guards,,recompiles") == (
        {"graph": True, "guards": logging.DEBUG, "recompiles": True}, [])
    assert parse_logs_spec("graph,bogus,+nope") == ({"graph": True}, ["bogus", "+nope"])
    assert parse_logs_spec("") == ({}, [])


def test_kiln_logs_environment_variable():
    script = ("import logging, kiln; print(logging.getLogger('kiln.graph').level, "
              "logging.getLogger('kiln.graph_breaks').level, logging.getLogger('kiln.guards').level)")
    env = dict(os.environ, KILN_LOGS="graph,+graph_breaks,bogus")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(logging.INFO), str(logging.DEBUG), str(logging.WARNING)]
    assert "KILN_LOGS: unknown log(s) bogus" in done.stderr


# -- glue -----------------------------------------------------------------------------------------

def _frame(x, d, *rest, scale=2, **extra):
    return {"sum": (x + d["b"][0]) * kiln.tensor([1.0, 2.0]), "k": 3}


def _trace_result(guards="L['x'] is a tensor"):
    """What trace_frame answers for _frame: x + d['b'][0], times the attribute w."""
    g = fx.Graph("_frame")
    x = g.placeholder("x", "f32[2]")
    y = g.placeholder("d_b_0", "f32[2]")
    w = g.get_attr("w", "f32[2]")
    add = g.call_function("aten.add.Tensor", (x, y))
    g.output((g.call_function("aten.mul.Tensor", (add, w)),))
    return {"ok": True, "graph": g, "attrs": {"w": kiln.tensor([1.0, 2.0])}, "inputs": ["x", "d['b'][0]"],
            "output": "{'sum': __o[0], 'k': __c[0]}", "constants": [3], "guards": guards, "op_count": 2}


def _frame_args():
    return (kiln.tensor([1.0, 2.0]), {"b": [kiln.tensor([10.0, 20.0])]}, (), 2, {})


def test_argument_names_cover_every_argument_kind():
    def cells(a, b=1, *args, c, **kw):
        return lambda: a + c

    assert glue.argument_names(_frame.__code__) == ("x", "d", "scale", "rest", "extra")
    assert glue.argument_names(cells.__code__) == ("a", "b", "c", "args", "kw")
    assert glue.argument_names((lambda: 0).__code__) == ()


def test_glue_calls_the_graph_and_rebuilds_the_output():
    result = _trace_result()
    gm = fx.GraphModule(result["attrs"], result["graph"])
    args = _frame_args()
    examples = glue.example_inputs(_frame.__code__, args, result["inputs"])
    assert len(examples) == 2 and examples[1] is args[1]["b"][0]
    fn = glue.make_glue(_frame.__code__, gm.forward, result["inputs"], result["output"], result["constants"])
    out = fn(*args)
    assert out.keys() == {"sum", "k"} and out["k"] == 3
    np.testing.assert_array_equal(out["sum"].detach().numpy(), _frame(*args[:2])["sum"].detach().numpy())
    assert fn.__code__.co_filename.startswith("<kiln glue _frame #")
    assert skip_policy.is_skipped_file(fn.__code__.co_filename)
    assert glue.glue_source(("a",), [], "()") == "def __kiln_glue(a):\n    __o = __graph()\n    return ()\n"


def test_glue_tracebacks_show_the_glue_line():
    def boom(*inputs):
        raise ValueError("from the graph")

    fn = glue.make_glue(_frame.__code__, boom, ["x"], "__o", [])
    with pytest.raises(ValueError) as info:
        fn(*_frame_args())
    assert "    __o = __graph(x)\n" in "".join(traceback.format_exception(info.value))


# -- skip policy ----------------------------------------------------------------------------------

def test_skip_policy_by_file():
    assert skip_policy.is_skipped_file(json.dumps.__code__.co_filename)          # standard library
    assert skip_policy.is_skipped_file(pytest.main.__code__.co_filename)        # site-packages
    assert skip_policy.is_skipped_file(kiln.compiler.compile.__code__.co_filename)  # kiln itself
    # kiln.nn and kiln.optim too, as torch.compile skips torch.nn's and torch.autograd's frames
    # entered from eager code (a user's forward under Module.__call__ is captured on its own)
    assert skip_policy.is_skipped_file(nn.Linear.forward.__code__.co_filename)
    assert skip_policy.is_skipped_file(nn.Module.__call__.__code__.co_filename)
    assert skip_policy.is_skipped_file(kiln.optim.SGD.zero_grad.__code__.co_filename)
    assert not skip_policy.is_skipped_file(__file__)
    assert not skip_policy.is_skipped_file("<string>")
    assert skip_policy.is_skipped_file("<frozen importlib._bootstrap>")


# -- the frame callback, driven as the hook drives it ------------------------------------------

class Tracer:
    """A test-only stand-in for trace_frame: answers with `result` and counts its calls."""

    def __init__(self, result):
        self.result, self.calls = result, []

    def __call__(self, frame_info, options):
        self.calls.append(options)
        return self.result


@pytest.fixture
def hook(monkeypatch):
    """Puts a Tracer where the callback finds trace_frame; returns a function setting its answer."""
    tracers = []

    def install(result):
        tracers.append(Tracer(result))
        monkeypatch.setattr(frame_callback, "trace_frame", tracers[-1])
        return tracers[-1]

    skipped = []
    monkeypatch.setattr(frame_callback, "capture_module",
                        lambda: types.SimpleNamespace(SKIP=SKIP, skip_code=skipped.append))
    install.skipped = skipped
    return install


def _info(code=_frame.__code__, is_root=True, num_entries=0, failures=(), args=None):
    args = _frame_args() if args is None else args
    return types.SimpleNamespace(code=code, func=None, args=args, globals={}, builtins={}, is_root=is_root,
                                 num_entries=num_entries, failures=list(failures))


ERROR = {"ok": False, "kind": "error", "reason": "shape mismatch", "filename": "/src/m.py", "lineno": 3,
         "line": "x + y"}
UNSUPPORTED = {"ok": False, "kind": "unsupported", "reason": "call to print is not supported",
               "filename": "/src/model.py", "lineno": 12, "line": "    print(x)\n"}


def _eager_recording(seen):
    def backend(gm, example_inputs, **kwargs):
        seen.append((gm, example_inputs, kwargs))
        return gm.forward

    return backend


def test_callback_compiles_a_traced_frame(hook, capsys):
    tracer = hook(_trace_result())
    seen = []
    callback = frame_callback.FrameCallback(_eager_recording(seen), backend_kwargs={"mode": "default"})
    kiln.set_logs(graph=True, guards=True)
    guards, fn = callback(_info())
    assert guards == "L['x'] is a tensor" and tracer.calls == [{"fullgraph": False}]
    (gm, examples, kwargs), = seen
    assert isinstance(gm, fx.GraphModule) and kwargs == {"mode": "default"}
    np.testing.assert_array_equal(examples[1].detach().numpy(), [10.0, 20.0])
    np.testing.assert_array_equal(fn(*_frame_args())["sum"].detach().numpy(), [11.0, 44.0])
    assert hook.skipped == [fn.__code__]  # the glue's code is marked SKIP
    err = capsys.readouterr().err
    assert "[kiln.graph] graph __compiled_fn_0 of _frame (" in err and "aten.add.Tensor" in err
    assert "[kiln.guards] guards of __compiled_fn_0 (entry 1 of _frame" in err and "L['x'] is a tensor" in err


def test_callback_skips_library_frames_unless_root(hook):
    tracer = hook(ERROR)
    callback = frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"))
    assert callback(_info(code=json.dumps.__code__, is_root=False)) is SKIP
    assert callback(_info(code=kiln.Tensor.__repr__.__code__, is_root=False)) is SKIP
    assert callback(_info(code=nn.Linear.forward.__code__, is_root=False)) is SKIP
    assert tracer.calls == []
    assert callback(_info(code=_frame.__code__, is_root=False)) is None
    assert callback(_info(code=json.dumps.__code__, is_root=True)) is None
    assert callback(_info(code=nn.Linear.forward.__code__, is_root=True)) is None
    assert len(tracer.calls) == 3


def test_callback_recompiles_and_stops_at_the_limit(hook, capsys):
    hook(_trace_result())
    callback = frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"))
    kiln.set_logs(recompiles=True)
    failure = "L['x'].size()[0] == 2 (got 3)"
    assert callback(_info(num_entries=1, failures=[failure])) is not SKIP
    err = capsys.readouterr().err
    assert "[kiln.recompiles] Recompiling _frame (" in err and f"    - {failure}" in err
    kiln.config.recompile_limit = 2
    with pytest.warns(UserWarning, match=r"recompile_limit \(2\).*size\(\)\[0\] == 2 \(got 3\)"):
        assert callback(_info(num_entries=2, failures=[failure, failure])) is SKIP
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per code object
        assert callback(_info(num_entries=2, failures=[failure])) is SKIP


def test_callback_unsupported_frames_run_eagerly_or_raise_under_fullgraph(hook, capsys):
    tracer = hook(UNSUPPORTED)
    kiln.set_logs(graph_breaks=True)
    assert frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"))(_info()) is SKIP
    assert "[kiln.graph_breaks] _frame (" in capsys.readouterr().err
    kiln.compiler.reset()
    strict = frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"), fullgraph=True)
    for _ in range(2):
        with pytest.raises(kiln.compiler.Unsupported) as info:
            strict(_info())
        assert str(info.value) == "call to print is not supported\n  at /src/model.py:12\n    print(x)"
        assert info.value.break_reason.lineno == 12
    assert tracer.calls == [{"fullgraph": False}, {"fullgraph": True}]  # not traced again after the first


def test_callback_runs_erroring_frames_normally(hook):
    tracer = hook(ERROR)
    callback = frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"))
    assert callback(_info()) is None and callback(_info()) is None
    assert len(tracer.calls) == 2


def test_callback_rejects_arguments_named_like_the_glue(hook):
    def clash(__o, /):
        return __o

    tracer = hook(_trace_result())
    callback = frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"))
    assert callback(_info(code=clash.__code__, args=(1,))) is SKIP and tracer.calls == []


def test_callback_backend_failures_warn_once_or_raise_when_strict(hook):
    hook(_trace_result())

    def broken(gm, example_inputs):
        raise NotImplementedError("no kernels today")

    callback = frame_callback.FrameCallback(broken)
    with pytest.warns(UserWarning, match="(?s)backend 'broken' failed compiling _frame.*no kernels today"):
        assert callback(_info()) is SKIP
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert callback(_info()) is SKIP
    kiln.config.strict = True
    with pytest.raises(kiln.compiler.BackendCompilerFailed, match="no kernels today") as info:
        callback(_info())
    assert isinstance(info.value.__cause__, NotImplementedError)
    kiln.compiler.reset()
    not_callable = frame_callback.FrameCallback(lambda gm, inputs: 3)
    with pytest.raises(kiln.compiler.BackendCompilerFailed, match="not callable"):
        not_callable(_info())


def test_verbose_backend_warning_has_the_traceback(hook):
    hook(_trace_result())

    def broken(gm, example_inputs):
        raise NotImplementedError("deep inside")

    kiln.config.verbose = True
    with pytest.warns(UserWarning, match=r"Traceback \(most recent call last\)"):
        frame_callback.FrameCallback(broken)(_info())


# -- explain ----------------------------------------------------------------------------------

def test_explain_records_graphs_and_breaks(hook):
    hook(_trace_result(guards="G['w'] is the tensor of id 7"))
    recorder = ExplainRecorder()
    frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"), recorder=recorder)(_info())
    hook(UNSUPPORTED)
    frame_callback.FrameCallback(kiln.compiler.lookup_backend("eager"), recorder=recorder)(
        _info(code=test_explain_records_graphs_and_breaks.__code__, args=()))
    out = recorder.output()
    # The frame that runs eagerly compiled no graph: no break reason (torch's), an other break.
    assert (out.graph_count, len(out.break_reasons), out.graph_break_count, out.op_count) == (1, 0, 0, 2)
    assert isinstance(out.graphs[0], fx.GraphModule)
    assert out.ops_per_graph == [["aten.add.Tensor", "aten.mul.Tensor"]]
    assert [r.reason for r in out.all_break_reasons] == ["call to print is not supported"]
    assert out.guards == ["G['w'] is the tensor of id 7"]
    text = str(out)
    assert text.startswith("""\
Graph Count: 1
Graph Break Count: 0
Op Count: 2
Break Reasons:
Other Breaks (no graph compiled up to them: torch._dynamo.explain lists none):
  Reason: call to print is not supported
    /src/model.py:12
      print(x)
Ops per Graph:
  Ops 1:
    aten.add.Tensor
    aten.mul.Tensor
Guards:
  Guard 1:
    G['w'] is the tensor of id 7
Compile Times:
  trace_frame: """)
    assert "  backend: " in text
    assert str(out.all_break_reasons[0]) == "call to print is not supported\n  at /src/model.py:12\n    print(x)"


# -- OptimizedModule --------------------------------------------------------------------------

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 3)
        self.scale = 2.0

    def forward(self, x):
        return self.fc(x) * self.scale


@pytest.fixture
def compiled_forward(monkeypatch):
    """OptimizedModule's CompiledFunction replaced by one that records its calls and runs eagerly."""
    calls = []

    def compiled_function(fn, callback):
        def run(*args, **kwargs):
            calls.append((fn, callback))
            return fn(*args, **kwargs)
        return run

    monkeypatch.setattr(optimized_module, "capture_module",
                        lambda: types.SimpleNamespace(CompiledFunction=compiled_function))
    return calls


def test_optimized_module_forwards_to_the_original(compiled_forward):
    net = Net()
    opt = kiln.compiler.OptimizedModule(net, "the callback")
    assert opt._orig_mod is net and isinstance(opt, nn.Module)
    assert list(opt.state_dict()) == ["_orig_mod.fc.weight", "_orig_mod.fc.bias"]
    assert [p is q for p, q in zip(opt.parameters(), net.parameters())] == [True, True]
    assert opt.fc is net.fc and opt.scale == 2.0
    opt.scale = 3.0
    opt.extra = "e"
    assert net.scale == 3.0 and net.extra == "e" and "extra" not in opt.__dict__
    del opt.extra
    assert not hasattr(net, "extra")
    assert "fc" in dir(opt) and "_orig_mod" in dir(opt)
    assert repr(opt) == "OptimizedModule(\n  (_orig_mod): " + repr(net).replace("\n", "\n  ") + "\n)"
    opt.eval()
    assert not net.training and not opt.training and not net.fc.training
    opt.training = True
    assert net.training
    x = kiln.ones(4, 2)
    np.testing.assert_array_equal(opt(x).detach().numpy(), net(x).detach().numpy())
    assert compiled_forward == [(Net.forward, "the callback")]
    assert bool(kiln.compiler.OptimizedModule(nn.Linear(1, 1), None))
    assert len(kiln.compiler.OptimizedModule(nn.Sequential(nn.ReLU(), nn.ReLU()), None)) == 2


def test_optimized_module_with_hooks_calls_the_module(compiled_forward):
    net = Net()
    opt = kiln.compiler.OptimizedModule(net, None)
    seen = []
    handle = net.register_forward_hook(lambda mod, args, out: seen.append(mod) or out + 1)
    x = kiln.ones(1, 2)
    np.testing.assert_array_equal(opt(x).detach().numpy(), (net.forward(x) + 1).detach().numpy())
    assert seen == [net] and compiled_forward == []
    handle.remove()
    opt(x)
    assert len(compiled_forward) == 1


def test_optimized_module_copies(compiled_forward):
    opt = kiln.compiler.OptimizedModule(Net(), "cb")
    shallow = copy.copy(opt)
    assert type(shallow) is kiln.compiler.OptimizedModule and shallow._orig_mod is opt._orig_mod
    np.testing.assert_array_equal(shallow(kiln.ones(1, 2)).detach().numpy(), opt(kiln.ones(1, 2)).detach().numpy())
    relu = kiln.compiler.OptimizedModule(nn.ReLU(), "cb")
    deep = copy.deepcopy(relu)
    assert type(deep) is kiln.compiler.OptimizedModule and deep._orig_mod is not relu._orig_mod
    np.testing.assert_array_equal(deep(kiln.tensor([-1.0, 2.0])).detach().numpy(), [0.0, 2.0])
    assert compiled_forward[-1] == (nn.ReLU.forward, "cb")


# -- end to end through the real frame hook ------------------------------------------------------
# These run the real hook with a test double for trace_frame that answers for the few frames
# below exactly as protocol 2 says (graph, guards, input and output recipes), so the callback's
# policy is tested on its own; the test_capture_* suites cover the real tracer.

eager_runs = []


def mul_add(x, y):
    eager_runs.append("mul_add")
    return {"out": x * y + x, "n": 3}


def prints(x):
    eager_runs.append("prints")
    return x + 1


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(kiln.tensor([2.0, 3.0]))

    def forward(self, x):
        eager_runs.append("Scale.forward")
        return x * self.w


def _trace_mul_add(info):
    cap = kiln._C._capture
    guards = cap.GuardTree()
    guards.local(0, "L['x']").check_tensor(info.args[0])
    guards.local(1, "L['y']").check_tensor(info.args[1])
    g = fx.Graph("mul_add")
    x, y = g.placeholder("x"), g.placeholder("y")
    g.output((g.call_function("aten.add.Tensor", (g.call_function("aten.mul.Tensor", (x, y)), x)),))
    return {"ok": True, "graph": g, "attrs": {}, "inputs": ["x", "y"],
            "output": "{'out': __o[0], 'n': __c[0]}", "constants": [3], "guards": guards, "op_count": 2}


def _trace_scale(info):
    cap = kiln._C._capture
    module, x = info.args
    guards = cap.GuardTree()
    guards.local(0, "L['self']").check_id(module)
    guards.local(1, "L['x']").check_tensor(x)
    g = fx.Graph("forward")
    xs = g.placeholder("x")
    g.output((g.call_function("aten.mul.Tensor", (xs, g.get_attr("w"))),))
    return {"ok": True, "graph": g, "attrs": {"w": module.w}, "inputs": ["x"], "output": "__o[0]",
            "constants": [], "guards": guards, "op_count": 1}


def _trace_prints(info):
    line = prints.__code__.co_firstlineno + 2
    return {"ok": False, "kind": "unsupported", "reason": "list.append is not supported",
            "filename": __file__, "lineno": line, "line": "    eager_runs.append(\"prints\")"}


@pytest.fixture
def tracer(monkeypatch):
    """The test-only trace_frame; returns the list of codes it traced."""
    known = {mul_add.__code__: _trace_mul_add, Scale.forward.__code__: _trace_scale,
             prints.__code__: _trace_prints}
    traced = []

    def trace_frame(info, options):
        traced.append(info.code)
        if info.code in known:
            return known[info.code](info)
        return {"ok": False, "kind": "unsupported", "reason": "the test tracer does not know this frame",
                "filename": info.code.co_filename, "lineno": info.code.co_firstlineno, "line": ""}

    monkeypatch.setattr(frame_callback, "trace_frame", trace_frame)
    eager_runs.clear()
    return traced


def _xy(n=2):
    return kiln.arange(n, dtype=kiln.float32), kiln.full([n], 2.0)


def test_compiled_function_caches_and_recompiles(tracer, capsys):
    kiln.set_logs(recompiles=True)
    # dynamic=False: one trace per compile (automatic dynamic shapes would trace the recompile
    # at probe sizes too; test_dynamic_shapes.py covers that).
    f = kiln.compile(mul_add, dynamic=False)
    x, y = _xy()
    out = f(x, y)
    assert out["n"] == 3 and eager_runs == [] and tracer == [mul_add.__code__]
    np.testing.assert_array_equal(out["out"].detach().numpy(), [0.0, 3.0])
    f(*_xy())
    f(x, y=y)
    assert len(tracer) == 1 and eager_runs == []
    np.testing.assert_array_equal(f(*_xy(3))["out"].detach().numpy(), [0.0, 3.0, 6.0])
    assert len(tracer) == 2 and len(kiln._C._capture.cache_entries(mul_add.__code__)) == 2
    assert "Recompiling mul_add (" in capsys.readouterr().err
    assert f.__name__ == "mul_add" and f.__wrapped__ is mul_add


def test_recompile_limit_runs_eagerly_with_one_warning(tracer):
    kiln.config.recompile_limit = 2
    f = kiln.compile(mul_add, dynamic=False)
    f(*_xy(1))
    f(*_xy(2))
    with pytest.warns(UserWarning, match=r"mul_add .*recompile_limit \(2\)"):
        np.testing.assert_array_equal(f(*_xy(3))["out"].detach().numpy(), [0.0, 3.0, 6.0])
    assert eager_runs == ["mul_add"] and len(tracer) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f(*_xy(4))
        f(*_xy(1))  # the code is skipped now: even a cached shape runs eagerly
    assert eager_runs == ["mul_add"] * 3


def test_decorators_and_a_custom_backend(tracer):
    seen = []
    assert kiln.compile()(mul_add)(*_xy())["n"] == 3 and eager_runs == []
    custom = kiln.compile(backend=_eager_recording(seen), mode="max-autotune")(mul_add)
    kiln.compiler.reset()
    custom(*_xy())
    (gm, examples, kwargs), = seen
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets == ["aten.mul.Tensor", "aten.add.Tensor"]
    assert len(examples) == 2 and kwargs == {"mode": "max-autotune"} and eager_runs == []


def test_frames_called_from_an_eager_frame_are_captured(tracer):
    @kiln.compile
    def outer(x, y):
        eager_runs.append("outer")
        json.dumps([1])  # a standard library frame: skipped, never traced
        return mul_add(x, y)["out"]

    np.testing.assert_array_equal(outer(*_xy()).detach().numpy(), [0.0, 3.0])
    assert tracer == [outer.__wrapped__.__code__, mul_add.__code__] and eager_runs == ["outer"]
    outer(*_xy())
    assert len(tracer) == 2 and eager_runs == ["outer"] * 2


def test_unsupported_frames_run_eagerly_or_raise_with_fullgraph(tracer):
    assert kiln.compile(prints)(1) == 2 and kiln.compile(prints)(2) == 3
    assert eager_runs == ["prints"] * 2 and tracer == [prints.__code__]
    kiln.compiler.reset()
    strict = kiln.compile(prints, fullgraph=True)
    message = r"list.append is not supported\n  at .*test_compile_api.py:\d+\n    eager_runs.append\("
    with pytest.raises(kiln.compiler.Unsupported, match=message):
        strict(1)
    assert eager_runs == ["prints"] * 2


def test_backend_failure_falls_back_to_eager(tracer):
    def broken(gm, example_inputs):
        raise RuntimeError("cannot compile")

    f = kiln.compile(mul_add, backend=broken)
    with pytest.warns(UserWarning, match="backend 'broken' failed"):
        np.testing.assert_array_equal(f(*_xy())["out"].detach().numpy(), [0.0, 3.0])
    assert eager_runs == ["mul_add"]
    kiln.compiler.reset()
    kiln.config.strict = True
    with pytest.raises(kiln.compiler.BackendCompilerFailed, match="cannot compile"):
        f(*_xy())


def test_disable_runs_without_capture(tracer):
    assert kiln.compiler.disable(mul_add)(*_xy())["n"] == 3
    assert kiln.compiler.disable()(mul_add)(*_xy())["n"] == 3
    assert tracer == [] and eager_runs == ["mul_add"] * 2


def test_compiled_module(tracer):
    scale = Scale()
    opt = kiln.compile(scale)
    assert isinstance(opt, kiln.compiler.OptimizedModule)
    np.testing.assert_array_equal(opt(kiln.ones(2)).detach().numpy(), [2.0, 3.0])
    opt(kiln.ones(2))
    assert tracer == [Scale.forward.__code__] and eager_runs == []
    handle = scale.register_forward_pre_hook(lambda mod, args: (args[0] * 10,))
    np.testing.assert_array_equal(opt(kiln.ones(2)).detach().numpy(), [20.0, 30.0])
    assert eager_runs == ["Scale.forward"]
    handle.remove()
    opt(kiln.ones(2))
    assert eager_runs == ["Scale.forward"] and len(tracer) == 1


def test_explain_end_to_end(tracer):
    out = kiln.explain(mul_add)(*_xy())
    assert out.graph_count == 1 and out.graph_break_count == 0 and out.op_count == 2
    assert "L['x']" in str(out.guards[0]) and "Guard 1:" in str(out)
    assert kiln._C._capture.cache_entries(mul_add.__code__) == []  # explain resets after itself
    out = kiln.explain(prints)(1)
    assert (out.graph_count, len(out.break_reasons), len(out.all_break_reasons), out.graph_break_count) == (0, 0, 1, 0)
    assert "Reason: list.append is not supported" in str(out)
    out = kiln.explain(Scale())(kiln.ones(2))
    assert out.graph_count == 1 and out.ops_per_graph == [["aten.mul.Tensor"]]
