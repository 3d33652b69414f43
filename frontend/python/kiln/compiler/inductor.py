"""The "inductor" backend: a captured graph compiled to one shared object of generated C++.

    captured graph -> kiln.fx.retrace(gm, "prims") -> get_attr tensors become extra inputs
    -> kiln._C._codegen.lower (loop program) -> schedule (fusion into kernels)
    -> emit_cpp -> compile_source (the kernel cache) -> CompiledKernel (the per-call path, C++)

A graph whose tensor inputs are on a CUDA device compiles for that device instead: the scheduled
loop program goes to kiln._C._codegen.CudaCompiledProgram (CUDA emitter -> NVRTC for the
device's architecture -> the launch list run on the current stream; docs/cuda-codegen.md).

In-place writes (prims.copy_to) are compiled: the program writes into intermediates and into
the caller's input tensors, as eager mode does. Outputs that are inputs or views of inputs
(written in place or not) are taken eagerly at each call, after the program ran (they alias the
inputs as in eager mode); the rest are computed by the compiled program. What cannot be
compiled raises InductorUnsupported while compiling (a prim the lowering does not know, symbolic
shapes): the frame callback then runs the frame eagerly with a warning (kiln.config.strict
raises instead).
"""
import os

from .. import _logging
from .._C import _codegen
from .. import _C
from .. import config
from ..fx import Graph, GraphModule, retrace
from ..fx.interpreter import Interpreter
from ..fx.graph import type_of
from . import debug_dir, fallback, graph_cache
from .complex_views import fold_complex_round_trips, real_views_of_complex_views

_output_code_log = _logging.get_logger("output_code")
_loops_log = _logging.get_logger("loops")

# Prims whose result shares its input's storage eagerly (ir/ops/prims.yaml: the Tensor(a)
# results, and reshape, which is a view whenever the strides allow): a graph output made of these
# alone over an input aliases that input, which a compiled program (fresh outputs) cannot give.
_VIEW_PRIMS = frozenset({
    "prims.broadcast_in_dim", "prims.squeeze", "prims.transpose", "prims.slice", "prims.reshape",
    "prims.view_of", "prims.as_strided",
})
# What the fallback planner follows from a storage to its views: the view prims, and the complex
# views (eager steps: a write through view_as_real(slice(view_as_complex(zeros))) lands in zeros).
_PLANNED_VIEWS = _VIEW_PRIMS | {"aten.view_as_real", "aten.view_as_complex"}
# Prims that write into an argument (Tensor(a!)) and return it.
_MUTATING_PRIMS = frozenset({"prims.copy_to"})


class InductorUnsupported(RuntimeError):
    """A graph the inductor backend cannot compile; the caller runs it eagerly."""


