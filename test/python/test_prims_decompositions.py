"""Core ATen -> Prims decompositions (compiler/decompositions/Prims*.cpp): graphs retraced to
prims hold prims only, make type promotion and broadcasting explicit, and compute what the
eager ops compute (PyTorch's result dtypes included: Python numbers, 0-d tensors, int-to-float
ops, 16-bit floats computed in float). Every op is also checked on the shared sample inputs by
test_decompositions.py; these are the promotion and layout cases worth spelling out."""
import numpy as np
import pytest

import kiln
import kiln.fx as fx
from oracle import assert_match, both, need_torch, sample


def retrace(text):
    g = fx.parse(text)
    r = fx.retrace(g, "prims")
    r.lint(require_types=True)
    ops = [n.target for n in r.nodes if n.op == "call_function"]
    assert ops and all(t.startswith("prims.") for t in ops), str(r)
    return g, r, ops


def run(graph, *args):
    return fx.GraphModule({}, graph)(*args)


PROMOTION = [
    # (graph body over %i: i32[3], %h: f16[3], %f: f32[2, 3], %z: f64[], %b: b8[3]), torch expression
    ("aten.add.Tensor(%i, 2.5)", lambda i, h, f, z, b: i + 2.5),
    ("aten.add.Tensor(%h, %z)", lambda i, h, f, z, b: h + z),  # a 0-d tensor does not widen
    ("aten.mul.Tensor(%f, %i)", lambda i, h, f, z, b: f * i),
    ("aten.sub.Tensor(%f, %h, alpha=2)", lambda i, h, f, z, b: torch().sub(f, h, alpha=2)),
    ("aten.div.Tensor(%i, %i)", lambda i, h, f, z, b: i / i),
    ("aten.div.Tensor_mode(%i, -2, rounding_mode=\"floor\")", lambda i, h, f, z, b: torch().div(i, -2, rounding_mode="floor")),
    ("aten.div.Scalar_mode(%f, 0.7, rounding_mode=\"floor\")", lambda i, h, f, z, b: torch().div(f, 0.7, rounding_mode="floor")),
    ("aten.div.Tensor_mode(%h, %f, rounding_mode=\"trunc\")", lambda i, h, f, z, b: torch().div(h, f, rounding_mode="trunc")),
    ("aten.exp(%i)", lambda i, h, f, z, b: i.exp()),
    ("aten.sigmoid(%h)", lambda i, h, f, z, b: h.sigmoid()),
    ("aten.eq.Tensor(%i, %h)", lambda i, h, f, z, b: i == h),
    ("aten.lt.Scalar(%i, 1.5)", lambda i, h, f, z, b: i < 1.5),
    ("aten.where.self(%b, %i, %f)", lambda i, h, f, z, b: torch().where(b, i, f)),
    ("aten.pow.Tensor_Scalar(%i, 2)", lambda i, h, f, z, b: i ** 2),
    ("aten.pow.Scalar(2, %h)", lambda i, h, f, z, b: 2 ** h),
    ("aten.clamp(%i, 0.5)", lambda i, h, f, z, b: torch().clamp(i, 0.5)),
    ("aten.logical_and(%i, %f)", lambda i, h, f, z, b: torch().logical_and(i, f)),
    ("aten.bitwise_xor.Scalar(%b, True)", lambda i, h, f, z, b: b ^ True),
    ("aten.maximum(%b, %i)", lambda i, h, f, z, b: torch().maximum(b, i)),
    ("aten.atan2(%i, %z)", lambda i, h, f, z, b: torch().atan2(i, z)),
]


def torch():
    return need_torch()


def promotion_inputs():
    arrays = (np.array([3, -1, 2], np.int32), np.array([0.5, -1.5, 2.25], np.float16),
              sample((2, 3), "float32", seed=3), np.array(1.5), np.array([True, False, True]))
    return [both(a) for a in arrays]


