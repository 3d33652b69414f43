#!/usr/bin/env python3
"""Per-call cost of a graph break: a function with one break (two graphs and a resume function)
minus the eager cost of the same function, for kiln and torch in the same run.

    def fn(x):
        y = x + 1
        opaque()          # a no-op wrapped by compiler.disable / torch._dynamo.disable: a break
        return y * 2

compiled(x) runs the first graph, the call in Python, the resume function's guards and the
second graph; fn(x) runs the two ops and the call eagerly. compiled-fn is what the break and the
two compiled graphs add per call (kiln's target: <= 3 us with the eager backend). Medians of
timeit rounds after a warm-up, on a one-element float32 tensor, in this thread's CPU time
(time.thread_time: a shared machine's other processes do not inflate it; --wall for wall time).

    python bench/graph_break_overhead.py [--quick] [--backend NAME] [--json OUT]
"""
import argparse
import json
import os
import sys
import time
import timeit

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compile_overhead import libraries, per_call_us  # noqa: E402

import numpy as np  # noqa: E402


def make_fn(disable):
    @disable
    def opaque():
        pass

    def with_break(x):
        y = x + 1
        opaque()
        return y * 2

    return with_break


def _disable(name, lib):
    if name == "torch":
        import torch._dynamo
        return torch._dynamo.disable
    return lib.compiler.disable


def measure(quick=False, backend="eager", clock=time.thread_time):
    number, rounds = (2000, 3) if quick else (20000, 7)
    results = {}
    for name, (lib, compile_fn) in libraries().items():
        if compile_fn is None:
            continue
        x = lib.from_numpy(np.array([1.5], dtype=np.float32))
        fn = make_fn(_disable(name, lib))
        compiled = compile_fn(make_fn(_disable(name, lib)), backend=backend)
        got, want = compiled(x), fn(x)
        if float(got[0]) != float(want[0]):
            raise SystemExit(f"{name}: compiled result {got} != eager result {want}")
        env = {"x": x, "fn": fn, "compiled": compiled}
        row = {"fn_us": per_call_us("fn(x)", env, number, rounds, clock),
               "compiled_us": per_call_us("compiled(x)", env, number, rounds, clock)}
        row["overhead_us"] = row["compiled_us"] - row["fn_us"]
        results[name] = row
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer repetitions (smoke test)")
    ap.add_argument("--backend", default="eager", help="compile backend of both libraries")
    ap.add_argument("--wall", action="store_true", help="wall time instead of this thread's CPU time")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    res = measure(a.quick, a.backend, timeit.default_timer if a.wall else time.thread_time)
    print(f"microseconds per call, a function with one graph break, backend={a.backend!r}")
    print(f"{'library':<8}{'fn(x)':>12}{'compiled(x)':>12}{'compiled-fn':>12}")
    for name, row in res.items():
        print(f"{name:<8}{row['fn_us']:12.2f}{row['compiled_us']:12.2f}{row['overhead_us']:12.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
