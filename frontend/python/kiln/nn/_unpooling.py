"""Max unpooling (max_unpool1d/2d/3d): the partial inverse of max pooling with return_indices,
as SegNet-style decoders use it. Each input value goes to its flat spatial position `indices`
in a zero output of the unpooled size, so the op is a scatter along the flattened spatial dims:
autograd (a gather of the output's gradient) and kiln.compile need nothing of their own.
Imported into nn.functional."""
from .. import _C

_ops = _C._ops


def _tuple(value, dims, name):
    value = [value] * dims if isinstance(value, int) else [int(v) for v in value]
    if len(value) == 1:
        value = value * dims
    if len(value) != dims:
        raise RuntimeError(f"{name} must be an int or a tuple of {dims} ints, but got {value}")
    return value


def _unpool_output_size(input, kernel_size, stride, padding, output_size):
    """torch's _unpool_output_size: the default size of each spatial dim, or the given one
    (optionally with the batch and channel dims in front) if it is within a stride of it."""
    dims = len(kernel_size)
    default = [(input.shape[input.dim() - dims + d] - 1) * stride[d] + kernel_size[d] - 2 * padding[d]
               for d in range(dims)]
    if output_size is None:
        return default
    output_size = [int(s) for s in output_size]
    if len(output_size) == dims + 2:
        output_size = output_size[2:]
    if len(output_size) != dims:
        raise ValueError(f"output_size should be a sequence containing {dims} or {dims + 2} elements, but it has "
                         f"a length of '{len(output_size)}'")
    for d in range(dims):
        low, high = default[d] - stride[d], default[d] + stride[d]
        if not low < output_size[d] < high:
            raise ValueError(f'invalid output_size "{output_size}" (dim {d} must be between {low} and {high})')
    return output_size


def _max_unpool(name, dims, input, indices, kernel_size, stride, padding, output_size):
    kernel_size = _tuple(kernel_size, dims, f"{name}: kernel_size")
    stride = kernel_size if stride is None else _tuple(stride, dims, f"{name}: stride")
    padding = _tuple(padding, dims, f"{name}: padding")
    size = _unpool_output_size(input, kernel_size, stride, padding, output_size)
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}: Expected {dims + 1}D or {dims + 2}D tensor for input, but got "
                           f"{list(input.shape)}")
    if indices.dtype != _C.int64:
        raise RuntimeError(f"{name}: elements in indices should be type int64 but got: {indices.dtype}")
    if list(indices.shape) != list(input.shape):
        raise RuntimeError(f"{name}: Expected shape of indices to be same as that of the input tensor "
                           f"({list(input.shape)}) but got indices tensor with shape: {list(indices.shape)}")
    lead = list(input.shape[:input.dim() - dims])
    volume = 1
    for s in size:
        volume *= s
    flat_in = input.reshape(lead + [-1])
    flat_idx = indices.reshape(lead + [-1])
    # (kiln.compile traces with meta tensors, which have no values to check: as with torch.compile,
    # the compiled op leaves the range check to the scatter.)
    if flat_idx.numel() and not flat_idx.is_meta:
        low, high = int(flat_idx.min()), int(flat_idx.max())
        if low < 0 or high >= volume:
            bad = low if low < 0 else high
            raise RuntimeError(f"{name}: Found an invalid max index: {bad} (output volumes are of size "
                               f"{'x'.join(str(s) for s in size)})")
    out = input.new_zeros(lead + [volume]).scatter(-1, flat_idx, flat_in)
    return out.reshape(lead + size)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool1d", 1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool2d", 2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    return _max_unpool("max_unpool3d", 3, input, indices, kernel_size, stride, padding, output_size)
