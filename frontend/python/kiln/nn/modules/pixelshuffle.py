"""torch.nn.modules.pixelshuffle's path (super_resolution lists its PixelShuffle in safe_globals);
the layers live in upsampling.py."""
from .upsampling import PixelShuffle, PixelUnshuffle  # noqa: F401

__all__ = ["PixelShuffle", "PixelUnshuffle"]
