"""GradScaler (torch.amp.GradScaler): loss scaling for reduced-precision gradients. The loss is
multiplied by a scale before backward; step() unscales the gradients (in place, by the float32
reciprocal of the scale), skips the optimizer step when any is inf or NaN, and update() backs
the scale off after a skipped step and grows it after growth_interval good ones, with torch's
arithmetic, so the scale and the steps taken follow torch's. Works in any precision (in float32
it protects against overflowing losses the same way)."""
import functools
import warnings

from .. import _C, _compiling
from ..autograd.grad_mode import no_grad

__all__ = ["GradScaler"]

_READY, _UNSCALED, _STEPPED = 0, 1, 2


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
        self._init_scale = init_scale
        self._scale = None
        self._growth_factor = growth_factor
        self._backoff_factor = backoff_factor
        self._growth_interval = growth_interval
        self._init_growth_tracker = 0
        self._growth_tracker = None
        self._per_optimizer_states = {}

    def _lazy_init(self, device):
        if device.type == "meta":
            # Run for real on the fakes of a kiln.compile trace, the first scale() would keep a
            # meta tensor as the scaler's state and fail at the next eager call: a graph break,
            # so that the scale tensor is made when the code runs.
            raise NotImplementedError("GradScaler's first scale() makes its scale tensor (a side effect on the "
                                      "scaler): it runs eagerly")
        self._scale = _C._ops.full([], self._init_scale, dtype=_C.float32, device=device)
        self._growth_tracker = _C._ops.full([], self._init_growth_tracker, dtype=_C.int32, device=device)

    def _state(self, optimizer):
        return self._per_optimizer_states.setdefault(id(optimizer), {"stage": _READY, "found_inf": None})

    def scale(self, outputs):
        """outputs (a tensor, or tensors nested in lists/tuples) times the scale."""
        if not self._enabled:
            return outputs
        if isinstance(outputs, _C.TensorBase):
            if self._scale is None:
                self._lazy_init(outputs.device)
            return outputs * self._scale.to(outputs.device)
        if isinstance(outputs, (list, tuple)):
            scaled = [self.scale(o) for o in outputs]
            return type(outputs)(scaled) if isinstance(outputs, tuple) else scaled
        raise ValueError("outputs must be a Tensor or an iterable of Tensors")

    @functools.partial(_compiling.not_traced, reason="GradScaler.{} runs eagerly: it reads whether gradients hold inf/NaN and keeps Python state (torch breaks there too)".format("unscale_()"))
    def unscale_(self, optimizer):
        """Divides optimizer's gradients by the scale (in place) and records whether any is
        inf or NaN."""
        if not self._enabled:
            return
        state = self._state(optimizer)
        if state["stage"] == _UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] == _STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        if self._scale is None:
            raise AssertionError("Attempted unscale_ but _scale is None.  This may indicate your script did not use "
                                 "scaler.scale(loss or outputs) earlier in the iteration.")
        inv_scale = self._scale.double().reciprocal().float()
        found = False
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = getattr(param, "grad", None)
                    if grad is None:
                        continue
                    if grad.dtype == _C.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    if not bool(_C._ops.isfinite(grad).all()):
                        found = True
                    grad.mul_(inv_scale.to(grad.device))
        state["found_inf"] = _C._ops.full([1], 1.0 if found else 0.0, dtype=_C.float32)
        state["stage"] = _UNSCALED

    @functools.partial(_compiling.not_traced, reason="GradScaler.{} runs eagerly: it reads whether gradients hold inf/NaN and keeps Python state (torch breaks there too)".format("step()"))
    def step(self, optimizer, *args, **kwargs):
        """optimizer.step(*args, **kwargs) unless the unscaled gradients had an inf or NaN;
        returns what it returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        state = self._state(optimizer)
        if state["stage"] == _STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] == _READY:
            self.unscale_(optimizer)
        result = None
        if state["found_inf"].item() == 0:
            result = optimizer.step(*args, **kwargs)
        state["stage"] = _STEPPED
        return result

    @functools.partial(_compiling.not_traced, reason="GradScaler.{} runs eagerly: it reads whether gradients hold inf/NaN and keeps Python state (torch breaks there too)".format("update()"))
    def update(self, new_scale=None):
        """Backs the scale off after a skipped step, grows it after growth_interval good steps in
        a row (or sets it to new_scale)."""
        if not self._enabled:
            return
        if self._scale is None:
            raise RuntimeError("Attempted update but _scale is None.  This may indicate your script did not use "
                               "scaler.scale(loss or outputs) earlier in the iteration.")
        if new_scale is not None:
            if isinstance(new_scale, float):
                self._scale.fill_(new_scale)
            else:
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError("new_scale should be a float or a 1-element torch.cuda.FloatTensor or "
                                         "torch.FloatTensor with requires_grad=False.")
                self._scale.copy_(new_scale)
        else:
            found = [s["found_inf"] for s in self._per_optimizer_states.values() if s["found_inf"] is not None]
            if not found:
                raise AssertionError("No inf checks were recorded prior to update.")
            if sum(f.item() for f in found) > 0:
                self._scale.mul_(self._backoff_factor)
                self._growth_tracker.fill_(0)
            else:
                successful = self._growth_tracker.item() + 1
                if successful == self._growth_interval:
                    grown = self._scale * self._growth_factor
                    if bool(_C._ops.isfinite(grown).all()):
                        self._scale.copy_(grown)
                    self._growth_tracker.fill_(0)
                else:
                    self._growth_tracker.fill_(successful)
        self._per_optimizer_states = {}

    def get_scale(self):
        if not self._enabled:
            return 1.0
        return self._init_scale if self._scale is None else self._scale.item()

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if not self._enabled:
            return 0
        return self._init_growth_tracker if self._growth_tracker is None else self._growth_tracker.item()

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        if not self._enabled:
            return {}
        return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                "_growth_tracker": self._get_growth_tracker()}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])
