"""nn.utils.weight_norm / spectral_norm (the forward-pre-hook forms) and their remove_*: the
weight recomputed from its parameters before every forward, as torch's."""
import warnings

from ... import _C
from ...autograd.grad_mode import no_grad
from .. import functional as F
from ..parameter import Parameter

__all__ = ["norm_except_dim", "remove_spectral_norm", "remove_weight_norm", "spectral_norm", "weight_norm"]


def norm_except_dim(v, pow=2, dim=0):
    """The pow-norm of v over every dim but `dim` (of all of v for dim -1), shaped to broadcast
    against v."""
    if dim == -1:
        return v.norm(pow)
    dim %= v.dim()
    keep = [1] * v.dim()
    keep[dim] = v.shape[dim]
    return v.transpose(0, dim).reshape([v.shape[dim], -1]).norm(pow, [1]).reshape(keep)


def _check_no_hook(module, kind, label, name):
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, kind) and hook.name == name:
            raise RuntimeError(f"Cannot register two {label} hooks on the same parameter {name}")


def _remove_hook(module, kind, label, name):
    """Undoes kind.apply(module, name, ...): the hook's remove() and the hook itself."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{label} of '{name}' not found in {module}")


def default_spectral_dim(module):
    """The dim spectral norm treats as the output: 1 for transposed convolutions, else 0."""
    from ..modules.conv import ConvTranspose1d, ConvTranspose2d
    return 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0


def _weight_norm(v, g, dim):
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        _check_no_hook(module, WeightNorm, "weight_norm", name)
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        setattr(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        weight = self.compute_weight(module)
        delattr(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """w = g * v / ||v||: the weight split into a magnitude `name_g` and a direction `name_v`."""
    warnings.warn("torch.nn.utils.weight_norm is deprecated in favor of torch.nn.utils.parametrizations.weight_norm.",
                  FutureWarning, stacklevel=2)
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    return _remove_hook(module, WeightNorm, "weight_norm", name)


class SpectralNorm:
    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(f"Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape([weight.shape[0], -1])

    def compute_weight(self, module, do_power_iteration):
        """weight_orig / sigma, sigma = u . W v; while training, power iterations first refine u
        and v in place (torch's order: v from u, then u from v)."""
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        weight_mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(weight_mat.t().mv(u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(weight_mat.mv(v), dim=0, eps=self.eps))
            u, v = u.clone(), v.clone()
        sigma = u.dot(weight_mat.mv(v))
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        delattr(module, self.name)
        delattr(module, self.name + "_u")
        delattr(module, self.name + "_v")
        delattr(module, self.name + "_orig")
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        setattr(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        _check_no_hook(module, SpectralNorm, "spectral_norm", name)
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        if weight is None:
            raise ValueError(f"`SpectralNorm` cannot be applied as parameter `{name}` is None")
        with no_grad():
            h, w = fn.reshape_weight_to_matrix(weight).shape
            u = F.normalize(_C._ops.empty([h], dtype=weight.dtype).normal_(0, 1), dim=0, eps=fn.eps)
            v = F.normalize(_C._ops.empty([w], dtype=weight.dtype).normal_(0, 1), dim=0, eps=fn.eps)
        delattr(module, fn.name)
        module.register_parameter(fn.name + "_orig", weight)
        setattr(module, fn.name, weight.detach())
        module.register_buffer(fn.name + "_u", u)
        module.register_buffer(fn.name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """W / sigma(W), sigma estimated by power iteration (one step per training forward)."""
    if dim is None:
        dim = default_spectral_dim(module)
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove_hook(module, SpectralNorm, "spectral_norm", name)
