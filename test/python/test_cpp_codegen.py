"""C++ code generation end to end: hand-written loop programs -> kiln._C._codegen.emit_cpp ->
the system C++ compiler -> ctypes, run on numpy arrays and compared with numpy.

Every program of this module goes into ONE translation unit (one prelude, each program in its
own namespace with its own entry point), so the module compiles C++ once.
"""
import ctypes
import ctypes.util
import os
import re
import shutil
import subprocess

import numpy as np
import pytest

from kiln._C import _codegen
from kiln_context import KilnContext, sgemm_batched

CXX = os.environ.get("KILN_CXX", "c++")

PROGRAMS = {}


def program(text):
    """Registers a loop program (its @name is the key) for the module's compile."""
    name = text.split("@", 1)[1].split("(", 1)[0]
    PROGRAMS[name] = text
    return name


POINTWISE = program("""
program @pointwise(%x: f32[64, 128], %y: f32[128], %z: f32[64, 1]) {
  %buf0: f32[64, 128] = pointwise [i0: 64, i1: 128] {
    %0 = load %x[128*i0 + i1]
    %1 = load %y[i1]
    %2 = mul %0, %1
    %3 = load %z[i0]
    %4 = add %2, %3
    %5 = constant 0.0 : f32
    %6 = maximum %4, %5
    %7 = tanh %6
    store %7
  }
  %buf1: f32[64, 128] = pointwise [i0: 64, i1: 128] {
    %0 = load %buf0[128*i0 + i1]
    %1 = load %x[128*i0 + i1]
    %2 = exp %1
    %3 = sub %0, %2
    %4 = index_expr mod(i1, 3) : i64
    %5 = constant 0 : i64
    %6 = eq %4, %5
    %7 = where %6, %3, %0
    store %7
  }
  output %buf1
}
""")

STRIDED = program("""
program @strided(%t: f32[32, 48]{strides=[1, 32]}, %s: f32[16, 8]{strides=[40, 3]}) {
  %buf0: f32[32, 48] = pointwise [i0: 32, i1: 48] {
    %0 = load %t[i0 + 32*i1]
    %1 = constant 2.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %buf1: f32[16, 8] = pointwise [i0: 16, i1: 8] {
    %0 = load %s[40*i0 + 3*i1]
    %1 = neg %0
    store %1
  }
  output %buf0, %buf1, %t, %buf1
}
""")

SOFTMAX = program("""
program @softmax(%x: f32[256, 512]) {
  kernel @k0 {
    %amax: f32[256, 1] = reduction max [i0: 256] over [r0: 512] {
      %0 = load %x[512*i0 + r0]
      reduce %0
    }
    %sum: f32[256, 1] = reduction sum [i0: 256] over [r0: 512] {
      %0 = load %x[512*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
    %out: f32[256, 512] = pointwise [i0: 256, i1: 512] {
      %0 = load %x[512*i0 + i1]
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
""")

LAYER_NORM = program("""
program @layer_norm(%x: f32[48, 100], %w: f32[100], %b: f32[100]) {
  kernel @k0 {
    %mean: f32[48, 1] = reduction welford_mean [i0: 48] over [r0: 100] {
      %0 = load %x[100*i0 + r0]
      reduce %0
    }
    %var: f32[48, 1] = reduction welford_var [i0: 48] over [r0: 100] {
      %0 = load %x[100*i0 + r0]
      reduce %0
    }
    %rstd: f32[48, 1] = pointwise [i0: 48] {
      %0 = load %var[i0]
      %1 = constant 1e-05 : f32
      %2 = add %0, %1
      %3 = rsqrt %2
      store %3
    }
    %out: f32[48, 100] = pointwise [i0: 48, i1: 100] {
      %0 = load %x[100*i0 + i1]
      %1 = load %mean[i0]
      %2 = sub %0, %1
      %3 = load %rstd[i0]
      %4 = mul %2, %3
      %5 = load %w[i1]
      %6 = mul %4, %5
      %7 = load %b[i1]
      %8 = add %6, %7
      store %8
    }
  }
  output %out, %mean, %rstd
}
""")

# Reductions over a strided dim: the column order (reduction loop outside the contiguous loop).
COLUMNS = program("""
program @columns(%x: f32[6, 1100, 300], %h: f16[700, 40]) {
  kernel @k0 {
    %sum: f32[6, 300] = reduction sum [i0: 6, i1: 300] over [r0: 1100] {
      %0 = load %x[330000*i0 + 300*r0 + i1]
      reduce %0
    }
    %amax: f32[6, 300] = reduction max [i0: 6, i1: 300] over [r0: 1100] {
      %0 = load %x[330000*i0 + 300*r0 + i1]
      reduce %0
    }
    %anyneg: b8[6, 300] = reduction any [i0: 6, i1: 300] over [r0: 1100] {
      %0 = load %x[330000*i0 + 300*r0 + i1]
      %1 = constant -3.0 : f32
      %2 = lt %0, %1
      reduce %2
    }
    %mean: f32[6, 300] = pointwise [i0: 6, i1: 300] {
      %0 = load %sum[300*i0 + i1]
      %1 = constant 1100.0 : f32
      %2 = div %0, %1
      store %2
    }
  }
  %hs: f16[40] = reduction sum [i0: 40] over [r0: 700] {
    %0 = load %h[40*r0 + i0]
    reduce %0
  }
  output %mean, %amax, %anyneg, %hs
}
""")

# Both loads transposed: the innermost loop runs along their contiguous dim (the store strided).
TRANSPOSED = program("""
program @transposed(%x: f32[48, 64], %y: f32[48, 64]) {
  %buf0: f32[64, 48] = pointwise [i0: 64, i1: 48] {
    %0 = load %x[64*i1 + i0]
    %1 = load %y[64*i1 + i0]
    %2 = add %0, %1
    %3 = tanh %2
    store %3
  }
  output %buf0
}
""")

# cross-entropy's reductions: per row the max, then the sum of exp(x - max), which reads the row
# again (from cache) and prefetches the next row meanwhile.
LSE = program("""
program @lse(%x: f32[37, 1100]) {
  kernel @k0 {
    %amax: f32[37, 1] = reduction max [i0: 37] over [r0: 1100] {
      %0 = load %x[1100*i0 + r0]
      reduce %0
    }
    %sum: f32[37, 1] = reduction sum [i0: 37] over [r0: 1100] {
      %0 = load %x[1100*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
  }
  output %amax, %sum
}
""")

