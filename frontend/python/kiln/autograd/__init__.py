"""kiln.autograd: grad modes now; the autograd engine arrives with tier 2."""
from .grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
