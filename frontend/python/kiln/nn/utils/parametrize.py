"""nn.utils.parametrize (torch's): a parameter or buffer replaced by a function of tensors the
module keeps under `parametrizations.<name>.original` (or original0, original1, ... when the
parametrization's right_inverse splits it), recomputed on every access through a property of a
per-instance subclass, as torch does."""
import contextlib

from ... import _C
from ...autograd.grad_mode import no_grad
from ..modules.container import ModuleDict, ModuleList
from ..parameter import Parameter

__all__ = ["ParametrizationList", "cached", "is_parametrized", "register_parametrization",
           "remove_parametrizations", "type_before_parametrizations"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Within the block, each parametrized tensor is computed once per access site (its first
    access), as torch's cache."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order to its original(s)."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules.")
        super().__init__(modules)
        self.unsafe = unsafe
        new = original
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    new = module.right_inverse(new)
        self.is_tensor = isinstance(new, _C.TensorBase)
        self.ntensors = 1 if self.is_tensor else len(new)
        if self.is_tensor:
            if not unsafe and (new.dtype != original.dtype or tuple(new.shape) != tuple(original.shape)):
                raise ValueError(f"When `right_inverse` outputs one tensor, it may not change the dtype or shape.\n"
                                 f"original.dtype: {original.dtype}\nright_inverse(original).dtype: {new.dtype}")
            with no_grad():
                original.copy_(new)
            self._register_original("original", original)
        else:
            for i, t in enumerate(new):
                self._register_original(f"original{i}", Parameter(t.detach(), original.requires_grad)
                                        if isinstance(original, Parameter) else t.detach())
        if not unsafe:
            # torch's consistency check, which runs the parametrization once (a spectral norm
            # takes one more power-iteration step here, as in torch).
            _check_parametrized(self(), original.dtype, tuple(original.shape), "unparametrized", "parametrized")

    def _register_original(self, name, tensor):
        if isinstance(tensor, Parameter):
            self.register_parameter(name, tensor)
        else:
            self.register_buffer(name, tensor)

    def right_inverse(self, value):
        """Sets the originals so that the parametrized tensor becomes `value`."""
        with no_grad():
            for module in reversed(list(self)):
                if hasattr(module, "right_inverse"):
                    value = module.right_inverse(value)
                elif not self.unsafe:
                    raise RuntimeError(f"parametrization {type(module).__name__} does not implement right_inverse.")
            if self.is_tensor:
                self.original.copy_(value)
            else:
                for i, t in enumerate(value):
                    getattr(self, f"original{i}").copy_(t)

    def forward(self):
        modules = list(self)
        if self.is_tensor:
            x = modules[0](self.original)
        else:
            x = modules[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for module in modules[1:]:
            x = module(x)
        return x


def _check_parametrized(value, dtype, shape, before, after):
    """torch's errors for a parametrization whose value is not a tensor of the original's dtype
    and shape (without unsafe=True)."""
    if not isinstance(value, _C.TensorBase):
        raise ValueError(f"A parametrization must return a tensor. Got {type(value).__name__}.")
    if value.dtype != dtype:
        raise ValueError(f"Registering a parametrization may not change the dtype of the tensor, unless `unsafe` flag "
                         f"is enabled.\n{before} dtype: {dtype}\n{after} dtype: {value.dtype}")
    if tuple(value.shape) != shape:
        raise ValueError(f"Registering a parametrization may not change the shape of the tensor, unless `unsafe` flag "
                         f"is enabled.\n{before} shape: {list(shape)}\n{after} shape: {list(value.shape)}")


def _inject_new_class(module):
    cls = module.__class__

    def getstate(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through state_dict().")

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,), {"__getstate__": getstate,
                                                                    "_kiln_parametrized_base": cls})


def _inject_property(module, tensor_name):
    def get(self):
        parametrization = self.parametrizations[tensor_name]
        if _cache_enabled:
            key = (id(self), tensor_name)
            if key not in _cache:
                _cache[key] = parametrization()
            return _cache[key]
        return parametrization()

    def set_(self, value):
        self.parametrizations[tensor_name].right_inverse(value)

    setattr(module.__class__, tensor_name, property(get, set_))


def is_parametrized(module, tensor_name=None):
    parametrizations = getattr(module, "parametrizations", None)
    if parametrizations is None or not isinstance(parametrizations, ModuleDict):
        return False
    return len(parametrizations) > 0 if tensor_name is None else tensor_name in parametrizations


def type_before_parametrizations(module):
    return module.__class__._kiln_parametrized_base if is_parametrized(module) else type(module)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Replaces module.<tensor_name> by parametrization(original) (chained after earlier ones)."""
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        if not unsafe:
            # torch's checks: the new parametrization keeps the tensor's dtype and shape, and so
            # does its right_inverse where it has one.
            y = getattr(module, tensor_name)
            x = parametrization(y)
            _check_parametrized(x, y.dtype, tuple(y.shape), f"module.{tensor_name}", f"parametrization(module.{tensor_name})")
            if hasattr(parametrization, "right_inverse"):
                try:
                    z = parametrization.right_inverse(x)
                except NotImplementedError:
                    pass
                else:
                    if not isinstance(z, _C.TensorBase):
                        raise ValueError(f"parametrization.right_inverse must return a tensor. Got: {type(z).__name__}")
                    if z.dtype != y.dtype or tuple(z.shape) != tuple(y.shape):
                        raise ValueError(f"The tensor returned by parametrization.right_inverse must have the same dtype "
                                         f"and shape as module.{tensor_name}, unless the `unsafe` flag is enabled.\n"
                                         f"module.{tensor_name}: {y.dtype} {list(y.shape)}\n"
                                         f"returned: {z.dtype} {list(z.shape)}")
        module.parametrizations[tensor_name].append(parametrization)
        module.parametrizations[tensor_name].unsafe |= unsafe
        return module
    if tensor_name not in module._parameters and tensor_name not in module._buffers:
        raise ValueError(f"Module '{module}' does not have a parameter, a buffer, or a parametrized element with "
                         f"name '{tensor_name}'")
    original = getattr(module, tensor_name)
    parametrizations = ParametrizationList([parametrization], original, unsafe=unsafe)
    delattr(module, tensor_name)
    if not is_parametrized(module):
        _inject_new_class(module)
        module.parametrizations = ModuleDict()
    module.parametrizations[tensor_name] = parametrizations
    _inject_property(module, tensor_name)
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Puts a plain parameter back: the parametrized value (leave_parametrized) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {module} does not have a parametrization on {tensor_name}")
    parametrizations = module.parametrizations[tensor_name]
    if parametrizations.is_tensor:
        original = parametrizations.original
        if leave_parametrized:
            with no_grad():
                value = getattr(module, tensor_name)
                original.copy_(value)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        with no_grad():
            value = getattr(module, tensor_name)
        original = Parameter(value.detach(), value.requires_grad) if isinstance(parametrizations.original0,
                                                                                 Parameter) else value.detach()
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        delattr(module, "parametrizations")
        module.__class__ = module.__class__._kiln_parametrized_base
    return module
