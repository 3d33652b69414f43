"""kiln.autograd.graph (torch.autograd.graph): saved-tensor hooks. Inside
`with saved_tensors_hooks(pack_hook, unpack_hook):` every tensor an operation saves for its
backward goes through pack_hook(tensor) and the node keeps what that returns; the backward gets
the tensor from unpack_hook(kept). The hooks live in the C++ autograd engine
(runtime/autograd/SavedTensorHooks.h), per thread, innermost first; a node keeps the hooks that
packed its tensors, so unpacking works after the block ended."""
from .. import _C

__all__ = ["saved_tensors_hooks", "save_on_cpu"]


class saved_tensors_hooks:
    """Context manager: pack_hook(tensor) -> anything, unpack_hook(that) -> a tensor equal to
    the one packed. The pack hook's own operations save nothing through these hooks."""

    def __init__(self, pack_hook, unpack_hook):
        self.pack_hook = pack_hook
        self.unpack_hook = unpack_hook

    def __enter__(self):
        _C._push_saved_tensors_hooks(self.pack_hook, self.unpack_hook)
        return self

    def __exit__(self, *exc_info):
        _C._pop_saved_tensors_hooks()
        return False


class save_on_cpu(saved_tensors_hooks):
    """Saved tensors kept on the CPU and moved back to their device for the backward."""

    def __init__(self, pin_memory=False, device_type="cuda"):
        def pack(t):
            return t.device, t.to("cpu", copy=True)

        def unpack(packed):
            device, t = packed
            return t.to(device)

        super().__init__(pack, unpack)
