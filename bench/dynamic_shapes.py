#!/usr/bin/env python3
"""Dynamic shapes (issue 14): how often a function called at changing sizes compiles, and what
a kernel compiled over symbolic sizes costs against the same kernel compiled for one size.

    compiles  the conformance program dynamic_batch (softmax(x @ w, -1).sum(0) at batch sizes
              4, 8, 16, 33, 100) and a GPT-style block (bench/workloads.py transformer_block,
              d=64, 4 heads) at sequence lengths 8, 9, ..., 64 through kiln.compile: graphs
              compiled (a counting backend around inductor) and total wall time of the calls.
              Targets: at most 2 compiles each.
    kernels   loop programs over symbolic sizes (row softmax, layer-norm statistics, linear +
              bias) compiled once, against the same programs with the sizes written in
              (static), at the same sizes: median time of each (alternating calls, after a
              warm-up) and the ratio symbolic / static; and the GPT-style block through
              kiln.compile with dynamic=True against dynamic=False at seq 64 (end to end,
              capture and lowering over symbols). Target: <= 1.15.

    training  a GPT-style block with an MSE loss (d=64, 4 heads, batch 2) trained through
              kiln.compile (forward + backward, AOT autograd) at sequence lengths 8, 9, ..., 32
              with automatic dynamic shapes against dynamic=False: training graphs compiled and
              total wall time of the steps; then the time per step (forward + backward) at seq
              32 of the symbolic and the static compile (median, alternating). Target: at most
              2 compiles.

    python bench/dynamic_shapes.py [--part compiles,kernels,training] [--repeat N] [--json OUT]
"""
import argparse
import json
import os
import re
import statistics
import sys
import time
import types

import numpy as np

import kiln
from kiln._C import _codegen
from kiln.compiler.backends import lookup_backend

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from workloads import _transformer_block  # noqa: E402


def counting_backend():
    inductor = lookup_backend("inductor")
    count = [0]

    def backend(gm, example_inputs, **kwargs):
        count[0] += 1
        return inductor(gm, example_inputs, **kwargs)

    # As inductor, it compiles graphs over size symbols (kiln.compile's dynamic shapes).
    backend.supports_dynamic_shapes = True
    return backend, count


def compiles_over(fn, calls, dynamic=None):
    kiln.compiler.reset()
    backend, count = counting_backend()
    compiled = kiln.compile(fn, backend=backend, dynamic=dynamic)
    start = time.perf_counter()
    for args in calls:
        compiled(*args)
    return {"compiles": count[0], "calls": len(calls), "total_s": time.perf_counter() - start}


def dynamic_batch():
    r = np.random.default_rng(13)
    w = kiln.from_numpy(r.standard_normal((32, 16)).astype(np.float32))

    def fn(x):
        return kiln.softmax(x @ w, dim=-1).sum(dim=0)

    calls = [(kiln.from_numpy(r.standard_normal((n, 32)).astype(np.float32)),) for n in (4, 8, 16, 33, 100)]
    return compiles_over(fn, calls)


def gpt_block():
    fn, _ = _transformer_block(kiln, (1, 8, 64, 4))
    calls = [_transformer_block(kiln, (1, seq, 64, 4))[1] for seq in range(8, 65)]
    return compiles_over(fn, calls)


# Each program over size symbols, and the sizes it is timed at.
KERNELS = {
    "softmax_rows": ("""program @softmax(%x: f32[s0, s1]) {
  kernel @k0 {
    %amax: f32[s0, 1] = reduction max [i0: s0] over [r0: s1] {
      %0 = load %x[s1*i0 + r0]
      reduce %0
    }
    %sum: f32[s0, 1] = reduction sum [i0: s0] over [r0: s1] {
      %0 = load %x[s1*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
    %out: f32[s0, s1] = pointwise [i0: s0, i1: s1] {
      %0 = load %x[s1*i0 + i1]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      %4 = load %sum[i0]
      %5 = div %3, %4
      store %5
    }
  }
  output %out
}
""", {"s0": 1024, "s1": 1000}),
    "layer_norm_stats": ("""program @ln(%x: f32[s0, s1]) {
  kernel @k0 {
    %mean: f32[s0, 1] = reduction welford_mean [i0: s0] over [r0: s1] {
      %0 = load %x[s1*i0 + r0]
      reduce %0
    }
    %var: f32[s0, 1] = reduction welford_var [i0: s0] over [r0: s1] {
      %0 = load %x[s1*i0 + r0]
      reduce %0
    }
    %out: f32[s0, s1] = pointwise [i0: s0, i1: s1] {
      %0 = load %x[s1*i0 + i1]
      %1 = load %mean[i0]
      %2 = sub %0, %1
      %3 = load %var[i0]
      %4 = constant 1e-05 : f32
      %5 = add %3, %4
      %6 = rsqrt %5
      %7 = mul %2, %6
      store %7
    }
  }
  output %out
}
""", {"s0": 2048, "s1": 768}),
    "linear_bias_gelu_tanh": ("""program @linear(%x: f32[s0, 256], %w: f32[256, 512], %b: f32[512]) {
  kernel @k0 {
    %mm: f32[s0, 512] = extern mm(%x, %w)
    %out: f32[s0, 512] = pointwise [i0: s0, i1: 512] {
      %0 = load %mm[512*i0 + i1]
      %1 = load %b[i1]
      %2 = add %0, %1
      %3 = tanh %2
      store %3
    }
  }
  output %out
}
""", {"s0": 1000}),
}


