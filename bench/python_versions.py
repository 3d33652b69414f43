#!/usr/bin/env python3
"""Capture overheads per Python version (issue 17): the per-call cost a compiled function adds
(compiled minus uncompiled `x + 1`, eager backend, a cache hit) and the time of one guard check
(GuardTree.check_frame on the guards of a frame with three tensor arguments, a list and an
int), in microseconds, for this interpreter. Times are this thread's CPU time
(time.thread_time), not wall time: on a shared machine wall time counts the time slices other
processes take (a loaded 2-core machine made `x + 1` read 4 us instead of 0.8), CPU time does
not. The plain and compiled calls are timed in alternating rounds; a round's overhead is its
compiled time minus its plain time, and the median round is reported (min for the guard check).

    python bench/python_versions.py [--quick] [--json OUT]
    python bench/python_versions.py --all [--repeat N]  # every venv beside the default (.venv, .venv-3.X)

--all runs this script under each venv's interpreter in turn, N times (3), the venvs taking
turns so that they share the machine's state as far as a noisy machine allows, and prints one
row per version (medians of its runs) with its ratio to 3.11's.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import statistics
import time
import timeit

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _timer(stmt, env, number):
    timer = timeit.Timer(stmt, globals=env, timer=time.thread_time)
    timer.timeit(max(1, number // 10))  # warm-up (and, for compiled, the compile itself)
    return timer


def per_call_us(stmt, env, number, rounds):
    runs = _timer(stmt, env, number).repeat(repeat=rounds, number=number)
    return min(runs) / number * 1e6  # the least disturbed round


def paired_us(plain, compiled, env, number, rounds):
    """(plain us, compiled us, overhead us): medians over rounds that time both in turn, each
    round the best of three, so that both see the same machine state."""
    timers = [_timer(plain, env, number), _timer(compiled, env, number)]
    rows = []
    for _ in range(rounds):
        p, c = (min(t.repeat(repeat=3, number=number)) / number * 1e6 for t in timers)
        rows.append((p, c, c - p))
    return tuple(statistics.median(r[i] for r in rows) for i in range(3))


def measure(quick=False):
    import kiln

    number, rounds = (2000, 3) if quick else (10000, 9)

    def add_one(x):
        return x + 1

    x = kiln.from_numpy(np.array([1.5], dtype=np.float32))
    compiled = kiln.compile(add_one, backend="eager")
    env = {"fn": add_one, "compiled": compiled, "x": x}
    plain, hit, overhead = paired_us("fn(x)", "compiled(x)", env, number, rounds)

    def guarded(a, b, c, items, k):
        return (a * b + c) * items[0] + k

    args = (kiln.ones(4, 3), kiln.ones(4, 3), kiln.ones(3), [2.0, 3.0], 4)
    kiln.compile(guarded, backend="eager")(*args)
    tree = kiln._C._capture.cache_entries(guarded.__code__)[0][0]
    assert tree.check_frame(guarded, args) is None  # None: every guard passes
    guard = per_call_us("tree.check_frame(guarded, args)", {"tree": tree, "guarded": guarded, "args": args},
                        number, rounds)
    return {"python": "%d.%d" % sys.version_info[:2], "uncompiled_us": plain, "compiled_us": hit,
            "overhead_us": overhead, "guard_check_us": guard}


def run_all(quick, repeat):
    """One row per venv: the median of `repeat` runs, the venvs taking turns in each pass."""
    venvs = [v for v in [".venv"] + sorted(glob.glob(os.path.join(REPO, ".venv-3.*")))
             if os.path.exists(os.path.join(REPO, v, "bin", "python"))]
    runs = {}
    for _ in range(repeat):
        for venv in venvs:
            cmd = [os.path.join(REPO, venv, "bin", "python"), os.path.abspath(__file__)]
            run = subprocess.run(cmd + (["--quick"] if quick else []), capture_output=True, text=True, cwd=REPO)
            if run.returncode != 0:  # e.g. a venv whose kiln is not built yet
                print(f"{venv}: failed: {run.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            runs.setdefault(venv, []).append(json.loads(run.stdout.strip().splitlines()[-1]))
    rows = [{k: (v[0][k] if k == "python" else statistics.median(r[k] for r in v)) for k in v[0]}
            for v in runs.values()]
    base = next((r for r in rows if r["python"] == "3.11"), rows[0] if rows else None)
    print(f"{'python':8} {'fn(x) us':>9} {'compiled us':>12} {'overhead us':>12} {'vs 3.11':>8} "
          f"{'guard us':>9} {'vs 3.11':>8}   (medians of {repeat} runs)")
    for r in rows:
        print(f"{r['python']:8} {r['uncompiled_us']:9.3f} {r['compiled_us']:12.3f} {r['overhead_us']:12.3f} "
              f"{r['overhead_us'] / base['overhead_us']:8.2f} {r['guard_check_us']:9.3f} "
              f"{r['guard_check_us'] / base['guard_check_us']:8.2f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--all", action="store_true", help="every venv of the repository, one row each")
    ap.add_argument("--repeat", type=int, default=3, help="with --all: runs per venv, taking turns")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    result = run_all(a.quick, a.repeat) if a.all else measure(a.quick)
    if not a.all:
        print(json.dumps(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
