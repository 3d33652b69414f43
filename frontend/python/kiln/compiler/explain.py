"""kiln.explain's result: what compiling a function captured (graphs, ops, guards) and where
it could not (break reasons), with the fields and text of torch._dynamo.explain; and the
process-wide recording of every compiled function behind the `kiln explain` command."""
import contextlib
from dataclasses import dataclass, field


def _indent(text, spaces):
    return "".join(" " * spaces + line + "\n" for line in str(text).splitlines())


@dataclass
class ExplainOutput:
    """graphs: the GraphModules in capture order; break_reasons: a BreakReason per frame that
    ran eagerly (a whole-frame fallback counts one break); op_count: ops over all graphs;
    ops_per_graph: each graph's call targets; guards: each graph's GuardTree; compile_times:
    the time spent in each compile phase, as text."""

    graphs: list
    graph_count: int
    graph_break_count: int
    break_reasons: list
    op_count: int
    ops_per_graph: list = field(default_factory=list)
    guards: list = field(default_factory=list)
    compile_times: str = ""

    def __str__(self):
        out = f"Graph Count: {self.graph_count}\n"
        out += f"Graph Break Count: {self.graph_break_count}\n"
        out += f"Op Count: {self.op_count}\n"
        out += "Break Reasons:\n"
        for i, reason in enumerate(self.break_reasons, 1):
            out += f"  Break Reason {i}:\n"
            out += f"    Reason: {reason.reason}\n"
            out += "    User Stack:\n"
            out += f"      {reason.filename}:{reason.lineno}\n"
            if reason.line:
                out += f"        {reason.line.strip()}\n"
        out += "Ops per Graph:\n"
        for i, ops in enumerate(self.ops_per_graph, 1):
            out += f"  Ops {i}:\n" + "".join(f"    {op}\n" for op in ops)
        out += "Guards:\n"
        for i, guards in enumerate(self.guards, 1):
            out += f"  Guard {i}:\n" + _indent(guards, 4)
        if self.compile_times:
            out += f"Compile Times:\n{_indent(self.compile_times, 2)}"
        return out


class ExplainRecorder:
    """Collects what the frame callback captures and skips, for one kiln.explain call."""

    def __init__(self):
        self.graphs, self.break_reasons, self.guards = [], [], []
        self.op_count = 0
        self.phase_times = {}

    def add_graph(self, gm, op_count, guards):
        self.graphs.append(gm)
        self.op_count += op_count
        self.guards.append(guards)

    def add_break(self, break_reason):
        self.break_reasons.append(break_reason)

    def add_time(self, phase, seconds):
        self.phase_times[phase] = self.phase_times.get(phase, 0.0) + seconds

    def output(self):
        ops = [[n.target for n in gm.graph.nodes if n.op == "call_function"] for gm in self.graphs]
        times = "".join(f"{phase}: {seconds:.4f} s\n" for phase, seconds in self.phase_times.items())
        return ExplainOutput(
            graphs=list(self.graphs), graph_count=len(self.graphs),
            graph_break_count=len(self.break_reasons), break_reasons=list(self.break_reasons),
            op_count=self.op_count, ops_per_graph=ops, guards=list(self.guards), compile_times=times)


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
