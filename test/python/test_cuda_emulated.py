"""Generated CUDA programs run on the CPU emulator (cuda_emulator.py: a thread per CUDA thread,
barriers for __syncthreads/__syncwarp/shuffles, cuBLAS steps in numpy) against numpy: every
mapping (elementwise, a row per thread/warp/block, serial), every kind of combine (sum, max with
NaN, argmax with ties and NaN, Welford), GEMM steps, symbolic sizes, f16, a scatter with an index
error. Needs no GPU and no NVRTC, only the system C++ compiler.
"""
import re

import numpy as np
import pytest

from kiln._C import _codegen

import cuda_emulator

rng = np.random.default_rng(0)


def softmax_program(rows, cols):
    return f"""program @softmax(%x: f32[{rows}, {cols}]) {{
  kernel @k0 {{
    %amax: f32[{rows}, 1] = reduction max [i0: {rows}] over [r0: {cols}] {{
      %0 = load %x[{cols}*i0 + r0]
      reduce %0
    }}
    %sum: f32[{rows}, 1] = reduction sum [i0: {rows}] over [r0: {cols}] {{
      %0 = load %x[{cols}*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }}
    %out: f32[{rows}, {cols}] = pointwise [i0: {rows}, i1: {cols}] {{
      %0 = load %x[{cols}*i0 + i1]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      %4 = load %sum[i0]
      %5 = div %3, %4
      store %5
    }}
  }}
  output %out
}}
"""


@pytest.mark.parametrize("rows, cols, mapping", [(40, 8, "a row per thread"), (50, 100, "a row per warp"),
                                                 (6, 3000, "a row per block")])
