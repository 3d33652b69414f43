"""kiln.backends.cpu (torch.backends.cpu): the CPU's vector capability kiln's kernels are
compiled for (-march=native)."""
import functools


@functools.lru_cache(maxsize=None)
def get_cpu_capability():
    """'AVX512', 'AVX2' or 'DEFAULT', from the flags /proc/cpuinfo lists (torch's names)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return "DEFAULT"
    if "avx512f" in flags:
        return "AVX512"
    return "AVX2" if "avx2" in flags else "DEFAULT"