# log_softmax over rows: a per-row log(sum) used inside the pointwise loop.
LOGSM = program("""
program @logsm(%x: f32[16, 300]) {
  kernel @k0 {
    %amax: f32[16, 1] = reduction max [i0: 16] over [r0: 300] {
      %0 = load %x[300*i0 + r0]
      reduce %0
    }
    %sum: f32[16, 1] = reduction sum [i0: 16] over [r0: 300] {
      %0 = load %x[300*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
    %out: f32[16, 300] = pointwise [i0: 16, i1: 300] {
      %0 = load %x[300*i0 + i1]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = load %sum[i0]
      %4 = log %3
      %5 = sub %2, %4
      store %5
    }
  }
  output %out
}
""")

MIDDLE = program("""
program @middle(%x: f32[8, 100, 16]) {
  kernel @k0 {
    %sum: f32[8, 16] = reduction sum [i0: 8, i1: 16] over [r0: 100] {
      %0 = load %x[1600*i0 + 16*r0 + i1]
      reduce %0
    }
    %amax: f32[8, 1, 16] = reduction max [i0: 8, i1: 16] over [r0: 100] {
      %0 = load %x[1600*i0 + 16*r0 + i1]
      reduce %0
    }
    %argmax: i64[8, 16] = reduction argmax [i0: 8, i1: 16] over [r0: 100] {
      %0 = load %x[1600*i0 + 16*r0 + i1]
      reduce %0
    }
    %argmin: i64[8, 16] = reduction argmin [i0: 8, i1: 16] over [r0: 100] {
      %0 = load %x[1600*i0 + 16*r0 + i1]
      reduce %0
    }
  }
  output %sum, %amax, %argmax, %argmin
}
""")

HALF = program("""
program @half(%x: f16[32, 64], %y: bf16[64]) {
  %e: f16[32, 64] = pointwise [i0: 32, i1: 64] {
    %0 = load %x[64*i0 + i1]
    %1 = exp %0
    %2 = constant 0.1 : f16
    %3 = mul %1, %2
    store %3
  }
  %s: f32[32] = reduction sum [i0: 32] over [r0: 64] {
    %0 = load %x[64*i0 + r0]
    %1 = cast %0 : f32
    reduce %1
  }
  %h: f16[32] = reduction sum [i0: 32] over [r0: 64] {
    %0 = load %x[64*i0 + r0]
    reduce %0
  }
  %bf: bf16[32, 64] = pointwise [i0: 32, i1: 64] {
    %0 = load %x[64*i0 + i1]
    %1 = cast %0 : f32
    %2 = load %y[i1]
    %3 = cast %2 : f32
    %4 = mul %1, %3
    %5 = cast %4 : bf16
    store %5
  }
  output %e, %s, %h, %bf
}
""")

MM_EPILOGUE = program("""
program @mm_epilogue(%a: f32[64, 96], %w: f32[96, 48]{strides=[1, 96]}, %bias: f32[48]) {
  kernel @k0 {
    %mm: f32[64, 48] = extern mm(%a, %w)
    %out: f32[64, 48] = pointwise [i0: 64, i1: 48] {
      %0 = load %mm[48*i0 + i1]
      %1 = load %bias[i1]
      %2 = add %0, %1
      %3 = constant 0.0 : f32
      %4 = maximum %2, %3
      store %4
    }
  }
  output %out
}
""")

ADDMM_BMM = program("""
program @addmm_bmm(%b: f64[1, 6], %x: f64[5, 4], %y: f64[4, 6], %p: f32[3, 5, 7], %q: f32[3, 7, 2]{strides=[2, 6, 1]}, %g: f32[4, 6]{strides=[12, 2]}, %h: f32[6, 3]) {
  %am: f64[5, 6] = extern addmm(%b, %x, %y, beta=0.5, alpha=2.0)
  %bm: f32[3, 5, 2] = extern bmm(%p, %q)
  %gm: f32[4, 3] = extern mm(%g, %h, alpha=0.5)
  output %am, %bm, %gm
}
""")

FULL_SUM = program("""
program @full_sum(%x: f32[1000003]) {
  %s: f32[] = reduction sum [] over [r0: 1000003] {
    %0 = load %x[r0]
    reduce %0
  }
  %m: f32[] = reduction min [] over [r0: 1000003] {
    %0 = load %x[r0]
    reduce %0
  }
  %big: f32[3, 300000] = pointwise [i0: 3, i1: 300000] {
    %0 = load %x[300000*i0 + i1]
    %1 = load %s[0]
    %2 = div %0, %1
    store %2
  }
  output %s, %m, %big
}
""")

INTEGER = program("""
program @integer(%a: i64[40], %b: i64[40], %c: i32[40], %k: b8[40]) {
  %q: i64[40] = pointwise [i0: 40] {
    %0 = load %a[i0]
    %1 = load %b[i0]
    %2 = div %0, %1
    store %2
  }
  %r: i64[40] = pointwise [i0: 40] {
    %0 = load %a[i0]
    %1 = load %b[i0]
    %2 = remainder %0, %1
    store %2
  }
  %i: i64[40] = pointwise [i0: 40] {
    %0 = index_expr floordiv(i0 - 20, 3) : i64
    %1 = index_expr mod(i0 - 20, 3) : i64
    %2 = constant 10 : i64
    %3 = mul %0, %2
    %4 = add %3, %1
    store %4
  }
  %n: i32[40] = pointwise [i0: 40] {
    %0 = load %c[i0]
    %1 = load %k[i0]
    %2 = constant 0 : i32
    %3 = sub %2, %0
    %4 = where %1, %3, %0
    store %4
  }
  %any: b8[] = reduction any [] over [r0: 40] {
    %0 = load %k[r0]
    reduce %0
  }
  %cnt: i64[] = reduction sum [] over [r0: 40] {
    %0 = load %k[r0]
    %1 = cast %0 : i64
    reduce %1
  }
  output %q, %r, %i, %n, %any, %cnt
}
""")

