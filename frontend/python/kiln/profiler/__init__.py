"""kiln.profiler (torch.profiler): a minimal CPU profiler of record_function ranges; see
profiler.py for what it records and what it does not."""
from ._events import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from .profiler import (  # noqa: F401
    ProfilerAction, ProfilerActivity, profile, record_function, schedule, supported_activities,
    tensorboard_trace_handler,
)
