"""DataParallel and data_parallel, as torch's on a machine with one device or none.

Without CUDA, torch's DataParallel simply calls the module (device_ids is []), and so does
kiln's. With one CUDA device the module moves there and the inputs are moved to it before the
call. kiln does not replicate a module over several devices: asking for more than one raises
(torch splits the batch, which changes BatchNorm statistics; running the whole batch on one
device would silently differ), so pass device_ids=[0]."""
from ... import cuda
from ..._C import device as _device
from ..._tensor import Tensor
from ..modules.module import Module

__all__ = ["DataParallel", "data_parallel"]


def _device_ids(device_ids, output_device):
    """(device indices, output device index) for a machine with CUDA."""
    if device_ids is None:
        device_ids = list(range(cuda.device_count()))
    ids = [cuda._device_index(d) for d in device_ids]
    if not ids:
        raise RuntimeError("DataParallel: device_ids is empty")
    if len(ids) > 1:
        raise NotImplementedError(f"DataParallel over devices {ids}: kiln runs a module on one device only; "
                                  f"pass device_ids=[{ids[0]}]")
    out = ids[0] if output_device is None else cuda._device_index(output_device)
    return ids, out


def _to(value, where):
    if isinstance(value, Tensor):
        return value.to(where)
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_to(v, where) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, where) for v in value)
    if isinstance(value, dict):
        return type(value)((k, _to(v, where)) for k, v in value.items())
    return value


def _check_on(module, where):
    for t in list(module.parameters()) + list(module.buffers()):
        if t.device != where:
            raise RuntimeError(f"module must have its parameters and buffers on device {where} "
                               f"(device_ids[0]) but found one of them on device: {t.device}")


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.dim = dim
        if not cuda.is_available():
            self.device_ids, self.output_device = [], None
            return
        self.device_ids, self.output_device = _device_ids(device_ids, output_device)
        self.src_device_obj = _device("cuda", self.device_ids[0])
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on(self.module, self.src_device_obj)
        out = self.module(*_to(inputs, self.src_device_obj), **_to(kwargs, self.src_device_obj))
        return _to(out, _device("cuda", self.output_device))


def data_parallel(module, inputs, device_ids=None, output_device=None, dim=0, module_kwargs=None):
    """module(*inputs, **module_kwargs) on device_ids[0] (inputs moved there, outputs to
    output_device); without CUDA, the plain call."""
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    module_kwargs = {} if module_kwargs is None else module_kwargs
    if not cuda.is_available():
        return module(*inputs, **module_kwargs)
    ids, out_index = _device_ids(device_ids, output_device)
    where = _device("cuda", ids[0])
    _check_on(module, where)
    return _to(module(*_to(inputs, where), **_to(module_kwargs, where)), _device("cuda", out_index))
