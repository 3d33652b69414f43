"""Start-up settings and backend flags as training scripts use them (kiln._settings,
kiln.backends, kiln.accelerator), against torch's behaviour on a machine without CUDA."""
import pytest

import kiln
import kiln.backends.cudnn as cudnn  # the import style of pytorch/examples' scripts
from oracle import need_torch


def test_backend_flags_have_torch_defaults():
    torch = need_torch()
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name), name
    assert kiln.backends.cuda.matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32
    assert kiln.backends.mps.is_available() is False
    assert kiln.backends.openmp.is_available() and kiln.backends.mkldnn.is_available()
    assert kiln.backends.cpu.get_cpu_capability() in ("AVX512", "AVX2", "DEFAULT")


def test_accelerator_without_cuda(monkeypatch):
    monkeypatch.setattr(kiln.cuda, "is_available", lambda: False)
    assert kiln.accelerator.is_available() is False
    assert kiln.accelerator.current_accelerator() is None
    assert kiln.accelerator.device_count() == 0
    # The pytorch/examples idiom.
    device = kiln.accelerator.current_accelerator() if kiln.accelerator.is_available() else kiln.device("cpu")
    assert kiln.ones(2, device=device).device.type == "cpu"


def test_num_threads_round_trip():
    before = kiln.get_num_threads()
    try:
        kiln.set_num_threads(1)
        assert kiln.get_num_threads() == 1
        x = kiln.arange(100000, dtype=kiln.float32)
        assert x.sum().item() == pytest.approx(4999950000.0)
        assert kiln.compile(lambda a: (a * 2).sum())(x).item() == pytest.approx(9999900000.0)
    finally:
        kiln.set_num_threads(before)
    with pytest.raises(RuntimeError, match="positive integer"):
        kiln.set_num_threads(0)


def test_float32_matmul_precision():
    try:
        assert kiln.get_float32_matmul_precision() == "highest"
        kiln.set_float32_matmul_precision("high")
        assert kiln.get_float32_matmul_precision() == "high" and kiln.backends.cuda.matmul.allow_tf32
        with pytest.raises(RuntimeError, match="Invalid precision"):
            kiln.set_float32_matmul_precision("low")
    finally:
        kiln.set_float32_matmul_precision("highest")
    assert not kiln.backends.cuda.matmul.allow_tf32


def test_deterministic_and_default_dtype():
    try:
        kiln.use_deterministic_algorithms(True, warn_only=True)
        assert kiln.are_deterministic_algorithms_enabled()
        assert kiln.is_deterministic_algorithms_warn_only_enabled()
    finally:
        kiln.use_deterministic_algorithms(False)
    assert kiln.get_default_dtype() == kiln.float32
    try:  # (test_default_dtype.py covers what follows it)
        kiln.set_default_dtype(kiln.float64)
        assert kiln.get_default_dtype() == kiln.float64 and kiln.zeros(1).dtype == kiln.float64
    finally:
        kiln.set_default_dtype(kiln.float32)
    with pytest.raises(TypeError, match="floating-point"):
        kiln.set_default_dtype(kiln.int64)


def test_cuda_manual_seed_without_a_device_leaves_the_cpu_stream(monkeypatch):
    monkeypatch.setattr(kiln.cuda, "is_available", lambda: False)
    kiln.manual_seed(3)
    a = kiln.randn(4)
    kiln.manual_seed(3)
    kiln.cuda.manual_seed_all(7)
    kiln.cuda.manual_seed(8)
    assert kiln.equal(kiln.randn(4), a)
