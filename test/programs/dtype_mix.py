"""Mixed dtypes as real code has them: int64 index arithmetic, bool masks combined and summed,
float64 accumulation of float32 values, int32 counts, type promotion with scalars."""
import numpy as np

from cutil import randn, rng, tensor

TAGS = ["dtype", "indexing"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    def fn(x, idx, flags):
        valid = (idx >= 0) & flags
        safe = idx.clamp(min=0)
        picked = x[safe] * valid.unsqueeze(-1)
        total = picked.double().sum(0)
        count = valid.int().sum()
        mean = total / count
        row = (safe * 3 + 1) // 2 % x.shape[0]
        frac = valid.float().mean() + idx.float().mean()
        bits = (idx & 1).bool() ^ flags
        return picked, total, count, mean, row, frac, bits, (x.half().float() - x).abs().max()

    r = rng(41)
    idx = tensor(T, np.array([3, -1, 0, 5, 2, -1, 1], dtype=np.int64))
    flags = tensor(T, np.array([1, 1, 0, 1, 1, 1, 1], dtype=bool))
    return fn, [(randn(T, r, 6, 4), idx, flags)]
