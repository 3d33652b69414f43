#!/usr/bin/env python3
"""Per-call time of linalg code compiled whole (issue 16: the factorizations are graph nodes,
fallback kernels of the compiled program, no longer graph breaks) against eager, for kiln and
torch in the same run: a Gaussian log-likelihood through a Cholesky factor, forward and backward
(cholesky, solve_triangular, the log of the diagonal), and a batch of solves/inverses/eigh.
Medians of timeit rounds after a warm-up, in this thread's CPU time (time.thread_time).

    python bench/linalg_compiled.py [--quick] [--json OUT]
"""
import argparse
import json
import math
import time
import timeit

import numpy as np


def loglik_step(T):
    def fn(x, mu, L0):
        cov = L0 @ L0.mT + T.eye(L0.shape[-1]) * 0.5
        L = T.linalg.cholesky(cov)
        z = T.linalg.solve_triangular(L, (x - mu).unsqueeze(-1), upper=False).squeeze(-1)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        return (-0.5 * ((z * z).sum(-1) + logdet + L0.shape[-1] * math.log(2 * math.pi))).mean()

    def step(f, args):
        loss = -f(*args)
        loss.backward()
        return loss

    r = np.random.default_rng(0)
    arrays = [r.standard_normal((64, 8)), r.standard_normal(8), r.standard_normal((8, 8))]
    args = [T.tensor(a, requires_grad=i > 0) for i, a in enumerate(arrays)]
    return fn, step, args


def solves(T):
    def fn(a, b):
        m = a @ a.mT + T.eye(a.shape[-1])
        x = T.linalg.solve(m, b)
        w = T.linalg.eigvalsh(m)
        return (x.relu() + T.linalg.inv(m) @ b).sum() + w.sum() + T.linalg.slogdet(m).logabsdet.sum()

    def step(f, args):
        return f(*args)

    r = np.random.default_rng(1)
    return fn, step, [T.tensor(r.standard_normal((16, 6, 6))), T.tensor(r.standard_normal((16, 6, 3)))]


def per_call_us(call, number, rounds):
    call()
    times = timeit.repeat(call, timer=time.thread_time, number=number, repeat=rounds)
    return 1e6 * float(np.median(times)) / number


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--quick", action="store_true")
    p.add_argument("--json")
    opts = p.parse_args()
    number, rounds = (20, 3) if opts.quick else (100, 7)
    import kiln
    import torch

    results = {}
    for name, build in (("loglik_train_step", loglik_step), ("solve_inv_eigh", solves)):
        row = {}
        for lib, T, compile_fn in (("kiln", kiln, kiln.compile), ("torch", torch, torch.compile)):
            fn, step, args = build(T)
            compiled = compile_fn(fn)
            for _ in range(3):  # compile, and settle the caches
                step(compiled, args)
            row[f"{lib}_eager_us"] = round(per_call_us(lambda: step(fn, args), number, rounds), 1)
            row[f"{lib}_compiled_us"] = round(per_call_us(lambda: step(compiled, args), number, rounds), 1)
        results[name] = row
        print(name, row)
    if opts.json:
        with open(opts.json, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
