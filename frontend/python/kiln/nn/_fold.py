"""F.unfold (im2col) and F.fold (col2im) with torch's shapes, ordering and errors.

Both are one gather/scatter over a table of flat positions in the padded image: block column
(c, ki, kj) at output position (oh, ow) reads padded pixel (oh*s0 + ki*d0, ow*s1 + kj*d1).
unfold is an index_select of the padded image flattened over (H, W); fold is the index_add of
the columns into zeros there (overlaps sum), then the padding cut off. Each is the other's
adjoint, so autograd and compile need nothing of their own.
"""
from .. import _C

_ops = _C._ops


def _pair(value, name):
    v = [int(value)] * 2 if isinstance(value, int) else [int(x) for x in value]
    if len(v) == 1:
        v = v * 2
    if len(v) != 2:
        raise RuntimeError(f"{name} must be an int or a tuple of two ints, got {value!r}")
    return v


def _params(kernel_size, dilation, padding, stride):
    k, d, p, s = (_pair(kernel_size, "kernel_size"), _pair(dilation, "dilation"),
                  _pair(padding, "padding"), _pair(stride, "stride"))
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kernel_height: {k[0]} "
                           f"kernel_width: {k[1]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got stride_height: {s[0]} "
                           f"stride_width: {s[1]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilation_height: {d[0]} "
                           f"dilation_width: {d[1]}")
    if min(p) < 0:
        raise RuntimeError(f"padding should be non-negative, but got pad_height: {p[0]} pad_width: {p[1]}")
    return k, d, p, s


def _blocks(size, k, d, p, s):
    """Number of sliding blocks along each spatial dim."""
    return [(size[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)]


def _positions(padded_w, blocks, k, d, s, device):
    """[kh*kw*L] flat positions in the padded (H, W) plane, kernel offset major, as im2col's
    column order (c, ki, kj) x (oh, ow)."""
    ki = _ops.arange(k[0], dtype=_C.int64, device=device).view(k[0], 1, 1, 1)
    kj = _ops.arange(k[1], dtype=_C.int64, device=device).view(1, k[1], 1, 1)
    oh = _ops.arange(blocks[0], dtype=_C.int64, device=device).view(1, 1, blocks[0], 1)
    ow = _ops.arange(blocks[1], dtype=_C.int64, device=device).view(1, 1, 1, blocks[1])
    return ((oh * s[0] + ki * d[0]) * padded_w + ow * s[1] + kj * d[1]).reshape(-1)


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C, H, W) or (C, H, W) -> (N, C*kh*kw, L) or (C*kh*kw, L): each sliding block as a
    column."""
    k, d, p, s = _params(kernel_size, dilation, padding, stride)
    if input.dim() not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    n, c, h, w = x.shape
    blocks = _blocks((h, w), k, d, p, s)
    if min(blocks) < 1:
        raise RuntimeError(f"Given input with spatial size ({h}, {w}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), calculated shape of the "
                           f"array of sliding blocks as ({blocks[0]}, {blocks[1]}), but its components must be "
                           "at least one.")
    if p[0] or p[1]:
        x = _ops.constant_pad_nd(x, [p[1], p[1], p[0], p[0]], 0.0)
    hp, wp = h + 2 * p[0], w + 2 * p[1]
    idx = _positions(wp, blocks, k, d, s, x.device)
    cols = x.reshape(n, c, hp * wp).index_select(2, idx)
    cols = cols.reshape(n, c * k[0] * k[1], blocks[0] * blocks[1])
    return cols if batched else cols.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """(N, C*kh*kw, L) or (C*kh*kw, L) -> (N, C, H, W) or (C, H, W): the columns summed back
    into the image (overlapping blocks add)."""
    size = _pair(output_size, "output_size")
    k, d, p, s = _params(kernel_size, dilation, padding, stride)
    if input.dim() not in (2, 3) or input.numel() == 0 and input.shape[-1] == 0:
        raise RuntimeError("Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and "
                           f"non-zero dimensions for input, but got: {list(input.shape)}")
    batched = input.dim() == 3
    cols = input if batched else input.unsqueeze(0)
    n, ck, length = cols.shape
    if ck % (k[0] * k[1]):
        raise RuntimeError("Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={ck} and kernel_size=({k[0]}, {k[1]}).")
    blocks = _blocks(size, k, d, p, s)
    if blocks[0] * blocks[1] != length:
        raise RuntimeError(f"Given output_size=({size[0]}, {size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), "
                           "expected size of input's dimension 2 to match the calculated number of sliding "
                           f"blocks {blocks[0]} * {blocks[1]} = {blocks[0] * blocks[1]}, but got "
                           f"input.size(2)={length}.")
    if min(blocks) < 1:
        raise RuntimeError(f"Given output_size=({size[0]}, {size[1]}), kernel_size=({k[0]}, {k[1]}), "
                           f"dilation=({d[0]}, {d[1]}), padding=({p[0]}, {p[1]}), stride=({s[0]}, {s[1]}), "
                           f"calculated shape of the array of sliding blocks as ({blocks[0]}, {blocks[1]}), "
                           "which is too small (non-positive)")
    c = ck // (k[0] * k[1])
    hp, wp = size[0] + 2 * p[0], size[1] + 2 * p[1]
    idx = _positions(wp, blocks, k, d, s, cols.device)
    out = cols.new_zeros(n, c, hp * wp)
    out = out.index_add(2, idx, cols.reshape(n, c, k[0] * k[1] * length))
    out = out.reshape(n, c, hp, wp)[:, :, p[0]:p[0] + size[0], p[1]:p[1] + size[1]]
    return out if batched else out.squeeze(0)
