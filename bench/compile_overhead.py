#!/usr/bin/env python3
"""Per-call overhead of a compiled function: `x + 1` on a one-element float32 tensor.

For each library (kiln, and torch when importable) it times, in microseconds per call:
    x + 1          the operator alone
    fn(x)          an uncompiled Python function doing `return x + 1`
    compiled(x)    the same function through `compile(fn, backend=BACKEND)` (a cache hit:
                   the guards are checked and the captured graph runs; BACKEND is "eager"
                   unless --backend says otherwise, e.g. "inductor")
and prints compiled-minus-uncompiled, the cost capture adds to a call (kiln's target:
<= 1 us). Each number is the median over several rounds of timeit after a warm-up.
kiln's compiled column is left out while kiln has no `compile`.

    python bench/compile_overhead.py [--quick] [--backend NAME] [--json OUT]
"""
import argparse
import json
import statistics
import timeit

import numpy as np


def per_call_us(stmt, env, number, rounds, clock=timeit.default_timer):
    """Median microseconds per call of `stmt`. clock=time.thread_time times this thread's CPU
    time, which other processes on a shared machine do not inflate."""
    timer = timeit.Timer(stmt, globals=env, timer=clock)
    timer.timeit(max(1, number // 10))  # warm-up (and, for compiled, the compile itself)
    runs = timer.repeat(repeat=rounds, number=number)
    return statistics.median(runs) / number * 1e6


def libraries():
    libs = {}
    try:
        import kiln

        libs["kiln"] = (kiln, kiln.compile if hasattr(kiln, "compile") else None)
    except ImportError:
        pass
    try:
        import torch

        libs["torch"] = (torch, torch.compile)
    except ImportError:
        pass
    return libs


def make_fn():
    # A fresh function (and code object) per library, so no two compilers share one cache.
    def add_one(x):
        return x + 1

    return add_one


def measure(quick=False, backend="eager"):
    number, rounds = (2000, 3) if quick else (20000, 7)
    results = {}
    for name, (lib, compile_fn) in libraries().items():
        x = lib.from_numpy(np.array([1.5], dtype=np.float32))
        fn = make_fn()
        env = {"x": x, "fn": fn}
        row = {
            "op_us": per_call_us("x + 1", env, number, rounds),
            "fn_us": per_call_us("fn(x)", env, number, rounds),
        }
        if compile_fn is not None:
            compiled = compile_fn(make_fn(), backend=backend)
            got, want = compiled(x), fn(x)
            if got.dtype != want.dtype or tuple(got.shape) != tuple(want.shape) or float(got[0]) != float(want[0]):
                raise SystemExit(f"{name}: compiled result {got} != eager result {want}")
            env["compiled"] = compiled
            row["compiled_us"] = per_call_us("compiled(x)", env, number, rounds)
            row["overhead_us"] = row["compiled_us"] - row["fn_us"]
        results[name] = row
    return results


def fmt(v):
    return f"{v:12.2f}" if v is not None else f"{'-':>12}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    ap.add_argument("--backend", default="eager", help="compile backend of both libraries")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    res = measure(a.quick, a.backend)
    cols = [("op_us", "x + 1"), ("fn_us", "fn(x)"), ("compiled_us", "compiled(x)"),
            ("overhead_us", "compiled-fn")]
    print(f"microseconds per call, x + 1 on a 1-element float32 tensor, backend={a.backend!r}")
    print(f"{'library':<8}" + "".join(f"{title:>12}" for _, title in cols))
    for name, row in res.items():
        print(f"{name:<8}" + "".join(fmt(row.get(key)) for key, _ in cols))
    if "kiln" in res and "compiled_us" not in res["kiln"]:
        print("kiln: no kiln.compile yet, compiled columns skipped")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
