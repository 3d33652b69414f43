"""The inductor backend's graph-level cache (kiln/compiler/graph_cache.py): a graph compiled
before, in this process or another, is rebuilt from its artifact without lowering or compiling;
anything that changes the result changes the key; a damaged or stale entry is compiled again."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import kiln
import kiln.fx as fx
from kiln._C import _codegen
from kiln.compiler import inductor

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    path = str(tmp_path / "cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    return path


@pytest.fixture
def lowerings(monkeypatch):
    """Counts the graphs lowered to loop programs (a graph cache miss lowers, a hit does not)."""
    calls = []
    lower = _codegen.lower

    def counting(graph):
        calls.append(graph)
        return lower(graph)

    monkeypatch.setattr(_codegen, "lower", counting)
    return calls


def _rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


_GRAPH = """graph @g(%x: f32[4, 6], %y: f32[6]) {
  %m = call_function aten.mul.Tensor(%x, %y)
  %t = call_function aten.tanh(%m)
  %s = call_function aten.sum.dim_IntList(%t, [1])
  output (%s, %m)
}"""


def _gm(text=_GRAPH):
    return fx.GraphModule({}, fx.parse(text))


def _run(compiled, *args):
    return [t.detach().numpy() for t in compiled[0](*args)]


def test_second_compile_is_a_cache_hit(lowerings):
    x, y = _rand(4, 6), _rand(6, seed=1)
    first = _run(inductor.compile_graph(_gm(), [x, y]), x, y)
    assert len(lowerings) == 1
    second = _run(inductor.compile_graph(_gm(), [x, y]), x, y)
    assert len(lowerings) == 1  # rebuilt from the artifact
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(second[1], (x * y).detach().numpy(), rtol=1e-6)


def _damage_artifacts(cache_dir, how):
    folder = os.path.join(cache_dir, "artifacts")
    files = os.listdir(folder)
    assert files
    for name in files:
        path = os.path.join(folder, name)
        data = bytearray(open(path, "rb").read())
        if how == "flip":
            data[-3] ^= 0x40
        else:
            data = data[: len(data) // 2]
        with open(path, "wb") as f:
            f.write(bytes(data))


@pytest.mark.parametrize("how", ["flip", "truncate"])
def test_damaged_artifact_compiles_again(cache_dir, lowerings, how):
    x, y = _rand(4, 6), _rand(6, seed=1)
    want = _run(inductor.compile_graph(_gm(), [x, y]), x, y)
    _damage_artifacts(cache_dir, how)
    got = _run(inductor.compile_graph(_gm(), [x, y]), x, y)
    assert len(lowerings) == 2
    for a, b in zip(want, got):
        np.testing.assert_array_equal(a, b)
    inductor.compile_graph(_gm(), [x, y])  # the entry was written again
    assert len(lowerings) == 2


def test_key_covers_layouts_attributes_and_toolchain(monkeypatch):
    x, y = _rand(4, 6), _rand(6, seed=1)
    key = inductor._graph_key(_gm(), [x, y])
    assert key == inductor._graph_key(_gm(), [x, y])
    assert key != inductor._graph_key(_gm(), [_rand(6, 4).t(), y])  # strides
    assert key != inductor._graph_key(_gm(_GRAPH.replace("aten.tanh", "aten.exp")), [x, y])
    monkeypatch.setattr(kiln.config, "cpp_flags", ["-O1"])
    assert key != inductor._graph_key(_gm(), [x, y])  # compiler flags
    monkeypatch.setattr(kiln.config, "cpp_flags", [])

    class M(kiln.nn.Module):
        def __init__(self, w):
            super().__init__()
            self.w = w

    text = """graph @g(%x: f32[4, 6]) {
  %w = get_attr w : f32[4, 6]
  %m = call_function aten.mul.Tensor(%x, %w)
  output (%m,)
}"""
    contiguous = fx.GraphModule(M(_rand(4, 6)), fx.parse(text))
    transposed = fx.GraphModule(M(_rand(6, 4).t()), fx.parse(text))
    assert inductor._graph_key(contiguous, [x]) != inductor._graph_key(transposed, [x])


def test_views_and_attributes_from_the_cache(lowerings):
    lin = kiln.nn.Linear(6, 3)

    def fn(x):
        return x.t(), lin(x).relu() * 2.0

    x = _rand(4, 6)
    want = fn(x)
    for _ in range(2):  # compile, then (after kiln.compiler.reset) from the graph cache
        kiln.compiler.reset()
        with kiln.no_grad():  # the module's parameters require grad: inference compiles
            t, y = kiln.compile(fn, backend="inductor")(x)
        assert t.data_ptr() == x.data_ptr() and tuple(t.shape) == (6, 4)
        np.testing.assert_allclose(y.detach().numpy(), want[1].detach().numpy(), rtol=1e-5, atol=1e-6)
    assert len(lowerings) == 1
    with kiln.no_grad():
        lin.weight.mul_(0.0)  # attributes are read at every call, also on a cache hit
    np.testing.assert_allclose(kiln.compile(fn, backend="inductor")(x)[1].detach().numpy(),
                               fn(x)[1].detach().numpy(), rtol=1e-5, atol=1e-6)


_SCRIPT = """
import kiln
def fn(x, y):
    return (x * y + 1.0).tanh().sum(dim=1)
