"""kiln.utils: data loading (data), activation checkpointing (checkpoint) and hook handles (hooks),
as torch.utils."""
from . import _pytree, checkpoint, data, hooks  # noqa: F401
