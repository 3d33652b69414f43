"""3-d pooling (max, average, adaptive average, adaptive max) over the 2-d pooling kernels.

A pooling window is a box, the product of one interval per spatial dim, so each of these pools
is separable: the (H, W) plane of every depth slice is pooled by the 2-d kernel (depth read as
channels), then the depth dim by the same kernel with a unit height. For max pooling the first
largest element in (d, h, w) order is the first largest depth candidate's own (h, w) argmax (and
a NaN wins either way), so values, indices and the gradient equal one 3-d pass's. For average
pooling torch divides the box's sum by a product of per-dim counts: kiln sums both passes
(divisor 1) and divides by that product once, so integer inputs round as torch's. Autograd and
kiln.compile need nothing of their own: the 2-d kernels have both. Imported into nn.functional.
"""
from .. import _C

_ops = _C._ops


_DTYPE_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte",
                "float16": "Half", "bfloat16": "BFloat16", "bool": "Bool", "float32": "Float", "float64": "Double"}


def _not_implemented(kernel, dtype):
    name = str(dtype).split(".")[-1]
    return NotImplementedError(f"\"{kernel}\" not implemented for '{_DTYPE_NAMES.get(name, name)}'")


def _triple(value, name, allow_empty=False):
    if isinstance(value, int):
        return [value] * 3
    value = [int(v) for v in value]
    if allow_empty and not value:
        return value
    if len(value) == 1:
        return value * 3
    if len(value) != 3:
        raise RuntimeError(name)
    return value


