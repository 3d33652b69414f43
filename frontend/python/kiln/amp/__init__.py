"""kiln.amp: autocast and GradScaler with torch.amp's API.

autocast with enabled=False (how scripts switch mixed precision off on CPU) is a no-op context
manager and decorator; enabled=True raises NotImplementedError when entered: kiln has no
autocast dtype policy, and running in float32 instead would silently differ from torch's
lower-precision results. Cast the model and inputs explicitly instead.

GradScaler follows torch's: disabled it passes everything through; a "cuda" scaler without CUDA
warns and disables itself (torch's behaviour on a CPU machine); enabled on "cpu" it scales the
loss, unscales gradients before the step, skips steps with inf/nan gradients and grows or
backs off the scale."""
import functools
import warnings

from .. import _C

__all__ = ["autocast", "GradScaler", "is_autocast_available", "is_autocast_enabled"]


def is_autocast_available(device_type):
    return False


class autocast:
    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=None):
        if not isinstance(device_type, str):
            raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
        self.device, self.fast_dtype, self._enabled = device_type, dtype, bool(enabled)

    def __enter__(self):
        if self._enabled:
            raise NotImplementedError(
                f"kiln.autocast(device_type={self.device!r}, dtype={self.fast_dtype}): automatic mixed precision is "
                "not supported by kiln; pass enabled=False, or cast the model and inputs explicitly "
                "(model.to(kiln.bfloat16))")
        return self

    def __exit__(self, *exc):
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return wrapper


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if enabled and device == "cuda":
            from .. import cuda
            if not cuda.is_available():
                warnings.warn("torch.cuda.amp.GradScaler is enabled, but CUDA is not available.  Disabling.",
                              stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
        self._init_scale, self._growth_factor, self._backoff_factor = init_scale, growth_factor, backoff_factor
        self._growth_interval = growth_interval
        self._scale = None
        self._growth_tracker = 0
        self._per_optimizer = {}  # id(optimizer) -> {"stage": ..., "found_inf": bool}

    def is_enabled(self):
        return self._enabled

    def _lazy_scale(self):
        if self._scale is None:
            from .. import full
            self._scale = full((), float(self._init_scale), dtype=_C.float32)
        return self._scale

    def scale(self, outputs):
        """outputs (a tensor or nested lists/tuples of them) times the current scale."""
        if not self._enabled:
            return outputs
        scale = self._lazy_scale()
        if isinstance(outputs, _C.TensorBase):
            return outputs * scale.to(outputs.dtype)
        if isinstance(outputs, (list, tuple)):
            return type(outputs)(self.scale(o) for o in outputs)
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    def _state(self, optimizer):
        return self._per_optimizer.setdefault(id(optimizer), {"stage": "ready", "found_inf": False})

    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale in place and records whether any is
        inf or nan."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == "unscaled":
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == "stepped":
            raise RuntimeError("unscale_() is being called after step().")
        inv = 1.0 / self._lazy_scale().item()
        found = False
        from ..autograd.grad_mode import no_grad
        with no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    p.grad.mul_(inv)
                    found = found or not bool(p.grad.isfinite().all())
        state["found_inf"], state["stage"] = found, "unscaled"

    def step(self, optimizer, *args, **kwargs):
        """optimizer.step() after unscale_ (if not done yet), skipped when a gradient is not
        finite; returns the step's value (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == "stepped":
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == "ready":
            self.unscale_(optimizer)
        result = None if state["found_inf"] else optimizer.step(*args, **kwargs)
        state["stage"] = "stepped"
        return result

    def update(self, new_scale=None):
        """Backs the scale off after a skipped step, grows it after growth_interval good ones."""
        if not self._enabled:
            return
        scale = self._lazy_scale()
        if new_scale is not None:
            scale.fill_(float(new_scale))
        else:
            if not self._per_optimizer:
                raise AssertionError("No inf checks were recorded prior to update.")
            if any(s["found_inf"] for s in self._per_optimizer.values()):
                scale.mul_(self._backoff_factor)
                self._growth_tracker = 0
            else:
                self._growth_tracker += 1
                if self._growth_tracker == self._growth_interval:
                    scale.mul_(self._growth_factor)
                    self._growth_tracker = 0
        self._per_optimizer = {}

    def get_scale(self):
        return self._lazy_scale().item() if self._enabled else 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def get_growth_interval(self):
        return self._growth_interval

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._growth_tracker}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor, self._backoff_factor = state_dict["growth_factor"], state_dict["backoff_factor"]
        self._growth_interval, self._growth_tracker = state_dict["growth_interval"], state_dict["_growth_tracker"]


class _CudaGradScaler(GradScaler):
    """torch.cuda.amp.GradScaler: GradScaler("cuda", ...)."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


class _CudaAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cuda", dtype, enabled, cache_enabled)


class _CpuAutocast(autocast):
    def __init__(self, enabled=True, dtype=None, cache_enabled=True):
        super().__init__("cpu", dtype, enabled, cache_enabled)


def _namespace(name, **members):
    import types
    module = types.ModuleType(name)
    module.__dict__.update(members)
    return module


_CudaGradScaler.__name__ = _CudaGradScaler.__qualname__ = "GradScaler"
_CudaAutocast.__name__ = _CpuAutocast.__name__ = "autocast"
cuda_amp = _namespace("kiln.cuda.amp", GradScaler=_CudaGradScaler, autocast=_CudaAutocast)
cpu_amp = _namespace("kiln.cpu.amp", autocast=_CpuAutocast)


def is_autocast_enabled(device_type=None):
    return False  # kiln's autocast never enters enabled (see autocast)
