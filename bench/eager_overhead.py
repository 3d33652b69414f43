#!/usr/bin/env python3
"""Eager overhead and bandwidth: kiln against PyTorch and numpy, measured in one run.

    x + y on one-element tensors     microseconds per op (dispatch overhead)
    x + y on 1M float32 elements     GB/s (12 MB moved per op: two reads, one write)
    x.sum() on 1M float32 elements   GB/s (4 MB read)

Each number is the median of repeated timings after a warm-up. Peers that are not installed
are skipped.
"""
import argparse
import json
import statistics
import sys
import timeit

import numpy as np


def per_call_seconds(stmt, number, repeat):
    timer = timeit.Timer(stmt)
    timer.timeit(max(1, number // 10))  # warm-up
    runs = timer.repeat(repeat=repeat, number=number)
    return statistics.median(runs) / number


def libraries():
    import kiln

    libs = {"kiln": kiln}
    try:
        import torch

        torch.set_num_threads(kiln_threads())
        libs["torch"] = torch
    except ImportError:
        pass
    return libs


def kiln_threads():
    import os

    return int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))


def measure(quick=False):
    n_small, n_big, repeat = (20000, 50, 5) if quick else (200000, 300, 7)
    results = {}
    a_small = np.array([1.5], dtype=np.float32)
    a_big = np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
    b_big = np.random.default_rng(1).standard_normal(1 << 20).astype(np.float32)
    for name, lib in libraries().items():
        x, y = lib.from_numpy(a_small.copy()), lib.from_numpy(a_small.copy())
        bx, by = lib.from_numpy(a_big.copy()), lib.from_numpy(b_big.copy())
        results[name] = {
            "add_1elem_us": per_call_seconds(lambda: x + y, n_small, repeat) * 1e6,
            "add_1M_GBps": 12 * 2**20 / per_call_seconds(lambda: bx + by, n_big, repeat) / 1e9,
            "sum_1M_GBps": 4 * 2**20 / per_call_seconds(lambda: bx.sum(), n_big, repeat) / 1e9,
        }
    x, y = a_small.copy(), a_small.copy()
    bx, by = a_big, b_big
    results["numpy"] = {
        "add_1elem_us": per_call_seconds(lambda: x + y, n_small, repeat) * 1e6,
        "add_1M_GBps": 12 * 2**20 / per_call_seconds(lambda: bx + by, n_big, repeat) / 1e9,
        "sum_1M_GBps": 4 * 2**20 / per_call_seconds(lambda: bx.sum(), n_big, repeat) / 1e9,
    }
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    res = measure(a.quick)
    cols = [("add_1elem_us", "x+y 1 elem (us/op)"), ("add_1M_GBps", "x+y 1M f32 (GB/s)"),
            ("sum_1M_GBps", "x.sum() 1M f32 (GB/s)")]
    print(f"{'library':<8} " + " ".join(f"{title:>22}" for _, title in cols))
    for lib, r in res.items():
        print(f"{lib:<8} " + " ".join(f"{r[key]:>22.3f}" for key, _ in cols))
    if "torch" in res:
        ratio = res["kiln"]["add_1elem_us"] / res["torch"]["add_1elem_us"]
        print(f"kiln/torch per-op overhead: {ratio:.2f}x (target <= 1.00)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(res, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
