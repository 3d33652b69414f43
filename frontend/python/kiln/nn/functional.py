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


# ---------------------------------------------------------------------------------------------
# Convolution, pooling, batch/group norm, embedding: thin wrappers over the kernels of
# ir/ops/nn.yaml (runtime/cpu/{Convolution,Pooling,BatchNorm,GroupNorm,Embedding}Kernels.cpp).
# ---------------------------------------------------------------------------------------------
import math as _math  # noqa: E402

import numpy as _np  # noqa: E402


def _int_list(value, n, name):
    """An int or a sequence of ints as a list of n ints (a single-element sequence repeats)."""
    if isinstance(value, int):
        return [value] * n
    value = [int(v) for v in value]
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RuntimeError(f"expected {name} to be a single integer value or a list of {n} values "
                           f"to match the convolution dimensions, but got {name}={value}")
    return value


def _conv(name, dims, input, weight, bias, stride, padding, dilation, groups):
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, "
                           f"but got input of size: {list(input.shape)}")
    unbatched = input.dim() == dims + 1
    if unbatched:
        input = input.unsqueeze(0)
    stride = _int_list(stride, dims, "stride")
    dilation = _int_list(dilation, dims, "dilation")
    if isinstance(padding, str):
        if padding == "valid":
            padding = [0] * dims
        elif padding == "same":
            if any(s != 1 for s in stride):
                raise RuntimeError("padding='same' is not supported for strided convolutions")
            input, padding = _pad_same(input, weight, dilation, dims)
        else:
            raise RuntimeError(f"Invalid padding string '{padding}'")
    else:
        padding = _int_list(padding, dims, "padding")
    out = _ops.convolution(input, weight, bias, stride, padding, dilation, False, [0] * dims, groups)
    return out.squeeze(0) if unbatched else out


def _pad_same(input, weight, dilation, dims):
    """PyTorch's padding='same': dilation * (k - 1) split evenly; an odd total puts the extra
    element at the end (zeros concatenated to the input), the rest as symmetric padding."""
    padding = []
    for d in range(dims):
        total = dilation[d] * (weight.shape[2 + d] - 1)
        left = total // 2
        padding.append(left)
        if total - left != left:
            axis = input.dim() - dims + d
            shape = list(input.shape)
            shape[axis] = 1
            input = _ops.cat([input, _ops.zeros(shape, dtype=input.dtype, device=input.device)], axis)
    return input, padding


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def _pool_list(value):
    return [value] if isinstance(value, int) else [int(v) for v in value]


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    stride = [] if stride is None else _pool_list(stride)
    out, indices = _ops.max_pool2d_with_indices(input, _pool_list(kernel_size), stride, _pool_list(padding),
                                                _pool_list(dilation), ceil_mode)
    return (out, indices) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    stride = [] if stride is None else _pool_list(stride)
    return _ops.avg_pool2d(input, _pool_list(kernel_size), stride, _pool_list(padding), ceil_mode,
                           count_include_pad, divisor_override)


def adaptive_avg_pool2d(input, output_size):
    if input.dim() not in (3, 4):
        raise RuntimeError(f"adaptive_avg_pool2d(): Expected 3D or 4D tensor, but got {list(input.shape)}")
    size = [output_size, output_size] if isinstance(output_size, int) else list(output_size)
    if len(size) != 2:
        raise RuntimeError("adaptive_avg_pool2d: output_size must be 2")
    size = [input.shape[-2 + i] if s is None else int(s) for i, s in enumerate(size)]
    return _ops._adaptive_avg_pool2d(input, size)


def _verify_batch_size(size):
    values = size[0]
    for s in size[2:]:
        values *= s
    if values == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {size}")


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    if training:
        _verify_batch_size(list(input.shape))
    elif running_mean is None or running_var is None:
        raise RuntimeError("batch_norm: running_mean and running_var must be given when training=False")
    return _ops.native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    if input.dim() < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.dim()}")
    n, c = input.shape[0], input.shape[1]
    _verify_batch_size([n * c // num_groups, num_groups] + list(input.shape[2:]))
    hw = 1
    for s in input.shape[2:]:
        hw *= s
    return _ops.native_group_norm(input, weight, bias, n, c, hw, num_groups, eps)[0]


def _embedding_renorm_(weight, input, max_norm, norm_type):
    """Rescales, in place and outside autograd, the rows input refers to whose norm exceeds
    max_norm (torch.embedding_renorm_)."""
    from ..autograd.grad_mode import no_grad

    with no_grad():
        rows = _C.from_numpy(_np.unique(input.numpy().reshape(-1)).astype(_np.int64))
        if rows.numel() == 0:
            return
        selected = weight.index_select(0, rows)
        norms = _ops.norm(selected, norm_type, [1], True)
        scale = _ops.where(norms > max_norm, max_norm / (norms + 1e-7), _ops.ones_like(norms))
        weight.index_put_([rows], selected * scale)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    if padding_idx is not None:
        if padding_idx > 0 and padding_idx >= weight.shape[0]:
            raise AssertionError("Padding_idx must be within num_embeddings")
        if padding_idx < 0:
            if padding_idx < -weight.shape[0]:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = weight.shape[0] + padding_idx
    else:
        padding_idx = -1
    if sparse:
        raise NotImplementedError("embedding: sparse=True (sparse gradients) is not supported by kiln")
    if max_norm is not None:
        input = input.contiguous()
        _embedding_renorm_(weight, input, max_norm, norm_type)
    return _ops.embedding(weight, input, padding_idx, scale_grad_by_freq, sparse)
