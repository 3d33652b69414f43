#!/usr/bin/env python3
"""CUDA copy bandwidth through kiln's runtime, next to PyTorch's on the same GPU.

    host -> device, device -> host   GB/s of a pageable host buffer (wall clock, each copy waits)
    device -> device                 GB/s counting the read and the write (2 x bytes), CUDA events

The device-to-device figure is the yardstick of issue 18 for memory-bound generated kernels (at
least 85% of it). Each number is the median of --repeat copies after a warm-up. Without a GPU
it prints why CUDA is unavailable and exits 0.

    python bench/cuda_copy.py [--mib 256] [--repeat 10] [--json out.json]
"""
import argparse
import json
import statistics
import sys
import time


def host_copy_seconds(dst, src, repeat):
    dst.copy_(src)  # warm-up
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        dst.copy_(src)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def device_copy_seconds(lib, dst, src, repeat):
    dst.copy_(src)
    runs = []
    for _ in range(repeat):
        start, end = lib.cuda.Event(enable_timing=True), lib.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) / 1e3)
    return statistics.median(runs)


def measure(lib, nbytes, repeat):
    host = lib.ones(nbytes, dtype=lib.uint8)
    dev = lib.empty(nbytes, dtype=lib.uint8, device="cuda")
    dev2 = lib.empty(nbytes, dtype=lib.uint8, device="cuda")
    return {
        "h2d_GBps": nbytes / host_copy_seconds(dev, host, repeat) / 1e9,
        "d2h_GBps": nbytes / host_copy_seconds(host, dev, repeat) / 1e9,
        "d2d_GBps": 2 * nbytes / device_copy_seconds(lib, dev2, dev, repeat) / 1e9,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mib", type=int, default=256, help="bytes per copy, in MiB")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    import kiln

    if not kiln.cuda.is_available():
        print(f"CUDA is not available: {kiln.cuda.unavailable_reason()}")
        return 0
    nbytes = a.mib << 20
    results = {"device": kiln.cuda.get_device_name(), "bytes": nbytes,
               "kiln": measure(kiln, nbytes, a.repeat)}
    try:
        import torch

        if torch.cuda.is_available():
            results["torch"] = measure(torch, nbytes, a.repeat)
    except ImportError:
        pass
    print(f"{results['device']}, {a.mib} MiB per copy")
    print(f"{'library':<8} {'H2D GB/s':>10} {'D2H GB/s':>10} {'D2D GB/s':>10}")
    for lib in ("kiln", "torch"):
        if lib in results:
            r = results[lib]
            print(f"{lib:<8} {r['h2d_GBps']:>10.1f} {r['d2h_GBps']:>10.1f} {r['d2d_GBps']:>10.1f}")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
