"""Anomaly detection: set_detect_anomaly / detect_anomaly make backward raise at the first node
returning NaN gradients, naming it as torch does; off, backward goes on with the NaNs."""
import warnings

import pytest

import kiln


def _nan_backward():
    x = kiln.tensor([0.0, 1.0], requires_grad=True)
    y = x.sqrt() * 0  # sqrt's backward at 0: 0 * inf = nan
    y.sum().backward()
    return x.grad


def test_off_by_default_and_nan_gradients_pass():
    assert not kiln.is_anomaly_enabled() and kiln.is_anomaly_check_nan_enabled()
    assert kiln.isnan(_nan_backward()).any()


def test_set_detect_anomaly_raises_naming_the_node():
    with kiln.autograd.set_detect_anomaly(True):
        assert kiln.is_anomaly_enabled()
        with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values in its 0th output."):
            _nan_backward()
    assert not kiln.is_anomaly_enabled()
    with kiln.autograd.set_detect_anomaly(True, check_nan=False):
        assert kiln.isnan(_nan_backward()).any()
    kiln.autograd.set_detect_anomaly(True)  # as a function
    try:
        with pytest.raises(RuntimeError, match="returned nan values"):
            _nan_backward()
    finally:
        kiln.autograd.set_detect_anomaly(False)


def test_detect_anomaly_warns_and_restores():
    with pytest.warns(UserWarning, match="Anomaly Detection has been enabled"):
        guard = kiln.autograd.detect_anomaly()
    with guard:
        with pytest.raises(RuntimeError, match="SqrtBackward0"):
            _nan_backward()
        x = kiln.tensor([1.0, 4.0], requires_grad=True)
        x.sqrt().sum().backward()  # finite gradients pass
        assert x.grad.tolist() == [0.5, 0.25]
    assert not kiln.is_anomaly_enabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.set_anomaly_enabled(False)
