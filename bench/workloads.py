"""The benchmark workloads, each written once against a tensor library module `T` (kiln or torch).

A workload's `build(T, shape)` returns `(fn, args)`; its sizes are named "small" (cache-resident:
the working set fits in L2) and "large" (memory-bound: tens of MB, far beyond L2), sometimes also
"medium". `jax(jnp, jax, args)` (optional) gives the same computation for jax.jit, for the
workloads whose translation to jax.numpy is a one-liner; the others are skipped for JAX.
The conformance programs (../shared/conformance/programs) are added by `conformance_workloads`.
"""
import glob
import importlib.util
import math
import os
import sys
from dataclasses import dataclass, field

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CONFORMANCE = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "conformance"))


def randn(T, r, *shape, scale=1.0):
    """Same float32 data for every library (a fresh copy, so a workload may not alias another's)."""
    return T.from_numpy((r.standard_normal(shape) * scale).astype(np.float32))


@dataclass
class Workload:
    name: str
    sizes: dict                 # size name -> shape parameters passed to build
    build: object               # build(T, params) -> (fn, args)
    jax: object = None          # jax(jnp, jax) -> fn taking numpy-converted args, or None
    rtol: float = 1e-4
    atol: float = 1e-5
    tags: list = field(default_factory=list)
    native_size: str = ""       # conformance programs: the program's own input size, described


def _pointwise(T, p):
    r = np.random.default_rng(1)
    x, y = randn(T, r, *p), randn(T, r, *p)

    def fn(x, y):
        return ((x * 1.5 + y).sigmoid() * x - y.tanh() * 0.5).relu()

    return fn, (x, y)


def _jax_pointwise(jnp, jax):
    return lambda x, y: jax.nn.relu(jax.nn.sigmoid(x * 1.5 + y) * x - jnp.tanh(y) * 0.5)


def ten_ops(x, y):
    """Ten pointwise ops (issue 6's compile-latency function; bench/compile_breakdown.py too).
    Tensor methods only, so the same function runs with either library."""
    a = x * y
    b = a + 1.0
    c = b.tanh()
    d = c * 0.5
    e = d - x
    f = e.exp()
    g = y.abs()
    h = g + 1.0
    i = f / h
    return i.sigmoid()


def _ten_ops(T, p):
    r = np.random.default_rng(4)
    return ten_ops, (randn(T, r, *p), randn(T, r, *p))


def _jax_ten_ops(jnp, jax):
    return lambda x, y: jax.nn.sigmoid(jnp.exp(jnp.tanh(x * y + 1.0) * 0.5 - x) / (jnp.abs(y) + 1.0))


def _softmax(T, p):
    x = randn(T, np.random.default_rng(2), *p)
    return (lambda x: T.softmax(x, dim=-1)), (x,)


def _log_softmax(T, p):
    x = randn(T, np.random.default_rng(3), *p)
    return (lambda x: T.log_softmax(x, dim=-1)), (x,)


def _layer_norm(T, p):
    r = np.random.default_rng(4)
    x, w, b = randn(T, r, *p), randn(T, r, p[-1]), randn(T, r, p[-1])

    def fn(x, w, b):
        return T.nn.functional.layer_norm(x, [x.shape[-1]], w, b, 1e-5)

    return fn, (x, w, b)


def _jax_layer_norm(jnp, jax):
    def fn(x, w, b):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / jnp.sqrt(var + 1e-5) * w + b

    return fn


def _rms_swiglu(T, p):
    rows, d, hidden = p
    r = np.random.default_rng(5)
    x, g = randn(T, r, rows, d), randn(T, r, d)
    w1, w3 = randn(T, r, d, hidden, scale=d ** -0.5), randn(T, r, d, hidden, scale=d ** -0.5)

    def fn(x, g, w1, w3):
        h = x * T.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * g
        return T.nn.functional.silu(h @ w1) * (h @ w3)

    return fn, (x, g, w1, w3)


def _jax_rms_swiglu(jnp, jax):
    def fn(x, g, w1, w3):
        h = x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * g
        return jax.nn.silu(h @ w1) * (h @ w3)

    return fn