def _output_size(n_in, k, pad, stride, dilation, ceil_mode):
    """torch's pooling_output_shape, with its checks."""
    if stride == 0:
        raise RuntimeError("stride should not be zero")
    if pad < 0:
        raise RuntimeError(f"pad must be non-negative, but got pad: {pad}")
    if pad > ((k - 1) * dilation + 1) // 2:
        raise RuntimeError(f"pad should be at most half of effective kernel size, but got pad={pad}, "
                           f"kernel_size={k} and dilation={dilation}")
    out = (n_in + 2 * pad - dilation * (k - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (out - 1) * stride >= n_in + pad:
        out -= 1
    return out


def _pool_geometry(fn, input, k, s, p, d, ceil_mode, check_input_size):
    """The output sizes (od, oh, ow) after torch's pool3d_shape_check."""
    spatial = list(input.shape[-3:])
    out = [_output_size(n, k[i], p[i], s[i], d[i], ceil_mode) for i, n in enumerate(spatial)]
    if min(k) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got kT: {k[0]} kH: {k[1]} kW: {k[2]}")
    if min(s) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got dT: {s[0]} dH: {s[1]} dW: {s[2]}")
    if min(d) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got dilationT: {d[0]} dilationH: {d[1]} "
                           f"dilationW: {d[2]}")
    first = input.dim() - 4
    for i in range(first, input.dim()):
        if input.shape[i] == 0:
            raise RuntimeError(f"{fn}: Expected input's non-batch dimensions to have positive length, but input has "
                               f"a shape of {list(input.shape)} and non-batch dimension {i} has length zero!")
    if check_input_size and any(n < kk for n, kk in zip(spatial, k)):
        raise RuntimeError(f"input image (T: {spatial[0]} H: {spatial[1]} W: {spatial[2]}) smaller than kernel size "
                           f"(kT: {k[0]} kH: {k[1]} kW: {k[2]})")
    if any(kk // 2 < pp for kk, pp in zip(k, p)):
        raise RuntimeError(f"pad should be smaller than or equal to half of kernel size, but got kT: {k[0]} kW: "
                           f"{k[2]} kH: {k[1]} padT: {p[0]} padW: {p[2]} padH: {p[1]}")
    if min(out) < 1:
        c = input.shape[-4]
        raise RuntimeError(f"Given input size: ({c}x{spatial[0]}x{spatial[1]}x{spatial[2]}). Calculated output size: "
                           f"({c}x{out[0]}x{out[1]}x{out[2]}). Output size is too small")
    return out


def _planes(input):
    """input (N, C, D, H, W) or (C, D, H, W) as (N * C, D, H, W), and the leading sizes."""
    lead = list(input.shape[:-3])
    return input.reshape(-1, *input.shape[-3:]), lead


def _depth_last(x):
    """(P, D, OH, OW) -> (P, OH * OW, 1, D): depth as the width of unit-height planes."""
    p, d, oh, ow = x.shape
    return x.permute(0, 2, 3, 1).reshape(p, oh * ow, 1, d)


def _depth_first(x, oh, ow):
    """The inverse of _depth_last for a pooled depth: (P, OH * OW, 1, OD) -> (P, OD, OH, OW)."""
    p, _, _, od = x.shape
    return x.reshape(p, oh, ow, od).permute(0, 3, 1, 2)


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = _triple(kernel_size, "max_pool3d: kernel_size must either be a single int, or a tuple of three ints")
    s = _triple([] if stride is None else stride,
                "max_pool3d: stride must either be omitted, a single int, or a tuple of three ints", True) or k
    p = _triple(padding, "max_pool3d: padding must either be a single int, or a tuple of three ints")
    d = _triple(dilation, "max_pool3d: dilation must be either a single int, or a tuple of three ints")
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    od, oh, ow = _pool_geometry("max_pool3d_with_indices_out_cpu_template()", input, k, s, p, d, ceil_mode, False)
    if input.dtype == _C.bool:
        raise _not_implemented("max_pool3d", input.dtype)
    x, lead = _planes(input)
    h, w = x.shape[2], x.shape[3]
    plane, plane_idx = _ops.max_pool2d_with_indices(x, k[1:], s[1:], p[1:], d[1:], ceil_mode)
    values, depth = _ops.max_pool2d_with_indices(_depth_last(plane), [1, k[0]], [1, s[0]], [0, p[0]], [1, d[0]],
                                                 ceil_mode)
    values = _depth_first(values, oh, ow).reshape(*lead, od, oh, ow)
    if not return_indices:
        return values
    # depth: the picked slice per output; its (h, w) argmax is that slice's entry of plane_idx.
    hw = _ops.gather(_depth_last(plane_idx).squeeze(2), 2, depth.squeeze(2))
    indices = depth.squeeze(2) * (h * w) + hw
    return values, _depth_first(indices.unsqueeze(2), oh, ow).reshape(*lead, od, oh, ow)


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _window_counts(n_in, n_out, k, s, p, count_include_pad, device):
    """torch's avg_pool divisor along one dim, for each output position (int64)."""
    start = _ops.arange(n_out, dtype=_C.int64, device=device) * s - p
    end = (start + k).clamp(max=n_in + p)
    if count_include_pad:
        return end - start
    return end.clamp(max=n_in) - start.clamp(min=0)


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    k = _triple(kernel_size, "avg_pool3d: kernel_size must be a single int, or a tuple of three ints")
    s = _triple([] if stride is None else stride,
                "avg_pool3d: stride must be omitted, a single int, or a tuple of three ints", True) or k
    p = _triple(padding, "avg_pool3d: padding must be a single int, or a tuple of three ints")
    if input.dim() not in (4, 5):
        raise RuntimeError("non-empty 4D or 5D (batch mode) tensor expected for input")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    out = _pool_geometry("avg_pool3d()", input, k, s, p, [1, 1, 1], ceil_mode, True)
    if input.dtype in (_C.bool, _C.float16, _C.bfloat16):
        raise _not_implemented("avg_pool3d_out_frame", input.dtype)
    x, lead = _planes(input)
    oh, ow = out[1], out[2]
    sums = _ops.avg_pool2d(x, k[1:], s[1:], p[1:], ceil_mode, True, 1)
    sums = _ops.avg_pool2d(_depth_last(sums), [1, k[0]], [1, s[0]], [0, p[0]], ceil_mode, True, 1)
    sums = _depth_first(sums, oh, ow).reshape(*lead, *out)
    if divisor_override is not None:
        divisor = _ops.full([], divisor_override, dtype=_C.int64, device=input.device)
    else:
        spatial = list(input.shape[-3:])
        t, h, w = (_window_counts(spatial[i], out[i], k[i], s[i], p[i], count_include_pad, input.device)
                   for i in range(3))
        divisor = t.reshape(-1, 1, 1) * h.reshape(1, -1, 1) * w.reshape(1, 1, -1)
    if input.dtype.is_floating_point:
        return sums / divisor.to(input.dtype)
    return sums.div(divisor, rounding_mode="trunc").to(input.dtype)


def _adaptive_sizes3d(name, input, output_size, colon=""):
    from .functional import _adaptive_sizes
    if input.dim() not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got{colon} {list(input.shape)}")
    return _adaptive_sizes(name, input, output_size, 3)


def adaptive_avg_pool3d(input, output_size):
    od, oh, ow = _adaptive_sizes3d("adaptive_avg_pool3d", input, output_size)
    if not input.dtype.is_floating_point:
        raise _not_implemented("adaptive_avg_pool3d_cpu", input.dtype)
    x, lead = _planes(input)
    plane = _ops._adaptive_avg_pool2d(x, [oh, ow])
    return _depth_first(_ops._adaptive_avg_pool2d(_depth_last(plane), [1, od]), oh, ow).reshape(*lead, od, oh, ow)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    from .functional import _adaptive_max_pool
    _adaptive_sizes3d("adaptive_max_pool3d", input, output_size, ":")
    if not input.dtype.is_floating_point:
        raise _not_implemented("adaptive_max_pool3d_cpu", input.dtype)
    return _adaptive_max_pool("adaptive_max_pool3d", input, output_size, 3, return_indices)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool3d(input, output_size, True)