@pytest.mark.parametrize("body,expected", PROMOTION, ids=[p[0] for p in PROMOTION])
def test_pointwise_promotion_and_broadcasting(body, expected):
    g, r, ops = retrace("graph @f(%i: i32[3], %h: f16[3], %f: f32[2, 3], %z: f64[], %b: b8[3]) {\n"
                        f"  %r = call_function {body}\n  output %r\n}}\n")
    pairs = promotion_inputs()
    got = run(r, *[k for k, _ in pairs])
    assert_match(got, expected(*[t for _, t in pairs]))
    assert_match(got, run(g, *[k for k, _ in pairs]))


def test_explicit_convert_and_broadcast():
    _, r, ops = retrace("graph @f(%x: f32[2, 3], %y: i64[3]) {\n"
                        "  %r = call_function aten.add.Tensor(%x, %y)\n  output %r\n}\n")
    assert ops == ["prims.convert_element_type", "prims.broadcast_in_dim", "prims.add"]
    _, r, ops = retrace("graph @f(%x: f16[4]) {\n  %r = call_function aten.mul.Scalar(%x, 3)\n  output %r\n}\n")
    # 16-bit floats compute in float32, as the eager kernels do.
    assert ops == ["prims.convert_element_type", "prims.full", "prims.broadcast_in_dim", "prims.mul",
                   "prims.convert_element_type"]
    assert "prims.full([], 3, dtype=f32" in str(r)


REDUCTIONS = [
    ("aten.sum.dim_IntList(%i, [1], True)", lambda i, f: i.sum(1, keepdim=True)),
    ("aten.sum.dim_IntList(%f, None)", lambda i, f: f.sum()),
    ("aten.sum.dim_IntList(%h, [-1], dtype=f64)", lambda i, f: f.half().sum(-1, dtype=torch().float64)),
    ("aten.mean.dim(%f, [0, 2], True)", lambda i, f: f.mean((0, 2), keepdim=True)),
    ("aten.prod.dim_int(%i, 0)", lambda i, f: i.prod(0)),
    ("aten.amax(%f, [1, 2])", lambda i, f: f.amax((1, 2))),
    ("aten.max.dim(%f, 1, True)", lambda i, f: tuple(f.max(1, keepdim=True))),
    ("aten.min.dim(%i, -1)", lambda i, f: tuple(i.min(-1))),
    ("aten.argmax(%f, None, True)", lambda i, f: f.argmax(None, keepdim=True)),
    ("aten.argmin(%i, 2)", lambda i, f: i.argmin(2)),
    ("aten.var.correction(%f, [1], correction=0, keepdim=True)", lambda i, f: f.var(1, correction=0, keepdim=True)),
    ("aten.any.dims(%i, [0, 1])", lambda i, f: i.any((0, 1))),
]


@pytest.mark.parametrize("body,expected", REDUCTIONS, ids=[p[0] for p in REDUCTIONS])
def test_reductions(body, expected):
    torch()
    g, r, _ = retrace("graph @f(%i: i32[2, 3, 4], %f: f32[2, 3, 4], %h: f16[2, 3, 4]) {\n"
                      f"  %r = call_function {body}\n  output %r\n}}\n")
    ki, ti = both(sample((2, 3, 4), "int32", seed=1, low=-2, high=2))
    kf, tf = both(sample((2, 3, 4), "float32", seed=2, low=-1, high=1))
    kh = kf.to(kiln.float16)
    got = run(r, ki, kf, kh)
    assert_match(got, run(g, ki, kf, kh))
    assert_match(got, expected(ti, tf))


def test_scans_stay_for_the_loop_ir():
    # cumsum and cumprod have no prims decomposition: the loop IR lowers them as a scan
    # (compiler/lowering/Indexing.cpp lowerScan), where a masked reduction would be quadratic in the dim.
    g = fx.parse("graph @f(%i: i32[2, 3, 4], %h: f16[2, 3, 4]) {\n"
                 "  %s = call_function aten.cumsum(%i, 1)\n"
                 "  %p = call_function aten.cumprod(%h, 2)\n  output (%s, %p)\n}\n")
    r = fx.retrace(g, "prims")
    assert [n.target for n in r.nodes if n.op == "call_function"] == ["aten.cumsum", "aten.cumprod"], str(r)


