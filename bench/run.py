#!/usr/bin/env python3
"""The kiln benchmark suite (`make bench`): kiln eager and compiled against PyTorch eager,
torch.compile (inductor, CPU) and jax.jit (when installed), on the workloads of
bench/workloads.py and the conformance programs; writes report.md, results.json and PNG plots.

    python bench/run.py                      # everything -> bench/results/<timestamp>/
    python bench/run.py --smoke --out DIR    # tiny and quick: 2 workloads, 1 size (make test)
    python bench/run.py -k softmax -k attention --sizes small

Each workload size runs in a fresh subprocess (bench/measure.py): correctness against PyTorch
eager first, then the timed calls of every peer. Compile latency runs in fresh processes on an
empty, then a filled, cache folder (bench/compile_latency.py); compile time against graph size
(chains and wide DAGs of 100 to 10,000 ops) by bench/compile_scale.py; dynamic shapes (compile
counts over changing sizes, symbolic vs static code) by bench/dynamic_shapes.py. STREAM (bench/stream.c) gives the
bandwidth the achieved GB/s are set against.
"""
import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import machine  # noqa: E402
import report  # noqa: E402
import stream  # noqa: E402
from workloads import all_workloads  # noqa: E402

PEERS = ["kiln_eager", "kiln_compiled", "torch_eager", "torch_compile", "jax_jit"]
SMOKE_WORKLOADS = [("pointwise_chain", "small"), ("softmax", "small")]
# torch.compile's first compile takes many seconds: smoke mode runs it on the first workload only.
SMOKE_TORCH_COMPILE = {"pointwise_chain"}
# Compile latency (cold and warm) is measured on these: one pointwise-and-reduction workload and
# one with matmuls; smoke mode measures kiln on the first only.
LATENCY_WORKLOADS = [("ten_ops", "small"), ("softmax", "small"), ("transformer_block", "small")]


