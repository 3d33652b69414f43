"""One workload at one size, every peer, in this (fresh) process: correctness first, then timing.

    python bench/measure.py WORKLOAD SIZE --peers kiln_eager,torch_eager,... [--budget S]

Prints one JSON object (the last line of stdout). PyTorch eager is the reference: a peer whose
first result differs from it (dtype, shape, or values beyond the workload's tolerance) is
"failed" and not timed; a peer that raises is "failed" with the exception. Each peer builds the
workload afresh (programs that update parameters in place start from the same state).
"""
import argparse
import ctypes
import gc
import json
import os
import re
import signal
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from workloads import by_name  # noqa: E402

PEERS = ("kiln_eager", "kiln_compiled", "torch_eager", "torch_compile", "jax_jit")


def to_numpy(x):
    """Nested outputs -> nested numpy arrays / Python scalars."""
    if isinstance(x, (list, tuple)):
        return [to_numpy(v) for v in x]
    if isinstance(x, dict):
        return {k: to_numpy(x[k]) for k in sorted(x)}
    if hasattr(x, "detach") and hasattr(x, "numpy"):
        return np.array(x.detach().numpy(), copy=True)
    if hasattr(x, "block_until_ready"):  # a jax array
        return np.asarray(x)
    if isinstance(x, (bool, int, float, type(None))):
        return x
    return float(x)


def mismatch(want, got, rtol, atol, where="out"):
    """None when `got` matches `want` (dtype and shape exactly, values within tolerance)."""
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return f"{where}: structure differs"
        for i, (a, b) in enumerate(zip(want, got)):
            m = mismatch(a, b, rtol, atol, f"{where}[{i}]")
            if m:
                return m
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or sorted(got) != sorted(want):
            return f"{where}: dict keys differ"
        return next((m for k in want if (m := mismatch(want[k], got[k], rtol, atol, f"{where}[{k!r}]"))), None)
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"{where}: expected a tensor, got {type(got).__name__}"
        if got.shape != want.shape or got.dtype != want.dtype:
            return f"{where}: {got.dtype}{list(got.shape)} != expected {want.dtype}{list(want.shape)}"
        if want.dtype.kind in "biu":
            bad = int((want != got).sum())
            return f"{where}: {bad} elements differ" if bad else None
        if not np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True):
            err = np.nanmax(np.abs(want.astype(np.float64) - got.astype(np.float64)))
            return f"{where}: max abs error {err:.3g} (rtol={rtol}, atol={atol})"
        return None
    if isinstance(want, float) and isinstance(got, (int, float)):
        return None if abs(want - got) <= atol + rtol * abs(want) else f"{where}: {got!r} != {want!r}"
    return None if want == got else f"{where}: {got!r} != expected {want!r}"


def nbytes(x):
    """Bytes of every array in a nested structure (the compulsory traffic of inputs or outputs)."""
    if isinstance(x, (list, tuple)):
        return sum(nbytes(v) for v in x)
    if isinstance(x, dict):
        return sum(nbytes(v) for v in x.values())
    if isinstance(x, np.ndarray):
        return x.nbytes
    if hasattr(x, "element_size") and hasattr(x, "numel"):
        return x.element_size() * x.numel()
    return 0


def _status_kb(key):
    with open("/proc/self/status") as f:
        return int(re.search(key + r":\s+(\d+)", f.read()).group(1))


def reset_rss_peak():
    """Returns freed heap memory to the OS (so that a peer's next calls must take it again, and
    show in the peak), then sets VmHWM (peak resident set) to the current RSS (Linux: clear_refs
    5); returns that RSS."""
    gc.collect()
    ctypes.CDLL(None).malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    return _status_kb("VmRSS") * 1024


def timings(call, budget_s, min_runs=5, max_runs=300):
    """Per-call seconds of repeated calls (after the caller's warm-up), until the budget is spent."""
    ts = []
    start = time.perf_counter()
    while len(ts) < min_runs or (time.perf_counter() - start < budget_s and len(ts) < max_runs):
        t = time.perf_counter()
        call()
        ts.append(time.perf_counter() - t)
    return ts


def summarize(ts):
    a = np.sort(np.asarray(ts))
    return {"median_s": float(np.median(a)), "min_s": float(a[0]), "p25_s": float(np.percentile(a, 25)),
            "p75_s": float(np.percentile(a, 75)), "runs": len(a)}


