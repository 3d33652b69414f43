# The benchmark suite cannot rot: its smoke mode produces a report of the right structure with
# finite numbers, and a peer whose result differs from PyTorch is reported failed, not timed.
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from oracle import need_torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench")
sys.path.insert(0, BENCH)


def _finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    need_torch()
    out = tmp_path_factory.mktemp("bench")
    proc = subprocess.run([sys.executable, os.path.join(BENCH, "run.py"), "--smoke", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(out / "results.json") as f:
        return out, json.load(f)


def test_smoke_results_structure(smoke_run):
    _, res = smoke_run
    assert res["mode"] == "smoke"
    for key in ("cpu", "nproc", "python", "numpy", "torch", "kiln"):
        assert res["machine"][key], key
    assert _finite(res["stream"]["triad"]) and res["stream"]["triad"] > 0
    assert [(w["workload"], w["size"]) for w in res["workloads"]] == [("pointwise_chain", "small"),
                                                                     ("softmax", "small")]
    for w in res["workloads"]:
        assert set(w["peers"]) == set(res["peers"]), w
        assert w["peers"]["torch_eager"]["status"] == "ok"
        assert _finite(w["bytes"]) and w["bytes"] > 0
        for peer, r in w["peers"].items():
            assert r["status"] in ("ok", "failed", "skipped"), (peer, r)
            if r["status"] == "ok":
                for key in ("median_s", "min_s", "p25_s", "p75_s", "first_call_s", "peak_rss_bytes"):
                    assert _finite(r[key]), (peer, key, r)
                assert 0 < r["min_s"] <= r["median_s"]
            else:
                assert r["reason"], (peer, r)
    ov = res["overheads"]
    assert _finite(ov["eager_per_op"]["kiln"]["add_1elem_us"])
    assert _finite(ov["compiled_per_call"]["kiln"]["compiled_us"])
    (lat,) = res["compile_latency"]
    assert lat["lib"] == "kiln"
    assert _finite(lat["cold"]["first_call_s"]) and _finite(lat["warm"]["first_call_s"])
    for r in res["summary"]["ratios"]:
        assert r["geomean"] is None or _finite(r["geomean"])
    (scale,) = res["compile_scale"]["rows"]
    assert (scale["shape"], scale["ops"], scale["ok"]) == ("chain", 100, True)
    assert _finite(scale["first_call_s"]) and scale["kernels"] >= 1
    assert {"capture", "decompose", "lower", "schedule", "emit", "c++ compile"} <= set(scale["phases_s"])


def test_smoke_report_markdown(smoke_run):
    out, res = smoke_run
    text = (out / "report.md").read_text()
    for heading in ("## Summary", "## Machine", "## Workloads", "## Overheads", "## Compile latency",
                    "## Compile time against graph size"):
        assert heading in text
    assert "| kiln eager / torch eager |" in text
    assert f"triad **{res['stream']['triad']:.1f} GB/s**" in text
    assert f"torch {res['machine']['torch']}" in text
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    assert (out / "speedup.png").stat().st_size > 0


def test_wrong_result_is_failed_not_timed():
    need_torch()
    import torch

    import kiln
    from measure import run_peer, to_numpy
    from workloads import Workload

    def build(T, shape):
        x = T.from_numpy(np.arange(6, dtype=np.float32).reshape(shape))
        off = 1.0 if T is kiln else 0.0  # kiln computes a different function
        return (lambda x: x * 2 + off), (x,)

    w = Workload("wrong", {"small": (2, 3)}, build)
    fn, args = build(torch, (2, 3))
    want = to_numpy(fn(*args))
    libs = {"kiln": kiln, "torch": torch}
    bad = run_peer("kiln_eager", w, (2, 3), libs, want, 0.01)
    assert bad["status"] == "failed" and "differs from PyTorch" in bad["reason"]
    assert "median_s" not in bad
    good = run_peer("torch_eager", w, (2, 3), libs, want, 0.01)
    assert good["status"] == "ok" and good["median_s"] > 0
