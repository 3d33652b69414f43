#!/usr/bin/env python3
"""The GPU rows of issue 18: kiln's compiled CUDA programs on the GPU, next to the device's copy
bandwidth and to torch.compile on the same GPU.

    fused    a memory-bound fused kernel, out = (x * 2 + y).relu() over --elements f32: TB/s
             counting 3 x 4 bytes per element, and as a fraction of the device-to-device copy
             bandwidth (cuMemcpyDtoD, read + write) measured in the same process (target >= 85%)
    softmax  softmax over the last dim of [8192, 8192] f32: TB/s counting one read and one write
             (2 x 4 bytes per element; target 2.5 TB/s on an H100), kiln and torch.compile
    overhead wall-clock microseconds per call of a tiny compiled function ([16] f32,
             (x + 1) * 2 - 3), kiln and torch.compile, with the default mode
             and with mode="reduce-overhead" (CUDA graphs replayed)

GPU times come from CUDA events around --repeat back-to-back calls (median of 5 such runs).
Without a GPU (or on the fake driver: its kernels run on the CPU emulator, so no speed is
meaningful) it prints why and exits 0; `--fake-ok` runs it on the fake driver anyway, with tiny
sizes, to check the code paths (tools/gpu_check.sh --dry-run).

    python bench/cuda_kernels.py [--elements 67108864] [--rows 8192] [--repeat 20] [--json out.json]
"""
import argparse
import json
import statistics
import sys
import time


def event_seconds(lib, fn, repeat):
    """Median over 5 runs of (GPU time of `repeat` calls of fn) / repeat."""
    fn()
    lib.cuda.synchronize()
    runs = []
    for _ in range(5):
        start, end = lib.cuda.Event(enable_timing=True), lib.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / 1e3 / repeat)
    return statistics.median(runs)


def wall_us(lib, fn, calls=2000):
    for _ in range(50):
        fn()
    lib.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    lib.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def fused(x, y):
    return (x * 2 + y).relu()


def softmax_last(lib):
    return lambda x: lib.softmax(x, -1)


def tiny(x):
    return (x + 1) * 2 - 3


def measure(lib, compile_fn, elements, rows, repeat):
    out = {}
    x = lib.rand(elements, device="cuda")
    y = lib.rand(elements, device="cuda")
    dst = lib.empty_like(x)
    copy_s = event_seconds(lib, lambda: dst.copy_(x), repeat)
    out["d2d_TBps"] = 2 * 4 * elements / copy_s / 1e12
    f = compile_fn(fused)
    want = (x * 2 + y).relu() if lib.__name__ == "torch" else None
    got = f(x, y)
    if want is not None:
        assert (got - want).abs().max().item() == 0
    fused_s = event_seconds(lib, lambda: f(x, y), repeat)
    out["fused_TBps"] = 3 * 4 * elements / fused_s / 1e12
    out["fused_fraction_of_d2d"] = out["fused_TBps"] / out["d2d_TBps"]
    del x, y, dst
    s = lib.randn(rows, rows, device="cuda")
    sm = compile_fn(softmax_last(lib))
    sm(s)
    out["softmax_TBps"] = 2 * 4 * s.numel() / event_seconds(lib, lambda: sm(s), repeat) / 1e12
    t = lib.ones(16, device="cuda")
    tf = compile_fn(tiny)
    out["tiny_call_us"] = wall_us(lib, lambda: tf(t))
    tg = compile_fn(tiny, mode="reduce-overhead")
    out["tiny_graph_call_us"] = wall_us(lib, lambda: tg(t))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--elements", type=int, default=64 << 20)
    ap.add_argument("--rows", type=int, default=8192, help="softmax over [rows, rows]")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--fake-ok", action="store_true", help="run on the fake driver too (tiny sizes)")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    import kiln

    if not kiln.cuda.is_available():
        print(f"skipped: CUDA is not available: {kiln.cuda.unavailable_reason()}")
        return 0
    name = kiln.cuda.get_device_name()
    if "fake" in name:
        if not a.fake_ok:
            print(f"skipped: {name} runs kernels on the CPU emulator; no speed to measure")
            return 0
        print(f"{name}: the CPU emulator, tiny sizes; the numbers below are NOT GPU speeds")
        a.elements, a.rows, a.repeat = min(a.elements, 4096), min(a.rows, 64), 2
    results = {"device": name, "elements": a.elements, "softmax_shape": [a.rows, a.rows],
               "kiln": measure(kiln, kiln.compile, a.elements, a.rows, a.repeat)}
    try:
        import torch

        if torch.cuda.is_available():
            results["torch"] = measure(torch, torch.compile, a.elements, a.rows, a.repeat)
    except ImportError:
        pass
    print(f"{name}; fused kernel over {a.elements} f32, softmax over [{a.rows}, {a.rows}] f32")
    keys = ["d2d_TBps", "fused_TBps", "fused_fraction_of_d2d", "softmax_TBps", "tiny_call_us",
            "tiny_graph_call_us"]
    print(f"{'library':<8}" + "".join(f"{k:>22}" for k in keys))
    for lib in ("kiln", "torch"):
        if lib in results:
            print(f"{lib:<8}" + "".join(f"{results[lib][k]:>22.3f}" for k in keys))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