def _gelu_mlp(T, p):
    rows, d, hidden = p
    r = np.random.default_rng(6)
    x = randn(T, r, rows, d)
    w1, b1 = randn(T, r, hidden, d, scale=d ** -0.5), randn(T, r, hidden)
    w2, b2 = randn(T, r, d, hidden, scale=hidden ** -0.5), randn(T, r, d)
    F = T.nn.functional

    def fn(x, w1, b1, w2, b2):
        return F.linear(F.gelu(F.linear(x, w1, b1)), w2, b2)

    return fn, (x, w1, b1, w2, b2)


def _jax_gelu_mlp(jnp, jax):
    return lambda x, w1, b1, w2, b2: jax.nn.gelu(x @ w1.T + b1, approximate=False) @ w2.T + b2


def _cross_entropy(T, p):
    rows, classes = p
    r = np.random.default_rng(7)
    logits = randn(T, r, rows, classes)
    target = T.from_numpy(r.integers(0, classes, size=(rows, 1)).astype(np.int64))

    def fn(logits, target):
        return -T.log_softmax(logits, dim=-1).gather(1, target).mean()

    return fn, (logits, target)


def _jax_cross_entropy(jnp, jax):
    return lambda logits, target: -jnp.take_along_axis(
        jax.nn.log_softmax(logits, axis=-1), target, axis=1).mean()


def _embedding_linear(T, p):
    batch, seq, vocab, d = p
    r = np.random.default_rng(11)
    F = T.nn.functional
    tokens = T.from_numpy(r.integers(0, vocab, size=(batch, seq)).astype(np.int64))
    emb = randn(T, r, vocab, d)
    w, b = randn(T, r, d, d, scale=d ** -0.5), randn(T, r, d)

    def fn(tokens, emb, w, b):
        return F.linear(F.embedding(tokens, emb) * math.sqrt(d), w, b)

    return fn, (tokens, emb, w, b)


def _jax_embedding_linear(jnp, jax):
    def fn(tokens, emb, w, b):
        return (emb[tokens] * math.sqrt(emb.shape[1])) @ w.T + b

    return fn


def _attention(T, p):
    batch, heads, seq, dim = p
    r = np.random.default_rng(8)
    q, k, v = (randn(T, r, batch, heads, seq, dim) for _ in range(3))
    mask = T.from_numpy(np.triu(np.ones((seq, seq), dtype=bool), 1))

    def fn(q, k, v, mask):
        s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return T.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v

    return fn, (q, k, v, mask)


def _jax_attention(jnp, jax):
    def fn(q, k, v, mask):
        s = (q @ jnp.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])
        return jax.nn.softmax(jnp.where(mask, -jnp.inf, s), axis=-1) @ v

    return fn


def _cnn(T, p):
    batch, size = p
    r = np.random.default_rng(9)
    F = T.nn.functional
    x = randn(T, r, batch, 3, size, size)
    w1, b1 = randn(T, r, 16, 3, 3, 3, scale=0.2), randn(T, r, 16)
    w2, b2 = randn(T, r, 32, 16, 3, 3, scale=0.1), randn(T, r, 32)
    wf, bf = randn(T, r, 10, 32, scale=0.2), randn(T, r, 10)

    def fn(x, w1, b1, w2, b2, wf, bf):
        h = F.relu(F.conv2d(x, w1, b1, padding=1))
        h = F.max_pool2d(h, 2)
        h = F.relu(F.conv2d(h, w2, b2, padding=1))
        return F.linear(h.mean(dim=(2, 3)), wf, bf)

    return fn, (x, w1, b1, w2, b2, wf, bf)


def _transformer_block(T, p):
    batch, seq, d, heads = p
    r = np.random.default_rng(10)
    F = T.nn.functional
    x = randn(T, r, batch, seq, d)
    ln = [randn(T, r, d, scale=0.1) + 1.0 for _ in range(2)]
    wqkv, wo = randn(T, r, 3 * d, d, scale=d ** -0.5), randn(T, r, d, d, scale=d ** -0.5)
    w1, w2 = randn(T, r, 4 * d, d, scale=d ** -0.5), randn(T, r, d, 4 * d, scale=(4 * d) ** -0.5)
    mask = T.from_numpy(np.triu(np.ones((seq, seq), dtype=bool), 1))

    def fn(x, ln1, ln2, wqkv, wo, w1, w2, mask):
        b, s, dm = x.shape
        hd = dm // heads
        h = F.layer_norm(x, [dm], ln1)
        q, k, v = F.linear(h, wqkv).reshape(b, s, 3, heads, hd).permute(2, 0, 3, 1, 4).unbind(0)
        a = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        a = T.softmax(a.masked_fill(mask, float("-inf")), dim=-1) @ v
        x = x + F.linear(a.transpose(1, 2).reshape(b, s, dm), wo)
        return x + F.linear(F.gelu(F.linear(F.layer_norm(x, [dm], ln2), w1)), w2)

    return fn, (x, ln[0], ln[1], wqkv, wo, w1, w2, mask)


