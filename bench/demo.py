#!/usr/bin/env python3
"""`make run`: kiln on a real workload, checked and timed against numpy/PyTorch.

It builds a small transformer-style MLP block (LayerNorm -> Linear -> GELU(tanh) -> Linear, with a
residual connection) with kiln.nn, runs it on a batch of data, checks the result against a
numpy implementation of the same math, captures it with kiln.compile and shows the graph at
each stage that exists today (captured, Core ATen, Prims, the loop program), and times kiln
eager, kiln compiled, numpy, and PyTorch eager (when installed) on the same inputs.
"""
import math
import sys
import time

import numpy as np

import kiln
from kiln import nn


class MLPBlock(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, hidden)
        self.act = nn.GELU(approximate="tanh")
        self.down = nn.Linear(hidden, dim)

    def forward(self, x):
        return x + self.down(self.act(self.up(self.norm(x))))


def numpy_block(x, p):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    h = (x - mu) / np.sqrt(var + 1e-5) * p["norm.weight"] + p["norm.bias"]
    h = h @ p["up.weight"].T + p["up.bias"]
    h = 0.5 * h * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h**3)))
    return x + h @ p["down.weight"].T + p["down.bias"]


def attributes_as_inputs(graph):
    """The graph with its get_attr nodes (parameters) turned into inputs, as the lowering
    takes them."""
    g = graph.clone()
    first = next(n for n in g.nodes if n.op not in ("placeholder", "get_attr"))
    for n in [n for n in g.nodes if n.op == "get_attr"]:
        with g.inserting_before(first):
            p = g.placeholder(n.target.replace(".", "_") + "_in", type_expr=n.type)
        n.replace_all_uses_with(p)
        g.erase_node(n)
    return g


def median_ms(fn, runs=20):
    fn()
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    ts.sort()
    return ts[len(ts) // 2] * 1e3


def main():
    kiln.manual_seed(0)
    batch, dim, hidden = 256, 256, 1024
    block = MLPBlock(dim, hidden)
    print(block)
    rng = np.random.default_rng(0)
    x_np = rng.standard_normal((batch, dim)).astype(np.float32)
    x = kiln.from_numpy(x_np)

    print("\n== a few eager ops ==")
    a = kiln.arange(6, dtype=kiln.float32).reshape(2, 3)
    print("a =", a)
    print("a.softmax(-1) =", a.softmax(-1))
    print("a.T @ a =", a.t() @ a)
    print("(a > 2).sum() =", (a > 2).sum(), " a.mean(0) =", a.mean(0))

    print("\n== the block on a", tuple(x.shape), "batch ==")
    with kiln.no_grad():
        y = block(x)
    params = {k: v.numpy() for k, v in block.state_dict().items()}
    ref = numpy_block(x_np, params)
    err = float(np.abs(y.numpy() - ref).max())
    print(f"output {tuple(y.shape)} {y.dtype}, max |kiln - numpy| = {err:.2e}")
    assert err < 1e-3, "kiln disagrees with numpy"

    print("\n== kiln.compile: the captured graph and its stages ==")
    graphs = []

    def keep(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    compiled = kiln.compile(block, backend=keep)
    with kiln.no_grad():
        t0 = time.perf_counter()
        yc = compiled(x)
        t_capture = (time.perf_counter() - t0) * 1e3
    assert float(np.abs(yc.numpy() - y.numpy()).max()) == 0.0, "the captured graph disagrees with eager"
    gm = graphs[0]
    print(f"captured in {t_capture:.1f} ms (first call, including one run), {len(graphs)} graph:")
    print(gm.graph)
    core = kiln.fx.retrace(gm.graph, "core_aten")
    prims = kiln.fx.retrace(gm.graph, "prims")
    print(f"Core ATen: {len(list(core.nodes))} nodes; Prims: {len(list(prims.nodes))} nodes, e.g. the layer norm:")
    lines = str(prims).splitlines()
    print("\n".join(lines[:12]) + "\n  ...")
    program = kiln._C._codegen.lower(attributes_as_inputs(prims))
    print("loop program (the prims lowered; fusion into kernels comes with the scheduler):")
    print("\n".join(program.splitlines()[:16]) + "\n  ...")

    print("\n== timings (median of 20 runs) ==")
    with kiln.no_grad():
        t_kiln = median_ms(lambda: block(x))
    t_np = median_ms(lambda: numpy_block(x_np, params), runs=5)
    with kiln.no_grad():
        t_compiled = median_ms(lambda: compiled(x))
    print(f"kiln eager   {t_kiln:8.3f} ms")
    print(f"kiln.compile {t_compiled:8.3f} ms   (backend that runs the captured graph as is)")
    print(f"numpy        {t_np:8.3f} ms   (kiln is {t_np / t_kiln:.1f}x faster)")
    try:
        import torch

        tnorm, tup, tdown = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, hidden), torch.nn.Linear(hidden, dim)
        with torch.no_grad():
            for mod, prefix in ((tnorm, "norm"), (tup, "up"), (tdown, "down")):
                mod.weight.copy_(torch.from_numpy(params[prefix + ".weight"]))
                mod.bias.copy_(torch.from_numpy(params[prefix + ".bias"]))
        tx = torch.from_numpy(x_np)

        def torch_block():
            with torch.no_grad():
                return tx + tdown(torch.nn.functional.gelu(tup(tnorm(tx)), approximate="tanh"))

        terr = float(np.abs(torch_block().numpy() - y.numpy()).max())
        t_torch = median_ms(torch_block)
        print(f"torch eager  {t_torch:8.3f} ms   (kiln/torch time ratio {t_kiln / t_torch:.2f}; max |diff| {terr:.2e})")
    except ImportError:
        print("torch not installed: skipping the PyTorch comparison")
    stats = kiln.memory_stats()
    print(f"\nkiln allocator: {stats['allocated_bytes.all.current'] / 2**20:.1f} MiB live, "
          f"peak {stats['allocated_bytes.all.peak'] / 2**20:.1f} MiB, "
          f"{stats['allocation.all.cache_hits']}/{stats['allocation.all.allocated']} allocations from cache")
    return 0


if __name__ == "__main__":
    sys.exit(main())
