"""Eager reductions, softmax, layer_norm and cumsum: kiln against PyTorch on the same data.

    .venv/bin/python bench/reductions.py            # all threads
    OMP_NUM_THREADS=1 .venv/bin/python bench/reductions.py
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
    wide = r.standard_normal((1000, 700)).astype(np.float32).T
    tall = r.standard_normal((1_000_000, 2)).astype(np.float32)
    cases = [
        ("sum 1M float32", flat, lambda T, x: x.sum()),
        ("sum 1M float16", flat.astype(np.float16), lambda T, x: x.sum()),
        ("amax 1M", flat, lambda T, x: x.amax()),
        ("argmax 1M", flat, lambda T, x: x.argmax()),
        ("var 1M", flat, lambda T, x: x.var()),
        ("norm 1M", flat, lambda T, x: x.norm()),
        ("logsumexp 1M", flat, lambda T, x: x.logsumexp(0)),
        ("sum [1000,1000] dim 1", square, lambda T, x: x.sum(1)),
        ("sum [1000,1000] dim 0", square, lambda T, x: x.sum(0)),
        ("max [1000,1000] dim 1", square, lambda T, x: x.max(1)),
        ("var [1000,1000] dim 1", square, lambda T, x: x.var(1)),
        ("sum transposed [700,1000] dim 0", wide, lambda T, x: x.sum(0)),
        ("sum [1M,2] dim 1", tall, lambda T, x: x.sum(1)),
        ("sum [1M,2] dim 0", tall, lambda T, x: x.sum(0)),
        ("softmax [1000,1000] dim 1", square, lambda T, x: x.softmax(1)),
        ("softmax [1000,1000] dim 0", square, lambda T, x: x.softmax(0)),
        ("layer_norm [1000,1000]", square, lambda T, x: T.layer_norm(x, [1000])),
        ("cumsum [1000,1000] dim 1", square, lambda T, x: x.cumsum(1)),
    ]
    print(f"{'case':36s} {'kiln ms':>9s} {'torch ms':>9s}")
    for name, data, fn in cases:
        k, t = kiln.from_numpy(data), torch.from_numpy(data)
        print(f"{name:36s} {timed(lambda: fn(kiln, k), 20):9.3f} {timed(lambda: fn(torch, t), 20):9.3f}")


if __name__ == "__main__":
    main()