def _fresh_function(fn):
    """fn with a code object of its own (cache entries live on the code object, so two
    kiln.compile of one function would share them)."""
    code = fn.__code__.replace(co_name=fn.__code__.co_name + "_copy")
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def compiled_ratio(repeat, seq=64):
    """The GPT-style block compiled over symbols against compiled for its sizes, both called
    at seq: median time of each and the ratio. The symbolic one is kiln.compile's default
    (automatic dynamic: called at seq - 1 first, then at seq the sequence dims become
    symbolic), so only the sequence length is a symbol (dynamic=True would also make the
    weights' dims symbols, sharing the sequence's where sizes coincide)."""
    kiln.compiler.reset()
    fn, args = _transformer_block(kiln, (1, seq, 64, 4))
    backend, count = counting_backend()
    symbolic = kiln.compile(_fresh_function(fn), backend=backend)
    symbolic(*_transformer_block(kiln, (1, seq - 1, 64, 4))[1])
    static = kiln.compile(_fresh_function(fn), backend=backend, dynamic=False)
    a, b = symbolic(*args), static(*args)
    np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-4, atol=1e-4)
    times = {"symbolic": [], "static": []}
    for _ in range(3):
        symbolic(*args), static(*args)
    for _ in range(repeat):
        for key, f in (("symbolic", symbolic), ("static", static)):
            t = time.perf_counter()
            f(*args)
            times[key].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    return {"sizes": {"seq": seq}, "symbolic_ms": med["symbolic"] * 1e3, "static_ms": med["static"] * 1e3,
            "ratio": med["symbolic"] / med["static"], "compiles": count[0]}


class _Block(kiln.nn.Module):
    """A pre-norm GPT block (causal attention, GELU MLP) returning an MSE loss."""

    def __init__(self, d=64, heads=4):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = kiln.nn.LayerNorm(d), kiln.nn.LayerNorm(d)
        self.qkv, self.proj = kiln.nn.Linear(d, 3 * d), kiln.nn.Linear(d, d)
        self.fc, self.out = kiln.nn.Linear(d, 4 * d), kiln.nn.Linear(4 * d, d)

    def forward(self, x, target):
        F = kiln.nn.functional
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = self.qkv(self.ln1(x)).reshape(b, s, 3, self.heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1)) * (1.0 / hd ** 0.5)
        mask = kiln.ones(s, s, dtype=kiln.bool).triu(1)
        a = kiln.softmax(a.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, s, d))
        x = x + self.out(F.gelu(self.fc(self.ln2(x))))
        return F.mse_loss(x, target)


def _training_compiles():
    """A counter of the training graphs kiln.compile compiles (AOT autograd)."""
    from kiln.compiler import frame_callback

    count = [0]
    original = frame_callback.FrameCallback._compile_training

    def counting(self, *args, **kwargs):
        count[0] += 1
        return original(self, *args, **kwargs)

    frame_callback.FrameCallback._compile_training = counting
    return count


def _step(model, x, y):
    for p in model.parameters():
        p.grad = None
    loss = model(x, y)
    loss.backward()
    return loss


