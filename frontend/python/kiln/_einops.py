"""einops on kiln tensors: an einops backend for kiln (einops picks a backend by the tensor's
type among the subclasses of its AbstractBackend whose framework is imported).

kiln does not import einops: a finder on sys.meta_path waits for `einops._backends` to be
imported and then defines the backend (or defines it at once when einops came first). Under
kiln.compile, einops' functions run for real on the traced tensors, so their kiln ops are
recorded in the graph (frontend/capture/Calls.cpp: isKilnLibrary). `einops.layers.torch` builds
torch modules and stays torch's; the same finder serves `einops.layers.kiln` (Rearrange and
Reduce as kiln.nn modules, on einops' own layer mixins), which a model file moved to kiln imports
in its place. EinMix is not provided."""
import importlib.abc
import importlib.util
import sys

_TARGET = "einops._backends"
_LAYERS = "einops.layers.kiln"


def _define_backend(backends):
    if getattr(backends, "_kiln_backend_defined", False):
        return
    import kiln

    class KilnBackend(backends.AbstractBackend):
        framework_name = "kiln"

        def __init__(self):
            self.kiln = kiln

        def is_appropriate_type(self, tensor):
            return isinstance(tensor, kiln.Tensor)

        def from_numpy(self, x):
            variable = kiln.from_numpy(x)
            if self.is_float_type(variable):
                variable.requires_grad = True
            return variable

        def to_numpy(self, x):
            return x.detach().cpu().numpy()

        def arange(self, start, stop):
            return kiln.arange(start, stop, dtype=kiln.int64)

        def reduce(self, x, operation, reduced_axes):
            if operation == "min":
                return x.amin(dim=reduced_axes)
            if operation == "max":
                return x.amax(dim=reduced_axes)
            if operation == "sum":
                return x.sum(dim=reduced_axes)
            if operation == "mean":
                return x.mean(dim=reduced_axes)
            if operation in ("any", "all", "prod"):
                for i in sorted(reduced_axes)[::-1]:
                    x = getattr(x, operation)(dim=i)
                return x
            raise NotImplementedError("Unknown reduction ", operation)

        def transpose(self, x, axes):
            return x.permute(axes)

        def stack_on_zeroth_dimension(self, tensors):
            return kiln.stack(tensors)

        def add_axes(self, x, n_axes, pos2len):
            repeats = [-1] * n_axes
            for axis_position, axis_length in pos2len.items():
                x = self.add_axis(x, axis_position)
                repeats[axis_position] = axis_length
            return x.expand(repeats)

        def tile(self, x, repeats):
            return x.repeat(repeats)

        def concat(self, tensors, axis):
            return kiln.cat(tensors, dim=axis)

        def add_axis(self, x, new_position):
            return kiln.unsqueeze(x, new_position)

        def is_float_type(self, x):
            return x.dtype in (kiln.float16, kiln.float32, kiln.float64, kiln.bfloat16)

        def einsum(self, pattern, *x):
            return kiln.einsum(pattern, *x)

    backends.KilnBackend = KilnBackend
    backends._kiln_backend_defined = True


class _LayersLoader(importlib.abc.Loader):
    """einops.layers.kiln: einops' Rearrange/Reduce mixins on kiln.nn.Module."""

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
    """Serves einops.layers.kiln; otherwise finds nothing itself: when einops' backends module
    is found, its loader also defines kiln's backend once the module has run."""

    def find_spec(self, name, path, target=None):
        if name == _LAYERS:
            return importlib.util.spec_from_loader(name, _LayersLoader())
        if name != _TARGET:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
                run = spec.loader.exec_module

                def exec_module(module, run=run):
                    run(module)
                    _define_backend(module)
                spec.loader.exec_module = exec_module
                return spec
        return None


def install():
    if _TARGET in sys.modules:
        _define_backend(sys.modules[_TARGET])
    if not any(isinstance(f, _EinopsFinder) for f in sys.meta_path):  # also for einops.layers.kiln
        sys.meta_path.insert(0, _EinopsFinder())
