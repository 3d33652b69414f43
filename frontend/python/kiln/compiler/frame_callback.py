"""The frame callback: what the frame hook calls on a cache miss (protocol 1 of the capture
design). It decides whether a frame is captured at all, traces it (trace_frame, protocol 2),
hands the graph to the backend and returns the new cache entry: (guards, glue).

Its answers to the hook: SKIP (run this code eagerly from now on, until reset), None (run this
call eagerly, try again next time) or (guards, glue).
"""
import itertools
import logging
import re
import time
import traceback
import warnings
import weakref

from .. import _C, _compiling, config
from .._logging import get_logger
from ..autograd.function import forget_applications
from ..fx import GraphModule
from . import debug_dir, dynamic, resume
from .aot import _written_arguments
from .errors import BackendCompilerFailed, BreakReason, Unsupported
from .explain import session_recorder
from .glue import GLUE_NAMES, argument_names, example_inputs, make_glue
from .hook import capture_module, trace_frame
from .skip_policy import is_skipped_file

_graph_log = get_logger("graph")
_guards_log = get_logger("guards")
_recompiles_log = get_logger("recompiles")
_breaks_log = get_logger("graph_breaks")
_aot_log = get_logger("aot")
_dynamic_log = get_logger("dynamic")


# Ops whose result never requires grad, whatever their inputs.
_NOT_DIFFERENTIABLE = frozenset({"aten.detach"})


def _needs_autograd(examples, attrs, graph=None):
    """True when running the graph must record autograd history: some op runs with grad mode on
    and reads a tensor that requires grad (an input, a parameter the graph reads as an attribute,
    or such an op's result). Grad mode follows the graph's `_set_grad_enabled` nodes, so an
    optimizer step (under no_grad) or detached copies of the parameters need none and go to the
    backend as an inference graph (AOT autograd would trace a joint graph for nothing). Without
    `graph`: whether any input or attribute requires grad under grad mode. The compiling
    backends differentiate such graphs with AOT autograd (aot.py)."""
    values = list(examples) + list(attrs.values() if isinstance(attrs, dict) else attrs)
    if not any(isinstance(t, _C.TensorBase) and t.requires_grad for t in values):
        return False
    grad_on = _C.is_grad_enabled()
    if graph is None:
        return grad_on
    needs = set()
    placeholders = iter(examples)
    for node in graph.nodes:
        if node.op == "placeholder":
            value = next(placeholders, None)
            if isinstance(value, _C.TensorBase) and value.requires_grad:
                needs.add(node)
        elif node.op == "get_attr":
            value = attrs.get(node.target) if isinstance(attrs, dict) else None
            if value is None or (isinstance(value, _C.TensorBase) and value.requires_grad):
                needs.add(node)
        elif node.op == "call_function" and node.target == "kiln._C._set_grad_enabled":
            grad_on = bool(node.args[0])
        elif node.op in ("call_function", "call_method", "call_module"):
            if not grad_on:
                # An in-place write under no_grad returns the tensor it wrote, which still
                # requires grad (a parameter renormalized, then read by the graph).
                if any(arg in needs for arg in _written_arguments(node)):
                    needs.add(node)
                continue
            if node.target in _NOT_DIFFERENTIABLE:
                continue
            if any(arg in needs for arg in _node_args(node)):
                return True
    return False


_SET_GRAD_ENABLED = "kiln._C._set_grad_enabled"
# A guard failure on the values kiln's library code read from a small integer tensor (a
# PackedSequence's lengths): "L['lengths'].tolist() == [3, 6, 2, 5] (got [...])".
_VALUES_GUARD = re.compile(r"^(.*)\.tolist\(\) == \[")


def _trace_frame(frame_info, options):
    """hook.trace_frame, with the tensors whose values changed between compiles of the frame's
    code left unread (automatic dynamic values: the first compile specializes to the values, the
    recompile after they changed breaks where they are read, as torch.compile does always)."""
    opaque = _state(frame_info.code).opaque_values
    return trace_frame(frame_info, {**options, "opaque_values": sorted(opaque)} if opaque else options)


def _end_in_entry_grad_mode(graph):
    """The grad mode `graph` leaves switched, or None when it leaves the mode as it found it.

    A graph cut inside a `with no_grad():` block by a break ends in the block's mode, and the
    graph of the resume function after it ends the block: each leaves grad mode switched, as the
    frame's code does at that point. The graph gets a switch back to the entry mode at its end,
    so every backend compiles a graph that leaves the mode as it found it, and the caller
    switches to the returned mode after the call (as TorchDynamo restores grad mode at a graph's
    end and sets it again in the code after the call)."""
    switches = [n for n in graph.nodes if n.op == "call_function" and str(n.target) == _SET_GRAD_ENABLED]
    entry = _C.is_grad_enabled()
    if not switches or bool(switches[-1].args[0]) == entry:
        return None
    output = next(n for n in graph.nodes if n.op == "output")
    with graph.inserting_before(output):
        graph.call_function(_SET_GRAD_ENABLED, (entry,))
    return bool(switches[-1].args[0])


def _switching_grad_mode_after(compiled, mode):
    def run(*args):
        out = compiled(*args)
        _C._set_grad_enabled(mode)
        return out
    return run


def _autocast_on():
    return _C._is_autocast_enabled("cpu") or _C._is_autocast_enabled("cuda")


def _in_autocast_state(compiled, result):
    """`compiled`, run with autocast off when the frame is entered with it on, and followed by
    a switch to the autocast state the frame's code leaves when that differs from the entry
    state. A graph traced under autocast holds its casts as ops: run again under autocast (the
    eager backend calls the ops), an op after the block's end would be cast. A break inside a
    `with autocast(...)` block leaves the state on for the breaking call and the resume function,
    and the resume function's graph that ends the block leaves it off (as eager code does)."""
    entry, leaves = result.get("entry_autocast_state"), result.get("autocast_state")
    run = compiled
    if _autocast_on():
        def run(*args):
            prev = _C._autocast_packed_state()
            _C._set_autocast_enabled("cpu", False)
            _C._set_autocast_enabled("cuda", False)
            try:
                return compiled(*args)
            finally:
                _C._set_autocast_packed_state(prev)
    if leaves is None or leaves == entry:
        return run

    def switching(*args):
        out = run(*args)
        _C._set_autocast_packed_state(leaves)
        return out
    return switching


def _node_args(node):
    stack = [node.args, node.kwargs]
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif isinstance(a, dict):
            stack.extend(a.values())
        elif hasattr(a, "op"):
            yield a


