"""torch.optim.swa_utils: stochastic weight averaging and EMA of a model's weights.

AveragedModel keeps a deep copy of a model whose parameters (and buffers, with use_buffers) are
averaged into after each optimizer step: equal weights by default (SWA), or any avg_fn /
multi_avg_fn (get_ema_multi_avg_fn: an exponential moving average). SWALR anneals each group's
lr towards swa_lr; update_bn recomputes BatchNorm running statistics with one pass over a
loader. torch's arithmetic on the CPU path (its per-tensor avg_fn, lerp_ for the EMA)."""
import itertools
import math
import warnings
from copy import deepcopy

from .. import _C
from ..autograd.grad_mode import no_grad
from ..nn.modules.batchnorm import _BatchNorm
from ..nn.modules.instancenorm import _InstanceNorm
from ..nn.modules.module import Module
from .lr_scheduler import LRScheduler, _format_param

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn", "get_ema_avg_fn",
           "get_swa_avg_fn"]


def _check_decay(decay):
    if decay < 0.0 or decay > 1.0:
        raise ValueError(f"Invalid decay value {decay} provided. Please provide a value in [0,1] range.")


def _is_float_or_complex(t):
    return t.dtype.is_floating_point or t.dtype.is_complex


def get_ema_multi_avg_fn(decay=0.999):
    """An in-place EMA over lists of tensors: ema = lerp(ema, current, 1 - decay)."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        with no_grad():
            if _is_float_or_complex(ema_param_list[0]):
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.lerp_(p_model, 1 - decay)
            else:
                for p_ema, p_model in zip(ema_param_list, current_param_list):
                    p_ema.copy_(p_ema * decay + p_model * (1 - decay))

    return ema_update


def get_swa_multi_avg_fn():
    """An in-place running mean over lists of tensors, `num_averaged` values so far."""

    def swa_update(averaged_param_list, current_param_list, num_averaged):
        with no_grad():
            if _is_float_or_complex(averaged_param_list[0]):
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    p_avg.lerp_(p_model, 1 / (num_averaged + 1))
            else:
                for p_avg, p_model in zip(averaged_param_list, current_param_list):
                    diff = p_model - p_avg
                    if isinstance(num_averaged, _C.TensorBase):
                        p_avg.addcdiv_(diff, num_averaged + 1)
                    else:
                        p_avg.add_(diff, alpha=1.0 / (num_averaged + 1))

    return swa_update


def get_ema_avg_fn(decay=0.999):
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with no_grad():
            return decay * ema_param + (1 - decay) * current_param

    return ema_update


def get_swa_avg_fn():
    def swa_update(averaged_param, current_param, num_averaged):
        with no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)

    return swa_update


def _group_by_device_and_dtype(averaged, current):
    """(averaged, current) lists per (device, dtype) of the averaged tensors, in first-seen order."""
    groups = {}
    for a, c in zip(averaged, current):
        lists = groups.setdefault((str(a.device), a.dtype), ([], []))
        lists[0].append(a)
        lists[1].append(c)
    return groups


class AveragedModel(Module):
    """A deep copy of `model` whose parameters (and buffers, with use_buffers=True) average the
    model's over the update_parameters calls; forward runs the copy. n_averaged counts them."""

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if avg_fn is not None and multi_avg_fn is not None:
            raise AssertionError("Only one of avg_fn and multi_avg_fn should be provided")
        self.module = deepcopy(model)
        if device is not None:
            self.module = self.module.to(device)
        self.register_buffer("n_averaged", _C._ops.full([], 0, dtype=_C.int64, device=device))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        self_param = (itertools.chain(self.module.parameters(), self.module.buffers()) if self.use_buffers
                      else self.parameters())
        model_param = (itertools.chain(model.parameters(), model.buffers()) if self.use_buffers
                       else model.parameters())
        averaged, current = [], []
        copy_param = bool(self.n_averaged == 0)
        for p_averaged, p_model in zip(self_param, model_param):
            p_model_ = p_model.detach().to(p_averaged.device)
            averaged.append(p_averaged.detach())
            current.append(p_model_)
            if copy_param:
                p_averaged.detach().copy_(p_model_)
        if self.n_averaged > 0:
            if self.multi_avg_fn is not None or self.avg_fn is None:
                for (device, _), (params, models) in _group_by_device_and_dtype(averaged, current).items():
                    n_averaged = self.n_averaged.to(device)
                    if self.multi_avg_fn:
                        self.multi_avg_fn(params, models, n_averaged)
                    else:
                        # torch's path for devices without foreach kernels (the CPU).
                        swa = get_swa_avg_fn()
                        for p_averaged, p_model in zip(params, models):
                            p_averaged.copy_(swa(p_averaged, p_model, n_averaged))
            else:
                for p_averaged, p_model in zip(averaged, current):
                    n_averaged = self.n_averaged.to(p_averaged.device)
                    p_averaged.detach().copy_(self.avg_fn(p_averaged.detach(), p_model, n_averaged))
        if not self.use_buffers:
            # Buffers (BatchNorm statistics) are the model's, not averaged; update_bn recomputes them.
            for b_swa, b_model in zip(self.module.buffers(), model.buffers()):
                b_swa.detach().copy_(b_model.detach().to(b_swa.device))
        self.n_averaged += 1