def make_peer(peer, workload, params, libs):
    """(call, description): a no-argument callable running the workload with this peer."""
    if peer.startswith("kiln"):
        kiln = libs["kiln"]
        fn, args = workload.build(kiln, params)
        if peer == "kiln_compiled":
            fn = kiln.compile(fn, backend="inductor")
        return lambda: fn(*args)
    if peer.startswith("torch"):
        torch = libs["torch"]
        fn, args = workload.build(torch, params)
        if peer == "torch_compile":
            fn = torch.compile(fn)
        return lambda: fn(*args)
    jax, jnp = libs["jax"], libs["jax"].numpy
    if workload.jax is None:
        raise NotImplementedError("no jax.numpy translation of this workload")
    _, targs = workload.build(libs["torch"], params)
    jargs = [jnp.asarray(np.array(a.numpy())) for a in targs]
    jfn = jax.jit(workload.jax(jnp, jax))

    def call():
        out = jfn(*jargs)
        out.block_until_ready()
        return out

    return call


class PeerTimeout(BaseException):
    """Raised by SIGALRM; a BaseException, so that compilers that catch Exception (and fall back
    or retry) let it through."""


def _on_alarm(signum, frame):
    raise PeerTimeout()


def run_peer(peer, workload, params, libs, want, budget_s, first_call_limit_s=0):
    """The peer's result dict: status ok with timings and memory, or failed/skipped with a reason.
    A first call (compile included) longer than first_call_limit_s (0: no limit) fails the peer."""
    res = {}
    kiln = libs.get("kiln")
    try:
        t = time.perf_counter()
        call = make_peer(peer, workload, params, libs)
        if first_call_limit_s:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.alarm(first_call_limit_s)
        try:
            got = to_numpy(call())
        finally:
            signal.alarm(0)
        res["first_call_s"] = time.perf_counter() - t
    except PeerTimeout:
        return {"status": "failed", "reason": f"first call (compile included) took over {first_call_limit_s} s"}
    except NotImplementedError as ex:
        return {"status": "skipped", "reason": str(ex)}
    except Exception as ex:
        return {"status": "failed", "reason": f"{type(ex).__name__}: {ex}"[:400],
                "traceback": traceback.format_exc(limit=6)[-1500:]}
    m = mismatch(want, got, workload.rtol, workload.atol)
    if m:
        return {"status": "failed", "reason": "result differs from PyTorch eager: " + m}
    del got
    try:
        # Peak memory of steady-state calls (compiling and first-call caches left out): kiln's
        # cached blocks and glibc's free heap go back to the OS first, so the calls' own
        # allocations show in the RSS high-water mark.
        if kiln is not None:
            kiln.empty_cache()
            kiln.reset_peak_memory_stats()
        rss0 = reset_rss_peak()
        for _ in range(2):  # warm-up
            call()
        res["peak_rss_bytes"] = _status_kb("VmHWM") * 1024 - rss0
        if peer.startswith("kiln"):
            stats = kiln.memory_stats()
            res["kiln_peak_alloc_bytes"] = stats["allocated_bytes.all.peak"] - stats["allocated_bytes.all.current"]
        res.update(summarize(timings(call, budget_s)))
    except Exception as ex:
        return {"status": "failed", "reason": f"{type(ex).__name__} after the first call: {ex}"[:400]}
    res["status"] = "ok"
    return res


def load_libs(peers):
    libs = {}
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    import torch
    torch.set_num_threads(threads)
    libs["torch"] = torch
    if any(p.startswith("kiln") for p in peers):
        import kiln
        kiln.config.strict = True  # a backend failure must fail the peer, not run eagerly
        libs["kiln"] = kiln
    if "jax_jit" in peers:
        try:
            import jax
            jax.config.update("jax_platforms", "cpu")
            libs["jax"] = jax
        except ImportError:
            pass
    return libs


def measure(name, size, peers, budget_s, first_call_limit_s=0):
    workload = by_name(name)
    params = workload.sizes[size]
    libs = load_libs(peers)
    torch = libs["torch"]
    out = {"workload": name, "size": size, "params": list(params) if params else workload.native_size,
           "peers": {}}
    try:
        fn, args = workload.build(torch, params)
        want = to_numpy(fn(*args))
    except Exception as ex:
        out["reference_error"] = f"{type(ex).__name__}: {ex}"[:400]
        return out
    out["bytes"] = nbytes(list(args)) + nbytes(want)
    for peer in peers:
        if peer == "jax_jit" and "jax" not in libs:
            out["peers"][peer] = {"status": "skipped", "reason": "jax is not installed"}
            continue
        out["peers"][peer] = run_peer(peer, workload, params, libs, want, budget_s, first_call_limit_s)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload")
    ap.add_argument("size")
    ap.add_argument("--peers", default=",".join(PEERS))
    ap.add_argument("--budget", type=float, default=0.3, help="seconds of timed calls per peer")
    ap.add_argument("--first-call-limit", type=int, default=0,
                    help="seconds a peer's first call (compiling) may take; 0: no limit")
    a = ap.parse_args()
    print(json.dumps(measure(a.workload, a.size, a.peers.split(","), a.budget, a.first_call_limit)))


if __name__ == "__main__":
    main()