class _CodeState:
    """What the callbacks learned about one code object, kept until reset: the tracer's
    unsupported verdict (so a fullgraph frame is not traced again only to fail again) and the
    one-time warnings already given."""

    __slots__ = ("break_reason", "warned_backend", "warned_recompile_limit", "sizes", "dynamic_dims",
                 "static_dims", "wanted_dims", "floats", "dynamic_floats", "static_floats",
                 "numbers", "dynamic_numbers", "static_numbers", "described_guards", "opaque_values")

    def __init__(self):
        self.break_reason = None
        self.warned_recompile_limit = False
        self.warned_backend = False
        # Automatic dynamic shapes: each input's sizes at the last compile, and the dims that
        # changed between compiles (symbolic from then on).
        self.sizes = {}
        self.dynamic_dims = {}
        # Dims a compile wanted symbolic and got static (not one graph over them): not probed
        # again at later recompiles; and the dims the compile in progress wanted.
        self.static_dims = {}
        self.wanted_dims = {}
        # Floats an optimizer step reads (input expression -> value at the last compile), those
        # that changed between compiles (graph inputs from then on) and those that do not trace
        # as inputs (specialized): _float_inputs.
        self.floats = {}
        self.dynamic_floats = set()
        self.static_floats = set()
        # Automatic dynamic numbers (_number_inputs): the ints and floats of the arguments at the
        # last compile, those that changed (graph inputs from then on) and those that trace only
        # as constants.
        self.numbers = {}
        self.dynamic_numbers = set()
        # Tensors whose values kiln's library code read and that changed between compiles (guard
        # names): not read again (_trace_frame).
        self.opaque_values = set()
        self.static_numbers = set()
        # kiln.explain: the symbolic guards of graphs described over size symbols but compiled
        # for static sizes (the eager backend); a recompile they admit is not a new graph.
        self.described_guards = []


_code_states = weakref.WeakKeyDictionary()
_graph_ids = itertools.count()


def reset_state():
    """Forgets every code object's state and restarts graph numbering (kiln.compiler.reset)."""
    global _graph_ids
    _code_states.clear()
    resume.reset_state()
    forget_applications()
    _graph_ids = itertools.count()


def _state(code):
    state = _code_states.get(code)
    if state is None:
        state = _code_states[code] = _CodeState()
    return state


def _aliases_first_argument(node):
    """Whether a call's result is a view of its first argument ('view'), the argument itself
    written in place ('inplace'), or neither (None)."""
    if node.op != "call_function" or not node.args or not hasattr(node.args[0], "op"):
        return None
    try:
        schema = _C._fx.op_schema(str(node.target))["schema"]
    except Exception:  # noqa: BLE001 - not an op of the table (a Python function): no alias
        return None
    if "-> Tensor(a!)" in schema:
        return "inplace"
    if "-> Tensor(a" not in schema:
        return None
    # An op that may alias (`to`, `type_as`) copies when the dtype or device changes.
    meta, arg_meta = node.meta.get("tensor_meta"), node.args[0].meta.get("tensor_meta")
    if meta is not None and arg_meta is not None and (meta.dtype, meta.device) != (arg_meta.dtype, arg_meta.device):
        return None
    return "view"


def _detaching_outputs(compiled, graph):
    """`compiled`, with the outputs the graph returns from aten.detach detached again: the
    backends rebuild an output aliasing an input as a view of it (prims.view_of, which detach
    becomes), which required grad with no derivative (`return h.detach()` of a hidden state
    made backward through it fail, as repackage_hidden in a compiled function does)."""
    outputs = graph.output_node.args[0]
    outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
    detached = [i for i, o in enumerate(outputs) if str(getattr(o, "target", "")) == "aten.detach"]
    if not detached:
        return compiled

    def run(*args):
        out = list(compiled(*args))
        for i in detached:
            if isinstance(out[i], _C.TensorBase) and out[i].requires_grad:
                out[i] = out[i].detach()
        return tuple(out)

    return run


def _regenerate_views(graph, training):
    """Makes the outputs of `graph` that are views of a value it computes come back as views:
    such an output is replaced by its base (or taken from the base's own output) and the list
    returned says how to remake the view from it after the call, [(position, source position,
    [view nodes, innermost first])]; None when a view cannot be remade (a view op with a node
    argument besides its input). As AOT autograd regenerates an output that aliases an
    intermediate from the intermediate, at run time.

    Compiled, a view would come back as a copy: `y[0][1][0] = -1.0` breaking with y and y[0][1]
    live wrote into the copy and missed y. A lone view whose base nothing after the break holds
    (attention's `out.view(...)` of a linear, `med = x.sort().values[:, 4]` live at an
    `autograd.grad` break) is as good as a copy and stays, in a training graph too: AOT
    autograd's "unsafe view" output of torch, which hides such an alias from autograd (the
    training case ran the whole frame eagerly: nn.MultiheadAttention's output in the (L, N, E)
    layout is such a view, and mha_seq_first compiled 0 graphs where torch.compile makes 1)."""
    output = graph.output_node
    if output is None or not isinstance(output.args[0], (tuple, list)):
        return []
    outputs = list(output.args[0])
    by_root = {}
    for i, node in enumerate(outputs):
        if not hasattr(node, "op"):
            continue
        # `a = x.clone(); a[idx] = 0.5` returns the clone itself written in place (index_put_):
        # compiled it is the same fresh tensor. Only a view somewhere on the way is a problem;
        # the writes in place on the way are in the base's storage, so only views are replayed.
        base, views = node, []
        while (alias := _aliases_first_argument(base)) is not None:
            if alias == "view":
                views.append(base)
            base = base.args[0]
        if base.op not in ("placeholder", "get_attr"):
            by_root.setdefault(base, []).append((i, views[::-1]))
    regen = []
    for root, entries in by_root.items():
        if not any(views for _, views in entries) or len(entries) == 1:
            continue
        if any(hasattr(a, "op") for _, views in entries for v in views for a in _node_args_of(v)):
            return None
        source = next((i for i, views in entries if not views and outputs[i] is root), None)
        if source is None and training:
            # Not for a training graph whose base is not an output already: it would become one
            # more output with history of the graph's single autograd node, and code that
            # backpropagates two outputs of one node at different times (a GAN step:
            # errD_fake.backward(), later errG through fake) frees its saved tensors at the
            # first (torch.compile's AOT autograd fails the same way on such a graph). The frame
            # runs eagerly. (A base that is an output already, a module's output live with a
            # forward hook's `out.detach()` of it, adds no output: its views are remade.)
            return None
        if source is None:
            source = entries[0][0]
            outputs[source] = root
        regen += [(i, source, views) for i, views in entries if views]
    if regen:
        output.args = (tuple(outputs),)
    return regen


