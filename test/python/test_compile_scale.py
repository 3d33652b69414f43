"""Compiling large graphs (issue 13): a 1,000-op pointwise chain and a wide 1,000-op DAG compiled
by the inductor backend give eager's results, and the chain is split into kernels of bounded size
(passes/loop/Schedule.h, kMaxKernelOps) rather than one kernel of a thousand ops. The timing of
larger sizes is bench/compile_scale.py's (not a test)."""
import os
import re
import shutil
import sys

import numpy as np
import pytest

import kiln
from kiln.compiler import inductor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from compile_scale import make_fn  # noqa: E402 - the benchmark's own functions

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setattr(kiln.config, "cache_dir", str(tmp_path_factory.getbasetemp() / "scale-cache"))
    monkeypatch.setattr(kiln.config, "strict", True)
    kiln.compiler.reset()  # the functions share their code objects across tests
    yield
    kiln.compiler.reset()


@pytest.mark.parametrize("shape", ["chain", "wide"])
def test_thousand_ops_compiled_equal_eager(shape):
    fn, ops = make_fn(kiln, shape, 1000)
    assert 990 <= ops <= 1000
    x = kiln.from_numpy(np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32))
    want = fn(x).numpy()
    got = kiln.compile(fn, backend="inductor")(x).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert np.abs(want).max() > 0.1  # not a constant result


def test_long_chain_is_split_into_bounded_kernels():
    captured = []

    def backend(gm, example_inputs):
        captured.append(inductor.plan_kernels(gm, example_inputs))
        return gm.forward

    fn, _ = make_fn(kiln, "chain", 1000)
    x = kiln.from_numpy(np.ones((64, 64), np.float32))
    kiln.compile(fn, backend=backend)(x)
    (program,) = captured
    kernels = re.split(r"\n  kernel @k\d+ \{\n", program)[1:]
    ops = [len(re.findall(r"^      %\d+ = ", k, flags=re.M)) for k in kernels]
    assert len(kernels) >= 4, program[:2000]
    assert sum(ops) >= 1000
    # Each kernel stays within the bound (a kernel may be one buffer above it).
    assert max(ops) <= 512 + 64, ops


def _softmax_steps(x, steps=4):
    for _ in range(steps):
        x = kiln.softmax(x * 1.5, -1) + x
        x = x - x.mean(-1, keepdim=True)
    return x


def test_row_nest_of_many_phases_runs_rows_through_a_function():
    # Several softmaxes over the rows are one kernel of many phases, in parallel over the rows:
    # each row is a function of its own (g++ compiled the whole nest inside the OpenMP region
    # 4x slower); the result is eager's.
    from kiln._C import _codegen

    programs = []

    def backend(gm, example_inputs):
        programs.append(inductor.plan_kernels(gm, example_inputs))
        return gm.forward

    x = kiln.from_numpy(np.random.default_rng(1).standard_normal((64, 64)).astype(np.float32))
    kiln.compile(_softmax_steps, backend=backend)(x)
    source = _codegen.emit_cpp(programs[0])
    assert "__attribute__((noinline)) static void kiln_unit0_row(" in source
    assert re.search(r"#pragma omp parallel for num_threads\(nt\)\n\s+for \(int64_t o0 = 0; o0 < 64; \+\+o0\) \{\n"
                     r"\s+kiln_unit0_row\([^;]*o0\);", source), source[-3000:]
    kiln.compiler.reset()
    got = kiln.compile(_softmax_steps, backend="inductor")(x).numpy()
    np.testing.assert_allclose(got, _softmax_steps(x).numpy(), rtol=1e-5, atol=1e-5)


def test_program_split_into_translation_units_computes_the_same():
    # The code generator can spread a program's kernels over several translation units, which
    # the toolchain compiles in parallel and links (automatic from 64 KB of kernels, 32 KB or more
    # per unit).
    from kiln._C import _codegen

    programs = []

    def backend(gm, example_inputs):
        programs.append(inductor.plan_kernels(gm, example_inputs))
        return gm.forward

    fn, _ = make_fn(kiln, "chain", 1000)
    x = kiln.from_numpy(np.random.default_rng(2).standard_normal((64, 64)).astype(np.float32))
    kiln.compile(fn, backend=backend)(x)
    (program,) = programs
    whole = _codegen.emit_cpp(program, translation_units=1)
    assert "// kiln: translation unit" not in whole
    split = _codegen.emit_cpp(program, translation_units=3)
    assert split.count("\n// kiln: translation unit\n") == 2 and "// kiln: end of prelude\n" in split
    assert 'extern "C" int kiln_entry' in split.split("// kiln: translation unit")[0]
    results = []
    for source in (whole, split):
        path, _ = _codegen.compile_source(source)
        (out,) = _codegen.CompiledKernel(path, "kiln_entry", program)(x)
        results.append(out.numpy())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[1], fn(x).numpy(), rtol=1e-4, atol=1e-4)


