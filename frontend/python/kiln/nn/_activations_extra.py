"""More of torch.nn.functional's small layers over existing ops: threshold, hardshrink,
softshrink, the in-place relu_/leaky_relu_/elu_/hardtanh_/celu_, dropout1d, channel_shuffle and
local_response_norm (AlexNet-style LRN: a window mean of squares across channels)."""
from .. import _C

_ops = _C._ops


def threshold(input, threshold, value, inplace=False):
    """input where input > threshold, else value."""
    out = _ops.where(input > threshold, input, _ops.full_like(input, value))
    return input.copy_(out) if inplace else out


def threshold_(input, threshold, value):
    return globals()["threshold"](input, threshold, value, inplace=True)


def hardshrink(input, lambd=0.5):
    return _ops.where(input.abs() > lambd, input, input.new_zeros(()))


def softshrink(input, lambd=0.5):
    if lambd < 0:
        kind = str(input.dtype).split(".")[-1].capitalize()
        raise RuntimeError(f"lambda must be in range [0, 3.40282e+38] for input dtype {kind}, but found {lambd:g}")
    zero = input.new_zeros(())
    return _ops.where(input > lambd, input - lambd, _ops.where(input < -lambd, input + lambd, zero))


def relu_(input):
    return input.relu_()


def leaky_relu_(input, negative_slope=0.01):
    from .functional import leaky_relu
    return leaky_relu(input, negative_slope, inplace=True)


def elu_(input, alpha=1.0):
    from .functional import elu
    return elu(input, alpha, inplace=True)


def hardtanh_(input, min_val=-1.0, max_val=1.0):
    from .functional import hardtanh
    return hardtanh(input, min_val, max_val, inplace=True)


def celu_(input, alpha=1.0):
    from .functional import celu
    return celu(input, alpha, inplace=True)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.dim()}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    from .functional import dropout2d
    return dropout2d(input, p, training, inplace)


def channel_shuffle(input, groups):
    """ShuffleNet's channel interleave: (N, g, C/g, ...) transposed to (N, C/g, g, ...)."""
    if input.dim() <= 2:
        raise RuntimeError(f"channel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    n, c, *rest = input.shape
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    return input.reshape(n, groups, c // groups, *rest).transpose(1, 2).reshape(input.shape)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """input / (k + alpha * mean of input^2 over `size` neighbouring channels)^beta, the window
    zero-padded by size // 2 before and (size - 1) // 2 after (torch's average pool)."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    c = input.shape[1]
    sq = input * input
    pad = [0, 0] * (input.dim() - 2) + [size // 2, (size - 1) // 2]
    padded = _ops.constant_pad_nd(sq, pad, 0.0)
    window = padded.narrow(1, 0, c)
    for j in range(1, size):
        window = window + padded.narrow(1, j, c)
    return input / (window / size * alpha + k) ** beta
