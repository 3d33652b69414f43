"""Compile latency of one workload in this (fresh) process: the first call of the compiled
function, which compiles it (kiln.compile(backend="inductor") or torch.compile), then a second
call for reference. The driver runs it twice on one cache folder (KILN_CACHE_DIR /
TORCHINDUCTOR_CACHE_DIR): first on an empty folder (cold), then in a new process on the filled
folder (warm).

    python bench/compile_latency.py kiln|torch WORKLOAD SIZE      # prints one JSON line
"""
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    lib_name, name, size = sys.argv[1:4]
    t = time.perf_counter()
    if lib_name == "kiln":
        import kiln as lib
        lib.config.strict = True
        compile_fn = lambda f: lib.compile(f, backend="inductor")  # noqa: E731
    else:
        import torch as lib
        compile_fn = lib.compile
    import_s = time.perf_counter() - t
    from workloads import by_name

    workload = by_name(name)
    fn, args = workload.build(lib, workload.sizes[size])
    compiled = compile_fn(fn)
    t = time.perf_counter()
    compiled(*args)
    first = time.perf_counter() - t
    t = time.perf_counter()
    compiled(*args)
    second = time.perf_counter() - t
    print(json.dumps({"import_s": import_s, "first_call_s": first, "second_call_s": second,
                      "maxrss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main()
