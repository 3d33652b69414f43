"""kiln.random (torch.random): the default generator's seeding and state, and fork_rng."""
import contextlib

from . import _C
from ._C import get_rng_state, initial_seed, manual_seed, seed, set_rng_state  # noqa: F401

__all__ = ["fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled=True, _caller="fork_rng", _devices_kw="devices", device_type="cuda"):
    """Draws inside the block leave the default generator's state as it was before it (the CPU's;
    kiln keeps no separate state per CUDA device to fork)."""
    if not enabled:
        yield
        return
    state = _C.get_rng_state()
    try:
        yield
    finally:
        _C.set_rng_state(state)