def test_views_stay_views_and_shapes():
    torch = need_torch()
    g, r, ops = retrace("graph @f(%x: f32[2, 3, 4]) {\n"
                        "  %p = call_function aten.permute(%x, [2, 0, 1])\n"
                        "  %u = call_function aten.unsqueeze(%p, -1)\n"
                        "  %e = call_function aten.expand(%u, [4, 2, 3, 5])\n"
                        "  %s = call_function aten.select.int(%e, 1, -1)\n"
                        "  %l = call_function aten.slice.Tensor(%s, 1, 1, 100, 2)\n"
                        "  %v = call_function aten.view(%x, [6, -1])\n"
                        "  %q = call_function aten.squeeze.dims(%u, [-1, 0])\n"
                        "  output (%l, %v, %q)\n}\n")
    assert ops == ["prims.transpose", "prims.broadcast_in_dim", "prims.broadcast_in_dim", "prims.slice",
                   "prims.squeeze", "prims.slice", "prims.reshape", "prims.squeeze"]
    k, t = both(sample((2, 3, 4), "float32"))
    got = run(r, k)
    e = t.permute(2, 0, 1).unsqueeze(-1).expand(4, 2, 3, 5)
    assert_match(got, (e.select(1, -1)[:, 1:100:2], t.view(6, -1), t.permute(2, 0, 1).unsqueeze(-1).squeeze((-1, 0))))
    assert got[1].data_ptr() == k.data_ptr()  # view decomposes to a view


def test_creation_and_copies():
    torch = need_torch()
    g, r, ops = retrace("graph @f(%x: i64[2, 3]) {\n"
                        "  %a = call_function aten.arange.start_step(1, 2.5, 0.25)\n"
                        "  %b = call_function aten.arange.start_step(10, -3, -4, dtype=i16)\n"
                        "  %c = call_function aten.full([2], 7)\n"
                        "  %d = call_function aten.scalar_tensor(3)\n"
                        "  %t = call_function aten._to_copy(%x, dtype=f16)\n"
                        "  %k = call_function aten.clone(%x)\n"
                        "  output (%a, %b, %c, %d, %t, %k)\n}\n")
    assert set(ops) <= {"prims.iota", "prims.convert_element_type", "prims.full", "prims.broadcast_in_dim",
                        "prims.mul", "prims.add", "prims.clone"}
    k, t = both(np.arange(6).reshape(2, 3))
    assert_match(run(r, k), (torch.arange(1, 2.5, 0.25), torch.arange(10, -3, -4, dtype=torch.int16),
                             torch.full((2,), 7), torch.scalar_tensor(3), t.half(), t.clone()))


def test_linalg_and_cat():
    torch = need_torch()
    g, r, ops = retrace("graph @f(%a: f32[3], %m: f32[2, 4], %n: f32[4, 3], %i: i32[2, 3]) {\n"
                        "  %x = call_function aten.addmm(%a, %m, %n, beta=0.5, alpha=2)\n"
                        "  %c = call_function aten.cat([%x, %i], 0)\n"
                        "  %r = call_function aten.repeat(%a, [2, 1, 2])\n"
                        "  %f = call_function aten.flip(%i, [-1, 0])\n"
                        "  output (%c, %r, %f)\n}\n")
    assert "prims.mm" in ops and "prims.cat" in ops and "prims.rev" in ops
    (ka, ta), (km, tm), (kn, tn) = [both(sample(s, "float32", seed=i)) for i, s in enumerate([(3,), (2, 4), (4, 3)])]
    ki, ti = both(sample((2, 3), "int32"))
    x = torch.addmm(ta, tm, tn, beta=0.5, alpha=2)
    assert_match(run(r, ka, km, kn, ki), (torch.cat([x, ti], 0), ta.repeat(2, 1, 2), ti.flip(-1, 0)))


def test_random_ops_decompose_to_random_prims():
    g, r, ops = retrace("graph @f() {\n  %u = call_function aten.rand([3, 2])\n"
                        "  %n = call_function aten.randn([4], dtype=f64)\n  output (%u, %n)\n}\n")
    assert ops == ["prims.uniform", "prims.normal"]
    kiln.manual_seed(5)
    want = run(g)
    kiln.manual_seed(5)
    got = run(r)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a.numpy(), b.numpy())
