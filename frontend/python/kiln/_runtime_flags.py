"""Process-wide switches training scripts set through torch (matmul precision, deterministic
algorithms, autocast state): recorded and read back. kiln's CPU kernels compute float32 matmuls
in float32 whatever the precision setting (torch's CPU path ignores it as well) and are
deterministic run to run, so none of them changes a result."""
_state = {"matmul_precision": "highest", "deterministic": False, "deterministic_warn_only": False}


def set_float32_matmul_precision(precision):
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"Invalid precision {precision}, expected one of highest, high, medium")
    _state["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _state["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    _state["deterministic"], _state["deterministic_warn_only"] = bool(mode), bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _state["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _state["deterministic_warn_only"]


def is_autocast_enabled(device_type=None):
    return False  # kiln.autocast never enters enabled (see kiln.amp)
