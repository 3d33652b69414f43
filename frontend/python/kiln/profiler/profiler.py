"""A minimal CPU profiler with torch.profiler's API.

What it records: the wall time of every `record_function` range (also as a decorator), and
one "ProfilerStep#N" range per profile.step(), on every thread, while a profile records (its
schedule's RECORD / RECORD_AND_SAVE steps; always without a schedule). Results come as torch's:
key_averages().table(), events(), export_chrome_trace().
What it does not record (documented gaps): kiln's individual ops and kernels, CUDA time,
memory, input shapes, stacks and FLOPs (those arguments are accepted and ignored), and ranges
inside a kiln.compile'd function's graph (a record_function there runs when the graph runs,
but does not split it)."""
import contextlib
import enum
import json
import os
import socket
import threading
import time

from ._events import EventList, FunctionEvent

__all__ = ["ProfilerAction", "ProfilerActivity", "profile", "record_function", "schedule",
           "supported_activities", "tensorboard_trace_handler"]


class ProfilerActivity(enum.Enum):
    CPU = 0
    CUDA = 2


def supported_activities():
    return {ProfilerActivity.CPU}


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait, warmup, active, repeat=0, skip_first=0, skip_first_wait=0):
    """The action for each step: skip_first steps of NONE, then cycles of `wait` NONE, `warmup`
    WARMUP and `active` RECORD steps (the last RECORD_AND_SAVE), `repeat` times (0: forever)."""
    if wait < 0 or warmup < 0 or active <= 0 or repeat < 0 or skip_first < 0:
        raise ValueError("Invalid profiler schedule arguments")

    def schedule_fn(step):
        if step < 0:
            raise ValueError(f"Invalid profiler step {step}")
        step -= skip_first
        if step < 0:
            return ProfilerAction.NONE
        if skip_first_wait:
            step += wait
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return ProfilerAction.RECORD if pos < cycle - 1 else ProfilerAction.RECORD_AND_SAVE
    return schedule_fn


_lock = threading.Lock()
_recording = []  # the profiles recording now; a finished range goes to each


def _now_us():
    return time.perf_counter_ns() / 1000.0


def _record(name, start_us, end_us):
    with _lock:
        for p in _recording:
            p._add(name, start_us, end_us)


class record_function(contextlib.ContextDecorator):
    """A named range: `with record_function("fwd"):` or `@record_function("fwd")`."""

    def __init__(self, name, args=None):
        self.name = name
        self.args = args
        self._start = []

    def __enter__(self):
        self._start.append(_now_us())
        return self

    def __exit__(self, *exc):
        start = self._start.pop()
        if _recording:
            _record(self.name, start, _now_us())
        return False


class _Profile:
    """Shared by profile and autograd.profiler.profile: collects ranges while recording."""

    def __init__(self):
        self._events = []
        self._next_id = 0

    def _add(self, name, start_us, end_us):
        self._events.append(FunctionEvent(self._next_id, name, threading.get_ident(), start_us, end_us))
        self._next_id += 1

    def _start_recording(self):
        with _lock:
            if self not in _recording:
                _recording.append(self)

    def _stop_recording(self):
        with _lock:
            if self in _recording:
                _recording.remove(self)

    def events(self):
        events = EventList(FunctionEvent(e.id, e.name, e.thread, e.time_range_start, e.time_range_end)
                           for e in self._events)
        from ._events import _link_children
        _link_children(events)
        return events

    def key_averages(self, group_by_input_shape=False, group_by_stack_n=0, group_by_overload_name=False):
        if group_by_input_shape or group_by_stack_n:
            raise NotImplementedError("kiln's profiler does not record input shapes or stacks")
        return self.events().key_averages()

    def export_chrome_trace(self, path):
        """A Chrome trace (chrome://tracing, Perfetto) of the recorded ranges."""
        pid = os.getpid()
        events = [{"name": e.name, "ph": "X", "cat": "user_annotation", "ts": e.time_range_start,
                   "dur": e.cpu_time_total, "pid": pid, "tid": e.thread} for e in self._events]
        trace = {"traceEvents": events, "displayTimeUnit": "ms"}
        with open(path, "w") as f:
            json.dump(trace, f)


class profile(_Profile):
    """torch.profiler.profile: a context manager (or start()/stop()) that records ranges; with a
    schedule, profile.step() moves through its actions and calls on_trace_ready(prof) at the end
    of each RECORD_AND_SAVE step (then starts a fresh record)."""

    def __init__(self, *, activities=None, schedule=None, on_trace_ready=None, record_shapes=False,
                 profile_memory=False, with_stack=False, with_flops=False, with_modules=False,
                 experimental_config=None, execution_trace_observer=None, acc_events=False, **unused):
        super().__init__()
        activities = set(activities) if activities is not None else supported_activities()
        if not activities:
            raise AssertionError("No valid profiler activities found")
        self.activities = activities
        # Steps are ranges of their own only under a schedule, as torch's record_steps.
        self.record_steps = schedule is not None
        self.schedule = schedule if schedule is not None else (lambda step: ProfilerAction.RECORD)
        self.on_trace_ready = on_trace_ready
        self.acc_events = acc_events
        self.step_num = 0
        self._action = ProfilerAction.NONE
        self._step_start = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def start(self):
        self._enter_action(self.schedule(self.step_num))

    def stop(self):
        self._close_step()
        recorded = self._action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)
        self._stop_recording()
        if recorded and self.on_trace_ready is not None:
            self.on_trace_ready(self)
        self._action = ProfilerAction.NONE

    def step(self):
        self._close_step()
        previous = self._action
        self.step_num += 1
        if previous == ProfilerAction.RECORD_AND_SAVE:
            self._stop_recording()
            if self.on_trace_ready is not None:
                self.on_trace_ready(self)
            if not self.acc_events:
                self._events = []
        self._enter_action(self.schedule(self.step_num))

    def _enter_action(self, action):
        self._action = action
        if action in (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE):
            self._start_recording()
            self._step_start = _now_us() if self.record_steps else None
        else:
            self._stop_recording()

    def _close_step(self):
        if self._step_start is not None and self in _recording:
            self._add(f"ProfilerStep#{self.step_num}", self._step_start, _now_us())
        self._step_start = None


def tensorboard_trace_handler(dir_name, worker_name=None, use_gzip=False):
    """on_trace_ready handler writing each trace to dir_name/<worker>.<time>.pt.trace.json."""
    if use_gzip:
        raise NotImplementedError("tensorboard_trace_handler: use_gzip=True is not supported by kiln")

    def handler_fn(prof):
        os.makedirs(dir_name, exist_ok=True)
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        prof.export_chrome_trace(os.path.join(dir_name, f"{worker}.{time.time_ns()}.pt.trace.json"))
    return handler_fn


