#!/usr/bin/env python3
"""Bytes saved for backward by AOT autograd's partitioners: kiln's min-cut and default against
PyTorch's min-cut (functorch's min_cut_rematerialization_partition), on the same modules.

    python bench/aot_saved.py [--json out.json]

PyTorch's side counts the tensors its compiled backward receives (the forward's saved values,
tangents excluded) through aot_module with a recording backward compiler; kiln's side is the
partition kiln.explain reports (aot.plan_training). Modules: an MLP with GELU, a LayerNorm + GELU
block, and one GPT block of bench/training_models.py.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def modules(T):
    from training_models import gpt_classes

    nn = T.nn
    r = np.random.default_rng(0)
    x = T.from_numpy(r.standard_normal((64, 128)).astype(np.float32))
    mlp = nn.Sequential(nn.Linear(128, 512), nn.GELU(), nn.Linear(512, 128))
    ln_gelu = nn.Sequential(nn.LayerNorm(128), nn.Linear(128, 256), nn.GELU())
    gpt = gpt_classes(T)(vocab_size=64, block_size=32, n_layer=1, n_head=4, n_embd=128)
    block = gpt.transformer.h[0]
    xb = T.from_numpy(r.standard_normal((4, 32, 128)).astype(np.float32))
    return {"mlp_gelu": (mlp, x), "layernorm_gelu": (ln_gelu, x), "gpt_block": (block, xb)}


def kiln_saved(partitioner):
    import kiln
    from kiln.compiler import aot

    out = {}
    for name, (module, x) in modules(kiln).items():
        captured = []

        def backend(gm, example_inputs):
            captured.append((gm, example_inputs))
            return gm.forward

        with kiln.no_grad():  # capture only: the graph is partitioned below, with grad
            kiln.compile(lambda m, x: m(x).sum(), backend=backend)(module, x)
        gm, examples = captured[0]
        attrs = {n.target: getattr_path(gm, n.target) for n in gm.graph.nodes if n.op == "get_attr"}
        _, _, part = aot.plan_training(gm, examples, attrs, partitioner)
        out[name] = {"tensors": len(part.saved_inputs) + part.num_saved, "bytes": part.saved_bytes}
    return out


def getattr_path(obj, path):
    for atom in path.split("."):
        obj = getattr(obj, atom)
    return obj


def torch_saved():
    import torch
    from functorch.compile import aot_module, make_boxed_func, min_cut_rematerialization_partition

    out = {}
    for name, (module, x) in modules(torch).items():
        received = {}

        def fw_compiler(gm, example_inputs):
            return make_boxed_func(gm)

        def bw_compiler(gm, example_inputs):
            tangents = [n for n in gm.graph.nodes if n.op == "placeholder" and "tangents" in n.name]
            saved = example_inputs[:len(example_inputs) - len(tangents)]
            tensors = [t for t in saved if isinstance(t, torch.Tensor)]
            received["tensors"] = len(tensors)
            received["bytes"] = sum(t.numel() * t.element_size() for t in tensors)
            return make_boxed_func(gm)

        compiled = aot_module(module, fw_compiler=fw_compiler, bw_compiler=bw_compiler,
                              partition_fn=min_cut_rematerialization_partition)
        compiled(x).sum().backward()
        out[name] = dict(received)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json")
    a = ap.parse_args()
    results = {"kiln min_cut": kiln_saved("min_cut"), "kiln default": kiln_saved("default")}
    try:
        results["torch min_cut"] = torch_saved()
    except ImportError as error:
        print(f"torch: skipped ({error})")
    names = list(results["kiln min_cut"])
    print(f"{'module':16}" + "".join(f"{peer:>24}" for peer in results))
    for name in names:
        cells = [f"{r[name]['tensors']:3d} t {r[name]['bytes']:>12,} B" if name in r else "-" for r in results.values()]
        print(f"{name:16}" + "".join(f"{c:>24}" for c in cells))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
