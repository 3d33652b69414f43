#!/usr/bin/env python3
"""Random ops, kiln against PyTorch in one process: the same seed must give the same values
(checked first), then the best of a few timings of each side.

    python bench/random_ops.py [--n 4000000] [--threads 1]

Both fill sequentially from mt19937 (torch's CPU kernels are serial too); --threads sets
torch's intra-op threads for the ops it parallelizes (none of these fills).
"""
import argparse
import time

import numpy as np

import kiln

OPS = {
    "rand": lambda T, n: T.rand(n),
    "randn": lambda T, n: T.randn(n),
    "randn f64": lambda T, n: T.randn(n, dtype=T.float64),
    "randint": lambda T, n: T.randint(0, 1000, (n,)),
    "bernoulli_": lambda T, n: T.empty(n).bernoulli_(0.5),
    "dropout": lambda T, n: T.nn.functional.dropout(T.ones(n), 0.1),
    "randperm": lambda T, n: T.randperm(n),
    "multinomial": lambda T, n: T.multinomial(T.ones(1000), n // 1000, True),
}


def best_ms(f, runs=3):
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - start)
    return best * 1e3


def main():
    import torch

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_000_000)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{'op':12s} {'same':>5s} {'kiln ms':>9s} {'torch ms':>9s}   (n={args.n})")
    for name, op in OPS.items():
        values = []
        for T in (kiln, torch):
            T.manual_seed(0)
            values.append(op(T, args.n).numpy())
        same = np.array_equal(values[0], values[1])
        print(f"{name:12s} {str(same):>5s} {best_ms(lambda: op(kiln, args.n)):9.1f} "
              f"{best_ms(lambda: op(torch, args.n)):9.1f}")


if __name__ == "__main__":
    main()
