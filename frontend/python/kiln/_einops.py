"""einops on kiln tensors. einops picks a backend by the tensor: a subclass of its
AbstractBackend whose framework_name is an imported module and which accepts the tensor. kiln's
is "kiln": torch's backend with kiln in place of torch (its methods only call torch's API:
permute, reshape, stack, cat, einsum, amax, ...). It is defined as soon as einops' backends
module loads, whether einops is imported before or after kiln, and kiln never imports einops
itself. einops' nn layers (einops.layers.torch) are torch.nn modules and do not work with kiln."""
import importlib.abc
import importlib.util
import sys

_BACKENDS = "einops._backends"


def _define_backend(backends):
    from ._tensor import Tensor

    class KilnBackend(backends.TorchBackend):
        framework_name = "kiln"

        def __init__(self):  # TorchBackend's imports torch; this one needs only kiln
            self.torch = sys.modules["kiln"]

        def is_appropriate_type(self, tensor):
            return isinstance(tensor, Tensor)

    backends.KilnBackend = KilnBackend


class _DefineOnLoad(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when einops' backends module is about to load, it has the usual
    finders find it and defines the kiln backend right after the module runs."""

    def find_spec(self, name, path, target=None):
        if name != _BACKENDS:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
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
    if backends is not None:
        if not hasattr(backends, "KilnBackend"):
            _define_backend(backends)
    elif not any(isinstance(f, _DefineOnLoad) for f in sys.meta_path):
        sys.meta_path.insert(0, _DefineOnLoad())
