#!/usr/bin/env python3
"""Eager nn.functional ops (tier 2) in kiln and PyTorch: forward time per call, same inputs.

    activations      leaky_relu, elu, softplus, mish, hardswish on 1M float32 elements
    losses           cross_entropy (GPT-style: 4096 x 512 logits, ignore_index=-1, and a tiny 8 x 16 call
                     for per-call overhead), mse_loss, binary_cross_entropy_with_logits
    attention        scaled_dot_product_attention (8 x 8 heads, 256 x 64, causal and with a bool mask)
    norm             rms_norm over 4096 x 1024
    pad              F.pad constant and reflect on 32 x 64 x 64 x 64

Medians of repeated timings after a warm-up; ratio = kiln / torch (below 1: kiln is faster).
Set OMP_NUM_THREADS on a loaded machine (both libraries then use that many threads).
"""
import argparse
import json
import os
import statistics
import timeit

import numpy as np


def per_call_seconds(fn, repeat=5, budget=0.3):
    fn()
    number = max(1, int(budget / max(timeit.timeit(fn, number=1), 1e-7) / repeat))
    return statistics.median(timeit.repeat(fn, number=number, repeat=repeat)) / number


def workloads(lib):
    r = np.random.default_rng(0)
    F = lib.nn.functional
    t = lambda a: lib.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    x = t(r.standard_normal(1 << 20).astype(np.float32))
    logits = t(r.standard_normal((4096, 512)).astype(np.float32))
    labels = r.integers(0, 512, 4096)
    labels[::7] = -1
    labels = t(labels)
    small, small_labels = t(r.standard_normal((8, 16)).astype(np.float32)), t(r.integers(0, 16, 8))
    y = t(r.standard_normal(1 << 20).astype(np.float32))
    q, k, v = (t(r.standard_normal((8, 8, 256, 64)).astype(np.float32)) for _ in range(3))
    mask = t(r.random((256, 256)) > 0.2)
    h = t(r.standard_normal((4096, 1024)).astype(np.float32))
    g = t(r.standard_normal(1024).astype(np.float32))
    img = t(r.standard_normal((32, 64, 64, 64)).astype(np.float32))
    return {
        "leaky_relu 1M": lambda: F.leaky_relu(x, 0.1),
        "elu 1M": lambda: F.elu(x),
        "softplus 1M": lambda: F.softplus(x),
        "mish 1M": lambda: F.mish(x),
        "hardswish 1M": lambda: F.hardswish(x),
        "cross_entropy 4096x512 ignore=-1": lambda: F.cross_entropy(logits, labels, ignore_index=-1),
        "cross_entropy 8x16 (overhead)": lambda: F.cross_entropy(small, small_labels),
        "mse_loss 1M": lambda: F.mse_loss(x, y),
        "bce_with_logits 1M": lambda: F.binary_cross_entropy_with_logits(x, y.sigmoid()),
        "sdpa causal 8x8x256x64": lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True),
        "sdpa bool mask 8x8x256x64": lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask),
        "rms_norm 4096x1024": lambda: F.rms_norm(h, [1024], g),
        "pad constant 32x64x64x64": lambda: F.pad(img, (1, 1, 1, 1)),
        "pad reflect 32x64x64x64": lambda: F.pad(img, (1, 1, 1, 1), mode="reflect"),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", help="also write the numbers here")
    args = parser.parse_args()
    import kiln

    libs = {"kiln": kiln}
    try:
        import torch

        torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1)))
        libs["torch"] = torch
    except ImportError:
        pass
    results = {name: {n: per_call_seconds(fn) for n, fn in workloads(lib).items()} for name, lib in libs.items()}
    print(f"{'workload':36} {'kiln us':>10} {'torch us':>10} {'ratio':>6}")
    for n, sec in results["kiln"].items():
        ref = results.get("torch", {}).get(n)
        print(f"{n:36} {sec * 1e6:10.1f} " + (f"{ref * 1e6:10.1f} {sec / ref:6.2f}" if ref else f"{'-':>10} {'-':>6}"))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