def test_split_program_whose_unit_has_attributes_before_static():
    # A unit whose definition starts with attributes of its own (optimize("no-thread-jumps"):
    # a select of integers, as cross_entropy's ignore_index makes) stayed `static` in its part
    # while the entry in the first part called it: the program failed to compile once split
    # (nanoGPT's loss, when programs began to split at 64 KB).
    from kiln._C import _codegen

    programs = []

    def backend(gm, example_inputs):
        programs.append(inductor.plan_kernels(gm, example_inputs))
        return gm.forward

    def fn(x, idx):
        return (x.sin() * 2).sum(1), kiln.where(idx > 2, idx, -idx).sum(), (x.exp() + 1).amax(0)

    x = kiln.from_numpy(np.random.default_rng(4).standard_normal((16, 32)).astype(np.float32))
    idx = kiln.arange(-8, 8)
    kiln.compile(fn, backend=backend)(x, idx)
    (program,) = programs
    split = _codegen.emit_cpp(program, translation_units=3)
    assert 'optimize("no-thread-jumps")' in split and split.count("\n// kiln: translation unit\n") == 2
    path, _ = _codegen.compile_source(split)
    for got, want in zip(_codegen.CompiledKernel(path, "kiln_entry", program)(x, idx), fn(x, idx)):
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)


def test_failing_translation_unit_names_its_part():
    from kiln._C import _codegen

    source = ("// kiln: end of prelude\nint kiln_ok() { return 1; }\n"
              "\n// kiln: translation unit\nint kiln_broken( { }\n")
    with pytest.raises(RuntimeError, match=r"C\+\+ compilation failed[\s\S]*\(part 2 of 2\)[\s\S]*kiln_broken"):
        _codegen.compile_source(source)


def test_large_programs_get_the_large_program_flags(monkeypatch):
    # A program with 256 KB of C++ or more beyond the prelude (thousands of ops) compiles with
    # kiln.config.large_program_cpp_flags (default -O1: less g++ time) on top of cpp_flags,
    # split into translation units or not; a smaller one never does. The flags reach the compiler
    # and key both caches.
    from kiln._C import _codegen

    fn, _ = make_fn(kiln, "chain", 1000)
    x = kiln.from_numpy(np.random.default_rng(3).standard_normal((64, 64)).astype(np.float32))
    programs = []

    def backend(gm, example_inputs):
        programs.append((inductor.plan_kernels(gm, example_inputs), inductor._graph_key(gm, example_inputs)))
        return gm.forward

    kiln.compile(fn, backend=backend)(x)
    ((program, key),) = programs
    whole, split = _codegen.emit_cpp(program), _codegen.emit_cpp(program, translation_units=2)
    assert kiln.config.large_program_cpp_flags == ["-O1"]
    assert inductor._program_flags(whole) == [] and inductor._program_flags(split) == []  # 87 KB
    # The same program with 200 KB more source (a comment: g++'s time is the program's).
    large = split + "\n// " + "x" * (200 * 1024) + "\n"
    assert inductor._program_flags(large) == ["-O1"]
    path, _ = _codegen.compile_source(large, extra_flags=inductor._program_flags(large))
    (out,) = _codegen.CompiledKernel(path, "kiln_entry", program)(x)
    np.testing.assert_allclose(out.numpy(), fn(x).numpy(), rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(kiln.config, "large_program_cpp_flags", ["-fkiln-no-such-flag"])
    with pytest.raises(RuntimeError, match="kiln-no-such-flag"):
        _codegen.compile_source(large, extra_flags=inductor._program_flags(large))
    kiln.compiler.reset()
    kiln.compile(fn, backend=backend)(x)
    assert programs[1][1] != key  # the graph cache keys the flags too
    monkeypatch.setattr(kiln.config, "large_program_cpp_flags", [])
    assert inductor._program_flags(large) == []
