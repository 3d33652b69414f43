"""STREAM bandwidth measured in the same run as the benchmarks: bench/stream.c built at run time
with the system C compiler (-O3 -march=native -fopenmp), arrays of at least 4x the last-level
cache where memory allows, best of N repetitions."""
import json
import os
import shutil
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def llc_bytes():
    """The largest cache size the kernel reports (sysfs), or None."""
    best = None
    root = "/sys/devices/system/cpu/cpu0/cache"
    for entry in os.listdir(root) if os.path.isdir(root) else []:
        try:
            with open(os.path.join(root, entry, "size")) as f:
                text = f.read().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        value = int(text.rstrip("KMG")) * mult
        best = value if best is None else max(best, value)
    return best


def available_bytes():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def array_elements(smoke):
    """Doubles per array: 4x the LLC, at most 1/8 of the available memory per array (three
    arrays; the machine is shared), at least 32 MB; 4 MB arrays in smoke mode."""
    if smoke:
        return (4 << 20) // 8
    want = 4 * (llc_bytes() or 32 << 20)
    avail = available_bytes()
    if avail:
        want = min(want, avail // 8)
    return max(want, 32 << 20) // 8


def measure(build_dir, smoke=False):
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return {"error": "no C compiler found (set CC)"}
    exe = os.path.join(build_dir, "stream")
    cmd = [cc, "-O3", "-march=native", "-fopenmp", os.path.join(HERE, "stream.c"), "-o", exe]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        return {"error": f"{' '.join(cmd)} failed: {proc.stderr[-500:]}"}
    n = array_elements(smoke)
    reps = 3 if smoke else 5
    proc = subprocess.run([exe, str(n), str(reps)], capture_output=True, text=True)
    if proc.returncode:
        return {"error": f"stream failed: {proc.stderr[-500:]}"}
    res = json.loads(proc.stdout)
    res.pop("check")
    res.update({"array_bytes": n * 8, "llc_bytes": llc_bytes(), "reps": reps, "compiler": cc})
    return res
