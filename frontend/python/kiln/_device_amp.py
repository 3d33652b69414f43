"""kiln.cuda.amp and kiln.cpu.amp: the deprecated per-device spellings of kiln.amp (torch warns
that they are deprecated; so does kiln)."""
import types
import warnings

from . import amp as _amp


def _namespace(device, default_dtype):
    def autocast(enabled=True, dtype=default_dtype, cache_enabled=True):
        warnings.warn(f"`torch.{device}.amp.autocast(args...)` is deprecated. Please use "
                      f"`torch.amp.autocast('{device}', args...)` instead.", FutureWarning, stacklevel=2)
        return _amp.autocast(device, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    def GradScaler(init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                   enabled=True):
        warnings.warn(f"`torch.{device}.amp.GradScaler(args...)` is deprecated. Please use "
                      f"`torch.amp.GradScaler('{device}', args...)` instead.", FutureWarning, stacklevel=2)
        return _amp.GradScaler(device, init_scale, growth_factor, backoff_factor, growth_interval, enabled)

    return types.SimpleNamespace(autocast=autocast, GradScaler=GradScaler)


cuda_amp = _namespace("cuda", None)
cpu_amp = _namespace("cpu", None)
