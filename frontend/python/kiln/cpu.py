"""kiln.cpu (torch.cpu): the CPU as a device module, for device-generic code
(`getattr(torch, device_type).synchronize()`), and the deprecated kiln.cpu.amp."""
from ._device_amp import cpu_amp as amp  # noqa: F401

__all__ = ["amp", "current_device", "device_count", "is_available", "synchronize"]


def is_available():
    return True


def device_count():
    return 1


def current_device():
    return "cpu"


def synchronize(device=None):
    """CPU ops have finished when they return: nothing to wait for."""