def _node_args_of(view):
    """The arguments of a view node besides its input."""
    return list(view.args[1:]) + list(view.kwargs.values())


def _remaking_views(compiled, regen):
    """`compiled`, with the outputs _regenerate_views replaced by their bases made views of
    them again (the view ops run eagerly, so a training graph's views get their autograd
    history from the base, as eager's)."""
    from ..fx import resolve_target

    steps = [(i, source, [(resolve_target(str(v.target)), tuple(v.args[1:]), dict(v.kwargs)) for v in views])
             for i, source, views in regen]

    def run(*args):
        out = list(compiled(*args))
        made = []
        for i, source, views in steps:
            value = out[source]
            for op, rest, kwargs in views:
                value = op(value, *rest, **kwargs)
            made.append((i, value))
        for i, value in made:
            out[i] = value
        return tuple(out)

    return run


def _is_tensor_module(obj):
    import types
    if not isinstance(obj, types.ModuleType):
        return False
    name = obj.__name__
    return name == "kiln" or name.startswith("kiln.") or name == "numpy" or name.startswith("numpy.")


def _has_tensor(obj, seen):
    """Whether `obj` is a tensor, an nn.Module (or its class), a numpy array, or a list, tuple,
    dict or namedtuple holding one (TorchDynamo's has_tensor_in_frame, convert_frame.py)."""
    key = id(obj)
    if key in seen:
        return seen[key]
    seen[key] = False
    from .. import nn
    if isinstance(obj, (_C.TensorBase, nn.Module)) or (type(obj) is type and issubclass(obj, nn.Module)):
        found = True
    elif _is_numpy_value(obj):
        found = True
    elif type(obj) in (list, tuple):
        found = any(_has_tensor(v, seen) for v in obj)
    elif type(obj) is dict:
        found = any(_has_tensor(v, seen) for v in list(obj.values()))
    elif isinstance(obj, tuple) and hasattr(type(obj), "_fields"):
        found = any(_has_tensor(getattr(obj, f), seen) for f in type(obj)._fields)
    else:
        found = False
    seen[key] = found
    return found


def _is_numpy_value(obj):
    # An ndarray or a numpy scalar, without importing numpy (kiln does not need it).
    return any(c.__module__ == "numpy" and c.__name__ in ("ndarray", "generic") for c in type(obj).__mro__)


