"""GEMM libraries side by side (issue 13 item 4): which BLAS kiln should call.

Each candidate runs in its own process (so that one library's thread pool cannot slow the next
one's numbers), loaded with ctypes from where Debian or pip puts it; a candidate that is not
installed is reported as such. Per shape: the best time (of 7 timings, each of
several calls, times --rounds runs of the whole table: the machine is shared) of a C = A @ B product into a
preallocated C (row-major CBLAS convention; "nt" = B transposed as in x @ W.T, "tn" = A
transposed as in a weight gradient), as GFLOP/s. torch.mm(out=) is the peer. Then the pair that
shows whether two thread pools fight: 512x256 @ 256x1024 followed by kiln's GELU (an OpenMP
kernel) on the result, each alone and the two in a row.

    .venv/bin/python bench/gemm_candidates.py [--only mkl-gnu,torch] [--prefix DIR ...] [--json F]

Libraries looked for: Debian libopenblas0-pthread / libopenblas0-openmp / libblis4-openmp /
libdnnl2 under /usr/lib/x86_64-linux-gnu; PyPI scipy-openblas32 (importable), mkl and
onednn-cpu-gomp (their lib/ folders under sys.prefix or a --prefix given here).
"""
import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

DEB = "/usr/lib/x86_64-linux-gnu"

# (label, m, k, n, layout, batch): layout "nn", "nt" (B stored [n, k]), "tn" (A stored [k, m]).
SHAPES = [
    ("64^3", 64, 64, 64, "nn", 1),
    ("128^3", 128, 128, 128, "nn", 1),
    ("256^3", 256, 256, 256, "nn", 1),
    ("512^3", 512, 512, 512, "nn", 1),
    ("1024^3", 1024, 1024, 1024, "nn", 1),
    ("512x256x1024", 512, 256, 1024, "nn", 1),
    ("512x256x1024 nt", 512, 256, 1024, "nt", 1),
    ("512x256x1024 tn", 512, 256, 1024, "tn", 1),
    ("32x768x3072 nt", 32, 768, 3072, "nt", 1),
    ("32x3072x768 nt", 32, 3072, 768, "nt", 1),
    ("64x256x1024 nt", 64, 256, 1024, "nt", 1),
    ("2048x1024x4096 nt", 2048, 1024, 4096, "nt", 1),
    ("attn 4x(64x32x64) nt", 64, 32, 64, "nt", 4),
    ("attn 64x(512x64x512) nt", 512, 64, 512, "nt", 64),
    ("attn 64x(512x512x64)", 512, 512, 64, "nn", 64),
]
BF16_SHAPES = ["128^3", "512^3", "1024^3", "512x256x1024 nt", "2048x1024x4096 nt"]

CblasRowMajor, CblasNoTrans, CblasTrans = 101, 111, 112


def prefixes(extra):
    out = list(extra) + [sys.prefix]
    out += [p for p in os.environ.get("KILN_GEMM_PROBE_PREFIX", "").split(":") if p]
    return out


def find_lib(extra, name, reject=None):
    """The first lib/<name> under the prefixes, skipping folders that hold `reject` (pip's
    onednn is the SYCL/TBB build; onednn-cpu-gomp installs a libdnnl of the same name)."""
    for p in prefixes(extra):
        if reject and glob.glob(os.path.join(p, "lib", reject)):
            continue
        hits = sorted(glob.glob(os.path.join(p, "lib", name)))
        if hits:
            return hits[0]
    return None


def cblas(lib, prefix=""):
    f = getattr(lib, prefix + "cblas_sgemm")
    f.restype = None
    f.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                                       ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                                       ctypes.c_void_p, ctypes.c_int]

    def sgemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
        f(CblasRowMajor, CblasTrans if ta else CblasNoTrans, CblasTrans if tb else CblasNoTrans,
          m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc)
    return sgemm


