#!/usr/bin/env python3
"""Compile time against graph size (issue 13): the first call of a compiled function of N
pointwise ops on a 64x64 float32 tensor, cold cache, in a fresh process per (shape, size).

Shapes:
    chain   x = x * c; x = x + c; x = sin(x); x = relu(x); x = x - c; repeated (one long
            dependence chain, N ops)
    wide    N // 6 independent branches of x (each: * c_i, + c_i, sin, relu, - c_i), summed
            pairwise (a balanced tree of adds): about N ops, depth about 5 + log2(N / 6)

Every phase of the first call is timed around the function doing it (phases do not nest here:
each row excludes the rows below it in the call tree):
    capture         trace_frame: bytecode translation, the captured graph, guards
    graph module    GraphModule of the captured graph, glue function, graph cache key
    decompose       retrace to prims (kiln.fx.retrace)
    graph passes    the rest of preparing the prims graph (dead code, random draws, outputs)
    lower           prims graph -> loop program (_codegen.lower)
    schedule        fusion into kernels, memory plan (_codegen.schedule)
    emit            loop program -> C++ source (_codegen.emit_cpp)
    c++ compile     the kernel cache: hashing, g++, the shared object (_codegen.compile_source)
    load            CompiledKernel: parse the program, dlopen
    other           the first call's remainder (graph cache store, running the program, ...)
The result of every size is checked against eager kiln (float32 tolerance) before it counts.

    python bench/compile_scale.py                    # 100, 1000, 3000, 10000 ops, both shapes
    python bench/compile_scale.py --quick            # 100 and 1000 ops
    python bench/compile_scale.py --sizes 1000,3000 --shapes chain --runs 3 --json out.json --plot out.png
The summary gives per shape the first-call time per size, the time per op and the ratio of the
time per op at the largest size to that at 1,000 ops (the issue's target: at most 1.5).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

_CHILD = "--child"
PHASES = ["capture", "graph module", "decompose", "graph passes", "lower", "schedule", "emit",
          "c++ compile", "load", "other"]
DEFAULT_SIZES = [100, 1000, 3000, 10000]
QUICK_SIZES = [100, 1000]
SHAPES = ["chain", "wide"]


def make_fn(kiln, shape, n):
    """The function of about n pointwise ops of `shape`, and its op count."""
    if shape == "chain":
        reps = max(1, n // 5)

        def chain(x):
            for _ in range(reps):
                x = x * 1.01
                x = x + 0.1
                x = kiln.sin(x)
                x = kiln.relu(x)
                x = x - 0.05
            return x

        return chain, reps * 5
    if shape == "wide":
        branches = max(2, n // 6)
        consts = [1.0 + 0.001 * i for i in range(branches)]

        def wide(x):
            values = []
            for c in consts:
                y = x * c
                y = y + c
                y = kiln.sin(y)
                y = kiln.relu(y)
                values.append(y - 0.05 * c)
            while len(values) > 1:
                pairs = [values[i] + values[i + 1] for i in range(0, len(values) - 1, 2)]
                if len(values) % 2:
                    pairs.append(values[-1])
                values = pairs
            return values[0]

        return wide, branches * 5 + branches - 1
    raise SystemExit(f"unknown shape {shape!r} (expected one of {', '.join(SHAPES)})")


def _count_units(program):
    """Kernels of a scheduled loop program (text): kernel groups and buffers outside them."""
    lines = program.splitlines()
    return sum(1 for line in lines if line.startswith("  kernel @") or line.startswith("  %"))


def _install_timers(phases, facts):
    """Wraps the functions of the compile path; each call's wall time, less the time of the
    wrapped calls inside it, adds to its phase (so phases do not overlap)."""
    import kiln.compiler.frame_callback as frame_callback
    import kiln.compiler.inductor as inductor
    from kiln._C import _codegen

    stack = []  # per active timed call: time spent in timed calls nested in it

    def wrap(owner, name, phase, seen=None):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            stack.append(0.0)
            start = time.perf_counter()
            try:
                result = original(*args, **kwargs)
                if seen is not None:
                    seen(result)
                return result
            finally:
                total = time.perf_counter() - start
                nested = stack.pop()
                phases[phase] = phases.get(phase, 0.0) + total - nested
                if stack:
                    stack[-1] += total

        setattr(owner, name, timed)

    wrap(frame_callback, "trace_frame", "capture")
    wrap(frame_callback, "GraphModule", "graph module")
    wrap(frame_callback, "make_glue", "graph module")
    wrap(inductor, "_graph_key", "graph module")
    wrap(inductor, "_prepare", "graph passes")
    wrap(inductor, "retrace", "decompose")
    wrap(_codegen, "lower", "lower")
    wrap(_codegen, "schedule", "schedule", lambda r: facts.update(kernels=_count_units(r[0])))
    wrap(_codegen, "emit_cpp", "emit", lambda r: facts.update(cpp_bytes=len(r)))
    wrap(_codegen, "compile_source", "c++ compile")
    wrap(_codegen, "CompiledKernel", "load")


def child(shape, n):
    import kiln

    kiln.config.strict = True  # a backend failure fails the run instead of running eagerly
    phases, facts = {}, {}
    fn, ops = make_fn(kiln, shape, n)
    rng = np.random.default_rng(0)
    x = kiln.from_numpy(rng.standard_normal((64, 64)).astype(np.float32))
    start = time.perf_counter()
    want = fn(x).numpy()
    eager_s = time.perf_counter() - start
    _install_timers(phases, facts)
    compiled = kiln.compile(fn, backend="inductor")
    start = time.perf_counter()
    got = compiled(x)
    first_s = time.perf_counter() - start
    got = got.numpy()
    err = float(np.max(np.abs(got - want)))
    ok = bool(np.allclose(got, want, rtol=1e-4, atol=1e-4))
    phases["other"] = first_s - sum(phases.values())
    if "lower" not in phases:
        # Nothing was compiled: the frame ran eagerly (a graph break, e.g. the capture's
        # instruction budget), which kiln.config.strict does not turn into an error.
        ok = False
        facts["error"] = "not compiled: the frame ran eagerly (KILN_LOGS=graph_breaks says why)"
    print(json.dumps({"shape": shape, "n": n, "ops": ops, "first_call_s": first_s, "eager_s": eager_s,
                      "phases_s": phases, "max_abs_err": err, "ok": ok, **facts}))


def run_child(shape, n, timeout):
    with tempfile.TemporaryDirectory(prefix="kiln-scale-") as cache:
        env = dict(os.environ, KILN_CACHE_DIR=cache)
        env.pop("KILN_LOGS", None)
        env.pop("KILN_DEBUG_DIR", None)
        try:
            r = subprocess.run([sys.executable, os.path.abspath(__file__), _CHILD, shape, str(n)], env=env,
                               capture_output=True, text=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            return {"shape": shape, "n": n, "error": f"timed out after {timeout} s"}
    lines = r.stdout.strip().splitlines()
    if r.returncode or not lines:
        return {"shape": shape, "n": n, "error": f"exit status {r.returncode}: {r.stderr.strip()[-600:]}"}
    return json.loads(lines[-1])


def summarize(rows):
    """Per shape: the time per op at each size and the ratio of the largest size's time per op to
    that at 1,000 ops (or the smallest size above 100 when 1,000 was not run)."""
    out = {}
    for shape in sorted({r["shape"] for r in rows}):
        good = sorted((r for r in rows if r["shape"] == shape and "error" not in r), key=lambda r: r["n"])
        per_op = {r["n"]: r["first_call_s"] / r["ops"] for r in good}
        entry = {"per_op_ms": {n: v * 1e3 for n, v in per_op.items()}}
        base = 1000 if 1000 in per_op else next((n for n in per_op if n > 100), None)
        top = max(per_op) if per_op else None
        if base is not None and top is not None and top > base:
            entry["per_op_ratio"] = {"base": base, "top": top, "ratio": per_op[top] / per_op[base]}
        out[shape] = entry
    return out


def markdown(result):
    lines = ["| shape | ops | first call s | " + " | ".join(PHASES) + " | kernels | C++ KB | max abs err |",
             "| --- | ---: | ---: | " + " | ".join("---:" for _ in PHASES) + " | ---: | ---: | ---: |"]
    for r in result["rows"]:
        if "error" in r:
            lines.append(f"| {r['shape']} | {r['n']} | failed: {r['error'][:200]} |")
            continue
        cells = [f"{r['phases_s'].get(p, 0.0):.3f}" for p in PHASES]
        lines.append(f"| {r['shape']} | {r['ops']} | {r['first_call_s']:.3f} | " + " | ".join(cells)
                     + f" | {r.get('kernels', '?')} | {r.get('cpp_bytes', 0) / 1024:.0f}"
                     + f" | {r['max_abs_err']:.1e}{'' if r['ok'] else ' (MISMATCH)'} |")
    for shape, s in result["summary"].items():
        per = ", ".join(f"{n}: {v:.3f}" for n, v in s["per_op_ms"].items())
        line = f"- {shape}: ms per op {per}"
        if "per_op_ratio" in s:
            q = s["per_op_ratio"]
            line += f"; per op at {q['top']} / at {q['base']}: {q['ratio']:.2f}x"
        lines.append(line)
    return "\n".join(lines)


def plot(result, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for shape, style in zip(SHAPES, ("-", "--")):
        rows = sorted((r for r in result["rows"] if r["shape"] == shape and "error" not in r),
                      key=lambda r: r["ops"])
        if not rows:
            continue
        ns = [r["ops"] for r in rows]
        axes[0].plot(ns, [r["first_call_s"] for r in rows], style, marker="o", color="k",
                     label=f"{shape}: first call")
        for p in PHASES:
            ys = [max(r["phases_s"].get(p, 0.0), 1e-4) for r in rows]
            if max(ys) > 0.01:
                axes[0].plot(ns, ys, style, marker=".", label=f"{shape}: {p}")
        axes[1].plot(ns, [r["first_call_s"] / r["ops"] * 1e3 for r in rows], style, marker="o",
                     label=shape)
    axes[0].set(xscale="log", yscale="log", xlabel="ops", ylabel="seconds",
                title="kiln compile time (cold cache, first call)")
    axes[0].legend(fontsize=6, ncol=2)
    axes[1].set(xscale="log", xlabel="ops", ylabel="ms per op", title="compile time per op")
    axes[1].set_ylim(bottom=0)
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def run(sizes, shapes, runs, timeout, log=print):
    rows = []
    for shape in shapes:
        for n in sizes:
            trials = []
            for _ in range(runs):
                res = run_child(shape, n, timeout)
                trials.append(res)
                if "error" in res:
                    break
            good = [t for t in trials if "error" not in t]
            if not good:
                rows.append(trials[-1])
                log(f"{shape} {n}: {trials[-1]['error'][:300]}")
                continue
            best = min(good, key=lambda t: t["first_call_s"])  # least disturbed by other load
            best["first_call_runs_s"] = [t["first_call_s"] for t in good]
            best["first_call_median_s"] = statistics.median(best["first_call_runs_s"])
            best["ok"] = all(t["ok"] for t in good)
            rows.append(best)
            top = sorted(best["phases_s"].items(), key=lambda kv: -kv[1])[:3]
            log(f"{shape} {best['ops']} ops: first call {best['first_call_s']:.2f} s "
                f"({', '.join(f'{k} {v:.2f}' for k, v in top)}), max abs err {best['max_abs_err']:.1e}"
                f"{'' if best['ok'] else ' MISMATCH'}")
    result = {"rows": rows}
    result["summary"] = summarize(rows)
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", help="comma-separated op counts (default 100,1000,3000,10000)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help="chain, wide or both")
    ap.add_argument("--quick", action="store_true", help="sizes 100 and 1000 only")
    ap.add_argument("--runs", type=int, default=1, help="fresh processes per point (the fastest counts)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds one first call may take")
    ap.add_argument("--json", help="write the numbers here")
    ap.add_argument("--plot", help="write the plot (PNG) here")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")] if a.sizes else (QUICK_SIZES if a.quick else DEFAULT_SIZES)
    result = run(sizes, a.shapes.split(","), a.runs, a.timeout)
    print(markdown(result))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1)
    if a.plot and plot(result, a.plot):
        print(f"plot: {a.plot}")
    return 0 if all("error" not in r and r["ok"] for r in result["rows"]) else 1


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == _CHILD:
        child(sys.argv[2], int(sys.argv[3]))
    else:
        sys.exit(main())
