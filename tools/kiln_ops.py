#!/usr/bin/env python3
"""kiln-ops: prints kiln's op table as the runtime sees it (schemas, tags, kernels).

    kiln_ops.py                 every op overload, one line each
    kiln_ops.py --tag core      only ops with that tag
    kiln_ops.py --summary       counts per tag and per kernel kind
"""
import argparse
import collections

import kiln


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tag", help="only ops carrying this tag")
    ap.add_argument("--summary", action="store_true", help="print counts instead of ops")
    a = ap.parse_args()
    table = kiln._C._op_table()
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