x = kiln.ones(8, 16)
print(kiln.compile(fn, backend="inductor")(x, x * 2).tolist())
"""


def test_fresh_process_skips_lowering(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "fresh"), KILN_LOGS="output_code,loops")
    runs = [subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
            for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    assert runs[0].stdout == runs[1].stdout
    assert "compiled):" in runs[0].stderr and "fusion decisions" in runs[0].stderr
    assert "graph cache hit):" in runs[1].stderr and "fusion decisions" not in runs[1].stderr
    assert "extern \"C\" int kiln_entry" in runs[1].stderr  # the source kept next to the library


def test_shared_object_removed_from_the_cache_compiles_again(tmp_path):
    # In a fresh process: this one keeps the libraries it loaded mapped.
    cache = tmp_path / "fresh"
    env = dict(os.environ, KILN_CACHE_DIR=str(cache), KILN_LOGS="output_code")
    first = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    for name in os.listdir(cache / "kernels"):
        os.remove(cache / "kernels" / name)
    second = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert "graph cache: unusable entry" in second.stderr and "compiled):" in second.stderr


def test_cache_folder_moved_to_another_place_still_hits(tmp_path):
    env = dict(os.environ, KILN_CACHE_DIR=str(tmp_path / "here"), KILN_LOGS="output_code")
    first = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    shutil.copytree(tmp_path / "here", tmp_path / "there")
    shutil.rmtree(tmp_path / "here")
    env["KILN_CACHE_DIR"] = str(tmp_path / "there")
    second = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout == first.stdout
    assert f"output code ({tmp_path / 'there'}/kernels/" in second.stderr and "graph cache hit" in second.stderr


def test_cache_hit_writes_the_debug_stages(tmp_path, monkeypatch, lowerings):
    """A graph cache hit writes the stages a compile writes (schedule.log, loops.kir,
    output_code.cpp) to the debug folder: `make run`'s demo read schedule.log and failed on its
    second run."""
    debug = tmp_path / "debug"
    monkeypatch.setattr(kiln.config, "debug_dir", str(debug))

    def fn(x, y):
        return (x * y).tanh().sum(dim=1)

    x, y = _rand(4, 6), _rand(6, seed=1)
    for run in range(2):
        shutil.rmtree(debug, ignore_errors=True)
        kiln.compiler.reset()
        kiln.compile(fn)(x, y)
        folders = [d for d, _, names in os.walk(debug) if "captured.txt" in names]
        latest = max(folders, key=os.path.getmtime)
        stages = {name: open(os.path.join(latest, name)).read() for name in
                  ("schedule.log", "loops.kir", "output_code.cpp")}
        assert "kernel @k0" in stages["schedule.log"] and "kiln_entry" in stages["output_code.cpp"]
    assert len(lowerings) == 1  # the second run was a cache hit
