"""kiln.utils: data loading (data) and activation checkpointing (checkpoint), as torch.utils."""
from . import checkpoint, data  # noqa: F401
