"""CUDA code generation without a GPU (docs/cuda-codegen.md): every kernel kiln generates for
the lit codegen tests and for the compiled graphs of conformance programs compiles with NVRTC
for sm_80 and sm_90, its PTX assembles with ptxas where the image has it, and the CUBIN cache
keys on the architecture. Skips where NVRTC (pip install nvidia-cuda-nvrtc) is absent.

The sources of one test are compiled as one NVRTC program (a prelude, each source's kernels in
a namespace of their own), so the cost is a compile per architecture, not per program.
"""
import functools
import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

from kiln._C import _codegen

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
ARCHS = ("sm_80", "sm_90")
PRELUDE_END = "// program @"

needs_nvrtc = pytest.mark.skipif(not _codegen.nvrtc_available(),
                                 reason="NVRTC not found (pip install nvidia-cuda-nvrtc)")


def kiln_opt():
    build = os.environ.get("KILN_BUILD_DIR") or os.path.join(ROOT, "build")
    path = os.path.join(build, "tools", "kiln-opt")
    if not os.path.exists(path):
        pytest.skip(f"{path} not built")
    return path


def split_source(source):
    """(prelude, kernels) of one generated CUDA source."""
    at = source.index(PRELUDE_END)
    return source[:at], source[at:]


def one_program(sources):
    """The sources as one CUDA translation unit: one prelude, each source's kernels (and its
    `extern "C"` kernels, renamed to stay unique) in a namespace of its own."""
    prelude = split_source(sources[0][1])[0]
    parts = [prelude]
    for i, (name, source) in enumerate(sources):
        pre, kernels = split_source(source)
        assert pre == prelude, name
        kernels = re.sub(r'extern "C" __global__', "__global__", kernels)
        parts.append(f"namespace p{i} {{ // {name}\n{kernels}}}\n")
    return "".join(parts)


def compile_all(sources, what):
    assert sources, what
    text = one_program(sources)
    for arch in ARCHS:
        cubin = _codegen.nvrtc_compile(text, arch, f"{what}.cu")
        assert cubin[:4] == b"\x7fELF", (arch, cubin[:16])
    return text


def lit_sources():
    """(name, CUDA source) of every program of test/lit/codegen, as kiln-opt --emit=cuda makes it
    (graphs run the rest of the way first); chunks that are expected errors print nothing."""
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "test", "lit", "codegen", "*.kir"))):
        run = subprocess.run([kiln_opt(), path, "--split-input-file", "--emit=cuda"], capture_output=True, text=True)
        for i, chunk in enumerate(run.stdout.split("// -----\n")):
            for source in re.split(r"(?=// kiln CUDA prelude\n)", chunk):
                if source.startswith("// kiln CUDA prelude"):
                    out.append((f"{os.path.basename(path)}:{i}", source.split("\n// launch list of @")[0]))
    return out


@needs_nvrtc
def test_lit_codegen_kernels_compile_for_sm80_and_sm90():
    sources = lit_sources()
    # Every lit codegen file has programs the CUDA emitter renders.
    assert len({name.split(":")[0] for name, _ in sources}) >= 8, [n for n, _ in sources]
    text = compile_all(sources, "lit")
    # The kernels exercise every mapping and both index widths.
    for mapping in ("(elementwise)", "(a row per warp)", "(a row per block)", "(a row per thread)", "(serial)"):
        assert mapping in text, mapping
    assert "(32-bit indices)" in text and "(64-bit indices)" in text


def conformance_dir():
    for d in (os.environ.get("KILN_CONFORMANCE_DIR"), os.path.join(ROOT, "..", "shared", "conformance"),
              os.path.join(ROOT, "..", "..", "shared", "conformance")):
        if d and os.path.exists(os.path.join(d, "programs")):
            return os.path.abspath(d)
    pytest.skip("conformance programs not found (KILN_CONFORMANCE_DIR)")


# A sample of the conformance programs that covers the CUDA emitter's kinds of nests (pointwise,
# row reductions, softmax, layer norm, GEMMs, indirect indices, symbolic sizes); each is captured
# with a planning backend (no C++ compile).
CONFORMANCE = ["attention", "layernorm_manual", "mlp_module", "dynamic_batch", "inplace_ops", "conv_net"]


@functools.lru_cache(maxsize=None)
def conformance_programs():
    """(name, loop program text) of the sample's compiled graphs (captured once per session)."""
    import importlib.util

    import kiln
    from kiln.compiler import inductor

    d = conformance_dir()
    sys.path.insert(0, d)
    programs = []
    try:
        for name in CONFORMANCE:
            path = os.path.join(d, "programs", name + ".py")
            if not os.path.exists(path):
                continue
            spec = importlib.util.spec_from_file_location("prog_" + name, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)

            def backend(gm, example_inputs, name=name):
                try:
                    planned = inductor.plan_kernels(gm, example_inputs)
                except inductor.InductorUnsupported:
                    planned = None
                # (A graph with eager fallback ops plans segments: "# ..." lines between programs.)
                text = "".join(line for line in (planned or "").splitlines(True) if not line.startswith("#"))
                for part in re.split(r"(?=^program @)", text, flags=re.M):
                    if part.startswith("program @"):
                        programs.append((f"{name}:{len(programs)}", part))
                return gm.forward

            kiln.compiler.reset()
            fn, calls = mod.build(kiln)
            compiled = kiln.compile(fn, backend=backend)
            for args in calls:
                compiled(*args)
    finally:
        sys.path.remove(d)
        kiln.compiler.reset()
    return tuple(programs)