def load(name, extra):
    """(sgemm, bf16gemm or None, description) for a candidate, or a string saying why not."""
    if name in ("openblas-pthread", "openblas-openmp"):
        path = f"{DEB}/{name}/libopenblas.so.0"
        if not os.path.exists(path):
            return f"not installed ({path})"
        lib = ctypes.CDLL(path)
        lib.openblas_get_config.restype = ctypes.c_char_p
        return cblas(lib), None, lib.openblas_get_config().decode()
    if name == "scipy-openblas32":
        try:
            import scipy_openblas32
        except ImportError:
            return "not installed (pip install scipy-openblas32)"
        lib = ctypes.CDLL(scipy_openblas32.get_lib_dir() + "/libscipy_openblas.so")
        lib.scipy_openblas_get_config.restype = ctypes.c_char_p
        return cblas(lib, "scipy_"), None, lib.scipy_openblas_get_config().decode()
    if name == "blis-openmp":
        path = f"{DEB}/blis-openmp/libblis.so.4"
        if not os.path.exists(path):
            return f"not installed ({path})"
        return cblas(ctypes.CDLL(path)), None, "BLIS 0.9 (Debian, OpenMP)"
    if name == "mkl-gnu":
        path = find_lib(extra, "libmkl_rt.so*")
        if not path:
            return "not installed (pip install mkl)"
        # Set in the parent: MKL reads MKL_THREADING_LAYER=GNU when it loads.
        ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        buf = ctypes.create_string_buffer(256)
        lib.mkl_get_version_string(buf, 256)
        bf = lib.cblas_gemm_bf16bf16f32
        bf.restype = None
        bf.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ctypes.c_void_p, ctypes.c_int,
                                            ctypes.c_void_p, ctypes.c_int, ctypes.c_float,
                                            ctypes.c_void_p, ctypes.c_int]

        def bf16(ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
            bf(CblasRowMajor, CblasTrans if ta else CblasNoTrans,
               CblasTrans if tb else CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0, c, ldc)
        return cblas(lib), bf16, buf.value.decode().strip()
    if name in ("dnnl-debian", "onednn-gomp"):
        path = (f"{DEB}/libdnnl.so.2" if name == "dnnl-debian"
                else find_lib(extra, "libdnnl.so.3*", reject="libsycl.so*"))
        if not path or not os.path.exists(path):
            return "not installed (" + ("apt-get install libdnnl-dev" if name == "dnnl-debian"
                                        else "pip install onednn-cpu-gomp") + ")"
        lib = ctypes.CDLL(path)
        f = lib.dnnl_sgemm
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_char, ctypes.c_char] + [ctypes.c_int64] * 3 + [
            ctypes.c_float, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
            ctypes.c_float, ctypes.c_void_p, ctypes.c_int64]

        def sgemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc):  # dnnl_sgemm is row-major
            f(b"T" if ta else b"N", b"T" if tb else b"N", m, n, k, 1.0, a, lda, b, ldb, 0.0, c,
              ldc)

        class V(ctypes.Structure):
            _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int),
                        ("patch", ctypes.c_int), ("hash", ctypes.c_char_p),
                        ("cpu_runtime", ctypes.c_uint), ("gpu_runtime", ctypes.c_uint)]
        lib.dnnl_version.restype = ctypes.POINTER(V)
        v = lib.dnnl_version().contents
        runtime = {1: "seq", 2: "OpenMP", 4: "TBB"}.get(v.cpu_runtime, str(v.cpu_runtime))
        return sgemm, None, f"oneDNN {v.major}.{v.minor}.{v.patch} ({runtime}), dnnl_sgemm"
    raise ValueError(name)


def timeit(fn, min_time=0.15, reps=7):
    fn()
    t0 = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t0, 1e-7)
    inner = max(1, int(min_time / reps / one))
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        times.append((time.perf_counter() - t0) / inner)
    return min(times)


def operands(m, k, n, layout, batch, dtype=np.float32):
    r = np.random.default_rng(0)
    a = r.standard_normal((batch, k, m) if layout == "tn" else (batch, m, k)).astype(np.float32)
    b = r.standard_normal((batch, n, k) if layout == "nt" else (batch, k, n)).astype(np.float32)
    ref = np.matmul(a.transpose(0, 2, 1) if layout == "tn" else a,
                    b.transpose(0, 2, 1) if layout == "nt" else b)
    return a, b, ref


