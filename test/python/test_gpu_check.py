# tools/gpu_check.sh runs only on a lent GPU machine (its dry run takes a minute): what can rot
# here is checked here. Its smoke probe imports in each order and reports the runtimes mapped,
# the crash hook that lets the dry run walk the remedy matrix crashes until its remedy, and the
# script parses.
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROBE = os.path.join(ROOT, "tools", "gpu_smoke_probe.py")


def probe(first, **env):
    full = {k: v for k, v in os.environ.items() if not k.startswith("KILN_SMOKE_")}
    full.update(env)
    return subprocess.run([sys.executable, PROBE, "--first", first, "--device", "cpu"],
                          capture_output=True, text=True, timeout=120, env=full)


def test_probe_numpy_first_reports_runtimes_and_runs_an_op():
    p = probe("numpy")
    assert p.returncode == 0, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    after_numpy = next(line for line in lines if line.startswith("[after numpy]"))
    after_kiln = next(line for line in lines if line.startswith("[after kiln]"))
    assert "_C." not in after_numpy and "_C." in after_kiln  # kiln._C appears once imported
    assert "libstdc++" in after_kiln and "libgomp" in after_kiln, after_kiln
    assert "imported" in lines and lines[-1] == "ok: cpu (cpu)"


def test_probe_simulated_crash_until_its_remedy():
    crashed = probe("numpy", KILN_SMOKE_SIMULATE_CRASH="kiln-first", KILN_SMOKE_REMEDY="malloc")
    assert crashed.returncode == -signal.SIGSEGV, crashed.stdout + crashed.stderr
    assert "imported" not in crashed.stdout.splitlines()
    cured = probe("numpy", KILN_SMOKE_SIMULATE_CRASH="kiln-first", KILN_SMOKE_REMEDY="kiln-first")
    assert cured.returncode == 0, cured.stdout + cured.stderr
    alone = probe("none", KILN_SMOKE_SIMULATE_CRASH="kiln-first")  # kiln alone never crashed
    assert alone.returncode == 0, alone.stdout + alone.stderr


def test_probe_op_error_is_not_a_crash():
    # No CUDA here (no fake driver in this environment): the op raises, the probe says so with 3.
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KILN_CUDA", "KILN_SMOKE_"))}
    env["KILN_CUDA_DRIVER"] = "/nonexistent/libcuda.so.1"
    p = subprocess.run([sys.executable, PROBE, "--first", "none", "--device", "cuda"],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 3, p.stdout + p.stderr
    assert "op failed: RuntimeError" in p.stdout and "CUDA is not available" in p.stdout


def test_gpu_check_script_parses():
    bash = "/bin/bash"
    if not os.path.exists(bash):
        pytest.skip("no bash")
    p = subprocess.run([bash, "-n", os.path.join(ROOT, "tools", "gpu_check.sh")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