@needs_nvrtc
def test_conformance_kernels_compile_for_sm80_and_sm90():
    programs = conformance_programs()
    assert len(programs) >= len(CONFORMANCE), [n for n, _ in programs]
    sources = [(name, _codegen.emit_cuda(text)[0]) for name, text in programs]
    text = compile_all(sources, "conformance")
    assert "__shfl_xor_sync" in text


@needs_nvrtc
def test_ptx_assembles_with_ptxas():
    ptxas = shutil.which("ptxas") or ("/usr/local/cuda/bin/ptxas" if os.path.exists("/usr/local/cuda/bin/ptxas") else None)
    if ptxas is None:
        pytest.skip("no ptxas in this image")
    text = one_program(lit_sources())
    version = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    for arch in ARCHS:
        ptx = _codegen.nvrtc_compile(text, arch.replace("sm_", "compute_")).decode()
        emitted = re.search(r"^\.version (\d+\.\d+)", ptx, re.M).group(1)
        # NVRTC 13.5 writes PTX ISA 9.5, which ptxas 13.0 does not read ("current version is
        # '9.0'"): the kernels use nothing newer, so the PTX is assembled as the newest ISA this
        # ptxas accepts.
        probe = subprocess.run([ptxas, "-arch=" + arch, "-o", os.devnull, "-"], input=ptx, capture_output=True,
                               text=True)
        if probe.returncode != 0:
            accepted = re.search(r"current version is '(\d+\.\d+)'", probe.stderr)
            assert accepted, probe.stderr[-2000:]
            ptx = re.sub(r"^\.version \d+\.\d+", ".version " + accepted.group(1), ptx, count=1, flags=re.M)
            probe = subprocess.run([ptxas, "-arch=" + arch, "-o", os.devnull, "-"], input=ptx, capture_output=True,
                                   text=True)
        assert probe.returncode == 0, (emitted, version, probe.stderr[-3000:])


SOFTMAX = """program @softmax(%x: f32[64, 1024]) {
  kernel @k0 {
    %amax: f32[64, 1] = reduction max [i0: 64] over [r0: 1024] {
      %0 = load %x[1024*i0 + r0]
      reduce %0
    }
    %sum: f32[64, 1] = reduction sum [i0: 64] over [r0: 1024] {
      %0 = load %x[1024*i0 + r0]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      reduce %3
    }
    %out: f32[64, 1024] = pointwise [i0: 64, i1: 1024] {
      %0 = load %x[1024*i0 + i1]
      %1 = load %amax[i0]
      %2 = sub %0, %1
      %3 = exp %2
      %4 = load %sum[i0]
      %5 = div %3, %4
      store %5
    }
  }
  output %out
}
"""


@needs_nvrtc
def test_cubin_cache_keys_on_source_and_arch(tmp_path):
    cubin, hit = _codegen.cuda_cubin(SOFTMAX, "sm_80", str(tmp_path))
    assert not hit and cubin[:4] == b"\x7fELF"
    again, hit = _codegen.cuda_cubin(SOFTMAX, "sm_80", str(tmp_path))
    assert hit and again == cubin
    other, hit = _codegen.cuda_cubin(SOFTMAX, "sm_90", str(tmp_path))
    assert not hit and other != cubin
    # Another program (32 rows instead of 64): another source, another key.
    changed, hit = _codegen.cuda_cubin(SOFTMAX.replace("64", "32"), "sm_80", str(tmp_path))
    assert not hit and changed != cubin


@needs_nvrtc
def test_nvrtc_errors_carry_the_log():
    path, version = _codegen.nvrtc_info()
    assert "nvrtc" in os.path.basename(path) and re.fullmatch(r"\d+\.\d+", version)
    with pytest.raises(RuntimeError, match=r"(?s)could not compile bad\.cu for sm_80.*undefined_thing"):
        _codegen.nvrtc_compile('extern "C" __global__ void k() { undefined_thing(); }', "sm_80", "bad.cu")
    with pytest.raises(RuntimeError, match="expected sm_NN"):
        _codegen.nvrtc_compile("", "ampere")


def test_emit_cuda_softmax_is_one_row_kernel():
    # No NVRTC needed: the structure of the source and the launch list.
    source, launches = _codegen.emit_cuda(SOFTMAX)
    assert source.count("__global__") == 1 and "(a row per warp)" in source
    assert launches.splitlines() == [
        "launch kiln_unit0 grid=8 block=256 (%x, %out)",
        "output 0 = %out",
    ]


def test_emit_cuda_rejects_unsupported_extern():
    text = """program @p(%x: f32[4, 4]) {
  %y: f32[4, 4] = extern conv2d(%x, %x)
  output %y
}
"""
    with pytest.raises(RuntimeError, match=r"CUDA codegen: extern conv2d \(%y\): unsupported extern kernel"):
        _codegen.emit_cuda(text)
