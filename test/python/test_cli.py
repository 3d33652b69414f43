"""The kiln command (python -m kiln / the `kiln` console script): cache info|clear, explain,
run --dump; the KILN_DEBUG_DIR dump written by the frame callback; kiln._C._codegen (the C++
toolchain and kernel cache). Every test uses a temporary cache folder; few compile C++."""
import ctypes
import os
import subprocess
import sys
import textwrap

import kiln
import pytest
from kiln._C import _codegen

KERNEL = 'extern "C" int kiln_entry(int x) { return 3 * x + 1; }\n'

SCRIPT = textwrap.dedent('''\
    import sys
    import kiln

    @kiln.compile
    def f(x):
        return (x + 1).relu() * 2

    @kiln.compile
    def g(x):
        y = x * 2
        print("inside g")
        return y

    x = kiln.ones(3)
    f(x)
    g(x)
    print("script args", sys.argv[1:])
    ''')


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = str(tmp_path / "cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setenv("KILN_CACHE_DIR", path)
    return path


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "script.py"
    path.write_text(SCRIPT)
    return str(path)


def kiln_cmd(*args, env=None, cwd=None):
    """Runs `python -m kiln args...`; returns the CompletedProcess (text)."""
    full_env = {k: v for k, v in os.environ.items() if k != "KILN_DEBUG_DIR"}
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True,
                          env=full_env, cwd=cwd, timeout=120)


# -- kiln._C._codegen ----------------------------------------------------------------------------

def test_compile_source_cache_hit_load_and_clear(cache_dir):
    path, hit = _codegen.compile_source(KERNEL)
    assert not hit and path.startswith(cache_dir + "/kernels/") and path.endswith(".so")
    assert _codegen.compile_source(KERNEL) == (path, True)
    assert oct(os.stat(cache_dir).st_mode & 0o777) == "0o700"

    kernel = _codegen.load(path, "kiln_entry")
    assert kernel.path == path and kernel.entry == "kiln_entry" and int(kernel) == kernel.address
    fn = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int)(kernel.address)
    assert fn(4) == 13
    with pytest.raises(RuntimeError, match="no symbol 'missing'"):
        _codegen.load(path, "missing")

    info = _codegen.cache_info()
    assert info["dir"] == cache_dir == _codegen.cache_dir()
    assert info["entries"] == info["kernels"] == 1 and info["bytes"] > 0

    out = kiln_cmd("cache", "info")
    assert out.returncode == 0, out.stderr
    assert f"dir: {cache_dir}" in out.stdout and "entries: 1 (1 kernels, 0 artifacts)" in out.stdout
    out = kiln_cmd("cache", "clear")
    assert out.returncode == 0 and "removed 1 entries" in out.stdout, out.stderr
    assert _codegen.cache_info()["entries"] == 0


def test_compile_error_has_compiler_output_and_kept_source(cache_dir):
    with pytest.raises(RuntimeError) as info:
        _codegen.compile_source('extern "C" int kiln_entry() { return undeclared_thing; }\n')
    message = str(info.value)
    assert "C++ compilation failed" in message and "undeclared_thing" in message
    source = message.split("source: ")[1].split("\n")[0]
    assert os.path.exists(source) and source.startswith(cache_dir)


def test_config_settings_are_read_at_each_call(cache_dir, monkeypatch):
    monkeypatch.setattr(kiln.config, "cpp_compiler", "kiln-no-such-compiler")
    with pytest.raises(RuntimeError, match="kiln-no-such-compiler"):
        _codegen.compile_source(KERNEL)
    monkeypatch.setattr(kiln.config, "cpp_compiler", None)
    monkeypatch.setattr(kiln.config, "cpp_flags", "-O1")
    with pytest.raises(TypeError, match="cpp_flags"):
        _codegen.compile_source(KERNEL)
    monkeypatch.setattr(kiln.config, "cache_dir", cache_dir + "/other")
    assert _codegen.cache_dir() == cache_dir + "/other"


def test_artifacts(cache_dir):
    assert _codegen.get_artifact("graph key") is None
    _codegen.put_artifact("graph key", b"\x00lowered program")
    assert _codegen.get_artifact("graph key") == b"\x00lowered program"
    assert _codegen.cache_info()["artifacts"] == 1


# -- the kiln command ----------------------------------------------------------------------------

def test_cache_info_on_an_empty_cache(cache_dir):
    out = kiln_cmd("cache", "info")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"dir: {cache_dir}", "entries: 0 (0 kernels, 0 artifacts)", "bytes: 0 (0 B)"]
    assert kiln_cmd("cache", "bogus").returncode == 2