ROW_NORM = program("""
program @row_norm(%x: f32[8, 128]) {
  kernel @k0 {
    %sq: f32[8, 128] = pointwise [i0: 8, i1: 128] {
      %0 = load %x[128*i0 + i1]
      %1 = mul %0, %0
      store %1
    }
    %ms: f32[8, 1] = reduction sum [i0: 8] over [r0: 128] {
      %0 = load %sq[128*i0 + r0]
      reduce %0
    }
    %rev: f32[8, 128] = pointwise [i0: 8, i1: 128] {
      %0 = load %sq[128*i0 - i1 + 127]
      %1 = load %ms[i0]
      %2 = div %0, %1
      store %2
    }
  }
  kernel @k1 {
    %a: f32[8, 128] = pointwise [i0: 8, i1: 128] {
      %0 = load %x[128*i0 + i1]
      %1 = neg %0
      store %1
    }
    %flip: f32[8, 128] = pointwise [i0: 8, i1: 128] {
      %0 = load %a[-128*i0 + i1 + 896]
      %1 = exp %0
      store %1
    }
  }
  output %rev, %flip
}
""")

WELFORD_BLOCKS = program("""
program @welford_blocks(%x: f32[4, 1500], %y: f64[3, 700]{strides=[1, 3]}) {
  kernel @k0 {
    %mean: f32[4] = reduction welford_mean [i0: 4] over [r0: 1500] {
      %0 = load %x[1500*i0 + r0]
      reduce %0
    }
    %var: f32[4] = reduction welford_var [i0: 4] over [r0: 1500] {
      %0 = load %x[1500*i0 + r0]
      reduce %0
    }
  }
  %var2: f64[3] = reduction welford_var [i0: 3] over [r0: 700] {
    %0 = load %y[i0 + 3*r0]
    reduce %0
  }
  output %mean, %var, %var2
}
""")

COLLAPSE = program("""
program @collapse(%x: f32[4, 64, 256], %y: f32[4, 1, 256]) {
  %out: f32[4, 64, 256] = pointwise [i0: 4, i1: 64, i2: 256] {
    %0 = load %x[16384*i0 + 256*i1 + i2]
    %1 = load %y[256*i0 + i2]
    %2 = add %0, %1
    store %2
  }
  output %out
}
""")


ALLOC = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_size_t)
FREE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Allocator:
    """libc malloc/free behind ctypes callbacks that count what is live."""

    def __init__(self):
        libc = ctypes.CDLL(None)
        libc.malloc.restype = ctypes.c_void_p
        libc.malloc.argtypes = [ctypes.c_size_t]
        libc.free.argtypes = [ctypes.c_void_p]
        self.live, self.peak, self.calls = {}, 0, 0

        def alloc(n):
            p = libc.malloc(n)
            self.live[p] = n
            self.calls += 1
            self.peak = max(self.peak, sum(self.live.values()))
            return p

        def free(p):
            assert p in self.live, "free of a pointer kiln_entry did not allocate"
            del self.live[p]
            libc.free(p)

        self.alloc, self.free = ALLOC(alloc), FREE(free)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX})")
    source = _codegen.emit_cpp(next(iter(PROGRAMS.values())), prelude=True).split("// program @")[0]
    for name, text in PROGRAMS.items():
        body = _codegen.emit_cpp(text, entry_name=f"kiln_entry_{name}", prelude=False)
        source += f"namespace p_{name} {{\n{body}}}\n"
    d = tmp_path_factory.mktemp("cppgen")
    (d / "kernels.cpp").write_text(source)
    # kiln's own flags (codegen/Toolchain.cpp), so the vectorized code is what runs.
    subprocess.run([CXX, "-std=c++17", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp",
                    "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC", "-Wall", "-Werror",
                    str(d / "kernels.cpp"), "-o", str(d / "kernels.so"), "-lmvec"], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(d / "kernels.so"))


@pytest.fixture(scope="module")
def blas():
    path = ctypes.util.find_library("openblas")
    if path is None:
        pytest.skip("libopenblas not found")
    return ctypes.CDLL(path)


def run(lib, blas, name, inputs, outputs, threads=0):
    """Runs program `name` on numpy `inputs` (views keep their strides: the program declares
    them); `outputs` are (shape, dtype) pairs. Returns the output arrays."""
    allocator = Allocator()
    ctx = KilnContext(ctypes.cast(allocator.alloc, ctypes.c_void_p).value,
                      ctypes.cast(allocator.free, ctypes.c_void_p).value,
                      ctypes.cast(blas.cblas_sgemm, ctypes.c_void_p).value,
                      ctypes.cast(blas.cblas_dgemm, ctypes.c_void_p).value, threads)
    ctx.sgemm_batched = sgemm_batched(blas)
    outs = [np.empty(shape, dtype) for shape, dtype in outputs]
    ins = (ctypes.c_void_p * max(len(inputs), 1))(*[a.ctypes.data for a in inputs])
    outp = (ctypes.c_void_p * max(len(outs), 1))(*[a.ctypes.data for a in outs])
    entry = getattr(lib, f"kiln_entry_{name}")
    entry.restype = ctypes.c_int
    assert entry(ctypes.byref(ctx), ins, outp) == 0
    assert not allocator.live, "intermediates left allocated"
    run.last_allocator = allocator
    return outs


# The backward of a causally masked softmax (attention's): a row sum, then a select between
# floats picked by a loaded bool mask.
MASKED_SOFTMAX_BACKWARD = program("""
program @masked_softmax_backward(%g: f32[96, 40], %s: f32[96, 40], %m: b8[96, 40]) {
  %gs: f32[96] = reduction sum [i0: 96] over [r0: 40] {
    %0 = load %g[40*i0 + r0]
    %1 = load %s[40*i0 + r0]
    %2 = mul %0, %1
    reduce %2
  }
  %out: f32[96, 40] = pointwise [i0: 96, i1: 40] {
    %0 = load %m[40*i0 + i1]
    %1 = load %g[40*i0 + i1]
    %2 = load %s[40*i0 + i1]
    %3 = mul %1, %2
    %4 = load %gs[i0]
    %5 = mul %2, %4
    %6 = sub %3, %5
    %7 = constant 0.0 : f32
    %8 = where %0, %6, %7
    store %8
  }
  output %out
}
""")


