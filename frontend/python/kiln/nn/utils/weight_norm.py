"""torch.nn.utils.weight_norm / remove_weight_norm (the hook form, still the common one in vocoder
and WaveNet code): the weight becomes g * v / ||v||, the norm over every dim but `dim`, recomputed
by a forward pre-hook (_weight_norm_hook.WeightNorm) from the parameters name_g and name_v."""
from ..parameter import Parameter
from ._weight_norm_hook import WeightNorm, _norm_except_dim

__all__ = ["WeightNorm", "weight_norm", "remove_weight_norm"]


def _apply(module, name, dim):
    for hook in module._forward_pre_hooks.values():
        hook = getattr(hook, "weight_norm", hook)
        if isinstance(hook, WeightNorm) and hook.name == name:
            raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
    if dim is None:
        dim = -1
    fn = WeightNorm(name, dim)
    weight = getattr(module, name)
    if dim < -1:
        dim += weight.dim()
        fn.dim = dim
    del module._parameters[name]
    module.register_parameter(name + "_g", Parameter(_norm_except_dim(weight, dim).detach().clone()))
    module.register_parameter(name + "_v", Parameter(weight.detach().clone()))
    setattr(module, name, fn.compute_weight(module))
    module.register_forward_pre_hook(fn.as_hook())
    return fn


def _remove(self, module):
    weight = self.compute_weight(module).detach()
    delattr(module, self.name)
    del module._parameters[self.name + "_g"]
    del module._parameters[self.name + "_v"]
    setattr(module, self.name, Parameter(weight))


# torch's WeightNorm.apply / .remove, defined here so that they run as library code.
WeightNorm.apply = staticmethod(_apply)
WeightNorm.remove = _remove


def weight_norm(module, name="weight", dim=0):
    """Reparameterizes module.<name> as <name>_g * <name>_v / ||<name>_v|| (norm over every dim
    but `dim`; dim=None: the whole tensor). Returns the module."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    """Folds the reparameterization back into one parameter `name`."""
    for k, hook in list(module._forward_pre_hooks.items()):
        hook = getattr(hook, "weight_norm", hook)
        if isinstance(hook, WeightNorm) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"weight_norm of '{name}' not found in {module}")
