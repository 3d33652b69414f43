"""denoising-diffusion-pytorch's attention with memory key/values: map(partial(T.cat, dim=-2), ...)
over (memory, keys) pairs, a clamp bound with functools.partial, and default(x, lambda: ...)
asking callable() of a lambda made in the frame. One graph, as torch."""
import functools

from cutil import init_module, randn, rng

TAGS = ["tier2"]
RTOL, ATOL = 1e-5, 1e-5
MAX_BREAKS = 0


def _default(val, d):
    if val is not None:
        return val
    return d() if callable(d) else d


def build(T):
    r = rng(63)
    to_qkv = init_module(T, T.nn.Linear(8, 24, bias=False))
    mem_kv = randn(T, r, 2, 2, 8)

    def fn(x, noise=None):
        q, k, v = to_qkv(x).chunk(3, dim=-1)
        mk, mv = map(lambda t: t.expand(x.shape[0], -1, -1), mem_kv)
        k, v = map(functools.partial(T.cat, dim=-2), ((mk, k), (mv, v)))
        clip = functools.partial(T.clamp, min=-3.0, max=3.0)
        attn = clip(q @ k.transpose(-1, -2) * 8 ** -0.5).softmax(-1)
        noise = _default(noise, lambda: T.zeros_like(x))
        return attn @ v + noise

    return fn, [(randn(T, r, 3, 5, 8),)]
