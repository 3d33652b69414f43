"""kiln.amp: autocast and GradScaler with torch.amp's API (mixed-precision training)."""
from .autocast_mode import (  # noqa: F401
    autocast, custom_bwd, custom_fwd, is_autocast_available, is_autocast_enabled)
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["GradScaler", "autocast", "custom_bwd", "custom_fwd", "is_autocast_available", "is_autocast_enabled"]
