"""Type-promotion corner cases: int tensors with float scalars, true and floor division of
ints (negative operands), bool arithmetic and sums, uint8 wrap-around, a float16 tensor with a
float32 0-dim tensor (stays half), int64 with a float 0-dim tensor, result_type, and in-place
ops that must not change the dtype."""
import numpy as np
from cutil import randn, rng, tensor

TAGS = ["dtype", "pointwise"]
RTOL, ATOL = 1e-3, 1e-3


def build(T):
    def fn(i, b, u, h, f):
        a1 = i * 0.5
        a2 = i / 4
        a3 = i // -3
        a4 = T.remainder(i, -3)
        a5 = b + b
        a6 = b.sum()
        a7 = b * 2.5
        a8 = u + 250
        a9 = h + f.sum()
        a10 = i + f.sum()
        a11 = T.result_type(i, 1.0) == T.float32
        a12 = i.clone()
        a12 += 3
        a12 *= 2
        a13 = (i > 0) & b
        a14 = T.div(i, 3, rounding_mode="trunc")
        a15 = T.div(i, 3, rounding_mode="floor")
        a16 = i.float().mean() + i.sum()
        a17 = T.true_divide(b, 2)
        a18 = h * 3
        return a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18

    r = rng(118)
    i = tensor(T, np.array([-7, -3, -1, 0, 2, 5, 9], dtype=np.int64))
    b = tensor(T, np.array([1, 0, 1, 1, 0, 0, 1], dtype=bool))
    u = tensor(T, np.array([0, 3, 6, 9, 200, 250, 255], dtype=np.uint8))
    h = tensor(T, r.standard_normal(7).astype(np.float16))
    return fn, [(i, b, u, h, randn(T, r, 3))]