def test_softmax_rows(rows, cols, mapping):
    text = softmax_program(rows, cols)
    source = _codegen.emit_cuda(text)[0]
    assert f"({mapping})" in source
    # The row's elements stay in registers from the max phase to the output (row mappings).
    assert ("rc0[t] = in_x[" in source) == (mapping != "a row per thread")
    x = rng.standard_normal((rows, cols)).astype(np.float32) * 4
    x[1, 3] = np.nan  # a NaN row is NaN everywhere, as eager
    (out,), err = cuda_emulator.run(text, {"x": x}, [(np.float32, rows * cols)])
    e = np.exp(x - x.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    np.testing.assert_allclose(out.reshape(rows, cols), want, rtol=2e-6, atol=1e-7)
    assert err is None


def test_column_sum_and_long_row_max_with_nan():
    text = """program @p(%x: f32[1000, 64], %y: f32[4, 5000]) {
  %s: f32[64] = reduction sum [i0: 64] over [r0: 1000] {
    %0 = load %x[64*r0 + i0]
    reduce %0
  }
  %m: f32[4] = reduction max [i0: 4] over [r0: 5000] {
    %0 = load %y[5000*i0 + r0]
    reduce %0
  }
  output %s, %m
}
"""
    source = _codegen.emit_cuda(text)[0]
    assert "(a row per thread)" in source and "(a row per block)" in source
    x = rng.standard_normal((1000, 64)).astype(np.float32)
    y = rng.standard_normal((4, 5000)).astype(np.float32)
    y[2, 4321] = np.nan
    y[3, :] = -np.inf
    (s, m), _ = cuda_emulator.run(text, {"x": x, "y": y}, [(np.float32, 64), (np.float32, 4)])
    np.testing.assert_allclose(s, x.astype(np.float64).sum(0), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(m, y.max(1))  # [.., .., nan, -inf]


def test_argmax_first_position_nan_and_all_minus_inf():
    text = """program @p(%x: f32[5, 300]) {
  %i: i64[5] = reduction argmax [i0: 5] over [r0: 300] {
    %0 = load %x[300*i0 + r0]
    reduce %0
  }
  %j: i64[5] = reduction argmin [i0: 5] over [r0: 300] {
    %0 = load %x[300*i0 + r0]
    reduce %0
  }
  output %i, %j
}
"""
    x = rng.integers(-3, 4, (5, 300)).astype(np.float32)  # many ties: the first position wins
    x[1, 200], x[1, 250] = np.nan, np.nan                # the first NaN wins
    x[2, :] = -np.inf
    x[3, :] = np.inf
    (i, j), _ = cuda_emulator.run(text, {"x": x}, [(np.int64, 5), (np.int64, 5)])
    np.testing.assert_array_equal(i, [np.argmax(r) for r in x])
    np.testing.assert_array_equal(j, [np.argmin(r) for r in x])


@pytest.mark.parametrize("rows, cols", [(16, 768), (3, 5000)])
def test_layer_norm_welford(rows, cols):
    text = f"""program @ln(%x: f32[{rows}, {cols}], %w: f32[{cols}]) {{
  kernel @k0 {{
    %mean: f32[{rows}] = reduction welford_mean [i0: {rows}] over [r0: {cols}] {{
      %0 = load %x[{cols}*i0 + r0]
      reduce %0
    }}
    %var: f32[{rows}] = reduction welford_var [i0: {rows}] over [r0: {cols}] {{
      %0 = load %x[{cols}*i0 + r0]
      reduce %0
    }}
    %out: f32[{rows}, {cols}] = pointwise [i0: {rows}, i1: {cols}] {{
      %0 = load %x[{cols}*i0 + i1]
      %1 = load %mean[i0]
      %2 = sub %0, %1
      %3 = load %var[i0]
      %4 = constant 1e-05 : f32
      %5 = add %3, %4
      %6 = rsqrt %5
      %7 = mul %2, %6
      %8 = load %w[i1]
      %9 = mul %7, %8
      store %9
    }}
  }}
  output %out, %mean
}}
"""
    x = (rng.standard_normal((rows, cols)) * 3 + 100).astype(np.float32)  # a large mean: Welford's case
    w = rng.standard_normal(cols).astype(np.float32)
    (out, mean), _ = cuda_emulator.run(text, {"x": x, "w": w}, [(np.float32, rows * cols), (np.float32, rows)])
    x64 = x.astype(np.float64)
    want = (x64 - x64.mean(1, keepdims=True)) / np.sqrt(x64.var(1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(mean, x64.mean(1), rtol=1e-6)
    np.testing.assert_allclose(out.reshape(rows, cols), want, rtol=1e-4, atol=1e-4)


def test_gemm_steps():
    text = """program @g(%a: f32[16, 32], %w: f32[32, 8]{strides=[1, 32]}, %b: f32[8], %bb: f64[8], %x: f64[4, 3], %y: f64[3, 8], %p: f32[4, 16, 32]{strides=[512, 1, 16]}, %q: f32[4, 32, 8]) {
  kernel @k0 {
    %mm: f32[16, 8] = extern mm(%a, %w)
    %out: f32[16, 8] = pointwise [i0: 16, i1: 8] {
      %0 = load %mm[8*i0 + i1]
      %1 = load %b[i1]
      %2 = add %0, %1
      %3 = constant 0.0 : f32
      %4 = maximum %2, %3
      store %4
    }
  }
  %r: f64[4, 8] = extern addmm(%bb, %x, %y, beta=0.5, alpha=2.0)
  %z: f32[4, 16, 8] = extern bmm(%p, %q)
  output %out, %r, %z
}
"""
    a = rng.standard_normal((16, 32)).astype(np.float32)
    w = rng.standard_normal((8, 32)).astype(np.float32)  # storage of the [32, 8] view, strides [1, 32]
    b = rng.standard_normal(8).astype(np.float32)
    bb, x, y = rng.standard_normal(8), rng.standard_normal((4, 3)), rng.standard_normal((3, 8))
    p = rng.standard_normal((4, 32, 16)).astype(np.float32)  # [4, 16, 32] with strides [512, 1, 16]
    q = rng.standard_normal((4, 32, 8)).astype(np.float32)
    (out, r, z), _ = cuda_emulator.run(
        text, {"a": a, "w": w, "b": b, "bb": bb, "x": x, "y": y, "p": p, "q": q},
        [(np.float32, 128), (np.float64, 32), (np.float32, 512)])
    np.testing.assert_allclose(out.reshape(16, 8), np.maximum(a @ w.T + b, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.reshape(4, 8), 0.5 * bb + 2.0 * (x @ y), rtol=1e-12)
    np.testing.assert_allclose(z.reshape(4, 16, 8), p.transpose(0, 2, 1) @ q, rtol=1e-5, atol=1e-5)


def test_symbolic_sizes():
    text = """program @rows(%x: f32[s0, s1], %bias: f32[s1]) {
  kernel @k0 {
    %y: f32[s0, s1] = pointwise [i0: s0, i1: s1] {
      %0 = load %x[s1*i0 + i1]
      %1 = load %bias[i1]
      %2 = add %0, %1
      store %2
    }
    %sum: f32[s0] = reduction sum [i0: s0] over [r0: s1] {
      %0 = load %y[s1*i0 + r0]
      reduce %0
    }
  }
  %out: f32[s0, s1] = pointwise [i0: s0, i1: s1] {
    %0 = load %y[s1*i0 + i1]
    %1 = load %sum[i0]
    %2 = div %0, %1
    store %2
  }
  output %out
}
"""
    for s0, s1 in [(5, 77), (3, 2000)]:
        x = (rng.random((s0, s1)) + 0.5).astype(np.float32)
        bias = rng.random(s1).astype(np.float32)
        (out,), _ = cuda_emulator.run(text, {"x": x, "bias": bias}, [(np.float32, s0 * s1)], {"s0": s0, "s1": s1})
        y = x + bias
        np.testing.assert_allclose(out.reshape(s0, s1), y / y.sum(1, keepdims=True), rtol=1e-5)


def test_f16_pointwise_and_sum():
    text = """program @half(%x: f16[8, 256]) {
  %z: f16[8, 256] = pointwise [i0: 8, i1: 256] {
    %0 = load %x[256*i0 + i1]
    %1 = exp %0
    store %1
  }
  %s: f16[8] = reduction sum [i0: 8] over [r0: 256] {
    %0 = load %x[256*i0 + r0]
    reduce %0
  }
  output %z, %s
}
"""
    x = (rng.standard_normal((8, 256)) * 2).astype(np.float16)
    (z, s), _ = cuda_emulator.run(text, {"x": x}, [(np.float16, 2048), (np.float16, 8)])
    np.testing.assert_array_equal(z.reshape(8, 256), np.exp(x.astype(np.float32)).astype(np.float16))
    np.testing.assert_allclose(s.astype(np.float32), x.astype(np.float32).sum(1), rtol=2e-3, atol=2e-2)


def test_vector_loads_and_stores_aligned_or_not():
    # 4 floats per load and store where every pointer is aligned; a view one element into its
    # storage takes the scalar loop. Both compute the same.
    text = """program @p(%x: f32[8, 128], %y: f32[128]) {
  %out: f32[8, 128] = pointwise [i0: 8, i1: 128] {
    %0 = load %x[128*i0 + i1]
    %1 = load %y[i1]
    %2 = mul %0, %1
    %3 = tanh %2
    store %3
  }
  output %out
}
"""
    source = _codegen.emit_cuda(text)[0]
    assert "kiln_vec<float, 4>" in source and "kiln_aligned(in_x, 4)" in source
    x = rng.standard_normal((8 * 128 + 1)).astype(np.float32)
    y = rng.standard_normal(128).astype(np.float32)
    for offset in (0, 1):
        (out,), _ = cuda_emulator.run(text, {"x": (x, offset), "y": y}, [(np.float32, 1024)])
        want = np.tanh(x[offset:offset + 1024].reshape(8, 128) * y)
        np.testing.assert_allclose(out.reshape(8, 128), want, rtol=1e-6, atol=1e-6)


SCATTER = """program @scatter_add(%x: f32[64], %idx: i64[1000], %src: f32[1000]) {
  %buf0: f32[64] = pointwise [i0: 64] {
    %0 = load %x[i0]
    store %0
  }
  %buf1: f32[1000] = pointwise [i0: 1000] into %buf0[x0] accumulate {
    %0 = load %idx[i0]
    %1 = indirect %0 size 64 wrap as x0 error "IndexError: index {index} is out of bounds for dimension 0 with size {size}"
    %2 = load %src[i0]
    store %2
  }
  output %buf1
}
"""


def test_scatter_add_duplicates_and_index_error():
    x = rng.standard_normal(64).astype(np.float32)
    idx = rng.integers(-64, 64, 1000)
    src = rng.standard_normal(1000).astype(np.float32)
    (out,), err = cuda_emulator.run(SCATTER, {"x": x, "idx": idx, "src": src}, [(np.float32, 64)])
    want = x.copy()
    np.add.at(want, idx % 64, src)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    assert err is None
    idx[500] = 64
    _, err = cuda_emulator.run(SCATTER, {"x": x, "idx": idx, "src": src}, [(np.float32, 64)])
    assert err == "IndexError: index {index} is out of bounds for dimension 0 with size {size}"


INPUT = re.compile(r"%(\w+): (\w+)\[([^\]]*)\](?:\{strides=\[([^\]]*)\]\})?")
NUMPY = {"f32": np.float32, "f64": np.float64, "f16": np.float16, "i64": np.int64, "i32": np.int32,
         "b8": np.bool_}


def test_conformance_graphs_equal_the_cpu_kernels():
    # The compiled graphs of conformance programs (test_cuda_codegen's sample), each run by the
    # C++ back end and by the emulated CUDA program on the same inputs (strided ones included).
    import kiln
    import test_cuda_codegen

    programs, seen = [], set()
    for name, text in test_cuda_codegen.conformance_programs():
        if name.split(":")[0] not in seen or name.startswith("conv_net"):
            seen.add(name.split(":")[0])
            programs.append((name, text))
    assert len(programs) >= 6
    for name, text in programs:
        run_both(name, text)


def run_both(name, text):
    """The C++ kernels and the emulated CUDA program of `text` on the same random inputs
    (strided ones included) agree."""
    import kiln

    header = text.split("\n", 1)[0]
    storages, tensors = {}, []
    for m in INPUT.finditer(header):
        arg, dtype = m.group(1), NUMPY[m.group(2)]
        sizes = [int(s) for s in m.group(3).split(",") if s.strip()]
        strides = [int(s) for s in m.group(4).split(",")] if m.group(4) else \
            [int(np.prod(sizes[i + 1:])) for i in range(len(sizes))]
        span = 1 + sum((n - 1) * s for n, s in zip(sizes, strides))
        data = rng.standard_normal(span).astype(dtype)
        storages[arg] = data.copy()  # (the C++ run may write inputs in place: its own copy)
        tensors.append(kiln.from_numpy(data).as_strided(sizes, strides))
    path, _ = _codegen.compile_source(_codegen.emit_cpp(text))
    want = _codegen.CompiledKernel(path, "kiln_entry", text)(*tensors)
    want = [w.numpy() for w in (want if isinstance(want, (list, tuple)) else [want])]
    got, err = cuda_emulator.run(text, storages, [(w.dtype, w.size) for w in want])
    assert err is None, (name, err)
    for k, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(g, w.reshape(-1), rtol=1e-4, atol=1e-5, err_msg=f"{name} output {k}")


def test_scheduled_in_place_writes():
    # In-place writes fused with their neighbours (an optimizer step: momentum and parameter
    # updated in one nest), and a write kept apart because a neighbour reads another element.
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "lit", "loop", "schedule-inplace.kir")
    chunks = [c[m.start():] for c in open(path).read().split("// -----")
              if (m := re.search(r"^program @", c, re.M))]
    assert len(chunks) == 2
    for chunk in chunks:
        scheduled = _codegen.schedule(chunk)[0]
        run_both(chunk.split("(", 1)[0], scheduled)


def test_long_rows_split_over_blocks():
    # Few long rows: a first kernel reduces each (row, split) to a state, a second combines a
    # row's states (sum, argmax with its first-position rule, Welford) and finishes the row.
    text = """program @total(%x: f32[3, 200000], %y: f32[300000]) {
  kernel @k0 {
    %s: f32[3] = reduction sum [i0: 3] over [r0: 200000] {
      %0 = load %x[200000*i0 + r0]
      reduce %0
    }
    %mean: f32[3] = pointwise [i0: 3] {
      %0 = load %s[i0]
      %1 = constant 200000.0 : f32
      %2 = div %0, %1
      store %2
    }
  }
  kernel @k1 {
    %am: i64[] = reduction argmax [] over [r0: 300000] {
      %0 = load %y[r0]
      reduce %0
    }
  }
  kernel @k2 {
    %wm: f32[] = reduction welford_mean [] over [r0: 300000] {
      %0 = load %y[r0]
      reduce %0
    }
    %wv: f32[] = reduction welford_var [] over [r0: 300000] {
      %0 = load %y[r0]
      reduce %0
    }
  }
  output %mean, %am, %wm, %wv
}
"""
    source, launches = _codegen.emit_cuda(text)
    assert source.count("(a row per 24 blocks)") == 1 and source.count("(a row per 36 blocks)") == 2
    x = rng.standard_normal((3, 200000)).astype(np.float32)
    y = (rng.standard_normal(300000) + 50).astype(np.float32)
    y[[1000, 250000]] = 60  # the maximum twice: the first position
    (mean, am, wm, wv), _ = cuda_emulator.run(
        text, {"x": x, "y": y}, [(np.float32, 3), (np.int64, 1), (np.float32, 1), (np.float32, 1)])
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(1), rtol=1e-4, atol=1e-6)
    assert am[0] == 1000
    np.testing.assert_allclose(wm, y.astype(np.float64).mean(), rtol=1e-6)
    np.testing.assert_allclose(wv, y.astype(np.float64).var(), rtol=1e-5)


SCAN = """program @scan(%x: f32[s0, 5, 3], %i: i32[s0, 7]) {
  %buf0: f32[s0, 5, 3] = extern cumsum(%x, dim=1)
  %buf1: i64[s0, 7] = pointwise [i0: s0, i1: 7] {
    %0 = load %i[7*i0 + i1]
    %1 = cast %0 : i64
    store %1
  }
  %buf2: i64[s0, 7] = extern cumprod(%buf1, dim=1)
  output %buf0, %buf2
}
"""


def test_scan_a_thread_per_lane():
    # cumsum / cumprod (ScanShape): a thread per row and inner position carries the running
    # value (double for f32, wrapping integers) along the scanned dim, over a size symbol.
    s0 = 4
    x = rng.standard_normal((s0, 5, 3)).astype(np.float32)
    i = rng.integers(-3, 4, (s0, 7)).astype(np.int32)
    (c, p), _ = cuda_emulator.run(SCAN, {"x": x, "i": i}, [(np.float32, s0 * 15), (np.int64, s0 * 7)], {"s0": s0})
    np.testing.assert_allclose(c.reshape(s0, 5, 3), np.cumsum(x.astype(np.float64), 1).astype(np.float32), rtol=1e-6)
    np.testing.assert_array_equal(p.reshape(s0, 7), np.cumprod(i.astype(np.int64), 1))
