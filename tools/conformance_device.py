#!/usr/bin/env python3
"""The conformance programs with their tensors on an accelerator (issue 18): kiln eager and
kiln.compile on DEVICE against PyTorch eager on DEVICE.

The programs (../shared/conformance/programs, test/programs) make their data on the CPU through
cutil (numpy -> T.from_numpy); here cutil's tensor() puts every such tensor on the device, and
both libraries' default device is set to it while a program builds and runs, so parameters and
tensors the program makes itself land there too. Outputs are compared on the CPU with the
shared runner's compare() and each program's RTOL/ATOL. A tensor output that is not on the
device is reported (work that silently stayed on the CPU).

Where torch has no such device (a dry run on kiln's fake CUDA driver), the oracle runs on the
CPU: --oracle-device cpu (the default then).

  tools/conformance_device.py [PATHS...] [--device cuda] [--oracle-device cuda|cpu]
                              [--mode eager,compile] [-k SUBSTR] [--jobs N] [--timeout S]
                              [--conformance-dir DIR] [--json OUT]

Each program runs in its own subprocess (a crash fails that program only), --jobs at a time;
results print as they finish.
The last line is "N passed, M failed, K skipped".
"""
import argparse
import json
import os
import subprocess
import sys
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_conformance_dir(given):
    for d in ([given] if given else []) + [os.path.join(ROOT, "..", "shared", "conformance"),
                                           os.path.join(ROOT, ".gpu-debs", "conformance")]:
        if d and os.path.isfile(os.path.join(d, "run.py")) and os.path.isfile(os.path.join(d, "cutil.py")):
            return os.path.abspath(d)
    sys.exit("conformance_device: no conformance runner found (../shared/conformance or "
             ".gpu-debs/conformance; --conformance-dir DIR)")


def put_cutil_on(devices):
    """cutil.tensor() -> the tensor on devices[library module] (cutil's other helpers call it)."""
    import numpy as np
    import cutil

    def tensor(T, a, requires_grad=False):
        x = T.from_numpy(np.ascontiguousarray(a).copy()).to(devices[T.__name__])
        if requires_grad:
            x.requires_grad_()
        return x
    cutil.tensor = tensor


def tensor_devices(x, found):
    """The devices of every tensor in a nested output."""
    if isinstance(x, (list, tuple)):
        for v in x:
            tensor_devices(v, found)
    elif isinstance(x, dict):
        for v in x.values():
            tensor_devices(v, found)
    elif hasattr(x, "device") and hasattr(x, "detach"):
        found.add(str(x.device))
    return found


def run_one(path, device, oracle_device, modes, runner):
    res = {"program": os.path.basename(path), "results": {}}
    put_cutil_on({"torch": oracle_device, "kiln": device})
    prog = runner.load_program(path)
    rtol, atol = getattr(prog, "RTOL", 1e-4), getattr(prog, "ATOL", 1e-5)
    import torch
    # The oracle in full float32 precision: TF32 (cuDNN's default for convolutions and RNNs) would
    # put torch's own error of ~1e-4 into what kiln is compared with.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_default_device(oracle_device)
    torch.manual_seed(0)
    try:
        fn_t, calls_t = prog.build(torch)
        expected = [runner.to_numpy(fn_t(*args)) for args in calls_t]
    except Exception as ex:
        res["skipped"] = f"oracle failed on {oracle_device}: {ex!r}"[:300]
        return res
    import kiln
    if hasattr(kiln, "config") and hasattr(kiln.config, "strict"):
        kiln.config.strict = True  # a back-end failure must show, not fall back silently
    kiln.set_default_device(device)
    for mode in modes:
        try:
            kiln.manual_seed(0)
            fn_k, calls_k = prog.build(kiln)
            if mode == "compile":
                fn_k = kiln.compile(fn_k)
            msgs, off_device = [], set()
            for i, args in enumerate(calls_k):
                out = fn_k(*args)
                off_device |= {d for d in tensor_devices(out, set()) if not d.startswith(device)}
                m = runner.compare(expected[i], runner.to_numpy(out), rtol, atol, f"call{i}")
                if m:
                    msgs.append(m)
            if off_device:
                msgs.append(f"outputs on {sorted(off_device)}, not {device}")
            res["results"][mode] = "ok" if not msgs else "mismatch: " + "; ".join(msgs)
        except Exception:
            res["results"][mode] = "error: " + traceback.format_exc(limit=4)[-1500:]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--oracle-device", default=None,
                    help="where PyTorch runs (default: --device when torch has it, else cpu)")
    ap.add_argument("--mode", default="eager,compile")
    ap.add_argument("-k", default=None)
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=180)
    ap.add_argument("--conformance-dir", default=None)
    ap.add_argument("--json", default=None)
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    cdir = find_conformance_dir(a.conformance_dir)
    sys.path.insert(0, cdir)
    modes = a.mode.split(",")

    if a.one:
        import importlib.util
        spec = importlib.util.spec_from_file_location("conformance_run", os.path.join(cdir, "run.py"))
        runner = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(runner)
        try:
            out = run_one(a.one, a.device, a.oracle_device, modes, runner)
        except Exception:
            out = {"program": os.path.basename(a.one), "fatal": traceback.format_exc(limit=4)[-1500:]}
        print("@@RESULT@@" + json.dumps(out))
        return 0

    oracle_device = a.oracle_device
    if oracle_device is None:
        import torch
        has = a.device.startswith("cuda") and torch.cuda.is_available()
        oracle_device = a.device if has else "cpu"
    paths = a.paths or [os.path.join(cdir, "programs")]
    files = []
    for p in paths:
        if os.path.isdir(p):
            files += [os.path.join(p, f) for f in sorted(os.listdir(p)) if f.endswith(".py") and not f.startswith("_")]
        else:
            files.append(p)
    if a.k:
        files = [f for f in files if a.k in os.path.basename(f)]
    print(f"kiln on {a.device} against torch on {oracle_device}: {len(files)} programs, {a.jobs} at a time",
          flush=True)

    def one(f):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", f, "--mode", a.mode, "--device", a.device,
               "--oracle-device", oracle_device, "--conformance-dir", cdir]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
            line = [l for l in p.stdout.splitlines() if l.startswith("@@RESULT@@")]
            return json.loads(line[-1][10:]) if line else {
                "program": os.path.basename(f), "fatal": f"exit {p.returncode}: {p.stderr[-1500:]}"}
        except subprocess.TimeoutExpired:
            return {"program": os.path.basename(f), "fatal": f"timeout after {a.timeout}s"}

    passed = failed = skipped = 0
    results = []
    with ThreadPoolExecutor(max(1, a.jobs)) as pool:
        for fut in as_completed([pool.submit(one, f) for f in files]):
            r = fut.result()
            results.append(r)
            if "skipped" in r:
                skipped += 1
                print(f"SKIP {r['program']}: {r['skipped']}", flush=True)
                continue
            for mode in modes:
                st = r.get("results", {}).get(mode) or r.get("fatal", "not run")
                ok = st == "ok"
                passed += ok
                failed += not ok
                print(f"{'PASS' if ok else 'FAIL'} {mode:8s} {r['program']}", flush=True)
                if not ok:
                    print("     " + st.strip().replace("\n", "\n     ")[-900:], flush=True)
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=1)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