# Seven intermediates live at once (each its own nest, all read by the last): more than the
# code generator frees inline at each failure, so its failures go through one cleanup.
WIDE_LIVE = program("""
program @wide_live(%x: f32[16]) {
  %b0: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 1.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b1: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 2.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b2: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 3.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b3: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 4.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b4: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 5.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b5: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 6.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %b6: f32[16] = pointwise [i0: 16] {
    %0 = load %x[i0]
    %1 = constant 7.0 : f32
    %2 = mul %0, %1
    store %2
  }
  %out: f32[16] = pointwise [i0: 16] {
    %0 = load %b0[i0]
    %1 = load %b1[i0]
    %2 = load %b2[i0]
    %3 = load %b3[i0]
    %4 = load %b4[i0]
    %5 = load %b5[i0]
    %6 = load %b6[i0]
    %7 = add %0, %1
    %8 = add %7, %2
    %9 = add %8, %3
    %10 = add %9, %4
    %11 = add %10, %5
    %12 = add %11, %6
    store %12
  }
  output %out
}
""")


def rng(seed=0):
    return np.random.default_rng(seed)


def test_pointwise_broadcast_chain(lib, blas):
    r = rng(1)
    x = r.standard_normal((64, 128), dtype=np.float32)
    y = r.standard_normal(128, dtype=np.float32)
    z = r.standard_normal((64, 1), dtype=np.float32)
    (out,) = run(lib, blas, POINTWISE, [x, y, z], [((64, 128), np.float32)])
    b0 = np.tanh(np.maximum(x * y + z, 0))
    mask = (np.arange(128) % 3 == 0)[None, :]
    np.testing.assert_allclose(out, np.where(mask, b0 - np.exp(x), b0), rtol=1e-5, atol=1e-5)


def test_strided_inputs_and_output_copies(lib, blas):
    r = rng(2)
    base = r.standard_normal((48, 32), dtype=np.float32)
    t = base.T  # strides [1, 32]
    big = r.standard_normal((16, 40), dtype=np.float32)
    s = np.lib.stride_tricks.as_strided(big, shape=(16, 8), strides=(160, 12))  # [40, 3] elements
    o0, o1, o2, o3 = run(lib, blas, STRIDED, [t, s],
                         [((32, 48), np.float32), ((16, 8), np.float32), ((32, 48), np.float32),
                          ((16, 8), np.float32)])
    np.testing.assert_array_equal(o0, t * 2)
    np.testing.assert_array_equal(o1, -s)
    np.testing.assert_array_equal(o2, t)  # an input as an output: a contiguous copy
    np.testing.assert_array_equal(o3, -s)  # a buffer listed twice: copied


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_softmax_row_kernel(lib, blas, threads):
    x = rng(3).standard_normal((256, 512), dtype=np.float32) * 10
    x[5, 7] = np.inf
    (out,) = run(lib, blas, SOFTMAX, [x], [((256, 512), np.float32)], threads)
    rows = np.arange(256) != 5
    x64 = x[rows].astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    np.testing.assert_allclose(out[rows], e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    assert np.isnan(out[5]).all()  # inf - inf
    # amax and sum live in locals only: nothing was allocated.
    assert run.last_allocator.calls == 0


def test_layer_norm(lib, blas):
    r = rng(4)
    x = r.standard_normal((48, 100), dtype=np.float32) * 3 + 5
    w, b = r.standard_normal(100, dtype=np.float32), r.standard_normal(100, dtype=np.float32)
    out, mean, rstd = run(lib, blas, LAYER_NORM, [x, w, b],
                          [((48, 100), np.float32), ((48, 1), np.float32), ((48, 1), np.float32)])
    x64 = x.astype(np.float64)
    m = x64.mean(axis=1, keepdims=True)
    rs = 1 / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(mean, m, rtol=1e-6)
    np.testing.assert_allclose(rstd, rs, rtol=1e-6)
    np.testing.assert_allclose(out, (x64 - m) * rs * w + b, rtol=1e-5, atol=1e-5)


def test_middle_dim_reductions(lib, blas):
    x = rng(5).integers(-3, 4, size=(8, 100, 16)).astype(np.float32)  # ties everywhere
    x[2, 40, 3] = np.nan
    x[2, 60, 3] = np.nan
    s, amax, argmax, argmin = run(lib, blas, MIDDLE, [x],
                                  [((8, 16), np.float32), ((8, 1, 16), np.float32), ((8, 16), np.int64),
                                   ((8, 16), np.int64)])
    np.testing.assert_allclose(s, x.sum(axis=1))
    np.testing.assert_array_equal(amax[:, 0, :], x.max(axis=1))  # NaN propagates
    np.testing.assert_array_equal(argmax, np.argmax(x, axis=1))  # first index, NaN first
    np.testing.assert_array_equal(argmin, np.argmin(x, axis=1))


@pytest.mark.parametrize("threads", [0, 1])
def test_column_order_reductions(lib, blas, threads):
    r = rng(11)
    x = r.standard_normal((6, 1100, 300)).astype(np.float32)
    x[1, 500, 7] = np.nan
    h = r.uniform(-1, 1, size=(700, 40)).astype(np.float16)
    mean, amax, anyneg, hs = run(lib, blas, COLUMNS, [x, h],
                                 [((6, 300), np.float32), ((6, 300), np.float32), ((6, 300), np.bool_),
                                  ((40,), np.float16)], threads)
    np.testing.assert_allclose(mean, x.astype(np.float64).mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(amax, x.max(axis=1))  # the NaN column is NaN
    np.testing.assert_array_equal(anyneg, (x < -3).any(axis=1))
    np.testing.assert_allclose(hs.astype(np.float64), h.astype(np.float64).sum(axis=0), rtol=2e-3, atol=2e-3)


def test_column_order_emitted_only_for_strided_reductions():
    columns = _codegen.emit_cpp(PROGRAMS[COLUMNS], prelude=False)
    assert columns.count("// column order") == 2  # the fused kernel and %hs
    assert re.search(r"for \(int64_t r0 = rb; r0 < re; \+\+r0\) \{\n\s+#pragma omp simd\n"
                     r"\s+for \(int64_t o1 = cb; o1 < ce; \+\+o1\)", columns)
    # argmax keeps the row order; a reduction over the contiguous last dim keeps it too
    assert "column order" not in _codegen.emit_cpp(PROGRAMS[MIDDLE], prelude=False)
    assert "column order" not in _codegen.emit_cpp(PROGRAMS[SOFTMAX], prelude=False)


def test_masked_select_on_a_loaded_bool(lib, blas):
    r = rng(12)
    g, s = (r.standard_normal((96, 40), dtype=np.float32) for _ in range(2))
    m = np.tril(np.ones((96, 40), dtype=bool))
    m[7] = False  # a row without any kept element
    (out,) = run(lib, blas, MASKED_SOFTMAX_BACKWARD, [g, s, m], [((96, 40), np.float32)])
    gs = (g * s).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(out, np.where(m, g * s - s * gs, 0), rtol=1e-5, atol=1e-5)
    assert (out[7] == 0).all()


def test_select_on_a_loaded_bool_vectorizes(tmp_path):
    """A bool loaded from memory that picks between floats leaves the loop vectorizable. Read as
    bool(int(x)), GCC 12 kept the select a scalar loop with a branch (a masked softmax's backward
    ran 7x slower than the same loop vectorized)."""
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX})")
    (tmp_path / "m.cpp").write_text(_codegen.emit_cpp(PROGRAMS[MASKED_SOFTMAX_BACKWARD], prelude=True))
    r = subprocess.run([CXX, "-std=c++17", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp",
                        "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fno-tree-pre",
                        "-fopt-info-vec-optimized", "-c", str(tmp_path / "m.cpp"), "-o", str(tmp_path / "m.o")],
                       check=True, capture_output=True, text=True)
    vectorized = {int(l.split(":")[1]) for l in r.stderr.splitlines() if "loop vectorized" in l}
    text = (tmp_path / "m.cpp").read_text().splitlines()
    mask_load = next(n for n, l in enumerate(text, 1) if "in_m[" in l)
    loop = max(n for n, l in enumerate(text[:mask_load], 1) if l.strip().startswith("for ("))
    end = next(n for n, l in enumerate(text[loop:], loop + 1) if l.strip() == "}")
    # (GCC names the loop by its header or its first statement.)
    assert vectorized & set(range(loop, end)), "the loop selecting on the loaded mask did not vectorize:\n" + \
        "\n".join(text[loop - 1:end])


