#!/usr/bin/env python3
"""Capture overheads per Python version (issue 17): the per-call cost a compiled function adds
(compiled minus uncompiled `x + 1`, eager backend, a cache hit) and the time of one guard check
(GuardTree.check_frame on the guards of a frame with three tensor arguments, a list and an
int), in microseconds (the best of several rounds of timeit), for this interpreter.

    python bench/python_versions.py [--quick] [--json OUT]
    python bench/python_versions.py --all       # every venv beside the default (.venv, .venv-3.X)

--all runs this script under each venv's interpreter in turn (one after another, so that the
numbers share a machine state as far as a noisy machine allows) and prints one row per version
with its ratio to 3.11's.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import timeit

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def per_call_us(stmt, env, number, rounds):
    timer = timeit.Timer(stmt, globals=env)
    timer.timeit(max(1, number // 10))  # warm-up (and, for compiled, the compile itself)
    runs = timer.repeat(repeat=rounds, number=number)
    return min(runs) / number * 1e6  # the least disturbed round: the machine is shared


def measure(quick=False):
    import kiln

    number, rounds = (2000, 3) if quick else (20000, 7)

    def add_one(x):
        return x + 1

    x = kiln.from_numpy(np.array([1.5], dtype=np.float32))
    compiled = kiln.compile(add_one, backend="eager")
    env = {"fn": add_one, "compiled": compiled, "x": x}
    plain = per_call_us("fn(x)", env, number, rounds)
    hit = per_call_us("compiled(x)", env, number, rounds)

    def guarded(a, b, c, items, k):
        return (a * b + c) * items[0] + k

    args = (kiln.ones(4, 3), kiln.ones(4, 3), kiln.ones(3), [2.0, 3.0], 4)
    kiln.compile(guarded, backend="eager")(*args)
    tree = kiln._C._capture.cache_entries(guarded.__code__)[0][0]
    assert tree.check_frame(guarded, args) is None  # None: every guard passes
    guard = per_call_us("tree.check_frame(guarded, args)", {"tree": tree, "guarded": guarded, "args": args},
                        number, rounds)
    return {"python": "%d.%d" % sys.version_info[:2], "uncompiled_us": plain, "compiled_us": hit,
            "overhead_us": hit - plain, "guard_check_us": guard}


def run_all(quick):
    rows = []
    for venv in [".venv"] + sorted(glob.glob(os.path.join(REPO, ".venv-3.*"))):
        python = os.path.join(REPO, venv, "bin", "python")
        if not os.path.exists(python):
            continue
        cmd = [python, os.path.abspath(__file__)] + (["--quick"] if quick else [])
        run = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
        if run.returncode != 0:  # e.g. a venv whose kiln is not built yet
            print(f"{venv}: failed: {run.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
            continue
        rows.append(json.loads(run.stdout.strip().splitlines()[-1]))
    base = next((r for r in rows if r["python"] == "3.11"), rows[0] if rows else None)
    print(f"{'python':8} {'fn(x) us':>9} {'compiled us':>12} {'overhead us':>12} {'vs 3.11':>8} "
          f"{'guard us':>9} {'vs 3.11':>8}")
    for r in rows:
        print(f"{r['python']:8} {r['uncompiled_us']:9.3f} {r['compiled_us']:12.3f} {r['overhead_us']:12.3f} "
              f"{r['overhead_us'] / base['overhead_us']:8.2f} {r['guard_check_us']:9.3f} "
              f"{r['guard_check_us'] / base['guard_check_us']:8.2f}")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--all", action="store_true", help="every venv of the repository, one row each")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    result = run_all(a.quick) if a.all else measure(a.quick)
    if not a.all:
        print(json.dumps(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
