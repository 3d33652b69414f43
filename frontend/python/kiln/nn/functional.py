"""kiln.nn.functional: torch.nn.functional's tier-1 functions over kiln's ops."""
import warnings

from .. import _C

_ops = _C._ops


def relu(input, inplace=False):
    return input.relu_() if inplace else _ops.relu(input)


def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return input.silu_() if inplace else _ops.silu(input)


def sigmoid(input):
    return _ops.sigmoid(input)


def tanh(input):
    return _ops.tanh(input)


def _softmax_dim(name, ndim):
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X as an argument.",
                  stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmax", input.dim())
    return _ops.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("log_softmax", input.dim())
    return _ops.log_softmax(input, dim, dtype=dtype)


def linear(input, weight, bias=None):
    return _ops.linear(input, weight, bias)


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _ops.layer_norm(input, list(normalized_shape), weight, bias, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input.zero_() if inplace else input * 0
    keep = _ops.rand_like(input, dtype=input.dtype) >= p
    out = input * keep / (1.0 - p)
    return input.copy_(out) if inplace else out
