"""kiln.nn.attention (torch.nn.attention): SDPBackend and the sdpa_kernel context manager that
model code wraps scaled_dot_product_attention in.

kiln has one implementation of scaled_dot_product_attention per device (eager: a fused CPU
kernel; compiled: the loop IR's), computing what torch's math backend computes; it serves any
backend selection, so `with sdpa_kernel(SDPBackend.FLASH_ATTENTION):` runs the same code with
the same results (to rounding) as without. The selection is kept (`current_backends()`) and
checked: backends must be SDPBackend members."""
import contextlib
import enum

__all__ = ["SDPBackend", "sdpa_kernel"]


class SDPBackend(enum.IntEnum):
    ERROR = -1
    MATH = 0
    FLASH_ATTENTION = 1
    EFFICIENT_ATTENTION = 2
    CUDNN_ATTENTION = 3
    OVERRIDEABLE = 4


_ALL = tuple(b for b in SDPBackend if b != SDPBackend.ERROR)
_allowed = [_ALL]


def current_backends():
    """The backends the innermost sdpa_kernel block allows (all of them outside any)."""
    return _allowed[-1]


@contextlib.contextmanager
def sdpa_kernel(backends, set_priority=False):
    """Restricts scaled_dot_product_attention to `backends` (one SDPBackend or a list) inside the block."""
    chosen = tuple(backends) if isinstance(backends, (list, tuple, set)) else (backends,)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    _allowed.append(chosen)
    try:
        yield
    finally:
        _allowed.pop()
