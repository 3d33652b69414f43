"""Runs generated CUDA programs on the CPU, for tests on machines without a GPU: the CUDA source
is compiled by the system C++ compiler against a header that emulates the CUDA built-ins it uses
(test/fake_cuda/cuda_emulator.h, shared with the fake CUDA driver: a std::thread per CUDA thread,
one block at a time; warp shuffles and __syncwarp through a per-warp barrier, __syncthreads
through a per-block barrier; __shared__ arrays are statics), and the launch list (kiln._C._codegen.emit_cuda's text form) is interpreted here, cuBLAS steps with
numpy. Slow (threads are OS threads): small shapes only. It checks what the kernels compute
(mappings, combines, index math) and that the launch list is complete; not speed, not the
memory model of a real GPU.
"""
import ctypes
import os
import re
import subprocess
import tempfile

import numpy as np

from kiln._C import _codegen

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The emulated CUDA built-ins and the launcher, shared with the fake CUDA driver.
EMULATOR_HEADER = os.path.join(REPO, "test", "fake_cuda", "cuda_emulator.h")


def kernels(source):
    """[(name, syncs)] of the source's kernels: syncs when its body has a barrier or a warp
    shuffle (its threads must then run concurrently)."""
    found = list(re.finditer(r'extern "C" __global__ void __launch_bounds__\(\d+\) (\w+)\(', source))
    out = []
    for i, m in enumerate(found):
        body = source[m.end():found[i + 1].start() if i + 1 < len(found) else len(source)]
        out.append((m.group(1), "__sync" in body or "kiln_shfl" in body))
    return out


def _compile(source, workdir):
    text = f'#include "{EMULATOR_HEADER}"\n' + source + "".join(
        f'extern "C" void emu_{n}(unsigned g, unsigned b, void** a) {{ kiln_emu_launch({n}, g, b, a, {str(s).lower()}); }}\n'
        for n, s in kernels(source))
    src = os.path.join(workdir, "emu.cpp")
    lib = os.path.join(workdir, "emu.so")
    with open(src, "w") as f:
        f.write(text)
    cxx = os.environ.get("KILN_CXX", "c++")
    subprocess.run([cxx, "-std=c++20", "-O1", "-shared", "-fPIC", "-w", "-pthread", src, "-o", lib], check=True,
                   capture_output=True)
    return ctypes.CDLL(lib)


