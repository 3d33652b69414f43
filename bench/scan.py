"""cumsum / cumprod compiled as a scan (docs/loop-ir.md, "Scans") against kiln eager, PyTorch eager
and torch.compile, on the same data in one process (medians of --reps calls, milliseconds).

    .venv/bin/python bench/scan.py [--reps 50] [--no-torch-compile]
    OMP_NUM_THREADS=1 .venv/bin/python bench/scan.py     # one thread for both (a loaded machine)
"""
import argparse
import os
import statistics
import time

import numpy as np

import kiln


def median_ms(fn, reps):
    fn()
    fn()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


CASES = [
    ("cumsum [64, 4096] dim 1", (64, 4096), lambda x: x.cumsum(1)),
    ("cumsum [4096, 64] dim 0", (4096, 64), lambda x: x.cumsum(0)),
    ("cumsum [4096, 64] dim 1", (4096, 64), lambda x: x.cumsum(1)),
    ("(x * 2 + 1).cumsum [64, 4096] dim 1", (64, 4096), lambda x: (x * 2 + 1).cumsum(1)),
    ("cumprod [4096, 64] dim 0", (4096, 64), lambda x: (x * 0.001 + 1).cumprod(0)),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--no-torch-compile", action="store_true")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and os.environ.get("OMP_NUM_THREADS"):
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    rng = np.random.default_rng(0)
    cols = ["kiln compiled", "kiln eager", "torch eager", "torch.compile"]
    print(f"{'case':40s}" + "".join(f"{c:>15s}" for c in cols))
    for name, shape, fn in CASES:
        data = rng.standard_normal(shape).astype(np.float32)
        k = kiln.from_numpy(data)
        compiled = kiln.compile(fn)
        row = [median_ms(lambda: compiled(k), args.reps), median_ms(lambda: fn(k), args.reps)]
        if torch is not None:
            t = torch.from_numpy(data)
            row.append(median_ms(lambda: fn(t), args.reps))
            if not args.no_torch_compile:
                tc = torch.compile(fn)
                row.append(median_ms(lambda: tc(t), args.reps))
        print(f"{name:40s}" + "".join(f"{v:15.3f}" for v in row))


if __name__ == "__main__":
    main()
