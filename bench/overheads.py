"""Per-op and per-call overheads, for bench/run.py (one JSON line): eager `x + y` on one element
(bench/eager_overhead.py) and a tiny compiled function's per-call cost with the inductor backend
of both libraries (bench/compile_overhead.py), and the per-call cost of a function with one graph
break (bench/graph_break_overhead.py, eager backend).

    python bench/overheads.py [--quick]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compile_overhead  # noqa: E402
import eager_overhead  # noqa: E402
import graph_break_overhead  # noqa: E402


def main():
    quick = "--quick" in sys.argv[1:]
    import kiln
    kiln.config.strict = True  # the inductor number must be inductor's, not an eager fallback
    print(json.dumps({"eager_per_op": eager_overhead.measure(quick),
                      "compiled_per_call": compile_overhead.measure(quick, backend="inductor"),
                      "graph_break_per_call": graph_break_overhead.measure(quick, backend="eager")}))


if __name__ == "__main__":
    main()
