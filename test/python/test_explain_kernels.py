"""kiln.explain lists, per graph, the kernels the inductor backend fuses it into (from the
scheduled loop program) and its extern calls."""
import numpy as np
import pytest

import kiln
from kiln.compiler.explain import KernelPlan


def _rand(*shape, seed=0):
    return kiln.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _plan(fn, *args):
    out = kiln.explain(fn)(*args)
    assert out.graph_count == 1 and len(out.kernels_per_graph) == 1
    return out, out.kernels_per_graph[0]


def test_pointwise_chain_is_one_kernel():
    def pw_chain(x, y):
        return ((x * y + 1.0).tanh() * 0.5 - x).exp().sigmoid()

    out, plan = _plan(pw_chain, _rand(16, 32), _rand(32, seed=1))
    assert plan.num_kernels == 1 and plan.externs == [] and plan.reason == ""
    kinds = {kind for _, kind in plan.kernels[0][1]}
    assert kinds == {"pointwise"}
    assert plan.summary().startswith("kernels: 1 (k0: pointwise x")
    assert "Inductor Kernels per Graph:\n  Graph 1: kernels: 1 (k0: pointwise" in str(out)


def test_softmax_over_last_dim_is_one_kernel():
    out, plan = _plan(lambda x: x.softmax(-1), _rand(8, 16))
    assert plan.num_kernels == 1 and plan.externs == []
    assert plan.summary() == "kernels: 1 (k0: reduction x2, pointwise x1)"
    assert "k0 fuses %buf0, %buf1, %buf2" in str(out)


def test_mm_bias_gelu_row_sum_is_one_extern_and_one_kernel():
    def fn(x, w, b):
        return kiln.nn.functional.gelu(x @ w + b).sum(-1)

    out, plan = _plan(fn, _rand(8, 16), _rand(16, 32, seed=1), _rand(32, seed=2))
    assert plan.num_kernels == 1 and [k for _, k in plan.externs] == ["mm"]
    assert plan.summary().endswith(", extern calls: 1 (mm)")
    assert "= extern mm" in str(out)


def test_graph_the_backend_cannot_compile_says_why():
    def fn(x, y):
        # A fallback (convolution) reads the caller's tensor after a compiled write into it:
        # the graph cannot be cut into segments (fallback.py).
        x.view(-1)[:2].copy_(y)
        s = kiln.nn.functional.conv1d(x[None], x[None][:, :, :1])
        x.add_(s.sum())
        return s

    out, plan = _plan(fn, _rand(2, 2), _rand(2, seed=1))
    assert plan.num_kernels == 0 and "reads storage the graph writes" in plan.reason
    assert "not compiled by inductor" in str(out)


def test_only_views_need_no_kernel():
    _, plan = _plan(lambda x: x.t(), _rand(4, 6))
    assert plan.num_kernels == 0 and plan.reason == "" and plan.summary() == "kernels: 0"


@pytest.mark.parametrize("program,summary", [
    ("program @p(%x: f32[4]) {\n  output %x\n}\n", "kernels: 0"),
    ("""program @p(%x: f32[4, 4]) {
  %buf0: f32[4, 4] = extern mm(%x, %x)
  kernel @k0 {
    %buf1: f32[4, 4]{reuses=%buf0} = pointwise [i0: 4, i1: 4] {
      %0 = load %buf0[4*i0 + i1]
      store %0
    }
  }
  output %buf1
}
""", "kernels: 1 (k0: pointwise x1), extern calls: 1 (mm)"),
])
def test_plan_from_program_text(program, summary):
    assert KernelPlan.from_program(program).summary() == summary
