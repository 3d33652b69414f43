"""The profiler's results: FunctionEvent (one recorded range), FunctionEventAvg (the ranges of
one name summed) and EventList with torch's table(). Times are microseconds of wall time, as
torch's "CPU time"; a range's self time excludes the ranges nested in it on the same thread."""

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg"]


class FunctionEvent:
    def __init__(self, id, name, thread, start_us, end_us):
        self.id, self.name, self.thread = id, name, thread
        self.time_range_start, self.time_range_end = start_us, end_us
        self.cpu_children = []
        self.cpu_parent = None
        self.count = 1

    @property
    def key(self):
        return self.name

    @property
    def cpu_time_total(self):
        return self.time_range_end - self.time_range_start

    @property
    def self_cpu_time_total(self):
        return self.cpu_time_total - sum(c.cpu_time_total for c in self.cpu_children)

    def __repr__(self):
        return (f"<FunctionEvent id={self.id} name={self.name} thread={self.thread} "
                f"cpu_time_total={self.cpu_time_total:.3f}us>")


class FunctionEventAvg:
    def __init__(self, key):
        self.key = key
        self.count = 0
        self.cpu_time_total = 0.0
        self.self_cpu_time_total = 0.0

    def add(self, event):
        self.count += event.count
        self.cpu_time_total += event.cpu_time_total
        self.self_cpu_time_total += event.self_cpu_time_total
        return self

    @property
    def cpu_time(self):
        return self.cpu_time_total / self.count if self.count else 0.0

    def __repr__(self):
        return (f"<FunctionEventAvg key={self.key} self_cpu_time={self.self_cpu_time_total:.3f}us "
                f"cpu_time={self.cpu_time:.3f}us count={self.count}>")


def _link_children(events):
    """Nest each event in the innermost enclosing one of its thread (ranges nest as a stack)."""
    for thread in {e.thread for e in events}:
        stack = []
        for e in sorted((e for e in events if e.thread == thread),
                        key=lambda e: (e.time_range_start, -e.time_range_end)):
            while stack and stack[-1].time_range_end <= e.time_range_start:
                stack.pop()
            if stack and e.time_range_end <= stack[-1].time_range_end:
                e.cpu_parent = stack[-1]
                stack[-1].cpu_children.append(e)
            stack.append(e)


def _format_time(us):
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


_SORT_KEYS = {"cpu_time", "cpu_time_total", "self_cpu_time_total", "count"}


class EventList(list):
    def key_averages(self):
        """One FunctionEventAvg per name (all ProfilerStep#N as "ProfilerStep*", as torch's)."""
        averages = {}
        for e in self:
            key = "ProfilerStep*" if e.key.startswith("ProfilerStep#") else e.key
            averages.setdefault(key, FunctionEventAvg(key)).add(e)
        return EventList(averages.values())

    def table(self, sort_by=None, row_limit=100, max_name_column_width=55, header=None,
              top_level_events_only=False, **unused):
        """torch's table: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time avg,
        # of Calls; sort_by one of cpu_time, cpu_time_total, self_cpu_time_total, count
        (descending). Columns for CUDA, memory, shapes and stacks are not recorded."""
        rows = list(self)
        if top_level_events_only:
            rows = [e for e in rows if getattr(e, "cpu_parent", None) is None]
        if sort_by is not None:
            if sort_by not in _SORT_KEYS:
                raise ValueError(f"profiler table: sort_by must be one of {sorted(_SORT_KEYS)} (kiln records "
                                 f"CPU ranges only), got {sort_by!r}")
            rows.sort(key=lambda e: getattr(e, sort_by), reverse=True)
        rows = rows[:row_limit] if row_limit and row_limit > 0 else rows
        self_total = sum(e.self_cpu_time_total for e in self)
        name_width = min(max([len(e.key) for e in rows] + [4]) + 4, max_name_column_width)
        widths = [name_width] + [12] * 6
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg", "# of Calls"]
        line = "".join("-" * w + "  " for w in widths)

        def fmt(values):
            return "".join(str(v).rjust(w) + "  " for v, w in zip(values, widths))

        def pct(x):
            return f"{100.0 * x / self_total:.2f}%" if self_total else "0.00%"

        out = ([header] if header else []) + [line, fmt(headers), line]
        for e in rows:
            name = e.key if len(e.key) <= name_width - 3 else e.key[:name_width - 6] + "..."
            out.append(fmt([name, pct(e.self_cpu_time_total), _format_time(e.self_cpu_time_total),
                            pct(e.cpu_time_total), _format_time(e.cpu_time_total),
                            _format_time(e.cpu_time_total / e.count), e.count]))
        out += [line, f"Self CPU time total: {_format_time(self_total)}", ""]
        return "\n".join(out)

    def __str__(self):
        return self.table()
