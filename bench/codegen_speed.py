#!/usr/bin/env python3
"""Speed of kiln's generated code (issue 6 targets): cold compile latency of a 10-op function's
generated C++, this machine's STREAM bandwidth, and the bandwidth kiln-compiled memory-bound
kernels reach.

    compile   the C++ the inductor backend generates for a 10-op function, compiled with kiln's
              flags (fresh output each time, no cache): median wall and CPU time of --repeat
              runs; also the prelude alone (headers + helpers), the kernels without -O3's work
              (-O0) and an empty file (driver + linker), to see what dominates. Target: <= 150 ms.
    stream    STREAM copy (a[i] = b[i]) and triad (a[i] = b[i] + s * c[i]) on float32 arrays of
              --size elements (>> the last-level cache), OpenMP with kiln's thread count,
              compiled with kiln's flags; best of --repeat. GB/s counts bytes read + written.
    kernels   kiln.compile(backend="inductor") of x + y, x * 2.5 and softmax(x, -1) over rows of
              4096 on --size float32 elements; best of --repeat calls after a warm-up; GB/s =
              (bytes of the inputs + bytes of the output) / time, the least traffic the kernel
              can move. Target: >= 80% of STREAM (triad for add, copy for scale and softmax).
              "kernel alone" calls the generated library's entry directly on numpy arrays (no
              kiln call path, output memory from numpy).

    python bench/codegen_speed.py [--size N] [--repeat R] [--json OUT]
"""
import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

STREAM_SRC = r"""
#include <stddef.h>
#include <stdint.h>
extern "C" void kiln_stream_init(float* a, float* b, float* c, int64_t n, int nt) {
#pragma omp parallel for num_threads(nt)
  for (int64_t i = 0; i < n; ++i) { a[i] = 1.0f; b[i] = 2.0f; c[i] = 0.5f; }
}
extern "C" void kiln_stream_copy(float* __restrict a, const float* __restrict b, int64_t n, int nt) {
#pragma omp parallel for simd num_threads(nt)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i];
}
extern "C" void kiln_stream_triad(float* __restrict a, const float* __restrict b,
                                  const float* __restrict c, float s, int64_t n, int nt) {
#pragma omp parallel for simd num_threads(nt)
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""


def ten_ops(x, y):
    a = x * y + 1.0
    b = a.tanh() - x
    c = b.exp() * 0.5
    d = c.sigmoid() + y
    e = d.log1p() * a
    return (e.relu() * 2.0).sum(-1)


def compile_flags():
    """codegen/Toolchain.cpp's base flags (without -lmvec, which goes after the source)."""
    return ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-shared",
            "-fPIC", "-std=c++17"]


def time_cmd(args, repeat):
    """Median wall time and median CPU time (user + system of the compiler's processes) in ms;
    the CPU time is what a busy machine does not inflate."""
    runs, cpus = [], []
    for _ in range(repeat):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        runs.append(time.perf_counter() - t0)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
    return statistics.median(runs) * 1e3, statistics.median(cpus) * 1e3


def generated_source(tmp):
    """The C++ source the inductor backend generates for ten_ops (from a fresh kernel cache)."""
    import kiln
    kiln.config.cache_dir = os.path.join(tmp, "cache")
    x = kiln.from_numpy(np.random.rand(64, 256).astype(np.float32))
    y = kiln.from_numpy(np.random.rand(256).astype(np.float32))
    kiln.compile(ten_ops, backend="inductor")(x, y)
    kdir = os.path.join(tmp, "cache", "kernels")
    sources = [f for f in os.listdir(kdir) if f.endswith(".cpp")]
    assert len(sources) == 1, sources
    return os.path.join(kdir, sources[0])


def bench_compile(cxx, repeat, tmp):
    src = generated_source(tmp)
    flags = compile_flags()
    out = os.path.join(tmp, "out.so")
    with open(src) as f:
        text = f.read()
    prelude = os.path.join(tmp, "prelude.cpp")
    with open(prelude, "w") as f:
        f.write(text.split("// program @")[0])
    res = {
        "source_lines": text.count("\n"),
        "full_ms": time_cmd([cxx, src, *flags, "-lmvec", "-o", out], repeat),
        "prelude_only_ms": time_cmd([cxx, prelude, *flags, "-lmvec", "-o", out], repeat),
        "O0_ms": time_cmd([cxx, src, *flags, "-O0", "-lmvec", "-o", out], repeat),
    }
    empty = os.path.join(tmp, "empty.cpp")
    with open(empty, "w") as f:
        f.write("\n")
    res["empty_ms"] = time_cmd([cxx, empty, *flags, "-o", out], repeat)
    return res


def bench_stream(cxx, n, repeat, threads, tmp):
    src = os.path.join(tmp, "stream.cpp")
    lib = os.path.join(tmp, "stream.so")
    with open(src, "w") as f:
        f.write(STREAM_SRC)
    subprocess.run([cxx, src, *compile_flags(), "-o", lib], check=True, capture_output=True)
    so = ctypes.CDLL(lib)
    nt = ctypes.c_int(threads)
    a, b, c = (np.empty(n, np.float32) for _ in range(3))
    p = [arr.ctypes.data_as(ctypes.c_void_p) for arr in (a, b, c)]
    so.kiln_stream_init(*p, ctypes.c_int64(n), nt)
    best = {"copy": float("inf"), "triad": float("inf")}
    for _ in range(repeat):
        t0 = time.perf_counter()
        so.kiln_stream_copy(p[0], p[1], ctypes.c_int64(n), nt)
        best["copy"] = min(best["copy"], time.perf_counter() - t0)
        t0 = time.perf_counter()
        so.kiln_stream_triad(p[0], p[1], p[2], ctypes.c_float(3.0), ctypes.c_int64(n), nt)
        best["triad"] = min(best["triad"], time.perf_counter() - t0)
    return {"copy_GBps": 2 * 4 * n / best["copy"] / 1e9, "triad_GBps": 3 * 4 * n / best["triad"] / 1e9}