WORKLOADS = [
    Workload("pointwise_chain", {"small": (256, 256), "medium": (1024, 1024), "large": (4096, 4096)},
             _pointwise, _jax_pointwise, tags=["pointwise"]),
    Workload("ten_ops", {"small": (64, 64), "large": (4096, 4096)}, _ten_ops, _jax_ten_ops,
             tags=["pointwise"]),
    Workload("softmax", {"small": (256, 512), "large": (4096, 4096)}, _softmax,
             lambda jnp, jax: (lambda x: jax.nn.softmax(x, axis=-1)), tags=["reduction"]),
    Workload("log_softmax", {"small": (256, 512), "large": (4096, 4096)}, _log_softmax,
             lambda jnp, jax: (lambda x: jax.nn.log_softmax(x, axis=-1)), tags=["reduction"]),
    Workload("layer_norm", {"small": (256, 512), "large": (4096, 4096)}, _layer_norm,
             _jax_layer_norm, rtol=1e-4, atol=1e-4, tags=["reduction"]),
    Workload("rms_norm_swiglu", {"small": (64, 256, 512), "large": (2048, 1024, 2816)},
             _rms_swiglu, _jax_rms_swiglu, rtol=1e-3, atol=1e-4, tags=["matmul"]),
    Workload("gelu_mlp", {"small": (64, 256, 1024), "large": (2048, 1024, 4096)}, _gelu_mlp,
             _jax_gelu_mlp, rtol=1e-3, atol=1e-4, tags=["matmul"]),
    Workload("cross_entropy", {"small": (256, 1000), "large": (4096, 32000)}, _cross_entropy,
             _jax_cross_entropy, rtol=1e-4, atol=1e-5, tags=["reduction"]),
    Workload("embedding_linear", {"small": (8, 64, 1000, 128), "large": (32, 512, 32000, 512)},
             _embedding_linear, _jax_embedding_linear, rtol=1e-3, atol=1e-4, tags=["matmul"]),
    Workload("attention", {"small": (1, 4, 64, 32), "large": (8, 8, 512, 64)}, _attention,
             _jax_attention, rtol=1e-3, atol=1e-4, tags=["matmul"]),
    Workload("small_cnn", {"small": (2, 16), "large": (32, 64)}, _cnn, rtol=1e-3, atol=1e-4,
             tags=["conv"]),
    Workload("transformer_block", {"small": (1, 64, 128, 4), "large": (8, 256, 512, 8)},
             _transformer_block, rtol=1e-3, atol=1e-3, tags=["matmul"]),
]


def _load_program(path):
    if CONFORMANCE not in sys.path:
        sys.path.insert(0, CONFORMANCE)  # the programs import cutil
    name = "bench_prog_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _program_workload(path):
    """A conformance program as a workload: its first call's arguments, at the program's size
    (the programs fix their own sizes, so each has one size, "native")."""
    def build(T, _params):
        prog = _load_program(path)
        fn, calls = prog.build(T)
        return fn, tuple(calls[0])

    prog = _load_program(path)
    name = "conf/" + os.path.splitext(os.path.basename(path))[0]
    return Workload(name, {"native": None}, build, None, getattr(prog, "RTOL", 1e-4),
                    getattr(prog, "ATOL", 1e-5), ["conformance"] + list(getattr(prog, "TAGS", [])))


def conformance_workloads():
    paths = sorted(glob.glob(os.path.join(CONFORMANCE, "programs", "*.py")))
    return [_program_workload(p) for p in paths]


def all_workloads():
    return WORKLOADS + conformance_workloads()


def by_name(name):
    for w in all_workloads():
        if w.name == name:
            return w
    raise KeyError(f"no workload named {name!r}")
