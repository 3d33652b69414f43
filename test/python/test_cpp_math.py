"""Accuracy of the generated code's math (the prelude's kiln_* helpers and the libmvec-backed
kiln_v* declarations, runtime/cpu/KilnMath.inc) against numpy in float64 (glibc's libm; torch
for erf, which numpy lacks: torch's own float64 sinh overflows from 710 on), in ulp of the result
dtype, on dense grids, log-spaced magnitudes from the smallest subnormal to the largest finite
value, and the edge values 0, -0, subnormals, +-inf, NaN. The bounds asserted here are the ones
docs/cpp-codegen.md documents. Each function runs inside an `omp simd` loop compiled with
kiln's flags, so the vectorized code is what is measured.
"""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest

from kiln._C import _codegen

torch = pytest.importorskip("torch")

CXX = os.environ.get("KILN_CXX", "c++")
FLAGS = ["-O3", "-march=native", "-mprefer-vector-width=512", "-fopenmp", "-fno-math-errno", "-fno-trapping-math", "-shared",
         "-fPIC", "-std=c++17"]

def _erf(x):
    return torch.erf(torch.from_numpy(x)).numpy()


# name: (C helper base name, float64 reference, float ulp bound, double ulp bound). The double
# bounds include the reference's own error (glibc's float64 libm, within 1 ulp).
UNARY = {
    "exp": ("kiln_exp", np.exp, 1, 2),
    "expm1": ("kiln_expm1", np.expm1, 3, 3),
    "log": ("kiln_log", np.log, 1, 2),
    "log1p": ("kiln_log1p", np.log1p, 1, 2),
    "tanh": ("kiln_tanh", np.tanh, 3, 4),
    "exp2": ("kiln_vexp2", np.exp2, 4, 4),
    "log2": ("kiln_vlog2", np.log2, 4, 4),
    "sin": ("kiln_vsin", np.sin, 4, 4),
    "cos": ("kiln_vcos", np.cos, 4, 4),
    "tan": ("kiln_vtan", np.tan, 4, 4),
    "asin": ("kiln_vasin", np.arcsin, 4, 4),
    "acos": ("kiln_vacos", np.arccos, 4, 4),
    "atan": ("kiln_vatan", np.arctan, 4, 4),
    "sinh": ("kiln_vsinh", np.sinh, 4, 4),
    "cosh": ("kiln_vcosh", np.cosh, 4, 4),
    "erf": ("kiln_verf", _erf, 4, 4),
}
BINARY = {
    "atan2": ("kiln_vatan2", np.arctan2, 4, 4),
    "pow": ("kiln_vpow", np.power, 4, 4),
}


def _suffix(dt):
    return "f" if dt == np.float32 else ""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX})")
    prelude = _codegen.emit_cpp("program @p(%x: f32[2]) {\n  output %x\n}\n").split("// program @")[0]
    src = [prelude]
    for dt, T in ((np.float32, "float"), (np.float64, "double")):
        for name, (fn, *_rest) in UNARY.items():
            src.append(f'extern "C" void t_{name}{_suffix(dt)}(const {T}* __restrict a, {T}* __restrict b, '
                       f'long n) {{\n#pragma omp simd\n  for (long i = 0; i < n; ++i) b[i] = '
                       f'{fn}{_suffix(dt)}(a[i]);\n}}')
        for name, (fn, *_rest) in BINARY.items():
            src.append(f'extern "C" void t_{name}{_suffix(dt)}(const {T}* __restrict a, const {T}* __restrict c, '
                       f'{T}* __restrict b, long n) {{\n#pragma omp simd\n  for (long i = 0; i < n; ++i) '
                       f'b[i] = {fn}{_suffix(dt)}(a[i], c[i]);\n}}')
    d = tmp_path_factory.mktemp("cppmath")
    (d / "math.cpp").write_text("\n".join(src) + "\n")
    subprocess.run([CXX, str(d / "math.cpp"), *FLAGS, "-o", str(d / "math.so"), "-lmvec"], check=True,
                   capture_output=True, text=True)
    return ctypes.CDLL(str(d / "math.so"))


def grid(dt, lo=None, hi=None):
    fi = np.finfo(dt)
    rng = np.random.default_rng(0)
    edges = [0.0, -0.0, fi.smallest_subnormal, -fi.smallest_subnormal, fi.smallest_subnormal * 77,
             fi.tiny, -fi.tiny, fi.tiny * 0.5, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5, 2.0,
             fi.max, -fi.max, fi.eps, -fi.eps, 88.72, 89.0, -103.9, -104.0, 709.78, 710.0, -745.1,
             -746.0, 9.0, 22.0, -0.999999, 1e-30, 1e30]
    mags = np.exp(rng.uniform(np.log(float(fi.smallest_subnormal)), np.log(float(fi.max)), 60000))
    parts = [np.array(edges), np.linspace(-30, 30, 60001), np.linspace(-1, 1, 40001),
             rng.choice([-1.0, 1.0], mags.size) * mags]
    with np.errstate(over="ignore"):
        return np.concatenate(parts).astype(dt)