def bench_kernels(n, repeat, tmp):
    import kiln
    import kiln.nn.functional as F
    kiln.config.cache_dir = os.path.join(tmp, "cache")
    rng = np.random.default_rng(0)
    x = kiln.from_numpy(rng.standard_normal(n, dtype=np.float32))
    y = kiln.from_numpy(rng.standard_normal(n, dtype=np.float32))
    rows = kiln.from_numpy(rng.standard_normal((n // 4096, 4096), dtype=np.float32))
    cases = {
        "add": (lambda a, b: a + b, (x, y), 3),
        "scale": (lambda a: a * 2.5, (x,), 2),
        "softmax": (lambda a: F.softmax(a, -1), (rows,), 2),
    }
    res = {}
    kdir = os.path.join(tmp, "cache", "kernels")
    for name, (fn, args, arrays) in cases.items():
        before = set(os.listdir(kdir)) if os.path.isdir(kdir) else set()
        compiled = kiln.compile(fn, backend="inductor")
        compiled(*args)  # compile + first touch
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            out = compiled(*args)
            best = min(best, time.perf_counter() - t0)
            del out
        nbytes = arrays * 4 * (n // 4096 * 4096 if name == "softmax" else n)
        res[name + "_GBps"] = nbytes / best / 1e9
        res[name + "_ms"] = best * 1e3
        # The generated kernel alone: its entry called through ctypes on numpy arrays (input and
        # output memory from numpy, no kiln call path).
        (so,) = [f for f in set(os.listdir(kdir)) - before if f.endswith(".so")]
        alone = kernel_alone(os.path.join(kdir, so), [a.numpy() for a in args], repeat)
        res[name + "_alone_GBps"] = nbytes / alone / 1e9
    return res


class KilnContext(ctypes.Structure):
    _fields_ = [("alloc", ctypes.c_void_p), ("free", ctypes.c_void_p), ("sgemm", ctypes.c_void_p),
                ("dgemm", ctypes.c_void_p), ("num_threads", ctypes.c_int)]


def kernel_alone(path, inputs, repeat):
    """Best time of the library's kiln_entry on numpy inputs, into a preallocated output of the
    first input's shape (each benchmarked kernel is elementwise in shape)."""
    lib = ctypes.CDLL(path)
    libc = ctypes.CDLL(None)
    ctx = KilnContext(ctypes.cast(libc.malloc, ctypes.c_void_p).value,
                      ctypes.cast(libc.free, ctypes.c_void_p).value, None, None, 0)
    out = np.empty_like(inputs[0])
    ins = (ctypes.c_void_p * len(inputs))(*[a.ctypes.data for a in inputs])
    outs = (ctypes.c_void_p * 1)(out.ctypes.data)
    lib.kiln_entry(ctypes.byref(ctx), ins, outs)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        lib.kiln_entry(ctypes.byref(ctx), ins, outs)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=1 << 27, help="float32 elements per array")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--json")
    args = ap.parse_args()
    cxx = os.environ.get("KILN_CXX", "c++")
    if shutil.which(cxx) is None:
        sys.exit(f"no C++ compiler ({cxx})")
    import kiln
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    tmp = tempfile.mkdtemp(prefix="kiln_codegen_speed_")
    os.chmod(tmp, 0o700)
    try:
        comp = bench_compile(cxx, args.repeat, tmp)
        def ms(key):
            wall, cpu = comp[key]
            return f"{wall:.0f} ms (cpu {cpu:.0f} ms)"
        print(f"compile (10 ops, {comp['source_lines']} lines): {ms('full_ms')}  [prelude alone "
              f"{ms('prelude_only_ms')}, -O0 {ms('O0_ms')}, empty file {ms('empty_ms')}]  "
              f"target <= 150 ms")
        stream = bench_stream(cxx, args.size, args.repeat, threads, tmp)
        print(f"STREAM ({args.size * 4 >> 20} MiB arrays, {threads} threads): "
              f"copy {stream['copy_GBps']:.1f} GB/s, triad {stream['triad_GBps']:.1f} GB/s")
        kern = bench_kernels(args.size, args.repeat, tmp)
        for name, ref in (("add", "triad"), ("scale", "copy"), ("softmax", "copy")):
            gbps = kern[name + "_GBps"]
            alone = kern[name + "_alone_GBps"]
            print(f"kiln {name:8s} {kern[name + '_ms']:8.2f} ms  {gbps:6.1f} GB/s  "
                  f"= {100 * gbps / stream[ref + '_GBps']:.0f}% of STREAM {ref}; kernel alone "
                  f"{alone:.1f} GB/s = {100 * alone / stream[ref + '_GBps']:.0f}%")
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"kiln_version": getattr(kiln, "__version__", None), "compile": comp,
                           "stream": stream, "kernels": kern, "threads": threads, "size": args.size},
                          f, indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