def test_pointwise_loop_order_follows_most_accesses(lib, blas):
    code = _codegen.emit_cpp(PROGRAMS[TRANSPOSED], prelude=False)
    assert "for (int64_t p0 = 0; p0 < 48; ++p0) {\n    #pragma omp simd\n    for (int64_t o0 = 0; o0 < 64; ++o0)" in code
    # one transposed load against the contiguous store: the output's order stays
    strided = _codegen.emit_cpp(PROGRAMS[STRIDED], prelude=False)
    assert "#pragma omp simd\n    for (int64_t p0 = 0; p0 < 48; ++p0)" in strided
    r = rng(12)
    x, y = r.standard_normal((48, 64)).astype(np.float32), r.standard_normal((48, 64)).astype(np.float32)
    (out,) = run(lib, blas, TRANSPOSED, [x, y], [((64, 48), np.float32)])
    np.testing.assert_allclose(out, np.tanh(x.T + y.T), rtol=1e-6, atol=1e-7)


def test_softmax_computes_exp_once():
    """The sum loop stores exp(x - max) into the output; the last loop divides it in place."""
    code = _codegen.emit_cpp(PROGRAMS[SOFTMAX], prelude=False)
    assert code.count("kiln_expf(") == 1
    assert "b_out[512*o0 + r0] = t1_3;" in code and "const float t2_3 = b_out[512*o0 + p0];" in code


@pytest.mark.parametrize("threads", [0, 1, 3])
def test_second_pass_prefetches_the_next_row(lib, blas, threads):
    """The sum over a row the max already read prefetches the same block of the next row (not past
    the last row); the first pass, which streams from memory, does not."""
    code = _codegen.emit_cpp(PROGRAMS[LSE], prelude=False)
    assert code.count("__builtin_prefetch(") == 1
    assert "if (o0 + 1 < 37) {" in code
    assert "__builtin_prefetch(&in_x[1100*o0 + pf + 1100]);" in code
    assert code.index("a0 = kiln_max(") < code.index("__builtin_prefetch(") < code.index("kiln_expf(")
    x = rng(21).standard_normal((37, 1100), dtype=np.float32) * 5
    x[36, 1099] = 30.0  # the last element of the last row
    amax, total = run(lib, blas, LSE, [x], [((37, 1), np.float32), ((37, 1), np.float32)], threads)
    x64 = x.astype(np.float64)
    np.testing.assert_array_equal(amax[:, 0], x.max(1))
    np.testing.assert_allclose(total[:, 0], np.exp(x64 - x64.max(1, keepdims=True)).sum(1), rtol=1e-5)


def test_no_prefetch_for_rows_beyond_l2_or_read_once():
    """Rows of more than 256 KB (two would not stay in L2 together) and rows read by one pass only
    get no prefetch; neither does log_softmax's sum, whose row a later pass reads again."""
    big = PROGRAMS[LSE].replace("1100", "70000").replace("37", "4")
    assert "__builtin_prefetch(" not in _codegen.emit_cpp(big, prelude=False)
    assert "__builtin_prefetch(" not in _codegen.emit_cpp(PROGRAMS[POINTWISE], prelude=False)
    assert "__builtin_prefetch(" not in _codegen.emit_cpp(PROGRAMS[LOGSM], prelude=False)


def test_plain_loads_are_not_shared():
    """x / x.sum(): the summed value is a load, re-read rather than stored by the sum loop."""
    code = _codegen.emit_cpp("""
program @norm(%x: f32[8, 1000]) {
  kernel @k0 {
    %sum: f32[8, 1] = reduction sum [i0: 8] over [r0: 1000] {
      %0 = load %x[1000*i0 + r0]
      reduce %0
    }
    %out: f32[8, 1000] = pointwise [i0: 8, i1: 1000] {
      %0 = load %x[1000*i0 + i1]
      %1 = load %sum[i0]
      %2 = div %0, %1
      store %2
    }
  }
  output %out
}
""", prelude=False)
    assert code.count("b_out[") == 1