def run_json(cmd, env, timeout):
    """Runs a worker; its last stdout line is JSON. Returns (dict or None, error text or None)."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    lines = proc.stdout.strip().splitlines()
    if proc.returncode or not lines:
        return None, f"exit status {proc.returncode}: {(proc.stderr or proc.stdout)[-800:]}"
    try:
        return json.loads(lines[-1]), None
    except json.JSONDecodeError:
        return None, f"unreadable worker output: {lines[-1][:300]}"


def worker_env(cache_root, tag):
    """The environment of a worker: its own kernel caches under cache_root/tag."""
    env = dict(os.environ)
    env["KILN_CACHE_DIR"] = os.path.join(cache_root, tag, "kiln")
    env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache_root, tag, "inductor")
    env["PYTHONWARNINGS"] = "ignore"
    # Inductor compiles in this process instead of a pool of worker processes (each importing
    # torch), which on a machine of few cores is the faster choice.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


def selected(args):
    if args.smoke:
        return SMOKE_WORKLOADS
    out = []
    for w in all_workloads():
        if args.k and not any(k in w.name for k in args.k):
            continue
        for size in w.sizes:
            if w.sizes[size] is None or not args.sizes or size in args.sizes:
                out.append((w.name, size))
    return out


def measure_workloads(pairs, peers, args, cache_root, deadline):
    """Every (workload, size) in its own worker; those not started by `deadline` (perf_counter
    time) are reported as skipped."""
    results = []
    budget = 0.05 if args.smoke else args.budget
    for i, (name, size) in enumerate(pairs):
        t = time.perf_counter()
        if t > deadline:
            why = f"the run's time budget ({args.time_budget:.0f} s, --time-budget) was spent"
            results.append({"workload": name, "size": size, "wall_s": 0.0,
                            "peers": {p: {"status": "skipped", "reason": why} for p in peers}})
            print(f"[{i + 1}/{len(pairs)}] {name} {size}: skipped ({why})", flush=True)
            continue
        these = [p for p in peers if not (args.smoke and p == "torch_compile" and name not in SMOKE_TORCH_COMPILE)]
        cmd = [sys.executable, os.path.join(HERE, "measure.py"), name, size, "--peers", ",".join(these),
               "--budget", str(budget), "--first-call-limit", str(args.first_call_limit)]
        # One cache folder for all timed runs: torch.compile's FX graph cache then serves a
        # graph met before; the first-call times are not the compile latency measured below.
        res, err = run_json(cmd, worker_env(cache_root, "timed"), 60 + len(these) * (args.first_call_limit + 30))
        if res is None:
            res = {"workload": name, "size": size, "error": err, "peers": {}}
        for p in peers:
            if p not in these:
                res["peers"][p] = {"status": "skipped", "reason": "smoke mode runs torch.compile on "
                                   + ", ".join(sorted(SMOKE_TORCH_COMPILE)) + " only"}
        res["wall_s"] = time.perf_counter() - t
        status = " ".join(f"{p}={r['status']}" for p, r in res["peers"].items()) or res.get("error", "")[:200]
        print(f"[{i + 1}/{len(pairs)}] {name} {size} ({res['wall_s']:.1f} s): {status}", flush=True)
        results.append(res)
    return results


def compile_latency(pairs, libs, cache_root, timeout):
    out = []
    for name, size in pairs:
        for lib in libs:
            row = {"workload": name, "size": size, "lib": lib}
            env = worker_env(cache_root, f"latency-{lib}-{name}-{size}")
            for phase in ("cold", "warm"):
                res, err = run_json([sys.executable, os.path.join(HERE, "compile_latency.py"), lib, name, size],
                                    env, timeout)
                row[phase] = res if res is not None else {"error": err}
            print(f"compile latency {lib} {name} {size}: cold "
                  f"{row['cold'].get('first_call_s', float('nan')):.2f} s, warm "
                  f"{row['warm'].get('first_call_s', float('nan')):.2f} s", flush=True)
            out.append(row)
    return out


def compile_scale(args, cache_root, out_dir):
    """bench/compile_scale.py in a subprocess (each size in fresh processes of its own): compile
    time per phase against graph size; smoke mode: the 100-op chain only."""
    out_json = os.path.join(cache_root, "compile_scale.json")
    cmd = [sys.executable, os.path.join(HERE, "compile_scale.py"), "--json", out_json,
           "--plot", os.path.join(out_dir, "compile_scale.png")]
    if args.smoke:
        cmd += ["--sizes", "100", "--shapes", "chain"]
    try:
        proc = subprocess.run(cmd, env=worker_env(cache_root, "scale"), capture_output=True, text=True,
                              timeout=120 if args.smoke else 1800)
    except subprocess.TimeoutExpired:
        return {"error": "timed out"}
    if not os.path.exists(out_json):
        return {"error": (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]}
    with open(out_json) as fh:
        result = json.load(fh)
    if os.path.exists(os.path.join(out_dir, "compile_scale.png")):
        result["plot"] = "compile_scale.png"
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny and quick (for make test)")
    ap.add_argument("--out", help="results folder (default bench/results/<timestamp>)")
    ap.add_argument("-k", action="append", help="only workloads whose name contains this")
    ap.add_argument("--sizes", action="append", help="only these size names (small, medium, large)")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--budget", type=float, default=0.4, help="seconds of timed calls per peer and workload")
    ap.add_argument("--first-call-limit", type=int, default=150,
                    help="seconds a peer's first call (compiling included) may take before it is failed")
    ap.add_argument("--time-budget", type=float, default=900,
                    help="seconds after which no further workload is started (the rest are reported "
                         "as skipped); 0: no limit")
    ap.add_argument("--no-latency", action="store_true", help="skip the cold/warm compile latency")
    ap.add_argument("--no-scale", action="store_true",
                    help="skip compile time against graph size (bench/compile_scale.py)")
    args = ap.parse_args()
    if args.smoke:
        args.first_call_limit = min(args.first_call_limit, 45)
    start = time.perf_counter()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    out_dir = args.out or os.path.join(HERE, "results", stamp)
    os.makedirs(out_dir, exist_ok=True)
    peers = args.peers.split(",")
    cache_root = tempfile.mkdtemp(prefix="kiln-bench-caches-")
    try:
        results = {"mode": "smoke" if args.smoke else "full", "timestamp": stamp, "peers": peers,
                   "machine": machine.info()}
        print(f"machine: {results['machine']['cpu']}, {results['machine']['nproc']} cpus", flush=True)
        if "jax_jit" in peers and results["machine"]["jax"] is None:
            print("jax is not installed: jax.jit is skipped (`make bench BENCH_JAX=1` installs it)")
        results["stream"] = stream.measure(cache_root, args.smoke)
        print(f"STREAM: {results['stream']}", flush=True)
        ov, err = run_json([sys.executable, os.path.join(HERE, "overheads.py")] + (["--quick"] if args.smoke else []),
                           worker_env(cache_root, "overheads"), 300)
        results["overheads"] = ov if ov is not None else {"error": err}
        print(f"overheads: {results['overheads']}", flush=True)
        if not args.smoke:
            # Training steps (MLP, CNN, GPT-style; eager and compiled) and the autograd overhead.
            out_json = os.path.join(cache_root, "training.json")
            proc = subprocess.run([sys.executable, os.path.join(HERE, "training_steps.py"), "--json", out_json],
                                  env=worker_env(cache_root, "training"), capture_output=True, text=True,
                                  timeout=1800)
            if proc.returncode == 0 and os.path.exists(out_json):
                with open(out_json) as fh:
                    results["training"] = json.load(fh)
            else:
                results["training"] = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
            print(f"training: {results['training']}", flush=True)
            # Dynamic shapes: compile counts over changing sizes, symbolic vs static kernels.
            out_json = os.path.join(cache_root, "dynamic_shapes.json")
            proc = subprocess.run([sys.executable, os.path.join(HERE, "dynamic_shapes.py"), "--json", out_json],
                                  env=worker_env(cache_root, "dynamic"), capture_output=True, text=True,
                                  timeout=900)
            if proc.returncode == 0 and os.path.exists(out_json):
                with open(out_json) as fh:
                    results["dynamic_shapes"] = json.load(fh)
            else:
                results["dynamic_shapes"] = {"error": (proc.stderr.strip().splitlines() or ["failed"])[-1]}
            print(f"dynamic shapes: {results['dynamic_shapes']}", flush=True)
        if args.no_latency:
            results["compile_latency"] = []
        elif args.smoke:
            results["compile_latency"] = compile_latency(SMOKE_WORKLOADS[:1], ["kiln"], cache_root, 120)
        else:
            results["compile_latency"] = compile_latency(LATENCY_WORKLOADS, ["kiln", "torch"], cache_root,
                                                        args.first_call_limit + 90)
        if not args.no_scale:
            results["compile_scale"] = compile_scale(args, cache_root, out_dir)
            print(f"compile scale: {results['compile_scale'].get('summary', results['compile_scale'])}", flush=True)
        deadline = start + args.time_budget if args.time_budget and not args.smoke else float("inf")
        results["workloads"] = measure_workloads(selected(args), peers, args, cache_root, deadline)
    finally:
        shutil.rmtree(cache_root, ignore_errors=True)
    results["wall_s"] = time.perf_counter() - start
    results["summary"] = report.summary(results)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    plots = report.plots(results, out_dir)
    text = report.markdown(results, plots)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(text)
    print(text)
    print(f"results in {out_dir} ({results['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