def ulps(got, ref, dt):
    """|got - ref| in ulp of dt at ref (ref is float64), 0 where both are the same NaN/inf/zero
    (signs included), inf where they disagree on being NaN/inf or on the sign of a zero."""
    with np.errstate(over="ignore"):
        ref_r = ref.astype(dt)
    got64 = got.astype(np.float64)
    exact = (got == ref_r) & (np.signbit(got) == np.signbit(ref_r))
    exact |= np.isnan(got) & np.isnan(ref_r)
    spacing = np.spacing(np.abs(ref_r)).astype(np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(got64 - ref) / spacing
    finite = np.isfinite(got64) & np.isfinite(ref_r)
    return np.where(exact, 0.0, np.where(finite, err, np.inf))


def _call(lib, name, *arrays):
    out = np.empty_like(arrays[0])
    ptrs = [a.ctypes.data_as(ctypes.c_void_p) for a in arrays] + [out.ctypes.data_as(ctypes.c_void_p)]
    getattr(lib, name)(*ptrs, ctypes.c_long(out.size))
    return out


def _check(name, dt, x, got, ref, bound):
    err = ulps(got, ref, dt)
    worst = int(np.argmax(err))
    assert err[worst] <= bound, (f"{name}({dt.__name__}): {err[worst]:.2f} ulp > {bound} at x={x[worst]!r}: "
                                 f"got {got[worst]!r}, torch {ref[worst]!r}")


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(UNARY))
def test_unary_within_bound(lib, name, dt):
    _fn, ref_fn, bound32, bound64 = UNARY[name]
    x = grid(dt)
    got = _call(lib, f"t_{name}{_suffix(dt)}", x)
    # float: the float64 value on the same float inputs is exact to well below a float ulp.
    with np.errstate(all="ignore"):
        ref = ref_fn(x.astype(np.float64))
    _check(name, dt, x, got, ref, bound32 if dt == np.float32 else bound64)


@pytest.mark.parametrize("dt", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("name", list(BINARY))
def test_binary_within_bound(lib, name, dt):
    _fn, ref_fn, bound32, bound64 = BINARY[name]
    rng = np.random.default_rng(1)
    a = grid(dt)
    b = rng.permutation(a)
    if name == "pow":  # bases and exponents whose powers are mostly finite and nonzero
        a = np.abs(rng.uniform(0, 4, a.size)).astype(dt)
        a[:40] = grid(dt)[:40]
        b = rng.uniform(-30, 30, a.size).astype(dt)
        b[40:80] = grid(dt)[:40]
        b[80:90] = [0.0, -0.0, 0.5, 1.0, 2.0, 3.0, -1.0, np.inf, -np.inf, np.nan]
    got = _call(lib, f"t_{name}{_suffix(dt)}", a, b)
    with np.errstate(all="ignore"):
        ref = ref_fn(a.astype(np.float64), b.astype(np.float64))
    _check(name, dt, a, got, ref, bound32 if dt == np.float32 else bound64)


def test_math_loops_vectorize(tmp_path):
    """The helpers do not stop `omp simd` loops from vectorizing (a libm call would)."""
    if shutil.which(CXX) is None:
        pytest.skip(f"no C++ compiler ({CXX})")
    prelude = _codegen.emit_cpp("program @p(%x: f32[2]) {\n  output %x\n}\n").split("// program @")[0]
    names = ["kiln_expf", "kiln_exp", "kiln_expm1f", "kiln_expm1", "kiln_logf", "kiln_log",
             "kiln_log1pf", "kiln_log1p", "kiln_tanhf", "kiln_tanh", "kiln_verff", "kiln_vsin"]
    body = []
    for i, fn in enumerate(names):
        T = "float" if fn.endswith("f") else "double"
        body.append(f"void v{i}(const {T}* __restrict a, {T}* __restrict b, long n) {{\n#pragma omp simd\n"
                    f"  for (long i = 0; i < n; ++i) b[i] = {fn}(a[i]);\n}}")
    (tmp_path / "v.cpp").write_text(prelude + "\n".join(body) + "\n")
    r = subprocess.run([CXX, str(tmp_path / "v.cpp"), *FLAGS, "-fopt-info-vec-optimized", "-c", "-o",
                        str(tmp_path / "v.o")], check=True, capture_output=True, text=True)
    lines = {int(l.split(":")[1]) for l in r.stderr.splitlines() if "loop vectorized" in l}
    text = (tmp_path / "v.cpp").read_text().splitlines()
    for i, fn in enumerate(names):
        loop_line = next(n for n, l in enumerate(text, 1) if l.startswith(f"void v{i}(")) + 2
        assert loop_line in lines, f"the loop calling {fn} did not vectorize"


@pytest.mark.parametrize("dt", [np.float32, np.float64, np.float16], ids=["f32", "f64", "f16"])
@pytest.mark.parametrize("exponent", [2.0, 3.0, -1.0, -2.0, 1.7])
def test_constant_pow_matches_torch(tmp_path, dt, exponent):
    """x ** c compiles to eager PyTorch's special cases (x*x, x*x*x, 1/x, 1/(x*x)), bit-identical
    to torch (NaN signs aside), or to libmvec's pow (within a few ulp)."""
    import kiln
    kiln.config.cache_dir = str(tmp_path)
    kiln.compiler.reset()  # one lambda, many dtypes and exponents: stay under the recompile limit
    r = np.random.default_rng(2)
    base = np.concatenate([r.standard_normal(500) * 10, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30,
                                                         3e38, 1e-45, 0.5, 4.0]])
    with np.errstate(over="ignore"):
        x = base.astype(dt)
    got = kiln.compile(lambda a: a ** exponent, backend="inductor")(kiln.from_numpy(x)).numpy()
    ref = (torch.from_numpy(x) ** exponent).numpy()
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(np.signbit(got[~nan]), np.signbit(ref[~nan]))
    if exponent == 1.7:  # libmvec's pow: a few ulp
        rtol = {np.float32: 5e-7, np.float64: 1e-15, np.float16: 2e-3}[dt]
        np.testing.assert_allclose(got[~nan], ref[~nan], rtol=rtol, atol=0)
    else:
        np.testing.assert_array_equal(got[~nan], ref[~nan])