def test_welford_gets_its_own_vectorized_phase():
    """A Welford variance next to a sum over the same row (hand-written and F.layer_norm's
    statistics in one kernel) runs in its own blocked phase, not the sequential per-element
    update that kept the sum from vectorizing (layernorm_manual ran 3x slower than eager)."""
    code = _codegen.emit_cpp("""
program @stats2(%x: f32[8, 256]) {
  kernel @k0 {
    %s: f32[8] = reduction sum [i0: 8] over [r0: 256] {
      %0 = load %x[256*i0 + r0]
      reduce %0
    }
    %v: f32[8] = reduction welford_var [i0: 8] over [r0: 256] {
      %0 = load %x[256*i0 + r0]
      reduce %0
    }
  }
  output %s, %v
}
""", prelude=False)
    assert "_n += 1;" not in code
    assert "#pragma omp simd reduction(+:a0)" in code and "#pragma omp simd reduction(+:a1_bm2)" in code


def test_row_invariant_values_are_computed_before_the_loop(lib, blas):
    """log_softmax: log(sum) per row goes before the simd loop (inside it, it kept GCC from
    vectorizing the loop: softmax_manual's kernel ran 3.6x slower)."""
    code = _codegen.emit_cpp(PROGRAMS[LOGSM], prelude=False)
    assert code.index("kiln_logf(") < code.index("for (int64_t p0 = 0; p0 < 300; ++p0)")
    x = rng(13).standard_normal((16, 300)).astype(np.float32)
    (out,) = run(lib, blas, LOGSM, [x], [((16, 300), np.float32)])
    x64 = x.astype(np.float64)
    ref = x64 - x64.max(1, keepdims=True)
    ref -= np.log(np.exp(ref).sum(1, keepdims=True))
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def test_transcendentals_emit_vector_helpers():
    code = _codegen.emit_cpp(PROGRAMS[POINTWISE], prelude=False)
    assert "kiln_tanhf(" in code and "kiln_expf(" in code and "std::" not in code