def test_explain_reports_graphs_breaks_ops_guards(script, cache_dir):
    out = kiln_cmd("explain", script, "a1", "--flag")
    assert out.returncode == 0, out.stderr
    stdout = out.stdout
    assert "inside g" in stdout and "script args ['a1', '--flag']" in stdout  # the script ran
    report = stdout.split("=== kiln explain: ")[1]
    f_part, g_part = report.split("Compiled function 2: ")
    assert f"Compiled function 1: f ({script}:4)" in f_part
    assert "Graph Count: 1" in f_part and "Graph Break Count: 0" in f_part and "Op Count: 3" in f_part
    assert "aten.add" in f_part and "aten.relu" in f_part and "aten.mul" in f_part
    assert "Guard 1:" in f_part and "L['x']" in f_part
    assert g_part.startswith(f"g ({script}:8)")
    # the graph before the print; the resume function after it (`return y`) has no op, no graph:
    # one break reason, and a break count of graph_count - 1 (as torch._dynamo.explain's)
    assert "Graph Count: 1" in g_part and "Graph Break Count: 0" in g_part and "Break Reason 1:" in g_part
    assert "Break Reason 2:" not in g_part
    assert "print" in g_part and f"{script}:11" in g_part


def test_explain_of_a_failing_script_still_reports(tmp_path, cache_dir):
    path = tmp_path / "fails.py"
    path.write_text("import kiln\nf = kiln.compile(lambda x: x + 1)\nf(kiln.ones(2))\nraise ValueError('boom')\n")
    out = kiln_cmd("explain", str(path))
    assert out.returncode == 1
    assert "ValueError: boom" in out.stderr
    assert "Compiled function 1: <lambda>" in out.stdout and "Graph Count: 1" in out.stdout


def test_run_dump_writes_every_stage(script, tmp_path, cache_dir):
    dump = tmp_path / "dump"
    out = kiln_cmd("run", script, "--dump", str(dump), "x")
    assert out.returncode == 0, out.stderr
    assert "script args ['x']" in out.stdout and f"written to {dump}" in out.stderr
    graph_dir = dump / "f" / "__compiled_fn_0"
    files = sorted(os.listdir(graph_dir))
    # The default backend (inductor) adds its stages: the loop program, the fusion decisions
    # and the generated C++.
    assert files == ["captured.py", "captured.txt", "core_aten.txt", "guards.txt", "info.txt",
                     "loops.kir", "output_code.cpp", "prims.txt", "schedule.log"]
    assert (graph_dir / "loops.kir").read_text().startswith("program @f(%x: f32[3])")
    assert "kiln_entry" in (graph_dir / "output_code.cpp").read_text()
    captured = (graph_dir / "captured.txt").read_text()
    assert "aten.add" in captured and "aten.relu" in captured
    for stage in ("core_aten.txt", "prims.txt"):
        assert (graph_dir / stage).read_text().startswith("graph @f(%x: f32[3])")
    assert "def forward" in (graph_dir / "captured.py").read_text()
    assert "L['x']" in (graph_dir / "guards.txt").read_text()
    assert f"location: {script}:4" in (graph_dir / "info.txt").read_text()
    breaks = (dump / "g" / "graph_breaks.txt").read_text()
    assert "print" in breaks and f"{script}:11" in breaks


def test_console_script_is_installed():
    script = os.path.join(os.path.dirname(sys.executable), "kiln")
    if not os.path.exists(script):
        pytest.skip("the kiln console script is installed by `pip install -e .` (make build)")
    out = subprocess.run([script, "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == f"kiln {_codegen.KILN_VERSION}"


# -- KILN_DEBUG_DIR in the frame callback --------------------------------------------------------

def test_debug_dir_hook_for_backend_stages(tmp_path, monkeypatch):
    monkeypatch.setattr(kiln.config, "debug_dir", str(tmp_path))

    def backend(gm, example_inputs):
        kiln.compiler.debug_dir.write("output_code.cpp", "// generated\n")
        return gm.forward

    def h(x):
        return x.exp()

    kiln.compiler.reset()
    try:
        compiled = kiln.compile(h, backend=backend)
        compiled(kiln.ones(2))
    finally:
        kiln.compiler.reset()
    (graph_dir,) = (tmp_path / "test_debug_dir_hook_for_backend_stages.h").iterdir()
    assert (graph_dir / "output_code.cpp").read_text() == "// generated\n"
    assert "aten.exp" in (graph_dir / "captured.txt").read_text()
    kiln.compiler.debug_dir.write("ignored.txt", "outside a compile nothing is written")
    assert not (graph_dir / "ignored.txt").exists()


def test_debug_dir_is_read_from_the_environment(tmp_path):
    out = subprocess.run([sys.executable, "-c", "import kiln; print(kiln.config.debug_dir)"],
                         capture_output=True, text=True, env=dict(os.environ, KILN_DEBUG_DIR=str(tmp_path)),
                         timeout=60)
    assert out.stdout.strip() == str(tmp_path)
