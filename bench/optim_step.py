#!/usr/bin/env python3
"""Optimizer step time: kiln.optim against torch.optim on the same parameters and gradients.

    .venv/bin/python bench/optim_step.py [--threads N] [--repeat R]

The "model" is 50 float32 parameters of mixed sizes (a small GPT-like mix: 16 matrices of 64x256
and 256x64, 16 vectors of 256, 12 of 64, embeddings of 1000x64 and 128x64, 4 scalars; 339,204
elements). Each optimizer config (SGD, SGD momentum, Adam, AdamW, AdamW amsgrad) runs a warm-up,
then the median time of one step() over R repeats is reported, after the largest difference from
torch's parameters after 3 steps. torch runs its default CPU path (single-tensor: foreach is off
on the CPU) and foreach=True; kiln runs its default path (Adam: the _fused_adam_ kernel per
parameter) and, for Adam, fused=False (torch's ops one by one); "kiln compiled" is
kiln.compile(lambda: opt.step()) (one graph of every parameter's update, docs/capture.md).
"""
import argparse
import json
import os
import statistics
import time

import numpy as np

SHAPES = ([(64, 256), (256, 64)] * 8 + [(256,)] * 16 + [(64,)] * 12 + [(1000, 64), (128, 64)]
          + [()] * 4)
CONFIGS = [
    ("SGD", dict(lr=0.01)),
    ("SGD", dict(lr=0.01, momentum=0.9, weight_decay=1e-4)),
    ("Adam", dict(lr=1e-3)),
    ("AdamW", dict(lr=1e-3, weight_decay=0.1)),
    ("AdamW", dict(lr=1e-3, amsgrad=True)),
]


def make(lib, cls_name, kwargs):
    rng = np.random.default_rng(0)
    params, grads = [], []
    for shape in SHAPES:
        params.append(lib.tensor(rng.standard_normal(shape).astype(np.float32).tolist()))
        grads.append(lib.tensor(rng.standard_normal(shape).astype(np.float32).tolist()))
    for p, g in zip(params, grads):
        p.grad = g
    return params, getattr(lib.optim, cls_name)(params, **kwargs)


def time_steps(opt, repeat, step=None):
    step = step or opt.step
    for _ in range(5):
        step()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "1")))
    ap.add_argument("--repeat", type=int, default=50)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import kiln
    import torch

    torch.set_num_threads(args.threads)
    n = sum(int(np.prod(s)) for s in SHAPES)
    print(f"{len(SHAPES)} params, {n} elements, {args.threads} thread(s), median of {args.repeat} steps")
    rows = []
    for cls_name, kwargs in CONFIGS:
        label = f"{cls_name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})"
        kp, kopt = make(kiln, cls_name, kwargs)
        tp, topt = make(torch, cls_name, kwargs)
        for _ in range(3):
            kopt.step()
            topt.step()
        worst = max(float(np.max(np.abs(k.numpy() - t.numpy()))) for k, t in zip(kp, tp))
        kt = time_steps(kopt, args.repeat)
        tt = time_steps(topt, args.repeat)
        _, fopt = make(torch, cls_name, dict(kwargs, foreach=True))
        ft = time_steps(fopt, args.repeat)
        _, copt = make(kiln, cls_name, kwargs)
        # One lambda code object serves every row: without a reset, the rows after the
        # recompile limit would time eager steps under the "compiled" label.
        kiln.compiler.reset()
        ct = time_steps(copt, args.repeat, kiln.compile(lambda copt=copt: copt.step()))
        row = dict(config=label, kiln_ms=kt * 1e3, kiln_compiled_ms=ct * 1e3, torch_ms=tt * 1e3,
                   torch_foreach_ms=ft * 1e3, max_abs_diff=worst)
        line = (f"{label:48s} kiln {kt * 1e3:7.3f} ms  compiled {ct * 1e3:7.3f} ms  torch {tt * 1e3:7.3f} ms  "
                f"torch foreach {ft * 1e3:7.3f} ms  kiln/torch {kt / tt:5.2f}  max|diff| {worst:.1e}")
        if cls_name != "SGD":
            _, oopt = make(kiln, cls_name, dict(kwargs, fused=False))
            row["kiln_unfused_ms"] = time_steps(oopt, args.repeat) * 1e3
            line += f"  kiln fused=False {row['kiln_unfused_ms']:7.3f} ms"
        rows.append(row)
        print(line)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
