"""The machine and software a benchmark run used: CPU model, cores, load, versions of every peer."""
import importlib.metadata
import os
import platform
import re
import subprocess
import sys


def _first(cmd):
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.splitlines()[0].strip() if out.strip() else None


def cpu_model():
    with open("/proc/cpuinfo") as f:
        m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.M)
    return m.group(1).strip() if m else platform.processor()


def physical_cores():
    """Distinct (physical id, core id) pairs in /proc/cpuinfo."""
    with open("/proc/cpuinfo") as f:
        blocks = f.read().split("\n\n")
    pairs = set()
    for b in blocks:
        phys, core = re.search(r"physical id\s*:\s*(\d+)", b), re.search(r"core id\s*:\s*(\d+)", b)
        if phys and core:
            pairs.add((phys.group(1), core.group(1)))
    return len(pairs) or None


def version(module):
    try:
        mod = __import__(module)
    except ImportError:
        return None
    if hasattr(mod, "__version__"):
        return mod.__version__
    try:
        return importlib.metadata.version(module)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def kiln_commit():
    """The commit (and whether the tree has changes) of the kiln checkout the suite runs from."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    head = _first(["git", "-C", root, "rev-parse", "--short", "HEAD"])
    dirty = _first(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"])
    return f"{head}{'+changes' if dirty else ''}" if head else None


def info():
    with open("/proc/meminfo") as f:
        mem = int(re.search(r"MemTotal:\s+(\d+)", f.read()).group(1)) * 1024
    return {
        "cpu": cpu_model(),
        "physical_cores": physical_cores(),
        "nproc": len(os.sched_getaffinity(0)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "memory_bytes": mem,
        "loadavg_at_start": os.getloadavg(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "numpy": version("numpy"),
        "torch": version("torch"),
        "jax": version("jax"),
        "jaxlib": version("jaxlib"),
        "kiln": version("kiln"),
        "kiln_commit": kiln_commit(),
        "matplotlib": version("matplotlib"),
        "cc": _first([os.environ.get("CC", "cc"), "--version"]),
        "cxx": _first([os.environ.get("KILN_CXX", "c++"), "--version"]),
    }
