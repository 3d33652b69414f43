"""plan-memory (passes/loop/PlanMemory.h, part of `schedule`): programs whose intermediates
reuse dead buffers' storage compute what the same programs without a plan compute, and the
compiled wrapper allocates only the distinct storages."""
import os
import re
import shutil

import numpy as np
import pytest

import kiln
from kiln._C import _codegen

pytestmark = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                                reason="no C++ compiler")


@pytest.fixture(autouse=True)
def cache_dir(tmp_path_factory, monkeypatch):
    path = str(tmp_path_factory.getbasetemp() / "plan-memory-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    return path


def _transpose(name, src, op):
    return f"""  %{name}: f32[16, 16] = pointwise [i0: 16, i1: 16] {{
    %0 = load %{src}[16*i1 + i0]
    %1 = {op} %0
    store %1
  }}
"""


# Each buffer reads its producer transposed, so no two fuse: every one is a kernel of its own
# and lives in memory, and %c, %d can take the storage of %a, %b.
CHAIN = ("program @chain(%x: f32[16, 16]) {\n" + _transpose("a", "x", "exp") + _transpose("b", "a", "neg")
         + _transpose("c", "b", "sin") + _transpose("d", "c", "cos") + _transpose("e", "d", "tanh")
         + "  output %e\n}\n")


def _run(program, *inputs):
    path, _ = _codegen.compile_source(_codegen.emit_cpp(program))
    return [t.numpy() for t in _codegen.CompiledKernel(path, "kiln_entry", program)(*inputs)]


def test_chain_reuses_dead_buffers_and_matches_the_unplanned_program():
    planned, log = _codegen.schedule(CHAIN)
    assert "%c: f32[16, 16]{reuses=%a}" in planned and "%d: f32[16, 16]{reuses=%b}" in planned
    assert "plan-memory: %c reuses the storage of %a" in log
    source = _codegen.emit_cpp(planned)
    assert len(re.findall(r"ctx->alloc\(", source)) == 2  # %a's and %b's; %e is the output
    assert "float* b_c = b_a;" in source
    x = kiln.from_numpy(np.random.default_rng(0).standard_normal((16, 16)).astype(np.float32))
    want = _run(CHAIN, x)
    got = _run(planned, x)
    np.testing.assert_array_equal(got[0], want[0])
    ref = np.tanh(np.cos(np.sin(-np.exp(x.numpy().T).T).T).T).T
    np.testing.assert_allclose(got[0], ref, rtol=1e-5, atol=1e-6)


def test_unplanned_program_text_is_accepted_and_plan_roundtrips():
    planned, _ = _codegen.schedule(CHAIN)
    again, _ = _codegen.schedule(planned)
    assert again == planned


def test_compiled_mlp_reuses_buffers_and_matches_eager(monkeypatch, capsys):
    # mm externs and ReLU kernels alternate; each layer's buffers die two units later, so the
    # next layers' buffers (extern results included) write into their storage.
    monkeypatch.setattr(kiln.config, "strict", True)
    rng = np.random.default_rng(1)
    ws = [kiln.from_numpy(rng.standard_normal((16, 16)).astype(np.float32)) for _ in range(4)]

    def mlp(x):
        for w in ws:
            x = (x @ w).relu()
        return x

    x = kiln.from_numpy(rng.standard_normal((16, 16)).astype(np.float32))
    kiln.set_logs(loops=True)
    try:
        got = kiln.compile(mlp, backend="inductor")(x)
    finally:
        kiln.set_logs()
    assert re.search(r"plan-memory: %buf\d+ reuses the storage of %buf\d+ \(f32\[16, 16\]",
                     capsys.readouterr().err)
    np.testing.assert_allclose(got.numpy(), mlp(x).numpy(), rtol=1e-4, atol=1e-4)
