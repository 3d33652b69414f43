"""OptimizedModule: what kiln.compile returns for a kiln.nn.Module, as torch's does.

It holds the module as the submodule `_orig_mod` (so parameters() are the same tensors and
state_dict() keys start with "_orig_mod.", as in torch), forwards every other attribute read,
write and delete to it, and its forward runs the module's forward captured by the frame hook.
"""
import types

from ..nn.modules.module import Module
from .hook import capture_module


class OptimizedModule(Module):
    """A compiled view of `_orig_mod`; `callback` is the kiln.compile frame callback."""

    # Attributes that live on the wrapper itself; every other one is _orig_mod's.
    _opt_mod_attributes = frozenset({"_orig_mod", "_callback", "_compiled_forward", "_forward_self",
                                     "_super_module_initialized", "forward", "__dict__"})

    def __init__(self, mod, callback):
        # First, so that attribute access during Module.__init__ can reach _orig_mod.
        object.__setattr__(self, "_orig_mod", mod)
        self._super_module_initialized = False
        super().__init__()
        self._super_module_initialized = True
        self._orig_mod = mod  # now registered as a submodule
        self._callback = callback
        self._initialize()

    def _initialize(self):
        forward = self._orig_mod.forward
        # A bound forward is compiled as its function, so that the module is an argument of the
        # captured frame (its parameters are guarded and read as graph attributes).
        if isinstance(forward, types.MethodType) and forward.__self__ is self._orig_mod:
            self._forward_self = (self._orig_mod,)
            forward = forward.__func__
        else:
            self._forward_self = ()
        self._compiled_forward = capture_module().CompiledFunction(forward, self._callback)

    def forward(self, *args, **kwargs):
        mod = self._orig_mod
        if mod._forward_pre_hooks or mod._forward_hooks:
            # Hooks see the module's own call, exactly as without compiling.
            return mod(*args, **kwargs)
        return self._compiled_forward(*self._forward_self, *args, **kwargs)

    @property
    def training(self):
        return self._orig_mod.training

    @training.setter
    def training(self, value):
        # Module.__init__ sets the default; the wrapper mirrors _orig_mod's mode instead.
        if self._super_module_initialized:
            self._orig_mod.training = value

    def __getattr__(self, name):
        if name == "_orig_mod":
            return self._modules["_orig_mod"]
        return getattr(self._orig_mod, name)

    def __setattr__(self, name, value):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__setattr__(name, value)
        return setattr(self._orig_mod, name, value)

    def __delattr__(self, name):
        if hasattr(type(self), name) or name in OptimizedModule._opt_mod_attributes:
            return super().__delattr__(name)
        return delattr(self._orig_mod, name)

    def __dir__(self):
        own = self._orig_mod.__dir__()
        return own + [name for name in super().__dir__() if name not in own]

    def __len__(self):
        return len(self._orig_mod)

    def __bool__(self):
        # Truth as the module's: without this, __len__ would make a Linear's wrapper raise.
        return bool(self._orig_mod)

    def __reduce__(self):
        # copy, deepcopy and pickle rebuild the wrapper around a copy of the module.
        return type(self), (self._orig_mod, self._callback)
