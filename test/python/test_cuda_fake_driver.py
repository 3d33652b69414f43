"""kiln's CUDA runtime on the fake driver (test/fake_cuda, loaded through KILN_CUDA_DRIVER): the
driver loader, devices, streams, events, the caching allocator and the tensor copies run for real
on machines without a GPU. Each test runs in a fresh interpreter, as the driver loads once per
process. Device pointers of the fake are not host addresses: a host read of one crashes."""
import os
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def fake_driver():
    build = os.environ.get("KILN_BUILD_DIR") or os.path.join(REPO, "build")
    path = os.path.join(build, "test", "fake_cuda", "libkiln_fake_cuda.so")
    if not os.path.exists(path):
        pytest.skip(f"the fake CUDA driver is not built ({path})")
    return path


def run_fake(args, **env):
    full_env = dict(os.environ, KILN_CUDA_DRIVER=fake_driver())
    full_env.update(env)
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=full_env,
                          cwd=REPO, timeout=300)


def run_script(body, **env):
    result = run_fake(["-c", textwrap.dedent(body)], **env)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def run_device_tests(path, *args):
    result = run_fake(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                       os.path.join("test", "python", path), *args], KILN_TEST_DEVICE="cuda")
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    return out.strip().splitlines()[-1]


def test_device_generic_tests_pass_on_fake_cuda():
    summary = run_device_tests("test_device_tensors.py")
    assert "passed" in summary and "skipped" not in summary, summary  # all ran on the fake GPU


def test_device_generic_creation_tests_pass_on_fake_cuda():
    # The converted creation tests (compared with PyTorch on the CPU; skipped without torch).
    run_device_tests("test_creation.py", "-k", "cuda")


def test_devices_and_properties():
    run_script("""
        import kiln
        assert kiln.cuda.is_available() and kiln.cuda.device_count() == 2
        assert kiln.cuda.get_device_name(1) == "kiln fake CUDA device"
        assert kiln.cuda.get_device_capability() == (9, 0)
        assert kiln.cuda.current_device() == 0
        x = kiln.arange(6.0, device="cuda")
        assert str(x.device) == "cuda:0"
        kiln.cuda.set_device(1)
        assert kiln.ones(2, device="cuda").device.index == 1
        kiln.cuda.set_device(0)
        with kiln.cuda.device(1):
            y = x.to("cuda")           # same device type: no copy
            z = x.to("cuda:1")         # across devices
        assert y is x and str(z.device) == "cuda:1" and z.tolist() == x.tolist()
        assert kiln.cuda.current_device() == 0
        try:
            kiln.zeros(2, device="cuda:5")
            raise SystemExit("no error for a missing device")
        except RuntimeError as e:
            assert "invalid device ordinal cuda:5 (this machine has 2 CUDA devices)" in str(e), e
        kiln.cuda.synchronize()
    """, KILN_FAKE_CUDA_DEVICES="2")


def test_streams_events_and_per_stream_pools():
    run_script("""
        import kiln
        s = kiln.cuda.Stream()
        assert s != kiln.cuda.default_stream() and kiln.cuda.current_stream() == kiln.cuda.default_stream()
        kiln.cuda.empty_cache()
        a = kiln.empty(256, device="cuda")
        del a                                   # cached on the default stream
        segments = kiln.cuda.memory_stats()["segment.all.current"]
        with kiln.cuda.stream(s):
            assert kiln.cuda.current_stream() == s
            b = kiln.empty(256, device="cuda")  # another stream: not the cached block
        assert kiln.cuda.current_stream() == kiln.cuda.default_stream()
        assert kiln.cuda.memory_stats()["segment.all.current"] == segments + 1
        start, end = kiln.cuda.Event(enable_timing=True), kiln.cuda.Event(enable_timing=True)
        start.record()
        b.fill_(2.0)
        end.record(s)
        end.synchronize()
        assert start.query() and end.query() and s.query()
        assert start.elapsed_time(end) >= 0
        s.wait_stream(kiln.cuda.default_stream())
        try:
            kiln.cuda.Event().elapsed_time(kiln.cuda.Event())
            raise SystemExit("no error for untimed events")
        except RuntimeError as e:
            assert "enable_timing=True" in str(e)
        s.synchronize()
    """)


def test_out_of_memory_retries_then_raises():
    run_script("""
        import kiln
        MiB = 1 << 20
        with kiln.cuda.stream(kiln.cuda.Stream()):
            a = kiln.empty(40 * MiB, dtype=kiln.uint8, device="cuda")
        del a                                   # 40 MiB cached on the side stream
        b = kiln.empty(40 * MiB, dtype=kiln.uint8, device="cuda")   # fits only after a release
        stats = kiln.cuda.memory_stats()
        assert stats["num_alloc_retries"] == 1 and stats["num_ooms"] == 0, stats
        try:
            kiln.empty(40 * MiB, dtype=kiln.uint8, device="cuda")
            raise SystemExit("no out-of-memory error")
        except RuntimeError as e:
            assert "CUDA out of memory. Tried to allocate 40.00 MiB on cuda:0" in str(e), e
        assert kiln.cuda.memory_stats()["num_ooms"] == 1
        del b
        kiln.cuda.empty_cache()
        assert kiln.cuda.memory_reserved() == 0
    """, KILN_FAKE_CUDA_MEMORY=str(64 << 20))


def test_missing_entry_point_is_the_reason():
    # A library that is not a CUDA driver: the loader names the first missing entry point.
    result = run_fake(["-c", "import kiln; print(kiln.cuda.unavailable_reason())"],
                      KILN_CUDA_DRIVER="libm.so.6")
    assert result.returncode == 0, result.stderr
    assert "libm.so.6 lacks the entry point cuInit" in result.stdout
