"""einops on kiln tensors.

einops picks a backend by the tensor: a subclass of its AbstractBackend whose framework_name is
an imported module and which accepts the tensor. kiln's is "kiln": torch's backend with kiln in
place of torch (its methods only call torch's API: permute, reshape, stack, cat, einsum, amax,
...). It is defined as soon as einops' backends module loads, whether einops is imported before
or after kiln; kiln never imports einops itself.

einops' layers follow the framework's name: einops.layers.torch holds torch.nn modules, so a
model file moved to kiln imports `einops.layers.kiln` instead (Rearrange and Reduce as kiln.nn
modules, served by kiln). EinMix is not provided."""
import importlib.abc
import importlib.util
import sys

_BACKENDS = "einops._backends"
_LAYERS = "einops.layers.kiln"


def _define_backend(backends):
    from ._tensor import Tensor

    class KilnBackend(backends.TorchBackend):
        framework_name = "kiln"

        def __init__(self):  # TorchBackend's imports torch; this one needs only kiln
            self.torch = sys.modules["kiln"]

        def is_appropriate_type(self, tensor):
            return isinstance(tensor, Tensor)

    backends.KilnBackend = KilnBackend


class _LayersLoader(importlib.abc.Loader):
    def create_module(self, spec):
        return None

    def exec_module(self, module):
        from einops.layers import RearrangeMixin, ReduceMixin

        from .nn import Module

        class Rearrange(RearrangeMixin, Module):
            def forward(self, input):
                return self._apply_recipe(input)

        class Reduce(ReduceMixin, Module):
            def forward(self, input):
                return self._apply_recipe(input)

        for cls in (Rearrange, Reduce):
            cls.__module__ = _LAYERS
            setattr(module, cls.__name__, cls)
        module.__all__ = ["Rearrange", "Reduce"]


class _EinopsFinder(importlib.abc.MetaPathFinder):
    """Serves einops.layers.kiln, and when einops' backends module is about to load, has the
    usual finders find it and defines the kiln backend right after the module runs."""

    _finding = False

    def find_spec(self, name, path, target=None):
        if name == _LAYERS:
            return importlib.util.spec_from_loader(name, _LayersLoader())
        if name != _BACKENDS or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            _define_backend(module)

        spec.loader.exec_module = exec_module
        return spec


def install():
    backends = sys.modules.get(_BACKENDS)
    if backends is not None and not hasattr(backends, "KilnBackend"):
        _define_backend(backends)
    if not any(isinstance(f, _EinopsFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _EinopsFinder())
