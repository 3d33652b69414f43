"""kiln.explain's result: what compiling a function captured (graphs, ops, guards) and where
it could not (break reasons), with the fields and text of torch._dynamo.explain, plus the
kernels the inductor backend makes of each graph; and the process-wide recording of every
compiled function behind the `kiln explain` command."""
import contextlib
import re
from dataclasses import dataclass, field

_KERNEL_LINE = re.compile(r"^\s*kernel @(\w+) \{$")
_BUFFER_LINE = re.compile(r"^\s*%(\S+): \w+\[[^\]]*\](?:\{reuses=%\S+\})? = (pointwise|reduction|extern (\w+))")
_SEGMENT_LINE = re.compile(r"^# segment (\d+)$")
_FALLBACK_LINE = re.compile(r"^# fallback %(\S+) = (\S+) \(eager\)$")


def _indent(text, spaces):
    return "".join(" " * spaces + line + "\n" for line in str(text).splitlines())


@dataclass
class KernelPlan:
    """The kernels the inductor backend makes of one graph, from its scheduled loop program:
    kernels: (name, [(buffer, "pointwise" | "reduction" | "mm"), ...]) in execution order, each one
    fused loop nest (or an mm with its epilogue run as the GEMM's post-ops); externs: (buffer, library kernel such as "mm"); fallbacks: (node, op) run
    eagerly between compiled segments (ops without a lowering); reason: why the backend does
    not compile the graph ("" when it does)."""

    kernels: list = field(default_factory=list)
    externs: list = field(default_factory=list)
    fallbacks: list = field(default_factory=list)
    reason: str = ""

    @classmethod
    def from_program(cls, program):
        """The plan of a scheduled loop program's text (None: nothing to compile)."""
        plan, kernel, segment = cls(), None, ""
        for line in (program or "").splitlines():
            if match := _SEGMENT_LINE.match(line):
                segment = f"s{match[1]}."  # kernels of a segmented graph: s2.k0
            elif match := _FALLBACK_LINE.match(line):
                plan.fallbacks.append((match[1], match[2]))
            elif match := _KERNEL_LINE.match(line):
                kernel = (segment + match[1], [])
                plan.kernels.append(kernel)
            elif match := _BUFFER_LINE.match(line):
                if match[3]:
                    plan.externs.append((match[1], match[3]))
                    if kernel is not None:  # an mm whose epilogue runs as its post-ops
                        kernel[1].append((match[1], match[3]))
                elif kernel is not None:
                    kernel[1].append((match[1], match[2]))
            elif line.strip() == "}" and line.startswith("  }"):
                kernel = None
        return plan

    @property
    def num_kernels(self):
        return len(self.kernels)

    def summary(self):
        """`kernels: 1 (k0: pointwise x6)`, with `, extern calls: 1 (mm)` when there are some."""
        if self.reason:
            return f"not compiled by inductor: {self.reason}"
        parts = []
        for name, members in self.kernels:
            counts = {}
            for _, kind in members:
                counts[kind] = counts.get(kind, 0) + 1
            parts.append(f"{name}: " + ", ".join(f"{kind} x{n}" for kind, n in counts.items()))
        out = f"kernels: {len(self.kernels)}" + (f" ({'; '.join(parts)})" if parts else "")
        if self.externs:
            out += f", extern calls: {len(self.externs)} ({', '.join(k for _, k in self.externs)})"
        if self.fallbacks:
            out += (f", fallback ops (eager): {len(self.fallbacks)} "
                    f"({', '.join(op for _, op in self.fallbacks)})")
        return out

    def __str__(self):
        out = self.summary() + "\n"
        for name, members in self.kernels:
            out += f"  {name} fuses " + ", ".join(f"%{b}" for b, _ in members) + "\n"
        fused = {b: name for name, members in self.kernels for b, _ in members}
        for buffer, kernel in self.externs:
            where = f" (in {fused[buffer]}, its epilogue as post-ops)" if buffer in fused else ""
            out += f"  %{buffer} = extern {kernel}{where}\n"
        for node, op in self.fallbacks:
            out += f"  %{node} = {op} (eager fallback: no lowering)\n"
        return out


