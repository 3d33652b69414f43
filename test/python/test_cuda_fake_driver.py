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
    # The library is also the fake NVRTC (kernels built for the CPU emulator) and the fake cuBLAS.
    lib = fake_driver()
    full_env = dict(os.environ, KILN_CUDA_DRIVER=lib, KILN_NVRTC=lib, KILN_CUBLAS=lib)
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


def test_compiled_programs_run_on_fake_cuda():
    # kiln.compile on CUDA tensors: the CUDA emitter, the fake NVRTC, kernels launched on the
    # emulator, GEMMs through the fake cuBLAS; compared with the same functions eager on the CPU.
    summary = run_device_tests("test_compile_on_device.py")
    assert "passed" in summary and "skipped" not in summary, summary


def test_eager_ops_run_generated_kernels_on_fake_cuda():
    # Ops without a CUDA kernel run a program generated from their decomposition (cuda_eager.py):
    # pointwise, reductions, an MLP forward and backward, compared with the CPU.
    summary = run_device_tests("test_eager_on_device.py")
    assert "passed" in summary and "skipped" not in summary, summary


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


SOFTMAX = """program @softmax(%x: f32[6, 300]) {
  kernel @k0 {
    %amax: f32[6, 1] = reduction max [i0: 6] over [r0: 300] {
      %0 = load %x[300*i0 + r0]
      reduce %0
    }
    %sum: f32[6, 1] = reduction sum [i0: 6] over [r0: 300] {
      %0 = load %x[300*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
    %out: f32[6, 300] = pointwise [i0: 6, i1: 300] {
      %0 = load %x[300*i0 + i1]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      %4 = load %sum[i0]
      %5 = div %3, %4
      store %5
    }
  }
  output %out
}
"""


def test_kernels_run_on_the_fake_driver_and_a_broken_one_fails():
    # A CudaCompiledProgram end to end: the fake NVRTC builds the kernels (its "CUBIN" carries the
    # source), cuModuleLoadData loads them, cuLaunchKernel runs them with the launch's grid and
    # block (a row per warp: shuffles across 32 host threads). A source that does not compile
    # fails in nvrtcCompileProgram with the compiler's log, as NVRTC's would.
    run_script(f"""
        import numpy as np
        import kiln
        from kiln._C import _codegen
        text = {SOFTMAX!r}
        p = _codegen.CudaCompiledProgram(text, 0)
        assert p.arch == "sm_90" and "(a row per" in p.source, p
        x = np.random.default_rng(0).standard_normal((6, 300)).astype(np.float32) * 3
        (out,) = p(kiln.tensor(x).cuda())
        assert out.device.type == "cuda" and out.shape == (6, 300)
        e = np.exp(x - x.max(1, keepdims=True))
        np.testing.assert_allclose(out.cpu().numpy(), e / e.sum(1, keepdims=True), rtol=2e-6, atol=1e-7)
        assert _codegen.CudaCompiledProgram(text, 0).cache_hit    # the CUBIN cache
        try:
            p(kiln.tensor(x))
            raise SystemExit("a CPU input was accepted")
        except RuntimeError as e:
            assert "is on cpu, but the program was compiled for cuda:0" in str(e), e
        try:
            _codegen.nvrtc_compile('extern "C" __global__ void k(float* x) {{ x[0] = undefined_name; }}',
                                   "sm_90", "broken.cu")
            raise SystemExit("a broken kernel compiled")
        except Exception as e:
            assert "NVRTC_ERROR_COMPILATION" in str(e) and "undefined_name" in str(e), e
    """, KILN_FAKE_CUDA_CACHE=os.path.join(os.environ.get("TMPDIR", "/tmp"), f"kiln-fake-cuda-test-{os.getpid()}"))


def test_gemm_steps_through_the_fake_cublas():
    # Row-major GEMMs reach the column-major (fake) cuBLAS with their operands swapped: mm with a
    # transposed operand (m, n, k all different, so a wrong swap reads out of range or differs),
    # addmm's bias and beta, bmm's batch strides; against numpy.
    run_script("""
        import numpy as np
        import kiln
        rng = np.random.default_rng(1)
        a, b = rng.standard_normal((5, 7)).astype(np.float32), rng.standard_normal((3, 7)).astype(np.float32)
        bias = rng.standard_normal(3).astype(np.float32)
        x, y = rng.standard_normal((4, 5, 6)), rng.standard_normal((4, 6, 2))
        kiln.config.strict = True
        f = kiln.compile(lambda a, b, bias, x, y: (a @ b.t(), kiln.addmm(bias, a, b.t(), beta=0.5), x @ y))
        mm, addmm, bmm = f(*(kiln.tensor(v).cuda() for v in (a, b, bias, x, y)))
        np.testing.assert_allclose(mm.cpu().numpy(), a @ b.T, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(addmm.cpu().numpy(), 0.5 * bias + a @ b.T, rtol=1e-5, atol=1e-5)
        assert bmm.dtype == kiln.float64
        np.testing.assert_allclose(bmm.cpu().numpy(), x @ y, rtol=1e-12)
    """)


def test_a_file_saved_from_cuda_needs_cuda_or_a_map_location(tmp_path):
    path = tmp_path / "cuda.pt"
    run_script(f"""
        import kiln
        kiln.save({{"w": kiln.arange(6.0).reshape(2, 3).cuda()}}, {str(path)!r})
    """)
    import kiln
    if not kiln.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location"):
            kiln.load(path)
    w = kiln.load(path, map_location="cpu")["w"]
    assert w.device.type == "cpu" and w.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
