"""kiln.cuda: devices, streams, events and the caching allocator, with torch.cuda's names.

The CUDA driver (libcuda.so.1) is loaded at run time on first use, never linked: on a machine
without an NVIDIA driver `is_available()` is False, `device_count()` is 0, the memory functions
report nothing (as torch.cuda does before CUDA is initialized), and anything that needs a device
raises a RuntimeError saying why CUDA is unavailable. See docs/cuda.md.
"""
from . import _C

__all__ = [
    "Event", "Stream", "StreamContext", "current_device", "current_stream", "default_stream",
    "device", "device_count", "empty_cache", "get_device_capability", "get_device_name",
    "get_device_properties", "init", "is_available", "is_bf16_supported", "is_initialized", "manual_seed",
    "manual_seed_all", "max_memory_allocated",
    "max_memory_reserved", "memory_allocated", "memory_reserved", "memory_stats",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats", "set_device", "set_stream",
    "stream", "synchronize", "unavailable_reason",
]


def is_available():
    """True when the CUDA driver loaded, initialised and found at least one device."""
    return _C._cuda_is_available()


def manual_seed(seed):
    """Seeds the random numbers of CUDA tensors. kiln draws them from the default generator
    (on the host, then copies them), so with a device present this is kiln.manual_seed; without
    one it does nothing, as torch.cuda.manual_seed on a machine without CUDA."""
    if is_available():
        _C.manual_seed(seed)


manual_seed_all = manual_seed


def unavailable_reason():
    """Why CUDA is not available ('' when it is): e.g. libcuda.so.1 could not be loaded."""
    return _C._cuda_unavailable_reason()


def is_initialized():
    return is_available()


def init():
    """Loads the driver now; raises the reason when CUDA is not available."""
    if not is_available():
        raise RuntimeError(f"kiln.cuda.init(): CUDA is not available: {unavailable_reason()}")


def device_count():
    return _C._cuda_device_count()


def _device_index(device, optional=True):
    """The device index an argument names: None (current device), int, 'cuda:N', kiln.device."""
    if device is None:
        if not optional:
            raise ValueError("Expected a cuda device, but got: None")
        return current_device()
    if isinstance(device, str):
        device = _C.device(device)
    if isinstance(device, _C.device):
        if device.type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")
        return current_device() if device.index is None else device.index
    if isinstance(device, int):
        return device
    raise ValueError(f"Expected a cuda device, but got: {device!r}")


def current_device():
    return _C._cuda_current_device()


def set_device(device):
    index = _device_index(device)
    if index >= 0:
        _C._cuda_set_device(index)


class device:
    """Context manager that makes a device current: `with kiln.cuda.device(1): ...`."""

    def __init__(self, device):
        self.idx = _device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self):
        if self.idx >= 0:
            self.prev_idx = current_device()
            _C._cuda_set_device(self.idx)

    def __exit__(self, *exc):
        if self.prev_idx >= 0:
            _C._cuda_set_device(self.prev_idx)
        return False


class _CudaDeviceProperties:
    def __init__(self, name, major, minor, multi_processor_count, total_memory):
        self.name = name
        self.major = major
        self.minor = minor
        self.multi_processor_count = multi_processor_count
        self.total_memory = total_memory

    def __repr__(self):
        return (f"_CudaDeviceProperties(name='{self.name}', major={self.major}, "
                f"minor={self.minor}, total_memory={self.total_memory // (1 << 20)}MB, "
                f"multi_processor_count={self.multi_processor_count})")


def get_device_properties(device=None):
    return _CudaDeviceProperties(*_C._cuda_device_properties(_device_index(device)))


def get_device_name(device=None):
    return get_device_properties(device).name


def get_device_capability(device=None):
    p = get_device_properties(device)
    return (p.major, p.minor)


def is_bf16_supported(including_emulation=True):
    """True on a device of compute capability 8.0 or newer (native bfloat16 arithmetic); False
    without CUDA, as torch's. kiln does not emulate bfloat16 on older devices, so
    including_emulation changes nothing."""
    return is_available() and get_device_capability()[0] >= 8


def synchronize(device=None):
    """Waits for all work queued on the device."""
    _C._cuda_synchronize(_device_index(device))