def _eval(expr, sizes):
    env = {"floordiv": lambda a, b: a // b, "min": min, "max": max, "mod": lambda a, b: a % b}
    env.update(sizes)
    return int(eval(expr, {"__builtins__": {}}, env))


def _view(storage, dtype, offset, shape, strides):
    item = np.dtype(dtype).itemsize
    return np.lib.stride_tricks.as_strided(storage.view(dtype)[offset:], shape=shape,
                                           strides=[s * item for s in strides])


GEMM_DTYPES = {"f32": np.float32, "f64": np.float64}


def run(program_text, inputs, outputs, sizes=None):
    """Runs the CUDA program of `program_text` on the emulator. `inputs`: name -> numpy array
    holding the input's storage from its first element (a flat array for strided inputs), or
    (array, k) for an input starting at element k;
    `outputs`: [(dtype, element count)] per output slot; `sizes`: symbol -> value. Returns the
    outputs as flat arrays, and the KilnError message if one was reported."""
    sizes = sizes or {}
    source, launches = _codegen.emit_cuda(program_text)
    with tempfile.TemporaryDirectory() as d:
        lib = _compile(source, d)
        store = {}
        for name, arr in inputs.items():
            # (array, k): the input starts at element k of the array (a view at an offset).
            arr, offset = arr if isinstance(arr, tuple) else (arr, 0)
            data = np.ascontiguousarray(arr)
            store[name] = data.view(np.uint8).reshape(-1).copy()[offset * data.itemsize:]
        outs = [np.zeros(n, dtype=t) for t, n in outputs]
        for i, o in enumerate(outs):
            store[f"output:{i}"] = o.view(np.uint8).reshape(-1)
        err = np.zeros(2 + 2 + 256 // 8, dtype=np.int64)  # struct KilnError {int; int64; int64; char[256]}
        lines = launches.splitlines()
        for line in lines:
            if m := re.fullmatch(r"output (\d+) = %(\S+)", line):
                store[m.group(2)] = store[f"output:{m.group(1)}"]
        keep = []
        for line in lines:
            if m := re.fullmatch(r"alloc %(\S+) (.+) bytes", line):
                store[m.group(1)] = np.zeros(max(_eval(m.group(2), sizes), 1), np.uint8)
            elif m := re.fullmatch(r"alias %(\S+) = %(\S+)", line):
                store[m.group(1)] = store[m.group(2)]
            elif m := re.fullmatch(r"free %(\S+)", line):
                store[m.group(1)] = None
            elif m := re.fullmatch(r"copy (\S+) <- %(\S+) (.+) bytes", line):
                n = _eval(m.group(3), sizes)
                store[m.group(1)][:n] = store[m.group(2)][:n]
            elif m := re.fullmatch(r"launch (\w+) grid=(.+) block=(\d+) \((.*)\)( checks errors)?", line):
                args = []
                for a in m.group(4).split(", ") if m.group(4) else []:
                    # args[i] points at the parameter's value, as cuLaunchKernel's.
                    if a == "error":
                        v = ctypes.c_void_p(err.ctypes.data)
                    elif a.startswith("%") or a.startswith("output:"):
                        v = ctypes.c_void_p(store[a.lstrip("%")].ctypes.data)
                    else:
                        v = ctypes.c_int64(sizes[a])
                    keep.append(v)
                    args.append(ctypes.cast(ctypes.pointer(v), ctypes.c_void_p))
                arr = (ctypes.c_void_p * max(len(args), 1))(*args)
                getattr(lib, "emu_" + m.group(1))(ctypes.c_uint(_eval(m.group(2), sizes)),
                                                   ctypes.c_uint(int(m.group(3))), arr)
            elif line.startswith("gemm "):
                _gemm(line, store, sizes)
            elif not line.startswith("output "):
                raise AssertionError("unknown launch list step: " + line)
        message = None
        if err[0] & 0xFFFFFFFF:
            message = err[3:].tobytes().split(b"\0")[0].decode()
        return outs, message


def _gemm(line, store, sizes):
    f = dict(kv.split("=", 1) for kv in line.split()[3:])
    t = GEMM_DTYPES[line.split()[1]]
    trans = line.split()[2]
    m, n, k = (_eval(f[x], sizes) for x in "mnk")
    lda, ldb, ldc = (_eval(f[x], sizes) for x in ("lda", "ldb", "ldc"))
    batch = 1
    sa = sb = sc = 0
    if "batch" in f:
        batch = _eval(f["batch"], sizes)
        sa, sb, sc = (_eval(x, sizes) for x in f["strides"].split(","))

    def operand(spec):
        name, _, off = spec.lstrip("%").partition("+")
        return store[name], int(off or 0)

    A, oa = operand(f["a"])
    B, ob = operand(f["b"])
    C, _ = operand(f["c"])
    alpha, beta = float(f["alpha"]), float(f["beta"])
    for bt in range(batch):
        a = _view(A, t, oa + bt * sa, (m, k), (1, lda) if trans[0] == "T" else (lda, 1))
        b = _view(B, t, ob + bt * sb, (k, n), (1, ldb) if trans[1] == "T" else (ldb, 1))
        c = _view(C, GEMM_DTYPES[f.get("out", line.split()[1])], bt * sc, (m, n), (ldc, 1))
        c[...] = alpha * (a.astype(np.float64) @ b.astype(np.float64)) + beta * c