def to_bf16(x):
    """float32 array -> uint16 bfloat16 bits (round to nearest even) and its float32 value."""
    u = x.view(np.uint32)
    bits = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return bits, (bits.astype(np.uint32) << 16).view(np.float32)


def worker(name, extra, threads):
    out = {"name": name, "gflops": {}, "bf16": {}}
    if name == "torch":
        import torch
        torch.set_num_threads(threads)
        out["desc"] = f"torch {torch.__version__} mm(out=)"
    else:
        got = load(name, extra)
        if isinstance(got, str):
            out["error"] = got
            return out
        sgemm, bf16, out["desc"] = got
    for label, m, k, n, layout, batch in SHAPES:
        a, b, ref = operands(m, k, n, layout, batch)
        c = np.zeros((batch, m, n), np.float32)
        ta, tb = layout == "tn", layout == "nt"
        if name == "torch":
            import torch
            A, B, C = torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(c)
            A = A.transpose(1, 2) if ta else A
            B = B.transpose(1, 2) if tb else B
            if batch == 1:
                fn = (lambda A=A[0], B=B[0], C=C[0]: torch.mm(A, B, out=C))
            else:
                fn = (lambda A=A, B=B, C=C: torch.bmm(A, B, out=C))
        else:
            lda = m if ta else k
            ldb = k if tb else n
            pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
            sa, sb, sc = a[0].size * 4, b[0].size * 4, c[0].size * 4

            def fn(pa=pa, pb=pb, pc=pc, sa=sa, sb=sb, sc=sc, lda=lda, ldb=ldb):
                for i in range(batch):
                    sgemm(ta, tb, m, n, k, pa + i * sa, lda, pb + i * sb, ldb, pc + i * sc, n)
        t = timeit(fn)
        err = float(np.abs(c - ref).max() / (np.abs(ref).max() + 1e-30))
        out["gflops"][label] = [2.0 * batch * m * n * k / t / 1e9, t, err]
        if label in BF16_SHAPES and (name == "torch" or bf16):
            a16, af = to_bf16(a)
            b16, bfl = to_bf16(b)
            ref16 = np.matmul(af.transpose(0, 2, 1) if ta else af,
                              bfl.transpose(0, 2, 1) if tb else bfl)
            if name == "torch":
                A = torch.from_numpy(af).to(torch.bfloat16)
                B = torch.from_numpy(bfl).to(torch.bfloat16)
                A = A.transpose(1, 2) if ta else A
                B = B.transpose(1, 2) if tb else B
                C16 = torch.empty((m, n), dtype=torch.bfloat16)
                fn = (lambda A=A[0], B=B[0], C=C16: torch.mm(A, B, out=C))
                t = timeit(fn)
                res = C16.float().numpy()
            else:
                fn = (lambda: bf16(ta, tb, m, n, k, a16.ctypes.data, lda, b16.ctypes.data, ldb,
                                   c.ctypes.data, n))
                t = timeit(fn)
                res = c[0]
            err = float(np.abs(res - ref16[0]).max() / (np.abs(ref16).max() + 1e-30))
            out["bf16"][label] = [2.0 * m * n * k / t / 1e9, t, err]
    out["pair"] = pair(name, sgemm if name != "torch" else None)
    return out


def pair(name, sgemm):
    """512x256 @ 256x1024, then GELU on the product: each alone and both in a row (ms)."""
    m, k, n = 512, 256, 1024
    a, b, _ = operands(m, k, n, "nn", 1)
    c = np.zeros((m, n), np.float32)
    if name == "torch":
        import torch
        A, B, C = (torch.from_numpy(x) for x in (a[0], b[0], c))
        g = lambda: torch.nn.functional.gelu(C)
        mm = lambda: torch.mm(A, B, out=C)
    else:
        try:
            import kiln
        except ImportError:
            return None
        C = kiln.from_numpy(c)
        g = lambda: kiln.nn.functional.gelu(C)
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
        mm = lambda: sgemm(False, False, m, n, k, pa, k, pb, n, pc, n)

    def both():
        mm()
        g()
    return {"gemm": timeit(mm) * 1e3, "gelu": timeit(g) * 1e3, "both": timeit(both) * 1e3}


