"""A/B timing of one workload size on a busy machine: fresh processes of each peer, alternating.

    python bench/ab.py WORKLOAD SIZE [--rounds 3] [--calls 10] [--peers kiln,torch]
                       [--baseline PYTHON]

Each round runs every peer once, in turn, in a fresh process (compile, 3 warm-up calls, then
`calls` timed calls; the median is the round's number), so a change in the machine's load
affects all peers alike; the summary is the median over rounds and each peer's ratio to
torch.compile. `--baseline PYTHON` adds the peer "baseline": kiln compiled under another
checkout's interpreter (e.g. main's .venv/bin/python), to compare a branch with it side by side.
Prints the load average next to every round.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def one(library, workload, size, calls):
    sys.path.insert(0, HERE)
    from workloads import by_name

    if library == "kiln":
        import kiln as T

        T.config.strict = True
    else:
        import torch as T
    w = by_name(workload)
    fn, args = w.build(T, w.sizes[size])
    compiled = T.compile(fn)
    for _ in range(3):
        compiled(*args)
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        compiled(*args)
        times.append(time.perf_counter() - t0)
    print(json.dumps(times))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("workload")
    ap.add_argument("size")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--peers", default="kiln,torch")
    ap.add_argument("--baseline", help="a python whose kiln is the baseline peer")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        return one(a.one, a.workload, a.size, a.calls)
    peers = a.peers.split(",") + (["baseline"] if a.baseline else [])
    env = dict(os.environ, TORCHINDUCTOR_COMPILE_THREADS="1")
    medians = {p: [] for p in peers}
    for r in range(a.rounds):
        for p in peers:
            python = a.baseline if p == "baseline" else sys.executable
            cmd = [python, os.path.abspath(__file__), a.workload, a.size, "--calls", str(a.calls),
                   "--one", "torch" if p == "torch" else "kiln"]
            out = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if out.returncode:
                sys.exit(f"{p} failed:\n{out.stderr[-3000:]}")
            medians[p].append(statistics.median(json.loads(out.stdout.strip().splitlines()[-1])) * 1e3)
        print(f"round {r}: " + "  ".join(f"{p} {medians[p][-1]:.2f} ms" for p in peers) +
              f"  (load {os.getloadavg()[0]:.2f})", flush=True)
    med = {p: statistics.median(v) for p, v in medians.items()}
    line = "median: " + "  ".join(f"{p} {med[p]:.2f} ms" for p in peers)
    if "torch" in med:
        line += "  " + "  ".join(f"{p}/torch {med[p] / med['torch']:.3f}" for p in peers if p != "torch")
    print(line)


if __name__ == "__main__":
    main()
