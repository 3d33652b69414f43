"""kiln.autograd.profiler (torch.autograd.profiler, the older API): profile(enabled=True, ...)
and record_function over kiln.profiler's recorder (CPU ranges only)."""
from ..profiler._events import EventList, FunctionEvent, FunctionEventAvg  # noqa: F401
from ..profiler.profiler import _Profile, record_function  # noqa: F401

__all__ = ["EventList", "profile", "record_function"]


class profile(_Profile):
    def __init__(self, enabled=True, *, use_cuda=False, use_device=None, record_shapes=False,
                 with_flops=False, profile_memory=False, with_stack=False, with_modules=False, use_kineto=False, use_cpu=True,
                 experimental_config=None, acc_events=False, custom_trace_id_callback=None):
        super().__init__()
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self._start_recording()
        return self

    def __exit__(self, *exc):
        self._stop_recording()
        return False

    def table(self, *args, **kwargs):
        return self.key_averages().table(*args, **kwargs)

    @property
    def function_events(self):
        return self.events()
