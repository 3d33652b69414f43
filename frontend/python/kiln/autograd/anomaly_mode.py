"""Anomaly detection (torch.autograd.detect_anomaly / set_detect_anomaly): while enabled with
check_nan, backward checks every gradient a node returns and raises naming the node
("Function 'DivBackward0' returned nan values in its 0th output.", runtime/autograd/Engine.cpp).
torch also records each forward op's Python traceback and prints it with the error; kiln does
not (the error names the backward node only)."""
import warnings

from .. import _C

__all__ = ["detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "is_anomaly_check_nan_enabled",
           "set_anomaly_enabled"]


def is_anomaly_enabled():
    return _C._is_anomaly_enabled()


def is_anomaly_check_nan_enabled():
    return _C._is_anomaly_check_nan_enabled()


def set_anomaly_enabled(enabled, check_nan=True):
    _C._set_anomaly_mode(bool(enabled), bool(check_nan))


class detect_anomaly:  # noqa: N801 - torch's name
    """A context manager enabling anomaly detection inside its block (with a warning, as torch)."""

    def __init__(self, check_nan=True):
        self.prev = is_anomaly_enabled()
        self.check_nan = check_nan
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime and should only be "
                      "enabled for debugging.", stacklevel=2)

    def __enter__(self):
        set_anomaly_enabled(True, self.check_nan)

    def __exit__(self, *args):
        set_anomaly_enabled(self.prev, self.prev_check_nan)


class set_detect_anomaly:  # noqa: N801 - torch's name
    """Sets anomaly detection on or off: from the call (as a function), or for a `with` block."""

    def __init__(self, mode, check_nan=True):
        self.prev = is_anomaly_enabled()
        self.prev_check_nan = is_anomaly_check_nan_enabled()
        set_anomaly_enabled(mode, check_nan)

    def __enter__(self):
        pass

    def __exit__(self, *args):
        set_anomaly_enabled(self.prev, self.prev_check_nan)