def has_tensor_in_frame(frame_info):
    """Whether a frame that is not a compiled function's own has anything to compile, as
    TorchDynamo decides before tracing one (convert_frame.py's has_tensor_in_frame, which runs
    the frame eagerly otherwise): a global it names is kiln's (or numpy's) module, or an
    argument or free variable holds a tensor or module. A comprehension over a list of tensors
    with no tensor of its own in scope (`[o * 2 for o in out]` on 3.11) runs eagerly, as with
    torch.compile; `[t * i for i in range(3)]` (t a free variable) is captured."""
    code = frame_info.code
    globals_ = frame_info.globals
    for name in code.co_names:
        if name in globals_ and _is_tensor_module(globals_[name]):
            return True
    seen = {}
    if any(_has_tensor(v, seen) for v in frame_info.args):
        return True
    for cell in getattr(frame_info.func, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if _has_tensor(value, seen):
            return True
    return False


def _float_scope(frame_info):
    """The function whose floats a frame reads: the step a shared wrapper runs (the code at
    the end of its `__wrapped__` chain), else None (the frame's code)."""
    import inspect

    func = getattr(frame_info, "func", None)
    if getattr(func, "__wrapped__", None) is None:
        return None
    try:
        return getattr(inspect.unwrap(func), "__code__", None)
    except ValueError:  # a cycle of __wrapped__
        return None


def _where(code):
    return f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"


def _warn(code, message):
    # Attributed to the user's function, not to this file: that is what the user can act on.
    warnings.warn_explicit(message, UserWarning, code.co_filename, code.co_firstlineno)


def _backend_name(backend):
    return getattr(backend, "__name__", None) or repr(backend)


class FrameCallback:
    """The callback of one kiln.compile: its backend (a callable), the keyword arguments the
    backend gets (mode, options), fullgraph, and an optional ExplainRecorder (kiln.explain).
    What it captures also goes to the recording session of the `kiln explain` command when
    one is active, and to kiln.config.debug_dir when set."""

    def __init__(self, backend, *, fullgraph=False, backend_kwargs=None, recorder=None, dynamic=None,
                 describe_dynamic=False):
        self.backend = backend
        self.fullgraph = fullgraph
        self.dynamic = dynamic
        # kiln.explain: frames with symbolic dims (mark_dynamic) are probed to describe their
        # symbolic signature even for a backend that compiles static sizes only.
        self.describe_dynamic = describe_dynamic
        self.backend_kwargs = dict(backend_kwargs or {})
        self.recorder = recorder
        self.graphs_compiled = 0  # graphs (with ops) captured so far: the graph-break log says

    def __call__(self, frame_info):
        # Saved-tensor hooks in effect (a checkpointed function running eagerly) are the eager
        # code's: the trace and the compile record on fakes, and must not pack through them.
        _C._push_saved_tensors_hooks(None, None)
        try:
            return self._on_frame(frame_info)
        finally:
            _C._pop_saved_tensors_hooks()

    def _on_frame(self, frame_info):
        capture = capture_module()
        code = frame_info.code
        entry = _compiling.is_captured_entry(code)
        if not frame_info.is_root and is_skipped_file(code.co_filename) and not entry:
            if code.co_name != "forward" or not frame_info.args or not _compiling.is_library_module(
                    frame_info.args[0]):
                return capture.SKIP
            if not _compiling.has_forward_hooks(frame_info.args[0]):
                # Another module of the class may have hooks: decided again at the next call.
                return None
        if not frame_info.is_root and not entry and not has_tensor_in_frame(frame_info):
            return None  # this call eagerly; the next may hold tensors
        state = _state(code)
        if state.break_reason is not None:
            return self._unsupported(code, state.break_reason)
        if frame_info.num_entries >= config.recompile_limit:
            self._warn_recompile_limit(code, state, frame_info.failures)
            return capture.SKIP
        if frame_info.num_entries:
            for failure in frame_info.failures:
                match = _VALUES_GUARD.match(failure)
                if match:
                    state.opaque_values.add(match.group(1))
            failures = "\n".join(f"    - {failure}" for failure in frame_info.failures)
            _recompiles_log.info("Recompiling %s\n    triggered by the guard failure(s):\n%s",
                                 _where(code), failures)
        collision = sorted(set(argument_names(code)) & set(GLUE_NAMES))
        if collision:
            return self._break(code, state, BreakReason(
                f"argument name(s) {', '.join(collision)} are reserved by kiln's glue code",
                code.co_filename, code.co_firstlineno, ""))

        if entry:
            _compiling.prepare_capture(code, frame_info.args)
        start = time.perf_counter()
        result = _trace_frame(frame_info, {"fullgraph": self.fullgraph})
        self._time(code, "trace_frame", start)
        numbers = [] if entry else self._changed_numbers(state, result)
        if result["ok"] and entry:
            result = self._float_inputs(code, state, frame_info, result)
        elif result["ok"] and numbers:
            result = self._number_inputs(code, state, frame_info, result, numbers)
        if not result["ok"]:
            if result["kind"] == "unsupported":
                # (A library step that does not trace runs eagerly as a whole: no partial graphs
                # and resume functions inside kiln's own code.)
                library = entry and not frame_info.is_root
                if not self.fullgraph and "instruction" in result and not library:
                    entry = self._partial(code, state, frame_info, resume.BreakSite(code, result), numbers)
                    if entry is not None:
                        return entry
                # (No place: the frame broke before its first instruction, wrapping an argument
                # such as a sparse tensor; the function's own line then.)
                if not result["filename"]:
                    result = dict(result, filename=code.co_filename, lineno=code.co_firstlineno)
                return self._break(code, state, BreakReason.of_failure(result))
            # The user's code raised: running it eagerly gives them the real exception.
            _breaks_log.debug("tracing %s raised: %s (%s:%d); running this call eagerly", _where(code),
                              result["reason"], result["filename"], result["lineno"])
            return None
        return self._compile(code, state, frame_info, result)

    def _float_inputs(self, code, state, frame_info, result):
        """`result` traced again with the floats that changed since the last compile of `code`
        as graph inputs (an lr a scheduler sets at every step), as TorchDynamo's automatic
        dynamic floats: the first step compiles with the lr as a constant, the second with it
        as an input, and later steps reuse that graph. A float the traced code cannot take as a
        tensor (it branches on it: SGD's `momentum != 0`) stays a guarded constant."""
        floats = dict(result.get("floats") or {})
        # What changed is remembered per function the frame runs, as TorchDynamo's per code
        # object: kiln's optimizers share one step wrapper (one code object), but SGD's lr is
        # not Adam's (SGD's first step after an Adam compiled its lr as an input at once, where
        # torch.compile specializes it first).
        scope = _float_scope(frame_info)
        for expr, value in floats.items():
            before = state.floats.get((scope, expr))
            if before is not None and before != value:
                state.dynamic_floats.add((scope, expr))
            state.floats[(scope, expr)] = value
        wanted = sorted(e for e in floats if (scope, e) in state.dynamic_floats - state.static_floats)
        if not wanted:
            return result

        def traced(exprs):
            start = time.perf_counter()
            out = _trace_frame(frame_info, {"fullgraph": self.fullgraph, "dynamic_floats": exprs})
            self._time(code, "trace_frame", start)
            return out

        dynamic = traced(wanted)
        if not dynamic["ok"] and len(wanted) > 1:
            alone = [expr for expr in wanted if traced([expr])["ok"]]
            state.static_floats.update((scope, e) for e in set(wanted) - set(alone))
            dynamic = traced(alone) if alone else dynamic
        elif not dynamic["ok"]:
            state.static_floats.update((scope, e) for e in wanted)
        if not dynamic["ok"]:
            _recompiles_log.info("%s: the floats %s that changed since the last compile stay constants (%s)",
                                 _where(code), ", ".join(wanted), dynamic["reason"])
            return result
        _recompiles_log.info("%s: floats that change between calls are graph inputs: %s", _where(code),
                             ", ".join(e for e in wanted if (scope, e) not in state.static_floats))
        return dynamic

    @staticmethod
    def _changed_numbers(state, result):
        """The input expressions of the int and float arguments `result`'s trace read whose value
        changed since the last compile of the code (automatic dynamic numbers, as TorchDynamo's
        automatic dynamic SymInts: the first compile specializes them, the recompile a change
        causes makes them graph inputs), less those that trace only as constants."""
        read = {**dict(result.get("ints") or {}), **dict(result.get("floats") or {})}
        for expr, value in read.items():
            before = state.numbers.get(expr)
            if before is not None and (before != value or type(before) is not type(value)):
                state.dynamic_numbers.add(expr)
            state.numbers[expr] = value
        return sorted(e for e in read if e in state.dynamic_numbers - state.static_numbers)

    def _number_inputs(self, code, state, frame_info, result, numbers, options=None):
        """`result` traced again with the ints and floats `numbers` (_changed_numbers) as graph
        inputs (kiln._traced_numbers), or `result` itself when none traces so; a number whose
        value the traced code needs (a branch on it, `range(n)`, an index) stays a constant,
        specialized, from then on."""
        options = dict(options or {}, fullgraph=self.fullgraph if options is None else False)

        def traced(exprs):
            start = time.perf_counter()
            out = _trace_frame(frame_info, {**options, "dynamic_numbers": exprs})
            self._time(code, "trace_frame", start)
            return out

        dynamic = traced(numbers)
        if not dynamic["ok"] and len(numbers) > 1:
            alone = [expr for expr in numbers if traced([expr])["ok"]]
            state.static_numbers.update(set(numbers) - set(alone))
            dynamic = traced(alone) if alone else dynamic
        elif not dynamic["ok"]:
            state.static_numbers.update(numbers)
        if not dynamic["ok"]:
            _recompiles_log.info("%s: the numbers %s that changed since the last compile stay constants (%s)",
                                 _where(code), ", ".join(numbers), dynamic["reason"])
            return result
        made = [e for e in numbers if e not in state.static_numbers]
        dynamic["number_options"] = {"dynamic_numbers": made}
        _recompiles_log.info("%s: numbers that change between calls are graph inputs (automatic dynamic): %s",
                             _where(code), ", ".join(made))
        for e in set(numbers) - set(made):
            _recompiles_log.info("%s: %s stays a constant (its value is needed while tracing)", _where(code), e)
        return dynamic

    def _partial(self, code, state, frame_info, site, numbers=()):
        """A graph break that keeps compiling (resume.py): the cache entry of the graph up to
        `site` and a glue going on from there, or None when the frame must run eagerly. The
        numbers that changed since the last compile (`numbers`) are graph inputs where they
        trace so."""
        why = site.resumable()
        if why is None:
            result = self._retrace(code, frame_info, site)
            if result["ok"] and numbers:
                result = self._number_inputs(code, state, frame_info, result, numbers, site.retrace_options())
            if not result["ok"]:  # the values at the instruction cannot be rebuilt
                moved = site.at_statement_start()
                if moved is not None:
                    site, result = moved, self._retrace(code, frame_info, moved)
            if not result["ok"]:
                why = f"tracing up to the break failed: {result['reason']}"
            elif (regen := _regenerate_views(result["graph"], _needs_autograd(
                    example_inputs(code, frame_info.args, result["inputs"], result["constants"]),
                    result["attrs"], result["graph"]))) is None:
                # A live view whose view op cannot be replayed from its base after the call.
                why = "a live tensor is a view of a value computed before the break"
            elif site.kind == "generic" and result["op_count"] < site.min_ops:
                # As TorchDynamo: nothing to compile before an instruction that is not a call or
                # a branch (no checkpoint to compile up to), so the frame runs eagerly as a whole.
                why = "no operation before it" if not result["op_count"] else "too few operations before it"
            else:
                result["view_outputs"] = regen
        if why is not None:
            _breaks_log.debug("graph break in %s at %s:%d not resumed (%s)", _where(code),
                              site.reason.filename, site.reason.lineno, why)
            return None
        compiled_before = self.graphs_compiled
        try:
            entry = self._compile(code, state, frame_info, result, site)
        except resume.ResumeUnsupported as error:
            _breaks_log.debug("graph break in %s not resumed (%s)", _where(code), error)
            return None
        if entry is not None:
            ends_graph = self.graphs_compiled > compiled_before
            graphs = "1 graph" if result["op_count"] else "no graph"
            after = {"call": "a resume function after the call",
                     "subscr": "a resume function after the subscript",
                     "jump": "a resume function at either branch",
                     "generic": "the rest of the frame eagerly"}[site.kind]
            stack = ""
            if len(site.reason.user_stack) > 1:
                stack = "\n  user stack:\n" + site.reason.stack_text(4).rstrip("\n")
            _breaks_log.info("graph break in %s: %s (%s:%d); %s before it (%d ops), then %s; graphs "
                             "this compiled function has compiled: %d%s", _where(code), site.reason.reason,
                             site.reason.filename, site.reason.lineno, graphs, result["op_count"], after,
                             self.graphs_compiled, stack)
            debug_dir.dump_break(self, code, site.reason)
            for recorder in self._recorders(code):
                recorder.add_break(site.reason, ends_graph)
        return entry

    def _retrace(self, code, frame_info, site):
        start = time.perf_counter()
        result = _trace_frame(frame_info, {"fullgraph": False, **site.retrace_options()})
        self._time(code, "trace_frame", start)
        return result

    def _compile(self, code, state, frame_info, result, site=None):
        leaves_grad_mode = _end_in_entry_grad_mode(result["graph"])
        gm = GraphModule(result["attrs"], result["graph"])
        examples = example_inputs(code, frame_info.args, result["inputs"], result["constants"])
        if not result["op_count"]:
            # Nothing to compile (a frame without tensor ops: a namedtuple's __new__, `return y`
            # after a break, nothing before one): the graph only hands values through; as
            # TorchDynamo, which compiles no graph without a call in it, no graph is counted.
            run = gm.forward
            if leaves_grad_mode is not None:
                run = _switching_grad_mode_after(run, leaves_grad_mode)
            return self._glue_entry(code, frame_info, result, site, _in_autocast_state(run, result))
        traces, static_result, described = None, result, None
        served = self._served_by_a_described_graph(state, frame_info)
        # Training graphs are compiled over size symbols by AOT autograd for the inductor backend
        # (aot.compile_training_dynamic); other backends get them through gm.kiln_dynamic.
        # (A graph before a break is probed as it was traced: up to the break, `site`.)
        # (Outputs remade as views of their bases after the call (_regenerate_views) are not
        # in the probe traces: such a graph compiles for static sizes.)
        # (kiln.explain describes training graphs over size symbols too: its counts are those of
        # a compile that makes them symbolic, as the inductor backend does.)
        if leaves_grad_mode is None and not result.get("view_outputs") and (
                not _needs_autograd(examples, result["attrs"])
                or _backend_name(self.backend) == "inductor" or self.describe_dynamic):
            traces = self._dynamic_traces(code, state, frame_info, result, examples, site)
            if traces is not None and not getattr(self.backend, "supports_dynamic_shapes", False):
                # Described (kiln.explain), not compiled over: the graph runs at the call's sizes.
                state.described_guards.append(traces.result["guards"])
                described, traces = traces.describe(), None
        else:
            # The sizes are remembered all the same, so that the next compile sees which dims
            # changed (a training forward then an eval one at another batch: the second is
            # symbolic, as with torch.compile).
            self._wanted_dynamic_dims(state, result["inputs"], examples)
            state.wanted_dims = {}
            if traces is not None:
                result = traces.result
                gm = GraphModule(result["attrs"], result["graph"])
                gm.kiln_dynamic = traces
        name = f"__compiled_fn_{next(_graph_ids)}"
        # Compiling (retracing, debug dumps) may run random ops; the generator must not advance,
        # so the compiled call draws what the eager call would.
        rng_state = _C.get_rng_state()
        dump = debug_dir.dump_graph(
            self, code, name, gm=gm, graph=result["graph"], guards=result["guards"],
            op_count=result["op_count"], entry=frame_info.num_entries + 1,
            backend=_backend_name(self.backend))
        start = time.perf_counter()
        try:
            with debug_dir.compiling(dump):
                needs_autograd = _needs_autograd(examples, result["attrs"], gm.graph)
                if needs_autograd and (leaves_grad_mode is not None or not _C.is_grad_enabled()):
                    # A graph that switches grad mode for the code after it (a break inside a
                    # `with` block), or is called with grad mode off and turns it on inside (a
                    # resume function starting in a `no_grad` block whose end it passes), and
                    # records autograd: AOT autograd's function would run in the mode of the
                    # call, not of the block (its outputs would not require grad); op by op the
                    # switches are real.
                    _aot_log.info("%s: %s needs autograd inside a grad-mode block a break cut; it "
                                  "runs op by op under the autograd engine", _where(code), name)
                    compiled = gm.forward
                elif needs_autograd and getattr(self.backend, "__module__", None) == __package__ + ".backends":
                    compiled, gm, traces = self._compile_training(code, name, gm, examples, traces)
                    result = traces.result if traces is not None else static_result
                    self._remember_static_dims(state, traces)
                else:
                    compiled, gm, traces = self._backend_compile(code, frame_info, gm, examples, traces)
                    result = traces.result if traces is not None else static_result
                    self._remember_static_dims(state, traces)
            if not callable(compiled):
                raise TypeError(f"the backend returned a {type(compiled).__name__}, which is not callable")
        except Exception as error:  # noqa: BLE001 - any backend error falls back to eager
            return self._backend_failed(code, state, error)
        finally:
            self._time(code, "backend", start)
            _C.set_rng_state(rng_state)
        if leaves_grad_mode is not None:
            compiled = _switching_grad_mode_after(compiled, leaves_grad_mode)
        compiled = _in_autocast_state(compiled, result)
        compiled = _detaching_outputs(compiled, gm.graph)
        if result.get("view_outputs"):
            compiled = _remaking_views(compiled, result["view_outputs"])
        entry = self._glue_entry(code, frame_info, result, site, compiled)

        if traces is not None:
            _dynamic_log.info("graph %s of %s is over size symbols: %s (guarded %d <= s <= %d)", name,
                              _where(code), traces.describe(), 2, traces.signature.max_size)
            if frame_info.num_entries:
                _recompiles_log.info("%s recompiled over size symbols: %s", _where(code), traces.describe())
        _graph_log.info("graph %s of %s:\n%s", name, _where(code), result["graph"])
        if _graph_log.isEnabledFor(logging.DEBUG):  # gm.code generates the Python source
            _graph_log.debug("Python code of %s:\n%s", name, gm.code)
        _guards_log.info("guards of %s (entry %d of %s):\n%s", name, frame_info.num_entries + 1,
                         _where(code), result["guards"])
        if served:
            # kiln.explain counts the graphs a compile over size symbols would make: this call
            # recompiled (the eager backend runs static sizes) where that graph would serve it.
            return entry
        self.graphs_compiled += 1
        for recorder in self._recorders(code):
            recorder.add_graph(gm, result["op_count"], result["guards"], examples,
                               dynamic=traces.describe() if traces is not None else described)
        return entry

    def _served_by_a_described_graph(self, state, frame_info):
        """kiln.explain: whether a graph described over size symbols earlier admits this call."""
        if not self.describe_dynamic or frame_info.num_entries == 0 or not state.described_guards:
            return False
        try:
            return any(g.check_frame(frame_info.func, tuple(frame_info.args)) is None
                       for g in state.described_guards)
        except (TypeError, ValueError):  # a frame check_frame cannot rebuild
            return False

    def _backend_compile(self, code, frame_info, gm, examples, traces):
        """(compiled, gm, traces) of the backend on gm. A graph over size symbols the backend
        cannot make one program of (DynamicUnsupported: it is not the same graph over them)
        is tried again over each symbol alone, then for static sizes."""
        if traces is None:
            return self.backend(gm, examples, **self.backend_kwargs), gm, None
        tries = [traces]
        sig = traces.signature
        first_error = None
        while tries:
            t = tries.pop(0)
            if t is None:
                continue
            tgm = GraphModule(t.result["attrs"], t.result["graph"])
            tgm.kiln_dynamic = t
            try:
                return self.backend(tgm, examples, **self.backend_kwargs), tgm, t
            except dynamic.DynamicUnsupported as error:
                _dynamic_log.info("%s: no graph over the size symbols %s (%s)", _where(code), t.describe(), error)
                again = self._probe_again_avoiding(code, frame_info, examples, traces, t, error.sizes)
                if again is not None:
                    tries.insert(0, again)
                    continue
                if first_error is None:
                    first_error = error
                    if len(sig.hints) > 1:
                        tensors = {e: x for e, x in zip(traces.static_result["inputs"], examples)
                                   if isinstance(x, _C.TensorBase)}
                        tries = [self._probe(code, frame_info, traces.static_result, tensors, sig.restrict([i]),
                                             traces.trace_options)
                                 for i in range(len(sig.hints))]
                        tries = [t if isinstance(t, dynamic.Traces) else None for t in tries]
        _dynamic_log.info("%s: compiling for static sizes", _where(code))
        static = traces.static_result
        sgm = GraphModule(static["attrs"], static["graph"])
        return self.backend(sgm, examples, **self.backend_kwargs), sgm, None

    def _probe_again_avoiding(self, code, frame_info, examples, traces, t, sizes):
        """The frame probed again over t's symbols without the probe sizes `sizes` (whose graphs
        had another node count: a size equal to an int constant of the program), once per
        trace and never without an end of the range; None otherwise."""
        ends = {dynamic.MIN_SIZE, t.signature.max_size}
        if not sizes or sizes & ends or getattr(t, "avoided", None) is not None:
            return None
        tensors = {e: x for e, x in zip(traces.static_result["inputs"], examples)
                   if isinstance(x, _C.TensorBase)}
        again = self._probe(code, frame_info, traces.static_result, tensors, t.signature, t.trace_options,
                            avoid=sizes)
        if not isinstance(again, dynamic.Traces):
            return None
        again.avoided = sizes
        _dynamic_log.info("%s: probing again without the sizes %s", _where(code), sorted(sizes))
        return again

    def _remember_static_dims(self, state, traces):
        got = {}
        if traces is not None:
            for expr, ids in traces.signature.dims.items():
                got[expr] = {d for d, i in enumerate(ids) if i >= 0}
        for expr, dims in state.wanted_dims.items():
            missed = dims - got.get(expr, set())
            if missed:
                state.static_dims.setdefault(expr, set()).update(missed)
        state.wanted_dims = {}

    def _wanted_dynamic_dims(self, state, inputs, examples):
        """Per input expression, the dims to make symbolic (dynamic.py's policy)."""
        tensors = {e: t for e, t in zip(inputs, examples) if isinstance(t, _C.TensorBase)}
        if self.dynamic is False:
            return tensors, {}
        if self.dynamic is True:
            return tensors, {e: set(range(t.dim())) for e, t in tensors.items()}
        wanted = {}
        for expr, t in tensors.items():
            shape = tuple(t.shape)
            before = state.sizes.get(expr)
            if before is not None and len(before) == len(shape):
                changed = {d for d, (a, b) in enumerate(zip(before, shape)) if a != b}
                if changed:
                    state.dynamic_dims.setdefault(expr, set()).update(changed)
            state.sizes[expr] = shape
            dims = state.dynamic_dims.get(expr, set()) | dynamic.marked_dims(t)
            if dims:
                wanted[expr] = dims
        return tensors, wanted

    def _dynamic_traces(self, code, state, frame_info, result, examples, site=None):
        """The frame (up to the break at `site`, when given) traced with size symbols
        (dynamic.Traces), or None for a static compile."""
        extra = site.retrace_options() if site is not None else {}
        extra.update(result.get("number_options") or {})  # the probes trace the same numbers as inputs
        tensors, wanted = self._wanted_dynamic_dims(state, result["inputs"], examples)
        wanted = {e: d - state.static_dims.get(e, set()) for e, d in wanted.items()}
        wanted = {e: d for e, d in wanted.items() if d}
        # (Dims of size 0 or 1 and non-contiguous inputs are static for this call only.)
        state.wanted_dims = {e: {x for x in d if tensors[e].shape[x] >= 2} for e, d in wanted.items()
                             if tensors[e].is_contiguous()}
        if not wanted or not (getattr(self.backend, "supports_dynamic_shapes", False) or self.describe_dynamic):
            return None
        sig = dynamic.choose(tensors, wanted)
        if not sig:
            return None
        if len(sig.hints) > dynamic.MAX_SYMBOLS:
            _dynamic_log.info("%s: %d size symbols (at most %d are fitted); compiling for static sizes",
                              _where(code), len(sig.hints), dynamic.MAX_SYMBOLS)
            return None
        traces = self._probe(code, frame_info, result, tensors, sig, extra)
        while isinstance(traces, set):
            # The traced code compared sizes of these symbols (it may branch on them): they
            # are specialized, the others traced again.
            keep = [i for i in range(len(sig.hints)) if i not in traces]
            _dynamic_log.info("%s: the code compares sizes of %s; they are specialized", _where(code),
                              ", ".join(f"s{i}" for i in sorted(traces)))
            if not keep:
                return None
            sig = sig.restrict(keep)
            traces = self._probe(code, frame_info, result, tensors, sig, extra)
        if traces is None and len(sig.hints) > 1:
            # Specialize what does not trace over a symbol (a dim a parameter's size pins, as
            # `layer_norm(x, [d], weight)`): the symbols that trace alone, then together.
            alone = [i for i in range(len(sig.hints))
                     if isinstance(self._probe(code, frame_info, result, tensors, sig.restrict([i]), extra),
                                   dynamic.Traces)]
            if len(alone) > 1:
                traces = self._probe(code, frame_info, result, tensors, sig.restrict(alone), extra)
            if not isinstance(traces, dynamic.Traces) and alone:
                traces = self._probe(code, frame_info, result, tensors, sig.restrict(alone[:1]), extra)
        return traces if isinstance(traces, dynamic.Traces) else None

    def _fit_range(self, code, frame_info, tensors, sig, extra):
        """`sig` with its guarded maximum lowered to the largest size the frame traces at, when
        it does not trace with every symbol at the maximum (a model whose causal mask is
        block_size long takes sequences up to block_size only): found by bisection between
        the traced sizes and the maximum, with every symbol at the same size."""
        def traces_at(size):
            point = tuple(size for _ in sig.hints)
            return _trace_frame(frame_info, {"fullgraph": self.fullgraph, **extra,
                                            "sizes": sig.sizes_at(point, tensors)})["ok"]

        start = time.perf_counter()
        try:
            low, high = max(sig.hints), sig.max_size
            if traces_at(high) or not traces_at(low):
                return sig
            while high - low > 1:
                mid = (low + high) // 2
                low, high = (mid, high) if traces_at(mid) else (low, mid)
        finally:
            self._time(code, "trace_frame", start)
        _dynamic_log.info("%s: the frame traces at sizes up to %d only: guarded 2 <= s <= %d", _where(code), low, low)
        return sig.with_max_size(low)

    def _loop_bounds(self, code, frame_info, sig, extra):
        """The symbols of sizes the frame loops over (`for i in range(t)`), from a trace at the
        call's sizes: they specialize before the range is fitted, whose traces at the largest
        sizes would unroll the loop thousands of times."""
        start = time.perf_counter()
        try:
            dynamic.begin_trace()
            _trace_frame(frame_info, {"fullgraph": self.fullgraph, **extra, "dynamic": sig.dims,
                                      "max_dynamic_size": sig.max_size})
            return dynamic.loop_bound_symbols()
        finally:
            dynamic.begin_trace()
            self._time(code, "trace_frame", start)

    def _probe(self, code, frame_info, result, tensors, sig, extra, avoid=()):
        """The frame traced over `sig`'s symbols at the probe points (dynamic.Traces); None when
        the traces are not one graph; the set of symbol ids whose sizes the code compared.
        `extra`: trace_frame options of a graph before a break (resume.BreakSite)."""
        unrolled = self._loop_bounds(code, frame_info, sig, extra)
        if unrolled:
            return unrolled
        sig = self._fit_range(code, frame_info, tensors, sig, extra)
        options = {"fullgraph": self.fullgraph, **extra, "dynamic": sig.dims, "max_dynamic_size": sig.max_size}
        start = time.perf_counter()
        compared = set()
        try:
            dynamic.begin_trace((dynamic.MIN_SIZE, sig.max_size))
            traced = _trace_frame(frame_info, options)
            compared |= dynamic.compared_symbols()
            probes = []
            # (Comparisons are taken from the trace at the call's sizes only: at a probe point a
            # small symbol value often equals a static size, whose comparisons are not the
            # symbol's.)
            # The static sizes of the program (of attributes, and inputs' other dims) are not
            # probed: see dynamic.probe_points.
            avoid = set(avoid) | {s for t in result["attrs"].values() if isinstance(t, _C.TensorBase)
                                  for s in t.shape}
            for expr, t in tensors.items():
                avoid |= {s for s, i in zip(t.shape, sig.dims.get(expr, [-1] * t.dim())) if i < 0}
            try:
                points = dynamic.probe_points(sig, avoid)
            except dynamic.DynamicUnsupported:
                return None
            for point in points:
                probes.append((point, _trace_frame(frame_info, {**options, "sizes": sig.sizes_at(point, tensors)})))
                if not probes[-1][1]["ok"]:
                    break
        finally:
            dynamic.begin_trace()
            self._time(code, "trace_frame", start)
        if compared:
            return compared
        dynamic.size_break_state(result, [traced] + [r for _, r in probes])
        why = dynamic.compare_traces(traced, result, [r for _, r in probes])
        if why is not None:
            _dynamic_log.info("%s: not traced over size symbols %s (%s)", _where(code), sig.describe(), why)
            return None
        positions = {i for i, e in enumerate(result["inputs"]) if e in sig.dims}
        traces = dynamic.Traces(sig, traced, result, [tuple(sig.hints)] + [p for p, _ in probes],
                                [GraphModule(traced["attrs"], traced["graph"])]
                                + [GraphModule(r["attrs"], r["graph"]) for _, r in probes], positions)
        traces.trace_options = extra  # to probe again over fewer symbols
        return traces

    def _glue_entry(self, code, frame_info, result, site, compiled):
        capture = capture_module()
        body, namespace = None, {}
        if site is not None:
            body = resume.glue_body(site, frame_info, result["break_state"], namespace, capture, self)
            resume.guard_closure(result["guards"], frame_info)
        prelude = list(result.get("lets", ())) + list(result.get("side_effects", ()))
        glue = make_glue(code, compiled, result["inputs"], result["output"], result["constants"], body,
                         namespace, prelude)
        capture.skip_code(glue.__code__)  # the hook never captures the glue itself
        return result["guards"], glue

    def _compile_training(self, code, name, gm, examples, traces=None):
        """(compiled, gm, traces): AOT autograd (aot.py) for the inductor and aot_eager backends;
        the eager backend, and graphs AOT autograd does not handle yet, run op by op under the
        autograd engine. With `traces` (the frame traced over size symbols, inductor only) the
        forward and backward are compiled over the symbols; when they are not one graph over
        them (DynamicUnsupported), for static sizes, and traces is None on return."""
        backend = _backend_name(self.backend)
        if traces is not None:
            compiled = self._compile_training_dynamic(code, name, gm, examples, traces)
            if compiled is not None:
                return compiled, gm, traces
            static = traces.static_result
            gm = GraphModule(static["attrs"], static["graph"])
        return self._compile_training_static(code, name, gm, examples, backend), gm, None

    def _compile_training_dynamic(self, code, name, gm, examples, traces):
        """The training graph compiled over size symbols (aot.compile_training_dynamic), or None
        when it is not one graph over them or AOT autograd cannot compile it."""
        from .aot import AOTUnsupported, compile_training_dynamic
        from .inductor import _attribute, attribute_reader

        options = self.backend_kwargs.get("options") or {}
        try:
            run, attr_targets = compile_training_dynamic(
                traces, examples, {n.target: _attribute(gm, n.target) for n in gm.graph.nodes
                                   if n.op == "get_attr"}, options.get("partitioner", "min_cut"))
        except (dynamic.DynamicUnsupported, AOTUnsupported) as error:
            _dynamic_log.info("%s: %s: no training graph over the size symbols %s (%s); compiling for "
                              "static sizes", _where(code), name, traces.describe(), error)
            return None
        _aot_log.info("%s: %s compiled for training over size symbols %s (AOT autograd, inductor backend)",
                      _where(code), name, traces.describe())
        if not attr_targets:
            return run
        read = attribute_reader(gm, attr_targets)
        return lambda *args: run(*args, *read())

    def _compile_training_static(self, code, name, gm, examples, backend):
        if backend in ("inductor", "aot_eager"):
            from .aot import AOTUnsupported, compile_training
            from .inductor import _attribute, attribute_reader, compile_graph

            if backend == "inductor":
                def compile_part(part):
                    return compile_graph(part)[0]
            else:
                def compile_part(part):
                    from ..fx import retrace
                    return retrace(part, "prims").forward
            # The inductor's default is the min-cut partitioner (as PyTorch's); options={"partitioner":
            # "default"} picks the other; aot_eager uses the default one, as PyTorch's does.
            options = self.backend_kwargs.get("options") or {}
            partitioner = options.get("partitioner", "min_cut" if backend == "inductor" else "default")
            try:
                run, attr_targets = compile_training(
                    gm, examples, {n.target: _attribute(gm, n.target) for n in gm.graph.nodes
                                   if n.op == "get_attr"}, compile_part, partitioner)
            except AOTUnsupported as error:
                _aot_log.info("%s: %s needs autograd and AOT autograd cannot compile it (%s); it runs op "
                              "by op under the autograd engine", _where(code), name, error)
                return gm.forward
            _aot_log.info("%s: %s compiled for training (AOT autograd, %s backend)", _where(code), name,
                          backend)
            if not attr_targets:
                return run
            read = attribute_reader(gm, attr_targets)
            return lambda *args: run(*args, *read())
        _aot_log.info("%s: %s needs autograd (an input or a parameter requires grad); it runs op by op "
                      "under the autograd engine instead of the %s backend", _where(code), name, backend)
        return gm.forward

    def _break(self, code, state, reason):
        state.break_reason = reason
        if _breaks_log.isEnabledFor(logging.DEBUG):
            _breaks_log.debug("%s runs eagerly: %s", _where(code), reason)
        else:
            stack = "\n  user stack:\n" + reason.stack_text(4).rstrip("\n") if len(reason.user_stack) > 1 else ""
            _breaks_log.info("%s runs eagerly: %s (%s:%d); no graph (graphs this compiled function has "
                             "compiled: %d)%s", _where(code), reason.reason, reason.filename, reason.lineno,
                             self.graphs_compiled, stack)
        debug_dir.dump_break(self, code, reason)
        return self._unsupported(code, reason)

    def _unsupported(self, code, reason):
        for recorder in self._recorders(code):
            recorder.add_break(reason, ends_graph=False)
        if self.fullgraph:
            raise Unsupported(reason)
        return capture_module().SKIP

    def _backend_failed(self, code, state, error):
        message = f"backend {_backend_name(self.backend)!r} failed compiling {_where(code)}"
        if config.strict:
            raise BackendCompilerFailed(f"{message}: {type(error).__name__}: {error}") from error
        if not state.warned_backend:
            state.warned_backend = True
            if config.verbose:
                detail = "".join(traceback.format_exception(error))
            else:
                detail = f"{type(error).__name__}: {error} (kiln.config.verbose = True shows the traceback)"
            _warn(code, f"kiln.compile: {message}; it runs eagerly from now on.\n{detail}")
        return capture_module().SKIP

    def _warn_recompile_limit(self, code, state, failures):
        if state.warned_recompile_limit:
            return
        state.warned_recompile_limit = True
        _warn(code, f"kiln.compile: {_where(code)} reached kiln.config.recompile_limit "
                    f"({config.recompile_limit}) cache entries and runs eagerly from now on. "
                    f"The guard(s) that failed: {'; '.join(failures)}")

    def _recorders(self, code):
        recorders = [self.recorder, session_recorder(self, code)]
        return [recorder for recorder in recorders if recorder is not None]

    def _time(self, code, phase, start):
        seconds = time.perf_counter() - start
        for recorder in self._recorders(code):
            recorder.add_time(phase, seconds)