@dataclass
class TrainingPlan:
    """A graph compiled for training (AOT autograd, aot.py): the forward's and the backward's
    KernelPlans and what the forward saves for the backward."""

    forward: KernelPlan
    backward: KernelPlan
    saved_tensors: int
    saved_bytes: int
    partitioner: str
    reason: str = ""

    @property
    def num_kernels(self):
        return self.forward.num_kernels + self.backward.num_kernels

    def summary(self):
        return (f"training ({self.partitioner} partitioner): forward {self.forward.summary()}; backward "
                f"{self.backward.summary()}; saved for backward: {self.saved_tensors} tensors, "
                f"{self.saved_bytes} bytes")

    def __str__(self):
        return (f"{self.summary()}\n  forward:\n{_indent(self.forward, 4)}"
                f"  backward:\n{_indent(self.backward, 4)}")


def plan_of(gm, example_inputs):
    """The KernelPlan of a captured graph under the inductor backend (lowered and scheduled,
    not compiled to C++); a TrainingPlan for a graph that needs autograd."""
    from .inductor import _attribute, plan_kernels

    try:
        attrs = {n.target: _attribute(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
        from .frame_callback import _needs_autograd

        if example_inputs is not None and _needs_autograd(example_inputs, attrs, gm.graph):
            from .aot import plan_training

            forward, backward, part = plan_training(gm, example_inputs, attrs)
            return TrainingPlan(KernelPlan.from_program(forward), KernelPlan.from_program(backward),
                                len(part.saved_inputs) + part.num_saved, part.saved_bytes, "min_cut")
        return KernelPlan.from_program(plan_kernels(gm, example_inputs))
    except Exception as error:  # noqa: BLE001 - any failure means the graph runs eagerly
        return KernelPlan(reason=f"{type(error).__name__}: {error}")


@dataclass
class ExplainOutput:
    """What torch._dynamo.explain reports, counted as it counts: graphs: the GraphModules in
    capture order; graph_break_count: graph_count - 1 (never below 0), the splits between
    compiled graphs; break_reasons: a BreakReason per graph a break ended (a graph compiled up to
    the break), with its user stack through inlined calls, so a break with no graph before it (a
    helper called first thing, a frame or the rest of one run eagerly) is not in it, as in
    torch's; break_graphs: for each of break_reasons, the number (1-based) of the graph it ended;
    all_break_reasons: every break in capture order, also those with no graph before them (each
    eager frame's reason once), as KILN_LOGS=graph_breaks logs them;
    op_count: ops over all graphs;
    ops_per_graph: each graph's call targets; guards: each graph's GuardTree; compile_times:
    the time spent in each compile phase, as text; kernels_per_graph: each graph's KernelPlan
    (what the inductor backend compiles it to)."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    compile_times: str = ""
    kernels_per_graph: list = field(default_factory=list)
    # Per graph: its input dims that are size symbols ("L['x']: [s0, _]"), or None when static.
    dynamic_per_graph: list = field(default_factory=list)
    break_graphs: list = field(default_factory=list)
    all_break_reasons: list = field(default_factory=list)

    def __str__(self):
        out = f"Graph Count: {self.graph_count}\n"
        out += f"Graph Break Count: {self.graph_break_count}\n"
        out += f"Op Count: {self.op_count}\n"
        out += "Break Reasons:\n"
        for i, reason in enumerate(self.break_reasons, 1):
            out += f"  Break Reason {i}:\n"
            out += f"    Reason: {reason.reason}\n"
            out += "    User Stack:\n" + reason.stack_text(6)
            if i <= len(self.break_graphs):
                ended = self.break_graphs[i - 1]
                out += f"    Graphs: {ended} up to this break, {self.graph_count - ended} after it\n"
        others = [r for r in self.all_break_reasons if r not in self.break_reasons]
        if others:
            out += "Other Breaks (no graph compiled up to them: torch._dynamo.explain lists none):\n"
            for reason in others:
                out += f"  Reason: {reason.reason}\n" + reason.stack_text(4)
        out += "Ops per Graph:\n"
        for i, ops in enumerate(self.ops_per_graph, 1):
            out += f"  Ops {i}:\n" + "".join(f"    {op}\n" for op in ops)
        out += "Guards:\n"
        for i, guards in enumerate(self.guards, 1):
            out += f"  Guard {i}:\n" + _indent(guards, 4)
        if any(self.dynamic_per_graph):
            out += "Dynamic Dims per Graph:\n"
            for i, dims in enumerate(self.dynamic_per_graph, 1):
                out += f"  Graph {i}: {dims or 'static'}\n"
        if self.compile_times:
            out += f"Compile Times:\n{_indent(self.compile_times, 2)}"
        if self.kernels_per_graph:
            out += "Inductor Kernels per Graph:\n"
            for i, plan in enumerate(self.kernels_per_graph, 1):
                out += f"  Graph {i}: " + _indent(plan, 2).lstrip()
        return out


class ExplainRecorder:
    """Collects what the frame callback captures and skips, for one kiln.explain call."""

    def __init__(self):
        self.graphs, self.break_reasons, self.guards, self.kernel_plans = [], [], [], []
        self.break_graphs, self.all_break_reasons = [], []
        self.dynamic = []
        self.op_count = 0
        self.phase_times = {}

    def add_graph(self, gm, op_count, guards, example_inputs=None, dynamic=None):
        self.graphs.append(gm)
        self.dynamic.append(dynamic)
        self.kernel_plans.append(plan_of(gm, example_inputs))
        self.op_count += op_count
        self.guards.append(guards)

    def add_break(self, break_reason, ends_graph):
        """A break; ends_graph: a graph was compiled up to it (the last one added). A break
        with no graph before it is listed once (an eager frame reports it at every call)."""
        if ends_graph:
            self.break_reasons.append(break_reason)
            self.break_graphs.append(len(self.graphs))
        elif break_reason in self.all_break_reasons:
            return
        self.all_break_reasons.append(break_reason)

    def add_time(self, phase, seconds):
        self.phase_times[phase] = self.phase_times.get(phase, 0.0) + seconds

    def output(self):
        ops = [[n.target for n in gm.graph.nodes if n.op == "call_function"] for gm in self.graphs]
        times = "".join(f"{phase}: {seconds:.4f} s\n" for phase, seconds in self.phase_times.items())
        return ExplainOutput(
            graphs=list(self.graphs), graph_count=len(self.graphs),
            graph_break_count=max(len(self.graphs) - 1, 0), break_reasons=list(self.break_reasons),
            op_count=self.op_count, ops_per_graph=ops, guards=list(self.guards), compile_times=times,
            kernels_per_graph=list(self.kernel_plans), dynamic_per_graph=list(self.dynamic),
            break_graphs=list(self.break_graphs), all_break_reasons=list(self.all_break_reasons))


@dataclass
class CompiledFunctionRecord:
    """What one kiln.compile'd function captured during a recording session: `name`,
    `filename` and `lineno` are those of the first frame it saw (the function it compiled)."""

    name: str
    filename: str
    lineno: int
    recorder: ExplainRecorder

    def output(self):
        return self.recorder.output()


class SessionRecorder:
    """Records the captures of every compiled function (each kiln.compile call, that is each
    frame callback) while it is active, in the order they first ran."""

    def __init__(self):
        self._records = {}

    def recorder_for(self, callback, code):
        record = self._records.get(callback)
        if record is None:
            record = self._records[callback] = CompiledFunctionRecord(
                code.co_qualname, code.co_filename, code.co_firstlineno, ExplainRecorder())
        return record.recorder

    def records(self):
        return list(self._records.values())


_session = None


@contextlib.contextmanager
def record_all():
    """`with record_all() as session:` records what every compiled function captures (in
    addition to any kiln.explain recorder); session.records() lists them."""
    global _session
    previous, _session = _session, SessionRecorder()
    try:
        yield _session
    finally:
        _session = previous


def session_recorder(callback, code):
    """The active session's recorder for `callback`, or None outside record_all()."""
    return None if _session is None else _session.recorder_for(callback, code)
