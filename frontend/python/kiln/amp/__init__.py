"""kiln.amp: autocast and GradScaler with torch.amp's API (mixed-precision training)."""
from .autocast_mode import autocast, is_autocast_available, is_autocast_enabled  # noqa: F401
from .grad_scaler import GradScaler  # noqa: F401

__all__ = ["GradScaler", "autocast", "is_autocast_available", "is_autocast_enabled"]
