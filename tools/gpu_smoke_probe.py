#!/usr/bin/env python3
"""One import-order probe of tools/gpu_check.sh's smoke step: imports `--first` (numpy, torch, or
nothing), then kiln, then runs one small op on `--device`, printing which C++/OpenMP/Fortran
runtimes the process has mapped after each import.

The first GPU machine (session 10) crashed in `import numpy; import kiln` and `import torch;
import kiln` while `import kiln` alone worked: which shared libraries are loaded before kiln._C
decides the outcome, so each step says which ones are there. Exit status: 0 imported and the op
ran; 3 imported but the op raised (not an import crash: the error is printed); 4 the `--first`
module is missing; a signal (a crash) otherwise.

    python tools/gpu_smoke_probe.py --first numpy --device cuda

KILN_SMOKE_SIMULATE_CRASH=<remedy> (a test hook for gpu_check.sh's remedy matrix, used by its dry
run and test_gpu_check.py): the probe crashes with SIGSEGV after importing a `--first` module
unless KILN_SMOKE_REMEDY names that remedy, as the GPU machine crashed until the remedy applied.
"""
import argparse
import faulthandler
import gc
import importlib
import os
import re
import sys

# The runtimes whose copies and load order can make import order matter (one C++ runtime, one
# OpenMP runtime, the Fortran runtime of the BLAS), the BLAS libraries themselves, and kiln._C.
_WATCHED = re.compile(r"lib(stdc\+\+|gomp|iomp|gfortran|quadmath|gcc_s|dnnl|openblas|scipy_openblas|OpenCL)"
                      r"[^/]*\.so|/kiln/_C\.")


def mapped_runtimes():
    """The watched libraries mapped into this process, in /proc/self/maps order, one path each."""
    seen = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                path = parts[5].strip() if len(parts) == 6 else ""
                if path and _WATCHED.search(path) and path not in seen:
                    seen.append(path)
    except OSError as e:
        return [f"(no /proc/self/maps: {e})"]
    return seen


def short(path):
    """A mapped library as `name (folder)`, the folder shortened to what tells copies apart."""
    folder, _, name = path.rpartition("/")
    folder = re.sub(r".*/site-packages/", ".../", folder)
    return f"{name} ({folder.replace('/usr/lib/x86_64-linux-gnu', '/usr/lib') or '/'})"


def report(stage):
    libs = mapped_runtimes()
    print(f"[{stage}] " + (", ".join(map(short, libs)) or "(none of the watched libraries)"), flush=True)


def simulated_crash_wanted(first):
    cure = os.environ.get("KILN_SMOKE_SIMULATE_CRASH")
    return bool(cure) and first != "none" and os.environ.get("KILN_SMOKE_REMEDY") != cure


def run_op(kiln, device):
    x = kiln.ones(4, device=device)
    y = (x * 2 + 1).cpu()
    assert y.tolist() == [3.0] * 4, y
    # A named return (a struct sequence type made on first use) and a collection: memory handed
    # to Python by the wrong allocator tends to surface in either.
    values, indices = kiln.arange(6.0, device=device).reshape(2, 3).max(1)
    assert values.cpu().tolist() == [2.0, 5.0] and indices.cpu().tolist() == [2, 2], (values, indices)
    gc.collect()
    name = kiln.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"
    print(f"ok: {device} ({name})", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--first", choices=["none", "numpy", "torch"], default="none")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    faulthandler.enable()
    report("start")
    if args.first != "none":
        try:
            importlib.import_module(args.first)
        except ImportError as e:
            print(f"no {args.first}: {e}", flush=True)
            return 4
        report(f"after {args.first}")
        if simulated_crash_wanted(args.first):
            print("simulating the crash (KILN_SMOKE_SIMULATE_CRASH)", flush=True)
            sys.stdout.flush()
            os.kill(os.getpid(), 11)
    import kiln

    report("after kiln")
    print("imported", flush=True)
    try:
        run_op(kiln, args.device)
    except Exception as e:  # an op error is not the import crash this probe looks for
        print(f"op failed: {type(e).__name__}: {e}", flush=True)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
