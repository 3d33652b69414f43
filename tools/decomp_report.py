#!/usr/bin/env python3
"""decomp-report: how kiln's op table splits into core ATen, prims and decompositions.

    decomp_report.py            counts, then the ops that are neither core nor decompose
    decomp_report.py --all      also every op with its status at each level

An op "decomposes to core" when kiln.fx.retrace(..., "core_aten") of a one-node graph calling it
(on its first sample input, kiln.testing) gives a graph of core ATen ops only; "to prims"
likewise with "prims" and prims only. "partial": the retrace rewrote the op but left ops outside the
level (listed). "none": the retrace kept the op. Without kiln.fx.retrace only the tags count.
"""
import argparse
import collections
import sys

from kiln import testing
from kiln.testing import graphs


def _first_sample(target):
    for dtype in ("float32",) + tuple(d for d in testing.ALL_DTYPES if d != "float32"):
        for args, kwargs in testing.sample_inputs(target, dtype):
            try:
                testing.run_eager(target, testing.clone_value(args), testing.clone_value(kwargs))
            except Exception:  # noqa: BLE001 - try the next sample
                continue
            return args, kwargs
    return None


def status(target, level):
    """('kept' | 'full' | 'partial' | 'none' | 'error', detail) of `target` at `level`."""
    if graphs.kept_at(target, level):
        return "kept", ""
    sample = _first_sample(target)
    if sample is None:
        return "error", "no sample runs eagerly"
    graph, _ = graphs.op_graph(target, *sample)
    try:
        result = graphs.retrace(graph, level)
    except Exception as e:  # noqa: BLE001 - reported, not raised
        return "error", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    ops = graphs.call_targets(result)
    if ops == [target]:
        return "none", ""
    outside = sorted(set(graphs.outside_level(result, level)))
    return ("partial", " ".join(outside)) if outside else ("full", "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--all", action="store_true", help="print every op's status")
    a = ap.parse_args()
    targets = testing.op_targets()
    core = [t for t in targets if graphs.is_core(t)]
    prims = [t for t in targets if graphs.is_prim(t)]
    aten = [t for t in targets if not graphs.is_prim(t)]
    print(f"ops in the table: {len(targets)} ({len(aten)} aten, {len(prims)} prims)")
    print(f"core ATen (tag core): {len(core)}")
    print(f"prims (tag prims): {len(prims)}")
    if not graphs.retrace_available():
        rest = [t for t in aten if not graphs.is_core(t)]
        print("kiln.fx.retrace is not available: decompositions cannot be counted")
        print(f"neither core nor prims: {len(rest)}")
        for t in rest:
            print(f"  {t}")
        return 0
    st = {lvl: {t: status(t, lvl) for t in aten} for lvl in graphs.LEVELS}
    noncore = [t for t in aten if not graphs.is_core(t)]
    for lvl, group, what in (("core_aten", noncore, "non-core ops"), ("prims", aten, "aten ops")):
        c = collections.Counter(st[lvl][t][0] for t in group)
        print(f"{what} decomposing to {lvl}: {c['full']} fully, {c['partial']} partially, "
              f"{c['none']} not at all, {c['error']} failing (of {len(group)})")
    neither = [t for t in noncore if st["core_aten"][t][0] != "full"]
    print(f"neither core nor decomposing to core ATen: {len(neither)}")
    for t in neither:
        s, detail = st["core_aten"][t]
        print(f"  {t}  [{s}{': ' + detail if detail else ''}]")
    core_open = [t for t in core if st["prims"][t][0] != "full"]
    print(f"core ops not decomposing to prims: {len(core_open)}")
    for t in core_open:
        s, detail = st["prims"][t]
        print(f"  {t}  [{s}{': ' + detail if detail else ''}]")
    if a.all:
        print("all ops (core_aten / prims):")
        for t in aten:
            print(f"  {t}: {st['core_aten'][t][0]} / {st['prims'][t][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
