#!/usr/bin/env python3
"""Compile latency and per-call overhead of the inductor backend.

latency: a 10-op pointwise function compiled with kiln.compile(backend="inductor"), first call in
a FRESH process (a child of this script), minus one eager call of the same function:
    cold    KILN_CACHE_DIR empty: capture, lowering, C++ compile, load
    warm    the cache filled by an earlier process: the graph-level cache skips lowering and
            compiling (inductor.py, graph_cache.py)
and where the time goes, warm and cold (each phase timed around the function doing it; phases
nest, so "backend call" includes the graph cache and CompiledKernel rows).
per_call: microseconds per call of `x + 1` on 8 float32 elements: kiln eager op, an uncompiled
Python function, the inductor-compiled function (a cache hit of the guards: the compiled
program runs), and compiled minus uncompiled.

    python bench/compile_breakdown.py [--runs N] [--json OUT]
Every number is the median over N fresh processes (latency; latency_min_ms is the fastest, the
least disturbed by other load) or timeit rounds (per_call).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit

import numpy as np

_CHILD = "--child"

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import ten_ops  # noqa: E402 - the bench folder is on the path first


def _phase_timer(phases):
    """Wraps the functions of the compile path so that each call's wall time adds to a phase."""
    import kiln.compiler.frame_callback as frame_callback
    import kiln.compiler.graph_cache as graph_cache
    import kiln.compiler.inductor as inductor
    import kiln.fx.targets as targets
    from kiln._C import _codegen

    def wrap(owner, name, phase):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                phases[phase] = phases.get(phase, 0.0) + (time.perf_counter() - start) * 1e3

        setattr(owner, name, timed)

    wrap(frame_callback, "trace_frame", "capture (trace_frame: bytecode, guards)")
    wrap(frame_callback.FrameCallback, "__call__", "frame callback (all of the compile)")
    wrap(frame_callback.FrameCallback, "_compile", "backend call incl. graph module, glue")
    wrap(targets, "_scan_defaults", "fx target table (first GraphModule of the process)")
    wrap(inductor, "compile_graph", "inductor.compile_graph")
    wrap(frame_callback, "GraphModule", "GraphModule of the captured graph")
    wrap(frame_callback, "make_glue", "glue function")
    wrap(inductor, "_graph_key", "graph cache key")
    wrap(graph_cache, "build_identity", "graph cache key: kiln build identity")
    wrap(_codegen, "toolchain_key", "graph cache key: toolchain key")
    wrap(_codegen, "get_artifact", "artifact read")
    wrap(graph_cache, "parse", "view graph parse")
    wrap(inductor, "retrace", "retrace to prims")
    wrap(inductor, "_compile_program", "lower, schedule, emit, compile C++")
    wrap(_codegen, "CompiledKernel", "CompiledKernel (parse program, dlopen)")


def child(mode):
    start = time.perf_counter()
    import kiln

    import_ms = (time.perf_counter() - start) * 1e3
    phases = {}
    if mode == "profile":
        _phase_timer(phases)
    rng = np.random.default_rng(0)
    x = kiln.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    y = kiln.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    ten_ops(x, y)  # eager kernels' one-time costs are not the compiler's
    start = time.perf_counter()
    want = ten_ops(x, y)
    eager_ms = (time.perf_counter() - start) * 1e3
    compiled = kiln.compile(ten_ops, backend="inductor")
    start = time.perf_counter()
    got = compiled(x, y)
    first_ms = (time.perf_counter() - start) * 1e3
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)
    print(json.dumps({"import_ms": import_ms, "eager_ms": eager_ms, "first_call_ms": first_ms,
                      "latency_ms": first_ms - eager_ms, "phases_ms": phases}))


def run_child(mode, cache_dir, pycache):
    # Bytecode caches on (in a folder of their own), as for an installed kiln: compiling kiln's
    # modules from source is not the compiler's latency.
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir, PYTHONPYCACHEPREFIX=pycache)
    env.pop("KILN_LOGS", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    r = subprocess.run([sys.executable, os.path.abspath(__file__), _CHILD, mode], env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise SystemExit(f"child ({mode}) failed:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def per_call_us(stmt, env, number, rounds):
    timer = timeit.Timer(stmt, globals=env)
    timer.timeit(max(1, number // 10))  # warm-up (and, for compiled, the compile itself)
    return statistics.median(timer.repeat(repeat=rounds, number=number)) / number * 1e6


def per_call(cache_dir, number=20000, rounds=7):
    import kiln

    kiln.config.cache_dir = cache_dir

    def add_one(x):
        return x + 1

    x = kiln.from_numpy(np.arange(8, dtype=np.float32))
    compiled = kiln.compile(add_one, backend="inductor")
    np.testing.assert_array_equal(compiled(x).numpy(), add_one(x).numpy())
    env = {"x": x, "fn": add_one, "compiled": compiled}
    row = {"op_us": per_call_us("x + 1", env, number, rounds),
           "fn_us": per_call_us("fn(x)", env, number, rounds),
           "compiled_us": per_call_us("compiled(x)", env, number, rounds)}
    row["overhead_us"] = row["compiled_us"] - row["fn_us"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=5, help="fresh processes per measurement")
    ap.add_argument("--json", help="also write the numbers here")
    a = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        pycache = os.path.join(tmp, "pycache")
        run_child("time", os.path.join(tmp, "bytecode"), pycache)  # writes the bytecode caches
        cold = [run_child("time", os.path.join(tmp, f"cold{i}"), pycache) for i in range(a.runs)]
        warm_dir = os.path.join(tmp, "warm")
        run_child("time", warm_dir, pycache)  # fills the cache
        warm = [run_child("time", warm_dir, pycache) for _ in range(a.runs)]
        profile = [run_child("profile", warm_dir, pycache) for _ in range(a.runs)]
        cold_profile = [run_child("profile", os.path.join(tmp, f"cold-profile{i}"), pycache)
                        for i in range(a.runs)]
        for name, runs in (("cold", cold), ("warm", warm)):
            results[name] = {k: statistics.median(r[k] for r in runs)
                             for k in ("latency_ms", "first_call_ms", "eager_ms", "import_ms")}
            results[name]["latency_min_ms"] = min(r["latency_ms"] for r in runs)
        for name, runs in (("warm_phases_ms", profile), ("cold_phases_ms", cold_profile)):
            phases = {}
            for r in runs:
                for k, v in r["phases_ms"].items():
                    phases.setdefault(k, []).append(v)
            results[name] = {k: statistics.median(v) for k, v in phases.items()}
        results["per_call_us"] = per_call(os.path.join(tmp, "per_call"))
    print(json.dumps(results, indent=1))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == _CHILD:
        child(sys.argv[2])
    else:
        main()
