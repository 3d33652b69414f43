"""Eager indexing and sorting ops on 1M elements: kiln against PyTorch on the same data.

    .venv/bin/python bench/index_ops.py            # all threads
    OMP_NUM_THREADS=1 .venv/bin/python bench/index_ops.py
"""
import os
import time

import numpy as np
import torch

import kiln


def timed(fn, reps):
    fn()
    start = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - start) / reps * 1e3


def main():
    threads = os.environ.get("OMP_NUM_THREADS")
    if threads:
        torch.set_num_threads(int(threads))
    r = np.random.default_rng(0)
    flat = r.standard_normal(1_000_000).astype(np.float32)
    square = flat.reshape(1000, 1000)
    index_flat = r.integers(0, 1_000_000, 1_000_000)
    index_rows = r.integers(0, 1000, (1000, 1000))
    index_small = r.integers(0, 1000, 1_000_000)
    cube = r.standard_normal((64, 64, 64)).astype(np.float32)
    cases = [
        ("sort 1M float32", (flat,), lambda T, x: x.sort()),
        ("sort [1000,1000] dim 1", (square,), lambda T, x: x.sort(1)),
        ("sort [1000,1000] dim 0", (square,), lambda T, x: x.sort(0)),
        ("argsort 1M stable", (flat,), lambda T, x: x.argsort(stable=True)),
        ("topk 1M k=10", (flat,), lambda T, x: x.topk(10)),
        ("topk 1M k=1000", (flat,), lambda T, x: x.topk(1000)),
        ("topk [1000,1000] k=5 dim 1", (square,), lambda T, x: x.topk(5, 1)),
        ("gather 1M (1-D)", (flat, index_flat), lambda T, x, i: x.gather(0, i)),
        ("gather [1000,1000] dim 1", (square, index_rows), lambda T, x, i: x.gather(1, i)),
        ("scatter_add 1M into 1M", (flat, index_flat),
         lambda T, x, i: T.zeros(1_000_000).scatter_add(0, i, x)),
        ("scatter_add 1M into 1000", (flat, index_small),
         lambda T, x, i: T.zeros(1000).scatter_add(0, i, x)),
        ("scatter_add [1000,1000] dim 1", (square, index_rows),
         lambda T, x, i: T.zeros(1000, 1000).scatter_add(1, i, x)),
        ("index_select 1M rows of 1000", (square, index_rows[:, 0].copy()),
         lambda T, x, i: x.index_select(0, i)),
        ("masked_select 1M", (flat,), lambda T, x: x.masked_select(x > 0)),
        ("multinomial 1000 rows x 1000, 10", (np.abs(square),), lambda T, x: x.multinomial(10)),
        ("einsum bij,bjk [64,64,64]", (cube,), lambda T, x: T.einsum("bij,bjk->bik", x, x)),
    ]
    print(f"{'case':36s} {'kiln ms':>9s} {'torch ms':>9s}")
    for name, data, fn in cases:
        ks = [kiln.from_numpy(np.ascontiguousarray(d)) for d in data]
        ts = [torch.from_numpy(np.ascontiguousarray(d)) for d in data]
        k_ms = timed(lambda: fn(kiln, *ks), 10)
        t_ms = timed(lambda: fn(torch, *ts), 10)
        print(f"{name:36s} {k_ms:9.3f} {t_ms:9.3f}")


if __name__ == "__main__":
    main()