def test_half_and_bfloat16(lib, blas):
    torch = pytest.importorskip("torch")
    r = rng(6)
    x = r.uniform(-3, 3, size=(32, 64)).astype(np.float16)
    yb = torch.from_numpy(r.uniform(-2, 2, size=64).astype(np.float32)).to(torch.bfloat16)
    y = yb.view(torch.int16).numpy().view(np.uint16)
    e, s, h, bf = run(lib, blas, HALF, [x, y],
                      [((32, 64), np.float16), ((32,), np.float32), ((32,), np.float16),
                       ((32, 64), np.uint16)])
    xt = torch.from_numpy(x)
    # Each f16 op rounds its float result, as eager PyTorch does.
    ref_e = (xt.exp() * torch.tensor(0.1, dtype=torch.float16)).numpy()
    np.testing.assert_array_equal(e.view(np.uint16), ref_e.view(np.uint16))
    np.testing.assert_allclose(s, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(h.astype(np.float64), x.astype(np.float64).sum(axis=1), rtol=2e-3, atol=2e-2)
    ref_bf = (xt.float() * yb.float()).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(bf, ref_bf)


def test_mm_with_epilogue(lib, blas):
    r = rng(7)
    a = r.standard_normal((64, 96), dtype=np.float32)
    w = r.standard_normal((48, 96), dtype=np.float32).T  # strides [1, 96]
    bias = r.standard_normal(48, dtype=np.float32)
    (out,) = run(lib, blas, MM_EPILOGUE, [a, w, bias], [((64, 48), np.float32)])
    ref = np.maximum(a.astype(np.float64) @ w.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_addmm_bmm_and_copied_operand(lib, blas):
    r = rng(8)
    b, x, y = r.standard_normal((1, 6)), r.standard_normal((5, 4)), r.standard_normal((4, 6))
    p = r.standard_normal((3, 5, 7), dtype=np.float32)
    qbase = r.standard_normal((3, 7, 6), dtype=np.float32)
    q = np.lib.stride_tricks.as_strided(qbase, shape=(3, 7, 2), strides=(8, 24, 4))  # [2, 6, 1]
    gbase = r.standard_normal((4, 12), dtype=np.float32)
    g = gbase[:, ::2]  # strides [12, 2]: not a BLAS layout, copied first
    hm = r.standard_normal((6, 3), dtype=np.float32)
    am, bm, gm = run(lib, blas, ADDMM_BMM, [b, x, y, p, q, g, hm],
                     [((5, 6), np.float64), ((3, 5, 2), np.float32), ((4, 3), np.float32)])
    np.testing.assert_allclose(am, 0.5 * b + 2.0 * (x @ y), rtol=1e-12)
    np.testing.assert_allclose(bm, np.matmul(p, q), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(gm, 0.5 * (g @ hm), rtol=1e-5, atol=1e-5)
    assert run.last_allocator.calls == 1 and run.last_allocator.peak == 4 * 6 * 4


def test_parallel_full_reduction(lib, blas):
    x = rng(9).uniform(0.5, 1.5, size=1000003).astype(np.float32)
    s, m, big = run(lib, blas, FULL_SUM, [x], [((), np.float32), ((), np.float32), ((3, 300000), np.float32)])
    ref = x.astype(np.float64).sum()
    assert abs(float(s) - ref) / ref < 1e-6  # blocked: far better than a naive float loop
    assert m == x.min()
    np.testing.assert_allclose(big, x[:900000].reshape(3, 300000) / s, rtol=1e-6)


def test_integer_semantics(lib, blas):
    r = rng(10)
    a = r.integers(-50, 50, size=40)
    b = r.integers(-7, 8, size=40)
    b[b == 0] = 3
    c = r.integers(-100, 100, size=40).astype(np.int32)
    k = r.integers(0, 2, size=40).astype(np.bool_)
    q, rem, i, n, any_, cnt = run(lib, blas, INTEGER, [a, b, c, k],
                                  [((40,), np.int64), ((40,), np.int64), ((40,), np.int64), ((40,), np.int32),
                                   ((), np.bool_), ((), np.int64)])
    np.testing.assert_array_equal(q, np.trunc(a / b).astype(np.int64))  # prims.div truncates
    np.testing.assert_array_equal(rem, np.remainder(a, b))  # Python's sign rule
    j = np.arange(40) - 20
    np.testing.assert_array_equal(i, (j // 3) * 10 + j % 3)
    np.testing.assert_array_equal(n, np.where(k, -c, c))
    assert bool(any_) == k.any() and int(cnt) == k.sum()


def test_row_local_reads_and_unfusable_group(lib, blas):
    x = rng(11).standard_normal((8, 128), dtype=np.float32)
    rev, flip = run(lib, blas, ROW_NORM, [x], [((8, 128), np.float32), ((8, 128), np.float32)])
    sq = x.astype(np.float64) ** 2
    np.testing.assert_allclose(rev, sq[:, ::-1] / sq.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(flip, np.exp(-x[::-1]), rtol=1e-6)
    # %sq is read back from memory in its own nest (another element of the row): allocated;
    # %a is read from another row: k1 is not one nest, and %a is allocated too.
    assert run.last_allocator.calls == 2
    source = _codegen.emit_cpp(PROGRAMS[ROW_NORM], prelude=False)
    assert "// kernel @k0: %sq, %ms, %rev" in source
    assert "// %a (of kernel @k1: %a, %flip, not fused)" in source


def test_allocation_failure_returns_1(lib, blas):
    libc = ctypes.CDLL(None)
    failing = ALLOC(lambda n: None)
    ctx = KilnContext(ctypes.cast(failing, ctypes.c_void_p).value, ctypes.cast(libc.free, ctypes.c_void_p).value,
                      0, 0, 1)
    x = np.ones((64, 128), np.float32)
    y, z = np.ones(128, np.float32), np.ones((64, 1), np.float32)
    out = np.empty((64, 128), np.float32)
    ins = (ctypes.c_void_p * 3)(x.ctypes.data, y.ctypes.data, z.ctypes.data)
    outs = (ctypes.c_void_p * 1)(out.ctypes.data)
    assert lib.kiln_entry_pointwise(ctypes.byref(ctx), ins, outs) == 1


def test_allocation_failure_frees_what_was_allocated(lib, blas):
    # The k-th allocation fails: kiln_entry returns 1 having freed the k - 1 storages it had
    # (through kiln_fail), for every k; with none failing, the result and nothing left over.
    source = _codegen.emit_cpp(PROGRAMS[WIDE_LIVE], prelude=False)
    assert "auto kiln_fail = [&](int status) {" in source and source.count("ctx->free(") == 14
    x = np.arange(16, dtype=np.float32)
    (out,) = run(lib, blas, WIDE_LIVE, [x], [((16,), np.float32)])
    np.testing.assert_allclose(out, x * 28)
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    for fail_at in range(1, 8):
        live, count = set(), [0]

        def alloc(n):
            count[0] += 1
            if count[0] == fail_at:
                return None
            p = libc.malloc(n)
            live.add(p)
            return p

        def free(p):
            assert p in live, "free of a pointer not allocated (or freed twice)"
            live.remove(p)
            libc.free(p)

        a, f = ALLOC(alloc), FREE(free)
        ctx = KilnContext(ctypes.cast(a, ctypes.c_void_p).value, ctypes.cast(f, ctypes.c_void_p).value, 0, 0, 1)
        result = np.empty(16, np.float32)
        ins = (ctypes.c_void_p * 1)(x.ctypes.data)
        outs = (ctypes.c_void_p * 1)(result.ctypes.data)
        entry = lib.kiln_entry_wide_live
        entry.restype = ctypes.c_int
        assert entry(ctypes.byref(ctx), ins, outs) == 1
        assert count[0] == fail_at and not live


def test_emit_errors():
    with pytest.raises(ValueError, match="error"):
        _codegen.emit_cpp("program @f(%x: f32[4]) {\n  output %y\n}")
    # Size symbols become C++ names: only s0, s1, ... are accepted.
    symbolic = """program @f(%x: f32[n]) {
  %b: f32[n] = pointwise [i0: n] {
    %0 = load %x[i0]
    store %0
  }
  output %b
}"""
    with pytest.raises(RuntimeError, match="size symbol 'n' of program @f: name size symbols s0, s1"):
        _codegen.emit_cpp(symbolic)
    conv = """program @f(%x: f32[1, 1, 4, 4], %w: f32[1, 1, 3, 3]) {
  %c: f32[1, 1, 2, 2] = extern convolution(%x, %w)
  output %c
}"""
    with pytest.raises(RuntimeError, match="unsupported extern kernel"):
        _codegen.emit_cpp(conv)


def test_welford_blocks(lib, blas):
    r = rng(12)
    x = (r.standard_normal((4, 1500)) * 0.1 + 1000).astype(np.float32)  # a large offset
    y = r.standard_normal((700, 3)).T
    mean, var, var2 = run(lib, blas, WELFORD_BLOCKS, [x, y], [((4,), np.float32), ((4,), np.float32), ((3,), np.float64)])
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(mean, x64.mean(axis=1), rtol=1e-7)
    np.testing.assert_allclose(var, x64.var(axis=1), rtol=1e-6)
    np.testing.assert_allclose(var2, y.var(axis=1), rtol=1e-13)


def test_parallel_collapsed_outer_loops(lib, blas):
    r = rng(13)
    x = r.standard_normal((4, 64, 256), dtype=np.float32)
    y = r.standard_normal((4, 1, 256), dtype=np.float32)
    assert "#pragma omp parallel for collapse(2) num_threads(nt)" in _codegen.emit_cpp(PROGRAMS[COLLAPSE])
    for threads in (1, 4):
        (out,) = run(lib, blas, COLLAPSE, [x, y], [((4, 64, 256), np.float32)], threads)
        np.testing.assert_array_equal(out, x + y)


# Every math op of the loop IR on every dtype family, against eager PyTorch: one program per
# dtype with one buffer per op, all compiled in a second translation unit (-O1: many small
# kernels, compile time matters more than speed here).
UNARY_FLOAT = ("neg abs sign floor ceil trunc round reciprocal exp exp2 expm1 log log2 log1p sqrt rsqrt sin cos "
               "tan asin acos atan sinh cosh tanh erf isfinite").split()
UNARY_INT = "neg abs sign bitwise_not isfinite".split()
BINARY_FLOAT = "add sub mul div maximum minimum pow fmod remainder atan2 eq ne lt le gt ge".split()
BINARY_INT = ("add sub mul div maximum minimum pow fmod remainder bitwise_and bitwise_or bitwise_xor "
              "eq ne lt le gt ge").split()
UNARY_BOOL = "bitwise_not isfinite".split()
BINARY_BOOL = "add mul maximum minimum bitwise_and bitwise_or bitwise_xor eq ne lt le gt ge".split()
OP_DTYPES = {"f32": "float32", "f64": "float64", "f16": "float16", "bf16": "bfloat16", "i64": "int64",
             "i32": "int32", "i16": "int16", "u8": "uint8", "b8": "bool"}
N_OPS = 64


def op_table(dt):
    if dt == "b8":
        return UNARY_BOOL, BINARY_BOOL
    if dt in ("f32", "f64", "f16", "bf16"):
        return UNARY_FLOAT, BINARY_FLOAT
    return UNARY_INT, BINARY_INT


def ops_program(dt):
    unary, binary = op_table(dt)
    lines = [f"program @ops_{dt}(%x: {dt}[{N_OPS}], %y: {dt}[{N_OPS}]) {{"]
    outs = []
    for op in unary + binary:
        res = "b8" if op in ("isfinite", "eq", "ne", "lt", "le", "gt", "ge") else dt
        lines += [f"  %{op}: {res}[{N_OPS}] = pointwise [i0: {N_OPS}] {{", "    %0 = load %x[i0]", "    %1 = load %y[i0]"]
        if op in unary:
            lines += [f"    %2 = {op} %0", "    store %2"]
        elif op == "pow" and dt not in ("f32", "f64", "f16", "bf16"):
            lines += ["    %2 = abs %1", f"    %3 = {op} %0, %2", "    store %3"]  # no negative exponents
        else:
            lines += [f"    %2 = {op} %0, %1", "    store %2"]
        lines.append("  }")
        outs.append(f"%{op}")
    lines += ["  output " + ", ".join(outs), "}"]
    return "\n".join(lines)


def torch_op(torch, op, x, y):
    if op == "div" and not x.is_floating_point():
        return torch.div(x, y, rounding_mode="trunc")
    if op == "pow" and not x.is_floating_point():
        return torch.pow(x, y.abs())
    if op in ("bitwise_not",) and x.dtype == torch.bool:
        return torch.logical_not(x)
    if op in ("add", "maximum", "bitwise_or") and x.dtype == torch.bool:
        return torch.logical_or(x, y)
    if op in ("mul", "minimum", "bitwise_and") and x.dtype == torch.bool:
        return torch.logical_and(x, y)
    if op == "bitwise_xor" and x.dtype == torch.bool:
        return torch.logical_xor(x, y)
    f = getattr(torch, op)
    unary, _ = op_table("f32")
    return f(x) if op in unary or op in UNARY_INT else f(x, y)


@pytest.fixture(scope="module")
def ops_lib(tmp_path_factory):
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX})")
    source = ""
    for i, dt in enumerate(OP_DTYPES):
        text = _codegen.emit_cpp(ops_program(dt), entry_name=f"kiln_entry_ops_{dt}", prelude=(i == 0))
        source += text if i == 0 else f"namespace p_ops_{dt} {{\n{text}}}\n"
    d = tmp_path_factory.mktemp("cppgen_ops")
    (d / "ops.cpp").write_text(source)
    # kiln's own flags: the vectorized math (prelude helpers, libmvec) is what is compared.
    subprocess.run([CXX, "-std=c++17", "-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp",
                    "-fno-math-errno", "-fno-trapping-math", "-shared", "-fPIC", "-Wall", "-Wextra", "-Werror",
                    str(d / "ops.cpp"), "-o", str(d / "ops.so"), "-lmvec"], check=True, capture_output=True,
                   text=True)
    return ctypes.CDLL(str(d / "ops.so"))


def op_inputs(dt, torch):
    r = rng(14)
    if dt == "b8":
        return r.integers(0, 2, N_OPS).astype(np.bool_), r.integers(0, 2, N_OPS).astype(np.bool_)
    if dt in ("f32", "f64", "f16", "bf16"):
        x = r.uniform(-3, 3, N_OPS)
        y = r.uniform(-3, 3, N_OPS)
        x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 0.5]
        y[:6] = [0.0, 2.0, 1.0, np.inf, 1.0, 0.0]
        x[6], y[6] = 2.5, 2.5  # round half to even, equal operands
        return x, y
    lo = 0 if dt == "u8" else -20
    x = r.integers(lo, 21, N_OPS)
    y = r.integers(lo, 8, N_OPS)
    y[y == 0] = 3  # PyTorch raises on integer division by zero
    x[0], y[0] = -7, 2
    x[1], y[1] = 7, -2 if dt != "u8" else 2
    return x, y


@pytest.mark.parametrize("dt", list(OP_DTYPES))
def test_every_op_against_torch(ops_lib, blas, dt):
    torch = pytest.importorskip("torch")
    tdt = getattr(torch, OP_DTYPES[dt])
    x, y = op_inputs(dt, torch)
    tx, ty = torch.tensor(x).to(tdt), torch.tensor(y).to(tdt)

    def raw(t):  # the bytes kiln_entry reads: bfloat16 as its uint16 bits
        return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()

    unary, binary = op_table(dt)
    ops = unary + binary
    refs = [torch_op(torch, op, tx, ty) for op in ops]
    outs = run(ops_lib, blas, f"ops_{dt}", [raw(tx), raw(ty)],
               [((N_OPS,), np.int16 if ref.dtype == torch.bfloat16 else raw(ref).dtype) for ref in refs])
    for op, ref, out in zip(ops, refs, outs):
        got = torch.from_numpy(out)
        if ref.dtype == torch.bfloat16:
            got = got.view(torch.bfloat16)
        assert got.dtype == ref.dtype, op
        if ref.is_floating_point():
            rtol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 2e-6, torch.float64: 1e-14}[ref.dtype]
            torch.testing.assert_close(got, ref, rtol=rtol, atol=0, equal_nan=True, msg=lambda m: f"{dt} {op}: {m}")
        else:
            assert torch.equal(got, ref), f"{dt} {op}: {got} vs {ref}"