CANDIDATES = ["openblas-pthread", "openblas-openmp", "scipy-openblas32", "blis-openmp", "mkl-gnu",
              "dnnl-debian", "onednn-gomp", "torch"]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", default="", help="comma-separated candidates")
    p.add_argument("--prefix", action="append", default=[],
                   help="an extra install prefix whose lib/ holds mkl or onednn")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=2,
                   help="run every candidate this many times (interleaved), keep each cell's best")
    p.add_argument("--json", help="write the raw results here")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.prefix, args.threads)))
        return
    names = [n for n in args.only.split(",") if n] or CANDIDATES
    results = {}
    for rnd, name in [(i, n) for i in range(args.rounds) for n in names]:
        env = dict(os.environ, OMP_NUM_THREADS=str(args.threads),
                   OPENBLAS_NUM_THREADS=str(args.threads), MKL_THREADING_LAYER="GNU",
                   MKL_NUM_THREADS=str(args.threads), BLIS_NUM_THREADS=str(args.threads))
        cmd = [sys.executable, __file__, "--worker", name, "--threads", str(args.threads)]
        for x in args.prefix:
            cmd += ["--prefix", x]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            r = {"name": name, "error": proc.stderr.strip().splitlines()[-1:]}
        else:
            r = json.loads(proc.stdout.strip().splitlines()[-1])
        results[name] = best(results.get(name), r)
        if rnd == 0:
            print(f"{name}: {r.get('desc', r.get('error'))}", file=sys.stderr)
    results = [results[n] for n in names]
    report(results, args.threads, args.rounds)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


def best(old, new):
    """Each cell's best (fastest) of two rounds."""
    if old is None or "error" in old or "error" in new:
        return new if old is None or "error" in old else old
    for key in ("gflops", "bf16"):
        for label, v in new[key].items():
            if v[0] > old[key][label][0]:
                old[key][label] = v
    if new.get("pair"):
        old["pair"] = {k: min(v, new["pair"][k]) for k, v in old["pair"].items()}
    return old


def report(results, threads, rounds):
    ok = [r for r in results if "error" not in r]
    for r in results:
        if "error" in r:
            print(f"skipped {r['name']}: {r['error']}")
    print(f"\nf32 GFLOP/s ({threads} threads; the best of 7 timings x {rounds} rounds), "
          "max rel. error < 1e-5 unless marked *")
    w = max(len(s[0]) for s in SHAPES) + 1
    print("shape".ljust(w) + "".join(r["name"][:16].rjust(17) for r in ok))
    for label, *_ in SHAPES:
        cells = []
        for r in ok:
            g, t, err = r["gflops"][label]
            cells.append((f"{g:.0f}" + ("*" if err > 1e-5 else "")).rjust(17))
        print(label.ljust(w) + "".join(cells))
    bf = [r for r in ok if r["bf16"]]
    if bf:
        print("\nbf16 inputs GFLOP/s (MKL: cblas_gemm_bf16bf16f32, f32 result; torch: bf16 mm)")
        print("shape".ljust(w) + "".join(r["name"][:16].rjust(17) for r in bf))
        for label in BF16_SHAPES:
            print(label.ljust(w) + "".join(f"{r['bf16'][label][0]:.0f}".rjust(17) for r in bf))
    print("\n512x256 @ 256x1024 then GELU on the result (ms; kiln's GELU, torch's for torch)")
    print("candidate".ljust(20) + "gemm".rjust(8) + "gelu".rjust(8) + "both".rjust(8))
    for r in ok:
        if r.get("pair"):
            q = r["pair"]
            print(r["name"].ljust(20) + "".join(f"{q[x]:8.3f}" for x in ("gemm", "gelu", "both")))


if __name__ == "__main__":
    main()
