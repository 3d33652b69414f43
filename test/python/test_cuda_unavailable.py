"""Without a GPU (no libcuda): kiln.cuda says so and every CUDA request raises a RuntimeError
that names the call and the reason; nothing crashes, nothing raises about dispatch keys."""
import pytest

import kiln

pytestmark = pytest.mark.skipif(kiln.cuda.is_available(), reason="a CUDA device is present")

REASON = "CUDA is not available: "


def test_is_available_and_counts():
    assert kiln.cuda.is_available() is False
    assert kiln.cuda.device_count() == 0
    assert kiln.cuda.unavailable_reason()


@pytest.mark.parametrize("make, call", [
    (lambda: kiln.ones(2, device="cuda"), "kiln.ones()"),
    (lambda: kiln.zeros(2, 3, device="cuda:0"), "kiln.zeros()"),
    (lambda: kiln.empty(4, device="cuda"), "kiln.empty()"),
    (lambda: kiln.full((2,), 3.0, device=kiln.device("cuda")), "kiln.full()"),
    (lambda: kiln.arange(3, device="cuda"), "kiln.arange()"),
    (lambda: kiln.randn(3, device="cuda"), "kiln.randn()"),
    (lambda: kiln.tensor([1, 2], device="cuda"), "kiln.Tensor.to()"),
    (lambda: kiln.ones(2).cuda(), "kiln.Tensor.to()"),
    (lambda: kiln.ones(2).to("cuda"), "kiln.Tensor.to()"),
    (lambda: kiln.ones(2).to("cuda", kiln.float64), "kiln.Tensor.to()"),
    (lambda: kiln.zeros_like(kiln.ones(2), device="cuda"), "kiln.zeros_like()"),
    (lambda: kiln.cuda.current_device(), "kiln.cuda.current_device()"),
    (lambda: kiln.cuda.synchronize(0), "kiln.cuda.synchronize()"),
    (lambda: kiln.cuda.Stream(0), "kiln.cuda.Stream()"),
    (lambda: kiln.cuda.set_device(0), "kiln.cuda.set_device()"),
    (lambda: kiln.cuda.get_device_name(0), "kiln.cuda.get_device_properties()"),
])
def test_cuda_requests_raise_a_clear_runtime_error(make, call):
    with pytest.raises(RuntimeError) as caught:
        make()
    message = str(caught.value)
    assert type(caught.value) is RuntimeError, message  # not NotImplementedError
    assert call + ": " + REASON in message, message
    assert kiln.cuda.unavailable_reason() in message


def test_the_reason_says_what_was_loaded():
    with pytest.raises(RuntimeError, match=r"kiln.ones\(\): CUDA is not available: .*could not be "
                       r"loaded \(kiln loads the CUDA driver at run time; no NVIDIA driver"):
        kiln.ones(2, device="cuda")


def test_memory_functions_report_nothing():
    assert kiln.cuda.memory_stats() == {}
    assert kiln.cuda.memory_allocated() == 0
    assert kiln.cuda.max_memory_allocated() == 0
    assert kiln.cuda.memory_reserved() == 0
    kiln.cuda.empty_cache()
    kiln.cuda.reset_peak_memory_stats()


def test_cpu_and_meta_are_unaffected():
    assert kiln.ones(2).to("cpu").tolist() == [1.0, 1.0]
    assert kiln.ones(2, device="meta").to("meta").is_meta
    assert not kiln.ones(2).is_cuda
