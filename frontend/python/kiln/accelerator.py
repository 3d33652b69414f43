"""kiln.accelerator (torch.accelerator): the device-agnostic way recent PyTorch scripts pick
their device (`torch.accelerator.current_accelerator() if torch.accelerator.is_available() else
torch.device("cpu")`). kiln's one accelerator is CUDA (kiln.cuda), loaded at run time."""
from . import cuda as _cuda
from ._C import device as _device

__all__ = ["current_accelerator", "current_device_index", "current_device_idx", "device_count",
           "is_available", "set_device_index", "set_device_idx", "synchronize"]


def is_available():
    return _cuda.is_available()


def current_accelerator(check_available=False):
    """kiln.device("cuda") where kiln can run CUDA, else None (with check_available, as torch,
    also None when no device is present)."""
    return _device("cuda") if _cuda.is_available() else None


def device_count():
    return _cuda.device_count() if _cuda.is_available() else 0


def current_device_index():
    return _cuda.current_device() if _cuda.is_available() else -1


def set_device_index(device):
    _cuda.set_device(device)


def synchronize(device=None):
    _cuda.synchronize(device)


current_device_idx = current_device_index
set_device_idx = set_device_index
