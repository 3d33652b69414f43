#!/usr/bin/env python3
"""kiln-ops: prints kiln's op table as the runtime sees it (schemas, tags, kernels).

    kiln_ops.py                 every op overload, one line each
    kiln_ops.py --tag core      only ops with that tag
    kiln_ops.py --summary       counts per tag and per kernel kind
    kiln_ops.py --missing-derivatives
                                differentiable ops (floating-point results, not composite,
                                in-place or non-differentiable) that have no derivative formula;
                                backward through one of them raises an error naming it
"""
import argparse
import collections

import kiln


def missing_derivatives(table):
    """Ops autograd cannot differentiate yet: aten ops with a floating-point-capable Tensor result
    that are neither composite, in-place (through their functional twin), random/creation ops,
    nor marked non_differentiable, and that have no formula."""
    out = []
    for e in table:
        if e["derivative"] != "none" or "prims" in e["tags"] or e["schema"].startswith("prims::"):
            continue
        if "random" in e["tags"] or "creation" in e["tags"]:
            continue
        # In-place ops without a functional twin: copy_ has its own Autograd kernel, the others
        # (fill_) make self a constant (runtime/autograd/AutogradKernels.cpp), as in PyTorch.
        if "inplace" in e["tags"]:
            continue
        returns = e["schema"].rsplit("->", 1)[1]
        if "Tensor" not in returns or "Tensor" not in e["schema"].split("->", 1)[0]:
            continue
        out.append(e)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", help="only ops carrying this tag")
    ap.add_argument("--summary", action="store_true", help="print counts instead of ops")
    ap.add_argument("--missing-derivatives", action="store_true",
                    help="list the differentiable ops that lack a derivative formula")
    a = ap.parse_args()
    table = kiln._C._op_table()
    if a.missing_derivatives:
        missing = missing_derivatives(table)
        for e in missing:
            print(e["schema"])
        print(f"{len(missing)} differentiable ops without a derivative formula")
        return
    if a.tag:
        table = [e for e in table if a.tag in e["tags"]]
    if a.summary:
        tags = collections.Counter(t for e in table for t in e["tags"])
        kernels = collections.Counter(k for e in table for k in e["kernels"])
        print(f"ops: {len(table)}")
        for t, n in sorted(tags.items()):
            print(f"tag {t}: {n}")
        for k, n in sorted(kernels.items()):
            print(f"kernel {k}: {n}")
        return
    for e in table:
        where = ",".join(v for v in ("function", "method") if e[v])
        print(f"{e['schema']}  [{' '.join(e['tags'])}] promotion={e['promotion']} "
              f"kernels={','.join(e['kernels'])} python={e['python'] or '-'}({where})")


if __name__ == "__main__":
    main()
