#!/usr/bin/env python3
"""Training steps and autograd overhead: kiln against PyTorch, eager and compiled.

    python bench/training_steps.py [--steps N] [--models mlp,cnn,gpt] [--json out.json] [--no-torch-compile]

For an MLP, the small CNN and the GPT-style model of training_models.py (forward, loss,
backward, optimizer step), the median time per step and the peak resident memory of a process
that only builds the model and trains it (each (library, model) runs in its own subprocess, so
the peaks do not mix). "kiln-compiled" and "torch-compiled" compile the forward and the loss
(`kiln.compile` / `torch.compile` of the loss function: AOT autograd compiles the backward too;
the optimizer step runs eagerly in both); their first step (compiling, on an empty kiln cache
folder) is reported apart. "kiln-step" compiles the whole step function (zero_grad, loss,
backward, optimizer step: two graphs around the break at backward, docs/capture.md); its first
two steps compile (the second recompiles with the optimizer state it created). Then the autograd overhead per op: `x * y` on one-element tensors that
require grad, forward alone and forward + backward, in microseconds.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def make(lib, model):
    from training_models import cnn, gpt_classes

    T = __import__(lib)
    r = np.random.default_rng(0)
    nn = T.nn
    if model == "mlp":
        m = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10))
        opt = T.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        x = T.from_numpy(r.standard_normal((128, 256)).astype(np.float32))
        y = T.from_numpy(r.integers(0, 10, 128).astype(np.int64))
        return lambda: nn.functional.cross_entropy(m(x), y), opt
    if model == "cnn":
        m = cnn(T)
        opt = T.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
        x = T.from_numpy(r.standard_normal((32, 3, 16, 16)).astype(np.float32))
        y = T.from_numpy(r.integers(0, 10, 32).astype(np.int64))
        return lambda: nn.functional.cross_entropy(m(x), y), opt
    m = gpt_classes(T)(vocab_size=64, block_size=64, n_layer=4, n_head=4, n_embd=128)
    opt = m.configure_optimizers(0.1, 1e-3, (0.9, 0.95))
    idx = r.integers(0, 64, size=(8, 64)).astype(np.int64)
    x, y = T.from_numpy(idx.copy()), T.from_numpy(np.roll(idx, -1, 1).copy())
    return lambda: m(x, y)[1], opt


def worker(lib, model, steps):
    name, _, mode = lib.partition("-")
    if name == "torch":
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count())))
    loss_fn, opt = make(name, model)
    if mode == "compiled":
        loss_fn = __import__(name).compile(loss_fn)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn()
        loss.backward()
        opt.step()
        return loss

    if mode == "step":
        step = __import__(name).compile(step)
    times = []
    for i in range(steps + 3):
        t = time.perf_counter()
        loss = step()
        if i == 0:
            first = time.perf_counter() - t
        if i >= 3:
            times.append(time.perf_counter() - t)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"ms": statistics.median(times) * 1e3, "peak_mb": peak_kb / 1024,
                      "loss": float(loss.item()), "first_step_ms": first * 1e3}))


def overhead(lib):
    T = __import__(lib)
    x = T.ones(1, requires_grad=True)
    y = T.ones(1, requires_grad=True)
    n = 5000
    for _ in range(200):
        (x * y).backward()
    t = time.perf_counter()
    for _ in range(n):
        x * y
    fwd = (time.perf_counter() - t) / n * 1e6
    t = time.perf_counter()
    for _ in range(n):
        (x * y).backward()
    both = (time.perf_counter() - t) / n * 1e6
    return fwd, both


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--json")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--models", default="mlp,cnn,gpt",
                    help="comma-separated models to train (default: mlp,cnn,gpt)")
    ap.add_argument("--no-torch-compile", action="store_true",
                    help="skip torch.compile (its first training step compiles for tens of seconds)")
    a = ap.parse_args()
    if a.worker:
        worker(a.worker[0], a.worker[1], a.steps)
        return
    # torch is looked up, not imported: Linux keeps a process's peak RSS across exec, so the
    # workers must be forked from a small parent for their peaks to mean anything.
    import importlib.util

    import tempfile

    has_torch = importlib.util.find_spec("torch") is not None
    libs = ["kiln", "kiln-compiled"] + (["torch"] if has_torch else []) + (
        ["torch-compiled"] if has_torch and not a.no_torch_compile else []) + ["kiln-step"]
    results = {}
    print(f"{'model':8} {'library':14} {'ms/step':>9} {'peak MB':>9} {'loss':>9} {'first step ms':>14}")
    models = [m for m in a.models.split(",") if m]
    unknown = sorted(set(models) - {"mlp", "cnn", "gpt"})
    if unknown:
        ap.error(f"unknown model(s) {', '.join(unknown)}: expected mlp, cnn or gpt")
    for model in models:
        for lib in libs:
            with tempfile.TemporaryDirectory() as cache:  # compiled: a cold first step
                env = dict(os.environ, KILN_CACHE_DIR=cache, TORCHINDUCTOR_CACHE_DIR=cache,
                           TORCHINDUCTOR_COMPILE_THREADS="1")
                out = subprocess.run([sys.executable, __file__, "--steps", str(a.steps), "--worker", lib, model],
                                     capture_output=True, text=True, env=env)
            if out.returncode != 0:
                print(f"{model:8} {lib:14} failed: {out.stderr.strip().splitlines()[-1:]}")
                continue
            r = json.loads(out.stdout.strip().splitlines()[-1])
            results[f"{model}/{lib}"] = r
            print(f"{model:8} {lib:14} {r['ms']:9.2f} {r['peak_mb']:9.1f} {r['loss']:9.4f} {r['first_step_ms']:14.1f}")
    print("\nautograd overhead per op (x * y, one element, requires_grad):")
    for lib in [lib for lib in libs if "-" not in lib]:
        out = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
                              f"import training_steps as t; print(*t.overhead({lib!r}))"],
                             capture_output=True, text=True)
        if out.returncode != 0 or len(out.stdout.split()) != 2:
            print(f"  {lib:6} failed: {out.stderr.strip().splitlines()[-1:]}")
            continue
        fwd, both = (float(v) for v in out.stdout.split())
        results[f"overhead/{lib}"] = {"forward_us": fwd, "forward_backward_us": both}
        print(f"  {lib:6} forward {fwd:6.2f} us   forward + backward {both:7.2f} us")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