class Stream:
    """A CUDA stream. `Stream()` takes the next stream of the device's pool (as torch.cuda does,
    streams are never destroyed, so cached memory is never handed to a recycled handle)."""

    def __init__(self, device=None, priority=0, *, _handle=None):
        index = _device_index(device)
        self.device_index = index
        self.cuda_stream = _C._cuda_stream_from_pool(index) if _handle is None else _handle
        self.priority = priority

    @property
    def device(self):
        return _C.device("cuda", self.device_index)

    def synchronize(self):
        _C._cuda_stream_synchronize(self.device_index, self.cuda_stream)

    def query(self):
        """True when all work queued on the stream has completed."""
        return _C._cuda_stream_query(self.device_index, self.cuda_stream)

    def record_event(self, event=None):
        event = Event() if event is None else event
        event.record(self)
        return event

    def wait_event(self, event):
        event.wait(self)

    def wait_stream(self, stream):
        self.wait_event(stream.record_event())

    def __eq__(self, other):
        return (isinstance(other, Stream) and self.cuda_stream == other.cuda_stream
                and self.device_index == other.device_index)

    def __hash__(self):
        return hash((self.cuda_stream, self.device_index))

    def __repr__(self):
        return f"<kiln.cuda.Stream device=cuda:{self.device_index} cuda_stream={self.cuda_stream:#x}>"


def current_stream(device=None):
    index = _device_index(device)
    return Stream(index, _handle=_C._cuda_current_stream(index))


def default_stream(device=None):
    index = _device_index(device)
    _C._cuda_current_stream(index)  # checks the device
    return Stream(index, _handle=0)


def set_stream(stream):
    """Makes `stream` current on its device (for this thread)."""
    if stream is not None:
        _C._cuda_set_stream(stream.device_index, stream.cuda_stream)


class StreamContext:
    """`with kiln.cuda.stream(s):` runs the block with s (and its device) current."""

    def __init__(self, stream):
        self.stream = stream
        self._saved = None

    def __enter__(self):
        if self.stream is None:
            return
        prev_device = current_device()
        self._saved = (prev_device, current_stream(self.stream.device_index))
        _C._cuda_set_device(self.stream.device_index)
        set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self._saved is not None:
            prev_device, prev_stream = self._saved
            set_stream(prev_stream)
            _C._cuda_set_device(prev_device)
        return False


def stream(stream):
    return StreamContext(stream)


class Event:
    """A CUDA event: record it on a stream, wait for it, time between two of them."""

    def __init__(self, enable_timing=False, blocking=False, interprocess=False):
        if interprocess:
            raise NotImplementedError("kiln.cuda.Event: interprocess events are not supported")
        self._event = _C._CudaEvent(enable_timing, blocking)

    def record(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._event.record(stream.device_index, stream.cuda_stream)

    def wait(self, stream=None):
        stream = current_stream() if stream is None else stream
        self._event.block(stream.device_index, stream.cuda_stream)

    def query(self):
        return self._event.query()

    def synchronize(self):
        self._event.synchronize()

    def elapsed_time(self, end_event):
        """Milliseconds between this event's record and end_event's (both timed, both done)."""
        return self._event.elapsed_time(end_event._event)

    def __repr__(self):
        return f"<kiln.cuda.Event recorded={self._event.recorded}>"


# Memory: the caching allocator's statistics, under PyTorch's flat names
# ("allocated_bytes.all.current", "num_ooms", ...). A device with no allocation yet reports {}.
def _stats_index(device):
    if not is_available():
        return None
    return _device_index(device)


def memory_stats(device=None):
    index = _stats_index(device)
    return {} if index is None else dict(sorted(_C._cuda_memory_stats(index).items()))


def _stat(device, name):
    return memory_stats(device).get(name, 0)


def memory_allocated(device=None):
    return _stat(device, "allocated_bytes.all.current")


def max_memory_allocated(device=None):
    return _stat(device, "allocated_bytes.all.peak")


def memory_reserved(device=None):
    return _stat(device, "reserved_bytes.all.current")


def max_memory_reserved(device=None):
    return _stat(device, "reserved_bytes.all.peak")


def reset_peak_memory_stats(device=None):
    index = _stats_index(device)
    if index is not None:
        _C._cuda_reset_peak_memory_stats(index)


def reset_accumulated_memory_stats(device=None):
    index = _stats_index(device)
    if index is not None:
        _C._cuda_reset_accumulated_memory_stats(index)


def empty_cache():
    """Returns the cached, unused device memory of every device to the driver."""
    _C._cuda_empty_cache()


def _eager_op(qualname, args, kwargs, num_returns):
    """Runs an op on CUDA tensors that has no CUDA kernel (kiln/compiler/cuda_eager.py)."""
    from .compiler import cuda_eager

    return cuda_eager.run(qualname, args, kwargs, num_returns)


_C._codegen._set_cuda_eager_handler(_eager_op)