def update_bn(loader, model, device=None):
    """Recomputes the running statistics of model's BatchNorm layers: reset, then one pass over
    `loader` (each item an input, or a list/tuple whose first element is) in training mode with
    a cumulative average (momentum None); the model's mode and momenta are restored."""
    with no_grad():
        momenta = {}
        for module in model.modules():
            if isinstance(module, _BatchNorm) and not isinstance(module, _InstanceNorm):
                module.reset_running_stats()
                momenta[module] = module.momentum
        if not momenta:
            return
        was_training = model.training
        model.train()
        for module in momenta:
            module.momentum = None
        for input in loader:
            if isinstance(input, (list, tuple)):
                input = input[0]
            if device is not None:
                input = input.to(device)
            model(input)
        for module, momentum in momenta.items():
            module.momentum = momentum
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneals each param group's lr from its value to swa_lr over anneal_epochs steps (cosine
    or linear), then holds it there."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _format_param("swa_lr", optimizer, swa_lr)
        for lr, group in zip(swa_lrs, optimizer.param_groups):
            group["swa_lr"] = lr
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"anneal_strategy must be one of 'cos' or 'linear', instead got {anneal_strategy}")
        self._set_anneal_func(anneal_strategy)
        if not isinstance(anneal_epochs, int) or anneal_epochs < 0:
            raise ValueError(f"anneal_epochs must be equal or greater than 0, got {anneal_epochs}")
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _linear_anneal(t):
        return t

    @staticmethod
    def _cosine_anneal(t):
        return (1 - math.cos(math.pi * t)) / 2

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        if not self._get_lr_called_within_step:
            warnings.warn("To get the last learning rate computed by the scheduler, please use `get_last_lr()`.",
                          UserWarning, stacklevel=2)
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_t = max(0, min(1, (step - 1) / max(1, self.anneal_epochs)))
        prev_alpha = self.anneal_func(prev_t)
        prev_lrs = [self._get_initial_lr(group["lr"], group["swa_lr"], prev_alpha)
                    for group in self.optimizer.param_groups]
        t = max(0, min(1, step / max(1, self.anneal_epochs)))
        alpha = self.anneal_func(t)
        return [group["swa_lr"] * alpha + lr * (1 - alpha) for group, lr in zip(self.optimizer.param_groups, prev_lrs)]

    def _set_anneal_func(self, anneal_strategy):
        self._anneal_strategy = anneal_strategy
        self.anneal_func = self._cosine_anneal if anneal_strategy == "cos" else self._linear_anneal

    def state_dict(self):
        return {key: value for key, value in self.__dict__.items() if key not in ("optimizer", "anneal_func")}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._set_anneal_func(self._anneal_strategy)