def training(repeat, seqs=range(8, 33), at=32):
    r = np.random.default_rng(3)

    def batch(s):
        return tuple(kiln.from_numpy(r.standard_normal((2, s, 64)).astype(np.float32)) for _ in range(2))

    import tempfile

    count = _training_compiles()
    out = {}
    for label, dynamic in (("symbolic", None), ("static", False)):
        # Cold compiles: an empty kernel and graph cache.
        kiln.config.cache_dir = tempfile.mkdtemp(prefix=f"kiln-bench-{label}-")
        kiln.compiler.reset()
        kiln.manual_seed(0)
        run = kiln.compile(_Block(), dynamic=dynamic)
        count[0] = 0
        start = time.perf_counter()
        for s in seqs:
            _step(run, *batch(s))
        out[label] = {"compiles": count[0], "steps": len(seqs), "total_s": time.perf_counter() - start}
    # Per step at one size: the static compile beyond the recompile limit runs parts eagerly, so
    # both are compiled anew (the symbolic one at at - 1, then at at: over the sequence symbol).
    kiln.compiler.reset()
    args = batch(at)
    runs = {}
    for label, dynamic in (("symbolic", None), ("static", False)):
        kiln.manual_seed(0)
        runs[label] = kiln.compile(_Block(), dynamic=dynamic)
    _step(runs["symbolic"], *batch(at - 1))
    times = {"symbolic": [], "static": []}
    for _ in range(3):
        for key in times:
            _step(runs[key], *args)
    for _ in range(repeat):
        for key in times:
            t = time.perf_counter()
            _step(runs[key], *args)
            times[key].append(time.perf_counter() - t)
    med = {k: statistics.median(v) for k, v in times.items()}
    out["per_step"] = {"seq": at, "symbolic_ms": med["symbolic"] * 1e3, "static_ms": med["static"] * 1e3,
                       "ratio": med["symbolic"] / med["static"]}
    return out


def static_text(text, sizes):
    for sym, value in sizes.items():
        text = re.sub(rf"\b{sym}\b", str(value), text)
    return text


def compiled(text, hints=None):
    scheduled, _ = _codegen.schedule(text)
    path, _ = _codegen.compile_source(_codegen.emit_cpp(scheduled, size_hints=hints or {}))
    return _codegen.CompiledKernel(path, "kiln_entry", scheduled)


def kernel_ratios(repeat):
    rows = {}
    for name, (text, sizes) in KERNELS.items():
        symbolic, static = compiled(text, sizes), compiled(static_text(text, sizes))
        inputs = []
        for m in re.finditer(r"%(\w+): (f32)\[([^\]]*)\]", text.split("{")[0]):
            shape = [sizes.get(d.strip(), None) or int(d) for d in m.group(3).split(",")]
            inputs.append(kiln.from_numpy(np.random.default_rng(0).standard_normal(shape).astype(np.float32)))
        a, b = symbolic(*inputs), static(*inputs)
        for x, y in zip(a, b):
            np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-5, atol=1e-5)
        times = {"symbolic": [], "static": []}
        for _ in range(3):
            symbolic(*inputs), static(*inputs)
        for _ in range(repeat):
            for key, k in (("symbolic", symbolic), ("static", static)):
                t = time.perf_counter()
                k(*inputs)
                times[key].append(time.perf_counter() - t)
        med = {k: statistics.median(v) for k, v in times.items()}
        rows[name] = {"sizes": sizes, "symbolic_ms": med["symbolic"] * 1e3, "static_ms": med["static"] * 1e3,
                      "ratio": med["symbolic"] / med["static"]}
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", default="compiles,kernels,training")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args()
    parts = args.part.split(",")
    out = {"threads": os.environ.get("OMP_NUM_THREADS", "all")}
    if "compiles" in parts:
        out["dynamic_batch"] = dynamic_batch()
        out["gpt_block_seq_8_to_64"] = gpt_block()
        for key in ("dynamic_batch", "gpt_block_seq_8_to_64"):
            r = out[key]
            print(f"{key:24s} {r['compiles']:3d} compiles over {r['calls']} calls, {r['total_s']:.2f} s "
                  f"(target: <= 2 compiles)")
    if "kernels" in parts:
        out["kernels"] = kernel_ratios(args.repeat)
        out["kernels"]["gpt_block_compiled"] = compiled_ratio(args.repeat)
        for name, r in out["kernels"].items():
            print(f"{name:24s} symbolic {r['symbolic_ms']:8.3f} ms  static {r['static_ms']:8.3f} ms  "
                  f"ratio {r['ratio']:.3f} (target <= 1.15) at {r['sizes']}")
    if "training" in parts:
        out["training_block_seq_8_to_32"] = t = training(args.repeat)
        for key in ("symbolic", "static"):
            print(f"training {key:9s} {t[key]['compiles']:3d} compiles over {t[key]['steps']} steps, "
                  f"{t[key]['total_s']:.2f} s" + (" (target: <= 2 compiles)" if key == "symbolic" else ""))
        p = t["per_step"]
        print(f"training step at seq {p['seq']}: symbolic {p['symbolic_ms']:.3f} ms  static {p['static_ms']:.3f} ms  "
              f"ratio {p['ratio']:.3f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