def _view_strides(old_sizes, old_strides, new_sizes):
    """The strides viewing (old_sizes, old_strides) as new_sizes without a copy, or None where a
    dim of the new shape would span memory that is not evenly strided (PyTorch's computeStride,
    runtime/ViewGeometry.h): a reshape of a broadcast or of a transpose then copies."""
    if not old_sizes:
        return [1] * len(new_sizes)
    if 0 in old_sizes:
        return None if 0 not in new_sizes else list(new_sizes)  # (any strides view nothing)
    new_strides = [0] * len(new_sizes)
    view_d = len(new_sizes) - 1
    chunk_base_stride = old_strides[-1]
    tensor_numel, view_numel = 1, 1
    for d in range(len(old_sizes) - 1, -1, -1):
        tensor_numel *= old_sizes[d]
        if d == 0 or (old_sizes[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_base_stride):
            while view_d >= 0 and (view_numel < tensor_numel or new_sizes[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base_stride
                view_numel *= new_sizes[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base_stride = old_strides[d - 1]
                tensor_numel, view_numel = 1, 1
    return new_strides if view_d == -1 else None


def _is_view(node):
    """Does the view prim `node` return a view of its first argument? prims.reshape does only
    where the argument's strides allow it; the other view prims always do."""
    if node.target != "prims.reshape":
        return True
    src, out = getattr(node.args[0], "type", None), node.type
    if src is None or out is None or not src.is_static or not out.is_static:
        return True  # (symbolic sizes: each probe's static graph decides)
    return _view_strides(list(src.shape), list(src.stride), list(out.shape)) is not None


def _aliased_input(node, inputs):
    """The input node `node` is a view chain of (views and in-place writes, which return their
    destination), or None."""
    while node not in inputs:
        if (node.op != "call_function" or node.target not in _VIEW_PRIMS | _MUTATING_PRIMS
                or not node.args or (node.target in _VIEW_PRIMS and not _is_view(node))):
            return None
        node = node.args[0]
        if not hasattr(node, "op"):
            return None
    return node


def _lowerable_graph(prims_gm):
    """The prims graph of `prims_gm` (edited in place) with its get_attr nodes made placeholders
    after the graph's own, the placeholders, and the targets of those get_attr nodes, in order."""
    graph = prims_gm.graph  # retraced for this compile alone: edited in place, not copied
    modules, placeholders, attrs = [], [], []
    for n in graph.nodes:
        op = n.op
        if op == "placeholder":
            placeholders.append(n)
        elif op == "get_attr":
            attrs.append(n)
        elif op == "call_module":
            modules.append(n.target)
    if modules:
        raise InductorUnsupported(f"call_module nodes are not compiled: {', '.join(modules)}")
    targets = []
    for node in attrs:
        if not node.users:
            # Read by nothing (a parameter that only keyed a dict, as an optimizer's state[p]):
            # no input of the compiled program, so no read of it per call.
            graph.erase_node(node)
            continue
        target = node.target
        anchor = placeholders[-1] if placeholders else None
        if anchor is None:
            ctx = graph.inserting_before(next(iter(graph.nodes)))
        else:
            ctx = graph.inserting_after(anchor)
        with ctx:
            ph = graph.placeholder("attr_" + target.replace(".", "_"), type_expr=node.type)
        node.replace_all_uses_with(ph)
        graph.erase_node(node)
        placeholders.append(ph)
        targets.append(target)
    return graph, placeholders, targets


def _outputs(graph):
    outputs = graph.output_node.args[0]
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _subgraph(graph, outputs, roots=(), writes_done=False):
    """A graph with `graph`'s placeholders (same order) and the nodes computing `outputs` and
    `roots` (in-place writes to keep). With `writes_done`, an in-place write is replaced by its
    destination: the compiled program has already written it."""
    needed, stack = set(), list(outputs) + list(roots)
    while stack:
        node = stack.pop()
        if node in needed:
            continue
        needed.add(node)
        if writes_done and node.target in _MUTATING_PRIMS:
            stack.append(node.args[0])
        else:
            stack.extend(a for a in node.all_input_nodes)
    sub, env = Graph(), {}
    for node in graph.nodes:
        if writes_done and node in needed and node.target in _MUTATING_PRIMS:
            env[node] = env[node.args[0]]
        elif node.op == "placeholder" or (node in needed and node.op != "output"):
            env[node] = sub.node_copy(node, lambda a: env[a])
    sub.output(tuple(env[o] for o in outputs))
    return sub


def _writes_in_place(node):
    """prims.copy_to, or an op left without a functional form that writes into an argument
    (`_fused_adam_`, a fallback kernel): kept in the compiled part even when no output reads its
    result (an optimizer step returning the state it created, not the parameters it wrote)."""
    if node.op != "call_function":
        return False
    target = str(node.target)
    if target in _MUTATING_PRIMS:
        return True
    if target.startswith("prims."):
        return False
    try:
        schema = _C._fx.op_schema(target)["schema"]
    except Exception:  # noqa: BLE001 - not an op of the table: it writes nothing we know of
        return False
    return "!" in schema.split("->")[0]


def _split_outputs(graph, placeholders):
    """(compiled graph or None, view graph or None, per output: (from the view graph?, index)).
    Outputs that are inputs or view chains of inputs are computed eagerly by the view graph (so
    they alias the inputs as they do eagerly); the rest by the compiled program, which also does
    every in-place write."""
    writes = [n for n in graph.nodes if _writes_in_place(n)]
    inputs = set(placeholders)
    computed, views, where = [], [], []
    for out in _outputs(graph):
        if not hasattr(out, "op"):
            raise InductorUnsupported(f"the graph returns a non-tensor value {out!r}")
        if _aliased_input(out, inputs) is not None:
            where.append((True, len(views)))
            views.append(out)
        else:
            where.append((False, len(computed)))
            computed.append(out)
    if not views:
        return graph, None, where
    compiled = _subgraph(graph, computed, writes) if computed or writes else None
    return compiled, _subgraph(graph, views, writes_done=True), where


# Prims drawing from the default generator: they run eagerly at each call, in program order, and
# their results are inputs of the compiled program (the values are eager kiln's).
_RANDOM_PRIMS = frozenset({"prims.uniform", "prims.normal"})


def _runs_eagerly(node):
    """Random prims, ops left without a prims decomposition that take no tensor (randint,
    linspace), and random ops left without one that do (multinomial, random_): computed eagerly
    at each call rather than compiled. All draws must run in program order: a random op left in
    the compiled part would draw after every hoisted one."""
    if node.op != "call_function":
        return False
    target = str(node.target)
    if node.target in _RANDOM_PRIMS or (not target.startswith("prims.") and not node.all_input_nodes):
        return True
    if target.startswith("prims."):
        return False
    from .aot import _ops
    tags, written = _ops().get(target, ((), ()))
    if "random" not in tags:
        return False
    for position in written:
        _check_input_written_first(node, node.args[position] if position < len(node.args) else None)
    return True


def _check_input_written_first(node, arg):
    """A hoisted random op computes its tensor arguments again in the draw graph, so a write into
    a value the graph made lands in the draw graph's own copy (readers of the op's result read
    the hoisted value). A write into a graph input happens before the compiled program runs: only
    right when nothing reads that input earlier in the program."""
    chain = set()
    while getattr(arg, "op", None) == "call_function" and str(arg.target) in _VIEW_PRIMS:
        chain.add(arg)
        arg = arg.args[0]
    if getattr(arg, "op", None) != "placeholder":
        return
    chain.add(arg)
    for earlier in node.graph.nodes:
        if earlier is node:
            return
        if earlier not in chain and any(a in chain for a in earlier.all_input_nodes):
            raise InductorUnsupported(f"{node.target} draws into the graph input {arg.name} after "
                                      f"{earlier.format_node()} read it: the draws run before the "
                                      "compiled program")


def _hoist_random(graph, placeholders):
    """Nodes that run eagerly (_runs_eagerly) become placeholders after `placeholders`; returns
    the graph computing them from `placeholders`, or None when there are none."""
    draws = [n for n in graph.nodes if _runs_eagerly(n)]
    if not draws:
        return None
    draw_graph = _subgraph(graph, draws)
    for i, node in enumerate(draws):
        with graph.inserting_after(placeholders[-1]) if placeholders else \
                graph.inserting_before(next(iter(graph.nodes))):
            ph = graph.placeholder(f"draw_{i}", type_expr=node.type)
        value = ph
        written = _random_op_destination(node)
        if written is not None:
            # An in-place draw (exponential_ into a slice of a buffer): the draw graph fills its
            # own copy; the program writes the values into the destination where the op was,
            # so the buffer it is a view of sees them.
            with graph.inserting_before(node):
                value = graph.call_function("prims.copy_to", (written, ph), type_expr=written.type)
        node.replace_all_uses_with(value)
        graph.erase_node(node)
        placeholders.append(ph)
    return draw_graph


def _random_op_destination(node):
    """The tensor argument an in-place random op writes (None for the others)."""
    from .aot import _ops
    _, written = _ops().get(str(node.target), ((), ()))
    return node.args[written[0]] if written and written[0] < len(node.args) else None


def cuda_device(graph):
    """The CUDA device index of a graph whose tensor placeholders are on CUDA (None when they are
    on the CPU); InductorUnsupported when they are on several devices."""
    placeholders = {}  # device -> the names of the placeholders on it
    for node in graph.nodes:
        if node.op != "placeholder":
            continue  # (a fallback segment's graph may list placeholders after other nodes)
        t = node.type
        if t is not None and t.kind == "tensor":
            placeholders.setdefault(str(t.device or "cpu"), []).append(node.name)
    if not any(d.startswith("cuda") for d in placeholders):
        return None
    from ..cuda import current_device
    devices = {}
    for d, names in placeholders.items():  # ("cuda" names the current device)
        devices.setdefault(f"cuda:{current_device()}" if d == "cuda" else d, []).extend(names)
    if len(devices) > 1:
        where = "; ".join(f"{d}: {', '.join(names[:6])}{' ...' if len(names) > 6 else ''}"
                          for d, names in sorted(devices.items()))
        raise InductorUnsupported(f"a compiled graph's tensor inputs must be on one device, not on "
                                  f"{', '.join(sorted(devices))} ({where})")
    return int(next(iter(devices)).partition(":")[2])


def _compile_cuda(program, device, size_hints=None, cuda_graphs=False):
    """The CudaCompiledProgram of a scheduled loop program (NVRTC CUBINs come from the kernel
    cache's artifact store, so a program compiled before is only loaded); with `cuda_graphs`
    (mode="reduce-overhead") its calls replay a CUDA graph captured at the second call."""
    try:
        kernel = _codegen.CudaCompiledProgram(program, device, size_hints or {}, _codegen.cache_dir(),
                                              cuda_graphs)
    except Exception as error:  # noqa: BLE001 - the emitter's refusals name what it lacks
        raise InductorUnsupported(f"CUDA: {type(error).__name__}: {error}") from error
    debug_dir.write("output_code.cu", kernel.source)
    _output_code_log.info("CUDA output code (%s, %s):\n%s\n%s", kernel.arch,
                          "cache hit" if kernel.cache_hit else "compiled", kernel.source, kernel.launch_list)
    return kernel


def _compile_program(graph, cuda_graphs=False):
    """(CompiledKernel, scheduled loop program text, the scheduler's log) of a prims graph; for a
    graph with fallback ops (fallback.py), (PartitionedProgram, the segments' programs joined,
    their logs joined). On CUDA inputs, a CudaCompiledProgram instead of the CompiledKernel
    (replaying CUDA graphs with `cuda_graphs`; nothing changes on the CPU)."""
    device = cuda_device(graph)
    steps = _plan(graph)
    if steps is not None:
        # On CUDA the segments compile for the device and the ops between them dispatch on CUDA
        # tensors: a CUDA kernel, a program from their decomposition, or a host round trip
        # (cuda_eager.py). CUDA graphs replay no partitioned program (each segment runs as usual).
        return _compile_partitioned(graph, steps)
    program, schedule_log = _scheduled_program(graph)
    if device is not None:
        return _compile_cuda(program, device, cuda_graphs=cuda_graphs), program, schedule_log
    source = _emit(program)
    debug_dir.write("output_code.cpp", source)
    path, cache_hit = _codegen.compile_source(source, extra_flags=_program_flags(source))
    _output_code_log.info("output code (%s, %s):\n%s", path, "cache hit" if cache_hit else "compiled",
                          source)
    return _codegen.CompiledKernel(path, "kiln_entry", program), program, schedule_log


def _scheduled_program(graph):
    """(scheduled loop program text, the scheduler's log) of a prims graph without fallbacks,
    written to the debug folder and the logs."""
    try:
        program, schedule_log = _codegen.schedule(_codegen.lower(graph))
    except Exception as error:  # noqa: BLE001 - lowering errors name the prim; re-raised as one kind
        raise InductorUnsupported(f"{type(error).__name__}: {error}") from error
    debug_dir.write("loops.kir", program)
    debug_dir.write("schedule.log", schedule_log)
    _loops_log.info("fusion decisions:\n%s", schedule_log)
    _loops_log.debug("scheduled loop program:\n%s", program)
    _output_code_log.debug("loop program of %s:\n%s", graph, program)
    return program, schedule_log


def _emit(program, **options):
    """emit_cpp of a scheduled loop program, its errors raised as InductorUnsupported."""
    try:
        return _codegen.emit_cpp(program, **options)
    except Exception as error:  # noqa: BLE001 - as in _scheduled_program
        raise InductorUnsupported(f"{type(error).__name__}: {error}") from error


# What the C++ code generator writes between the translation units of a split program
# (codegen/CppCodegen.h, kTranslationUnitMarker).
_TRANSLATION_UNIT_MARKER = "\n" + _codegen.TRANSLATION_UNIT_MARKER + "\n"
_PRELUDE_BYTES = len(_codegen.cpp_prelude())
# A program with this much C++ beyond the prelude (thousands of ops) compiles with
# kiln.config.large_program_cpp_flags, and a segment this large compiles alone.
_LARGE_PROGRAM_BYTES = 256 * 1024
# As the code generator splits a program (codegen/CppCodegen.cpp, kSplitBytes, kPartBytes),
# segments compiled together go in several translation units (compiled in parallel) from 64 KB
# of C++, each with at least 32 KB: below that one g++ run costs less than the prelude parsed and
# linked once more.
_SPLIT_BYTES = 64 * 1024
_PART_BYTES = 32 * 1024


def _program_flags(source):
    """The compiler flags a program's C++ gets besides kiln.config.cpp_flags: those of
    kiln.config.large_program_cpp_flags for a large program (_LARGE_PROGRAM_BYTES)."""
    return _large_program_flags() if len(source) - _PRELUDE_BYTES >= _LARGE_PROGRAM_BYTES else []


def _large_program_flags():
    return [str(f) for f in config.large_program_cpp_flags or ()]


def _plan(graph):
    """fallback.plan of a prims graph; InductorUnsupported when its writes forbid cutting it."""
    try:
        return fallback.plan(graph, _PLANNED_VIEWS, _MUTATING_PRIMS)
    except fallback.Uncuttable as error:
        raise InductorUnsupported(f"cannot run the graph's ops without a lowering eagerly between "
                                  f"compiled segments: {error}") from error


def _compile_partitioned(graph, steps):
    """The PartitionedProgram of a prims graph cut by fallback ops into `steps`. On the CPU the
    segments' C++ compiles as one shared object (_link_segments): a convolution network's
    backward has dozens of segments between its convolutions, and a g++ run per segment paid the
    prelude, the driver and the link each time."""
    cpu = cuda_device(graph) is None

    def compile_segment(segment):
        placeholders = list(segment.placeholders())
        computed, views, where = _split_outputs(segment, placeholders)
        view_fn = GraphModule({}, views).forward if views is not None else None
        if computed is None:
            logs[id(segment)] = ""
            return _runner(None, view_fn, None, where), None
        if not cpu or _plan(computed) is not None:
            kernel, program, schedule_log = _compile_program(computed)
            logs[id(segment)] = schedule_log or ""
            return _runner(kernel, view_fn, None, where), program
        key = "\n".join([graph_cache.build_identity(), _codegen.toolchain_key(), "segment schedule",
                         str(computed)])
        cached = graph_cache.load_schedule(key)
        if cached is not None:
            program, schedule_log = cached
            debug_dir.write("loops.kir", program)
            debug_dir.write("schedule.log", schedule_log)
        else:
            program, schedule_log = _scheduled_program(computed)
            graph_cache.store_schedule(key, program, schedule_log)
        logs[id(segment)] = schedule_log
        return _UnlinkedSegment(program, view_fn, where), program

    logs = {}
    program = fallback.PartitionedProgram(graph, steps, compile_segment, link=_link_segments)
    _loops_log.info("fallback kernels (run eagerly between compiled segments): %s",
                    ", ".join(program.fallbacks))
    return program, _partitioned_text(program), "".join(
        logs[id(s.graph)] for s in steps if s.kind == "compiled")


class _UnlinkedSegment:
    """A segment's scheduled loop program waiting for _link_segments to compile it with the
    partitioned program's other segments."""

    def __init__(self, program, view_fn, where):
        self.program, self.view_fn, self.where = program, view_fn, where


def _link_segments(results):
    """The (run, program) of each segment, those given as _UnlinkedSegment compiled together:
    one source with the prelude once and each segment's C++ in a namespace of its own, entry
    kiln_entry_<k> (k its place in the program, so the source and its cache key do not depend on
    which thread scheduled first), in several translation units when large (the toolchain
    compiles them in parallel). A segment of _LARGE_PROGRAM_BYTES or more compiles alone, split
    as any large program."""
    unlinked = [(k, run) for k, (run, _) in enumerate(results) if isinstance(run, _UnlinkedSegment)]
    if not unlinked:
        return results
    results = list(results)
    bodies = []
    for k, segment in unlinked:
        body = _emit(segment.program, entry_name=f"kiln_entry_{k}", prelude=False)
        if len(body) >= _LARGE_PROGRAM_BYTES:
            source = _emit(segment.program)
            path, _ = _codegen.compile_source(source, extra_flags=_program_flags(source))
            kernel = _codegen.CompiledKernel(path, "kiln_entry", segment.program)
            results[k] = (_runner(kernel, segment.view_fn, None, segment.where), segment.program)
        else:
            bodies.append((k, segment, f"namespace kiln_segment{k} {{\n{body}\n}}  // namespace kiln_segment{k}\n"))
    if not bodies:
        return results
    total = sum(len(text) for _, _, text in bodies)
    parts = 1 if total < _SPLIT_BYTES else min(os.cpu_count() or 1, 4, len(bodies), total // _PART_BYTES)
    # Consecutive segments per part, the parts of about equal size (g++'s time follows it).
    texts, done = [[] for _ in range(parts)], 0
    for _, _, text in bodies:
        texts[min(parts - 1, (done + len(text) // 2) * parts // total)].append(text)
        done += len(text)
    source = (_codegen.cpp_prelude() + "\n" + _codegen.END_OF_PRELUDE_MARKER + "\n"
              + _TRANSLATION_UNIT_MARKER.join("\n".join(part) for part in texts if part))
    debug_dir.write("output_code.cpp", source)
    flags = _large_program_flags() if total >= _LARGE_PROGRAM_BYTES else []
    path, cache_hit = _codegen.compile_source(source, entry=f"kiln_entry_{bodies[0][0]}", extra_flags=flags)
    _output_code_log.info("output code (%s, %s, %d segments):\n%s", path,
                          "cache hit" if cache_hit else "compiled", len(bodies), source)
    for k, segment, _ in bodies:
        kernel = _codegen.CompiledKernel(path, f"kiln_entry_{k}", segment.program)
        results[k] = (_runner(kernel, segment.view_fn, None, segment.where), segment.program)
    return results


def _partitioned_text(program):
    """The segments' loop programs and the fallback ops between them, in execution order."""
    parts = []
    segments = iter(enumerate(program.segments))
    for step in program.steps:
        if step.kind == "compiled":
            i, text = next(segments)
            parts.append(f"# segment {i}\n" + (text or ""))
        else:
            parts.append(_fallback_line(step))
    return "".join(parts)


def _fallback_line(step):
    """`# fallback %sort = aten.sort (eager)`; none for the getitems taking a fallback's
    results apart."""
    node = step.outputs[0]
    if node.target == "operator.getitem":
        return ""
    return f"# fallback %{node.name} = {node.target} (eager)\n"


def _with_input_layouts(gm, example_inputs):
    """gm with placeholder types taken from the example inputs, strides included (the compiled
    program reads its inputs through the strides it was compiled for), and get_attr nodes
    without a type typed from the attribute they read."""
    graph = gm.graph.clone()
    nodes = graph.nodes
    for node, value in zip((n for n in nodes if n.op == "placeholder"), example_inputs or ()):
        if isinstance(value, _C.TensorBase):
            node.type = type_of(value)
    for node in nodes:
        if node.op == "get_attr" and node.type is None:
            value = _attribute(gm, node.target)
            if isinstance(value, _C.TensorBase):
                node.type = type_of(value)
    return GraphModule(gm, graph, class_name=type(gm).__name__)


def _graph_key(gm, example_inputs):
    """Everything compile_graph's result depends on: the captured graph's text, the example
    inputs' types with their strides (the program is compiled for those layouts), the types of
    the attributes it reads, the compiler, its flags and the CPU (toolchain_key: kiln's version
    included) and kiln's build."""
    lines = [graph_cache.build_identity(), _codegen.toolchain_key(),
             f"large programs: {list(config.large_program_cpp_flags or ())}", str(gm.graph)]
    if example_inputs is not None:
        lines += [f"input {i}: {type_of(v)}" for i, v in enumerate(example_inputs)]
    lines += [f"attribute {n.target}: {type_of(_attribute(gm, n.target))}"
              for n in gm.graph.nodes if n.op == "get_attr"]
    return "\n".join(lines)


def compile_graph(gm, example_inputs=None, cuda_graphs=False):
    """What `inductor` builds, as (run, attribute paths bound after the placeholders, the
    CompiledKernel or None): `run(*placeholders, *attributes)` returns the outputs' tuple.
    A graph compiled before (in any process) with the same key comes from the graph cache
    (graph_cache.py) without being lowered or compiled again. `cuda_graphs`: a program for CUDA
    replays CUDA graphs (mode="reduce-overhead")."""
    key = _graph_key(gm, example_inputs)
    entry = graph_cache.load(key)
    if entry is None:
        attr_targets, draws, computed, views, where = _prepare_cuttable(gm, example_inputs)
        kernel, program, schedule_log = _compile_program(computed, cuda_graphs) if computed is not None \
            else (None,) * 3
        view_fn = fallback.InputRelativeViews(views) if views is not None else None
        draw_fn = GraphModule({}, draws).forward if draws is not None else None
        if isinstance(kernel, fallback.PartitionedProgram) or \
                isinstance(kernel, _codegen.CudaCompiledProgram):
            # Not in the graph cache (its entries hold one C++ program); the segments' C++ and
            # the CUDA CUBINs still come from the kernel cache.
            return _runner(kernel, view_fn, draw_fn, where), attr_targets, kernel
        entry = graph_cache.Entry(program, kernel.path if kernel is not None else None,
                                  str(views) if views is not None else None, where, attr_targets,
                                  draws=str(draws) if draws is not None else None,
                                  schedule_log=schedule_log)
        graph_cache.store(key, entry)
    else:
        kernel, view_fn, draw_fn = entry.kernel, entry.view_fn, entry.draw_fn
    return _runner(kernel, view_fn, draw_fn, entry.where), entry.attr_targets, kernel


def _runner(kernel, view_fn, draw_fn, where):
    """The callable running the program `kernel` (outputs computed by it), the eager view graph
    `view_fn` (outputs that alias inputs) and the eager draws `draw_fn` (inputs appended)."""
    if draw_fn is None and view_fn is None:
        return kernel

    def run(*args):
        if draw_fn is not None:
            args = args + tuple(draw_fn(*args))
        if view_fn is None:
            return kernel(*args)
        # The program first: views of inputs it writes must show the new values.
        computed_outputs = kernel(*args) if kernel is not None else ()
        view_outputs = view_fn(*args)
        return tuple(view_outputs[i] if is_view else computed_outputs[i] for is_view, i in where)

    return run


def _drop_grad_mode_changes(graph):
    """Removes the grad-mode switches (`with no_grad():` inside the compiled code) from a graph
    compiled for inference: nothing in it records autograd, so they change no value. They must
    leave grad mode as the call found it (a `with` block does); a graph that ends in another
    mode raises InductorUnsupported (it runs eagerly, which switches the mode for real)."""
    # (call_function targets are qualified names: str)
    switches = [n for n in graph.nodes if n.target.endswith("_set_grad_enabled") and n.op == "call_function"]
    if not switches:
        return
    if bool(switches[-1].args[0]) != _C.is_grad_enabled():
        raise InductorUnsupported("the graph leaves grad mode switched (set_grad_enabled without restoring it)")
    for node in switches:
        graph.erase_node(node)


def _prepare(gm, example_inputs, functionalize=False):
    """The graphs compile_graph builds from `gm`: (attribute targets, the graph of eager draws or
    None, the graph to compile or None, the view graph or None, where each output comes from).
    With `functionalize`, in-place writes into the graph's own intermediates become values first
    (see _prepare_cuttable)."""
    typed = _with_input_layouts(gm, example_inputs)
    if functionalize:
        aten = _C._fx.retrace(typed.graph, "aten", True)
        aten._run_passes("functionalize,dce")
        typed = GraphModule(typed, aten, class_name=type(typed).__name__)
    prims_gm = retrace(typed, "prims")
    graph, placeholders, attr_targets = _lowerable_graph(prims_gm)
    _drop_grad_mode_changes(graph)
    real_views_of_complex_views(graph)
    fold_complex_round_trips(graph)
    # Identical pure calls computed once (a backward formula's `grad * x + grad * x`, the same
    # broadcast made for two consumers): the loop IR would compute each in its own buffer.
    # Decompositions leave unused values (max.dim's indices when only the values are read);
    # random draws and in-place writes stay.
    graph._run_passes("cse")
    graph.eliminate_dead_code()
    draws = _hoist_random(graph, placeholders)  # and other tensor-free ops without lowering
    computed, views, where = _split_outputs(graph, placeholders)
    return attr_targets, draws, computed, views, where


def _prepare_cuttable(gm, example_inputs):
    """_prepare's graphs, functionalized when an op without a lowering reads storage the graph
    writes in place (an inference graph is not functionalized by AOT autograd: a ResNet in eval
    mode writes relu(inplace=True) and `out += identity` into values its convolutions read, and
    fallback.plan cannot order those writes between compiled segments)."""
    prepared = _prepare(gm, example_inputs)
    computed = prepared[2]
    if computed is None:
        return prepared
    try:
        fallback.plan(computed, _PLANNED_VIEWS, _MUTATING_PRIMS)
        return prepared
    except fallback.Uncuttable:
        pass
    try:
        functional = _prepare(gm, example_inputs, functionalize=True)
        if functional[2] is not None:
            fallback.plan(functional[2], _PLANNED_VIEWS, _MUTATING_PRIMS)
    except (RuntimeError, fallback.Uncuttable):  # no better: _plan reports the first graph's writes
        return prepared
    return functional


def plan_kernels(gm, example_inputs=None):
    """The scheduled loop program (text) the inductor backend would compile for `gm`, without
    compiling it; None when every output is an input or a view of one (nothing to compile).
    Raises InductorUnsupported for graphs the backend runs eagerly."""
    _, _, computed, _, _ = _prepare_cuttable(gm, example_inputs)
    if computed is None:
        return None
    steps = _plan(computed)
    try:
        if steps is None:
            return _codegen.schedule(_codegen.lower(computed))[0]
        parts = []
        for step in steps:
            if step.kind == "eager":
                parts.append(_fallback_line(step))
                continue
            seg = _split_outputs(step.graph, list(step.graph.placeholders()))[0]
            parts.append(f"# segment {sum(p.startswith('# segment') for p in parts)}\n")
            if seg is not None:
                parts.append(_codegen.schedule(_codegen.lower(seg))[0])
        return "".join(parts)
    except Exception as error:  # noqa: BLE001 - as in _compile_program
        raise InductorUnsupported(f"{type(error).__name__}: {error}") from error


def _attribute(gm, target):
    obj = gm
    for atom in target.split("."):
        obj = getattr(obj, atom)
    return obj


def _with_probe_layouts(gm, example_inputs, symbolic):
    """gm (traced at a probe point: its placeholders have the probe's sizes, contiguous) with
    the example inputs' layouts for the inputs without size symbols (`symbolic`: positions)."""
    examples = list(example_inputs)
    graph = gm.graph.clone()
    for i, node in enumerate(n for n in graph.nodes if n.op == "placeholder"):
        if i not in symbolic and i < len(examples) and isinstance(examples[i], _C.TensorBase):
            node.type = type_of(examples[i])
    for node in graph.nodes:
        if node.op == "get_attr" and node.type is None:
            value = _attribute(gm, node.target)
            if isinstance(value, _C.TensorBase):
                node.type = type_of(value)
    return GraphModule(gm, graph, class_name=type(gm).__name__)


def _view_geometry(views):
    """Per output of the eager view graph `views` (prims views of its placeholders): (the
    placeholder it views, its sizes, strides and offset from that placeholder's), run on meta
    tensors of the placeholders' types."""
    import kiln

    placeholders = [n for n in views.nodes if n.op == "placeholder"]
    metas = [kiln.empty_strided(n.type.shape, n.type.stride, dtype=n.type.dtype, device="meta")
             for n in placeholders]
    outs = GraphModule({}, views).forward(*metas)
    geometry = []
    for node, out in zip(_outputs(views), outs):
        root = _aliased_input(node, set(placeholders))
        if root is None:
            raise InductorUnsupported("an eager view output is not a view of an input")
        geometry.append((placeholders.index(root), tuple(out.shape), tuple(out.stride()), out.storage_offset()))
    return geometry


def _symbolic_views(geometries, traces):
    """The view outputs' geometry over the symbols, fitted over the probe points: per output,
    (placeholder, [size fn], [stride fn], offset fn), each fn of the symbol values."""
    from .dynamic import DynamicUnsupported, Fitter

    fitter = Fitter(traces.points, traces.names)
    out = []
    for k, first in enumerate(geometries[0]):
        per_point = [g[k] for g in geometries]
        if len({(p[0], len(p[1])) for p in per_point}) != 1:
            raise DynamicUnsupported("an output view changes with the sizes")

        def fit(values):
            text = fitter.fit(list(values))
            if text is None:
                raise DynamicUnsupported(f"an output view's geometry is not a polynomial of the sizes: {values}")
            return eval(compile(f"lambda {', '.join(traces.names)}: {text}", "<view>", "eval"))  # noqa: S307

        rank = len(first[1])
        out.append((first[0], [fit(p[1][d] for p in per_point) for d in range(rank)],
                    [fit(p[2][d] for p in per_point) for d in range(rank)], fit(p[3] for p in per_point)))
    return out


class _SizedDraws(Interpreter):
    """Runs the draw graph traced at the call's sizes with each random draw's shape argument
    replaced by its fitted shape at the symbol values of this call."""

    def __init__(self, graph, shapes):
        super().__init__(None, graph=graph)
        self.shapes = shapes  # node -> [size fn]
        self.values = ()

    def run_node(self, n):
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        if n in self.shapes:
            args = ([f(*self.values) for f in self.shapes[n]],) + tuple(args[1:])
        return getattr(self, n.op)(n.target, args, kwargs)


def _symbolic_draws(draw_graphs, traces):
    """The eager draws of a dynamic compile (random prims hoisted out of the program, run at
    each call in program order, inputs of the program): `draw_graphs`, the draw graph at each
    probe point, must be one graph over the symbols (dynamic.generalize: only the draws'
    shapes and the types differ); each draw's shape is fitted over the probes. Returns
    draw(args, symbol values) -> the draws' values."""
    from .dynamic import DynamicUnsupported, Fitter, generalize

    generalize([str(g) for g in draw_graphs], traces.points, traces.names)
    fitter = Fitter(traces.points, traces.names)
    per_probe = [list(g.nodes) for g in draw_graphs]
    shapes = {}
    for i, node in enumerate(per_probe[0]):
        if node.op != "call_function" or node.target not in _RANDOM_PRIMS:
            continue
        sizes = [list(nodes[i].args[0]) for nodes in per_probe]
        fns = []
        for d in range(len(sizes[0])):
            text = fitter.fit([s[d] for s in sizes])
            if text is None:
                raise DynamicUnsupported(f"a random draw's shape is not a polynomial of the sizes: {node.format_node()}")
            fns.append(eval(compile(f"lambda {', '.join(traces.names)}: {text}", "<draw>", "eval")))  # noqa: S307
        shapes[node] = fns
    interpreter = _SizedDraws(draw_graphs[0], shapes)

    def draw(args, values):
        interpreter.values = values
        out = interpreter.run(*args)
        return tuple(out) if isinstance(out, (tuple, list)) else (out,)

    return draw


def _dynamic_runner(kernel, views, where, symbol_dims, draws=None):
    """The callable of a dynamic compile: the eager random draws (appended to the program's
    inputs), the program (or none) and the output views of inputs, the draws' shapes and the
    views' geometry taken at the symbol values of the call (`symbol_dims`: per symbol, the
    (argument, dim) it is read from)."""
    if views is None and draws is None:
        return kernel

    def run(*args):
        values = [args[a].shape[d] for a, d in symbol_dims]
        if draws is not None:
            args = args + tuple(draws(args, values))
        computed_outputs = kernel(*args) if kernel is not None else ()
        if views is None:
            return computed_outputs
        results = []
        for is_view, i in where:
            if not is_view:
                results.append(computed_outputs[i])
                continue
            root, sizes, strides, offset = views[i]
            base = args[root]
            results.append(base.as_strided([f(*values) for f in sizes], [f(*values) for f in strides],
                                           base.storage_offset() + offset(*values)))
        return tuple(results)

    run.kernel = kernel  # (what runs the program: cuda_eager checks whether it calls its own op)
    return run


def compile_dynamic(traces, example_inputs, cuda_graphs=False):
    """The program over size symbols (dynamic.py) of a frame traced at several points:
    `traces` is a dynamic.Traces; returns (the callable, attribute targets). Outputs that are
    views of inputs are taken at each call with their geometry fitted over the symbols. Raises
    dynamic.DynamicUnsupported when the prims graphs do not agree over the symbols, or when
    the graph needs what the symbolic path does not do yet (fallback plans that differ between
    probes: _partitioned_over_symbols)."""
    from .dynamic import DynamicUnsupported, generalize

    texts, attr_lists, wheres, geometries, draw_graphs, graphs, plans = [], [], [], [], [], [], []
    device = None
    for gm in traces.graph_modules:
        try:
            attr_targets, draws, computed, views, where = _prepare(
                _with_probe_layouts(gm, example_inputs, traces.symbolic_inputs), None)
            if views is not None:
                geometries.append(_view_geometry(views))
        except Exception as error:  # noqa: BLE001 - a probe the pipeline refuses: static sizes then
            raise DynamicUnsupported(f"the graph at other sizes does not compile: {type(error).__name__}: "
                                     f"{error}") from error
        draw_graphs.append(draws)
        try:
            plans.append(_plan(computed) if computed is not None else None)
        except InductorUnsupported as error:
            raise DynamicUnsupported(str(error)) from error
        graphs.append(computed)
        texts.append(str(computed) if computed is not None else "")
        device = cuda_device(computed) if computed is not None else None
        attr_lists.append(attr_targets)
        wheres.append(where)
    if any(w != wheres[0] for w in wheres) or len({len(g) for g in geometries}) > 1 or \
            (geometries and len(geometries) != len(texts)):
        raise DynamicUnsupported("the outputs aliasing inputs change with the sizes")
    views = _symbolic_views(geometries, traces) if geometries else None
    if any((g is None) != (draw_graphs[0] is None) for g in draw_graphs):
        raise DynamicUnsupported("the graph draws random numbers at some sizes only")
    draws = _symbolic_draws(draw_graphs, traces) if draw_graphs[0] is not None else None
    symbol_dims = traces.symbol_dims()
    if (views is not None or draws is not None) and None in symbol_dims:
        raise DynamicUnsupported("a size symbol of an output view or a random draw is the size of no input dim")
    if not texts[0]:
        return _dynamic_runner(None, views, wheres[0], symbol_dims, draws), attr_lists[0]
    if any(a != attr_lists[0] for a in attr_lists):
        raise DynamicUnsupported("the graph reads other attributes at other sizes")
    hints = dict(zip(traces.names, traces.points[0]))
    if any(plan is not None for plan in plans):
        kernel = _partitioned_over_symbols(graphs, plans, traces, hints, device)
        return _dynamic_runner(kernel, views, wheres[0], symbol_dims, draws), attr_lists[0]
    symbolic_text = generalize(texts, traces.points, traces.names)
    if device is not None:
        try:
            program, schedule_log = _codegen.schedule(_codegen.lower(symbolic_text))
        except Exception as error:  # noqa: BLE001 - as below
            raise DynamicUnsupported(f"lowering over size symbols failed: {type(error).__name__}: {error}") \
                from error
        _loops_log.info("fusion decisions (sizes %s, CUDA):\n%s", traces.describe(), schedule_log)
        kernel = _compile_cuda(program, device, hints, cuda_graphs)
        return _dynamic_runner(kernel, views, wheres[0], symbol_dims, draws), attr_lists[0]
    kernel = _compile_symbolic(symbolic_text, hints, traces, attr_lists[0])
    return _dynamic_runner(kernel, views, wheres[0], symbol_dims, draws), attr_lists[0]


def _compile_symbolic(symbolic_text, hints, traces, attr_targets=()):
    """The CompiledKernel of a prims graph's text over size symbols, tuned for the size `hints`.
    The graph cache keys on the symbolic graph (its text over s0, s1, ...) and the hints: another
    process, or another frame with the same graph, skips lowering and compiling."""
    from .dynamic import DynamicUnsupported

    key = "\n".join([graph_cache.build_identity(), _codegen.toolchain_key(),
                     f"large programs: {list(config.large_program_cpp_flags or ())}", "symbolic sizes",
                     repr(sorted(hints.items())), symbolic_text])
    entry = graph_cache.load(key)
    if entry is not None and entry.kernel is not None:
        return entry.kernel
    try:
        program, schedule_log = _codegen.schedule(_codegen.lower(symbolic_text))
        source = _codegen.emit_cpp(program, size_hints=hints)
    except Exception as error:  # noqa: BLE001 - as in _compile_program
        raise DynamicUnsupported(f"lowering over size symbols failed: {type(error).__name__}: {error}") \
            from error
    debug_dir.write("loops.kir", program)
    debug_dir.write("schedule.log", schedule_log)
    _loops_log.info("fusion decisions (sizes %s):\n%s", traces.describe(), schedule_log)
    _loops_log.debug("scheduled loop program:\n%s", program)
    debug_dir.write("output_code.cpp", source)
    path, cache_hit = _codegen.compile_source(source, extra_flags=_program_flags(source))
    _output_code_log.info("output code (%s, %s, symbolic sizes %s):\n%s", path,
                          "cache hit" if cache_hit else "compiled", traces.describe(), source)
    # (The entry holds the program; the output views are fitted again from the probes.)
    graph_cache.store(key, graph_cache.Entry(program, path, None, [], list(attr_targets), schedule_log=schedule_log))
    return _codegen.CompiledKernel(path, "kiln_entry", program)


def _partitioned_over_symbols(graphs, plans, traces, hints, device=None):
    """A graph with fallback ops over size symbols: the probes' prims `graphs` cut by their
    fallback `plans`, which must agree (the same steps, fallbacks whose calls differ only in
    their types); each compiled segment is fitted over the probes and compiled once over the
    symbols (it binds them from its own inputs' dims), and the fallbacks run eagerly between
    them as they do for static sizes (eager kernels take any size). On CUDA (`device`) the
    segments are CUDA programs and the fallbacks dispatch on CUDA tensors (cuda_eager.py)."""
    from .dynamic import DynamicUnsupported, generalize

    if any(plan is None for plan in plans):
        raise DynamicUnsupported("ops without a lowering (fallbacks) at some sizes only")
    shape = [_step_signature(step) for step in plans[0]]
    for plan, point in zip(plans[1:], traces.points[1:]):
        if [_step_signature(step) for step in plan] != shape:
            raise DynamicUnsupported(f"the fallback ops or their segments differ at sizes {point}")
    segment_texts = {}
    for i, step in enumerate(plans[0]):
        if step.kind != "compiled":
            continue
        texts = []
        for plan in plans:
            segment = plan[i].graph
            computed, views, _ = _split_outputs(segment, list(segment.placeholders()))
            if views is not None or computed is None:
                raise DynamicUnsupported("a segment between fallback ops returns a view of its inputs")
            texts.append(str(computed))
        segment_texts[id(step.graph)] = generalize(texts, traces.points, traces.names)

    def compile_segment(segment):
        symbolic_text = segment_texts[id(segment)]
        if device is None:
            return _compile_symbolic(symbolic_text, hints, traces), symbolic_text
        try:
            program, schedule_log = _codegen.schedule(_codegen.lower(symbolic_text))
        except Exception as error:  # noqa: BLE001 - as in compile_dynamic
            raise DynamicUnsupported(f"lowering a segment over size symbols failed: {type(error).__name__}: "
                                     f"{error}") from error
        _loops_log.info("fusion decisions (a segment, sizes %s, CUDA):\n%s", traces.describe(), schedule_log)
        return _compile_cuda(program, device, hints), program

    return fallback.PartitionedProgram(graphs[0], plans[0], compile_segment)


def _step_signature(step):
    """What must agree between probes for a step of a fallback plan: its kind, the nodes it takes
    and produces, and for a fallback its calls without their types (the arguments an eager
    kernel reads)."""
    names = ([n.name for n in step.inputs], [getattr(n, "name", None) for n in step.outputs])
    if step.kind == "compiled":
        return step.kind, names, step.layouts
    calls = [(n.op, str(n.target), repr(n.args), repr(n.kwargs)) for n in step.graph.nodes
             if n.op == "call_function"]
    return step.kind, names, step.layouts, calls


def attribute_reader(gm, targets):
    """A function returning the current values of get_attr `targets` of `gm`, read at every call
    (a parameter assigned anew after compiling is seen). Top-level parameters and buffers are
    one dict lookup each; going through Module.__getattr__ cost ~0.5 us an attribute, 30 us a
    call for an optimizer step over 16 parameters and their state."""
    slots = []
    for target in targets:
        store = None
        if "." not in target:
            for key in ("_parameters", "_buffers"):
                d = gm.__dict__.get(key)
                if d is not None and target in d:
                    store = d
                    break
        slots.append((store, target))
    if all(store is not None for store, _ in slots):
        def read():
            try:
                return [store[target] for store, target in slots]
            except KeyError:  # an attribute deleted or moved since: the general path
                return [_attribute(gm, target) for target in targets]
        return read
    return lambda: [_attribute(gm, target) for target in targets]


# kiln.compile's modes, as torch.compile's; those that replay CUDA graphs on CUDA inputs.
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
_CUDA_GRAPH_MODES = ("reduce-overhead", "max-autotune")


def check_mode(mode):
    """RuntimeError for a mode inductor does not know (torch.compile's message)."""
    if mode is not None and mode not in MODES:
        raise RuntimeError(f"Unrecognized mode={mode}, should be one of: {', '.join(MODES)}")


def _wants_cuda_graphs(mode=None, options=None, **_):
    """mode="reduce-overhead" (or "max-autotune"), or options={"triton.cudagraphs": True}."""
    check_mode(mode)
    if options is not None and "triton.cudagraphs" in options:
        return bool(options["triton.cudagraphs"])
    return mode in _CUDA_GRAPH_MODES


def compile_inductor(gm, example_inputs, **kwargs):
    """Compiles the captured graph to C++ (see the module docstring); returns a callable taking
    the graph's placeholders and returning its outputs as a tuple. mode="reduce-overhead" of
    kiln.compile makes a program for CUDA replay CUDA graphs (docs/cuda.md); on the CPU the
    modes change nothing yet. A graph traced with size symbols (gm.kiln_dynamic, set by the
    frame callback) compiles to one program over them."""
    cuda_graphs = _wants_cuda_graphs(**kwargs)
    traces = getattr(gm, "kiln_dynamic", None)
    if traces is not None:
        run, attr_targets = compile_dynamic(traces, example_inputs, cuda_graphs)
    else:
        run, attr_targets, _ = compile_graph(gm, example_inputs, cuda_graphs)
    if not attr_targets:
        return run
    read = attribute_reader(gm, attr_targets)

    def run_with_attributes(*args):
        return run(*args, *read())

    return run_with_attributes
