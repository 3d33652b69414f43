"""More of torch.nn.functional, as compositions of ops kiln has (so autograd and kiln.compile
need nothing of their own): shrink/threshold activations and RReLU, in-place activation
variants, alpha and 1-d/3-d feature dropout, local response norm, unfold/fold (im2col/col2im),
channel_shuffle, pdist, gumbel_softmax, the deprecated upsample functions, the pooling
*_with_indices forms, and the margin/likelihood losses. Imported into nn.functional."""
import math
import warnings

from .. import _C
from ..autograd.grad_mode import no_grad

_ops = _C._ops

__all__ = [
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices", "alpha_dropout", "celu_",
    "channel_shuffle", "dropout1d", "dropout3d", "elu_", "embedding_bag", "feature_alpha_dropout", "fold", "gaussian_nll_loss",
    "gumbel_softmax", "hardshrink", "hardtanh_", "hinge_embedding_loss", "leaky_relu_", "local_response_norm",
    "lp_pool1d", "lp_pool2d", "lp_pool3d",
    "max_pool1d_with_indices", "max_pool2d_with_indices", "multi_margin_loss", "multilabel_margin_loss",
    "multilabel_soft_margin_loss", "pdist", "poisson_nll_loss", "relu_", "rrelu", "rrelu_", "selu_",
    "soft_margin_loss", "softshrink", "threshold", "threshold_", "triplet_margin_with_distance_loss", "unfold",
    "upsample", "upsample_bilinear", "upsample_nearest",
]


def _F():
    from . import functional
    return functional


# ---- power-average pooling ---------------------------------------------------------------------

def _lp_pool(dims, input, norm_type, kernel_size, stride, ceil_mode):
    """torch's LP pooling: (sum over the window of x^p)^(1/p), as the average of x^p times the
    window size, with the sign of that average kept through a relu of its magnitude as torch's."""
    F = _F()
    k = [kernel_size] * dims if isinstance(kernel_size, int) else list(kernel_size)
    pool = (F.avg_pool1d, F.avg_pool2d, F.avg_pool3d)[dims - 1]
    if stride is not None:
        out = pool(input.pow(norm_type), kernel_size, stride, 0, ceil_mode)
    else:
        out = pool(input.pow(norm_type), kernel_size, padding=0, ceil_mode=ceil_mode)
    return (out.sign() * F.relu(out.abs())).mul(math.prod(k)).pow(1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(1, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(2, input, norm_type, kernel_size, stride, ceil_mode)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    return _lp_pool(3, input, norm_type, kernel_size, stride, ceil_mode)


# ---- activations -------------------------------------------------------------------------------

def threshold(input, threshold, value, inplace=False):
    """x where x > threshold, else value."""
    out = _ops.where(input > threshold, input, value).to(input.dtype)
    return input.copy_(out) if inplace else out


def threshold_(input, threshold, value):
    return _F().threshold(input, threshold, value, True)


def hardshrink(input, lambd=0.5):
    return _ops.where(input.abs() > lambd, input, 0.0).to(input.dtype)


def softshrink(input, lambd=0.5):
    if lambd < 0:
        raise RuntimeError(f"lambda must be greater or equal to 0, but found to be {lambd}.")
    return _ops.where(input > lambd, input - lambd, _ops.where(input < -lambd, input + lambd, 0.0)).to(input.dtype)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False):
    """Leaky ReLU whose negative slope is drawn uniformly from [lower, upper] per element while
    training, and is their mean otherwise."""
    if training:
        slope = _ops.rand_like(input) * (upper - lower) + lower
        out = _ops.where(input >= 0, input, input * slope)
    else:
        out = _F().leaky_relu(input, (lower + upper) / 2)
    return input.copy_(out) if inplace else out


def rrelu_(input, lower=1.0 / 8, upper=1.0 / 3, training=False):
    return rrelu(input, lower, upper, training, True)


def _in_place(name):
    def fn(input, *args, **kwargs):
        return input.copy_(getattr(_F(), name)(input, *args, **kwargs))
    fn.__name__ = name + "_"
    fn.__doc__ = f"{name}, written into input."
    return fn


relu_ = _in_place("relu")
elu_ = _in_place("elu")
leaky_relu_ = _in_place("leaky_relu")
hardtanh_ = _in_place("hardtanh")
selu_ = _in_place("selu")
celu_ = _in_place("celu")


# ---- dropout -----------------------------------------------------------------------------------

def _check_p(p):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def _feature_mask_shape(input, batched_dims):
    """The shape of a per-channel mask: (N, C, 1, ...) or, unbatched, (C, 1, ...)."""
    lead = 2 if input.dim() == batched_dims else 1
    return list(input.shape[:lead]) + [1] * (input.dim() - lead)


def _alpha(input, p, training, inplace, mask_shape):
    """torch's alpha dropout: kept elements scaled by a and dropped ones set to the SELU's
    negative saturation, shifted by b so mean and variance are kept."""
    _check_p(p)
    if p == 0.0 or not training or input.numel() == 0:
        return input
    if p == 1.0:
        return input.mul_(0) if inplace else input * 0
    alpha = 1.7580993408473766
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    # Drawn as torch does (noise.bernoulli_(1 - p) on an empty tensor: the scalar-probability
    # draw, another stream than bernoulli of a tensor of probabilities), so a seed gives its mask.
    keep = _ops.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    b = (keep - 1) * (alpha * a) + alpha * a * p
    out = input * (keep * a) + b
    return input.copy_(out) if inplace else out


def alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha(input, p, training, inplace, list(input.shape))


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
    return _alpha(input, p, training, inplace, list(input.shape[:2]) + [1] * (input.dim() - 2))


def _feature_dropout(name, input, p, training, inplace, batched_dims):
    _check_p(p)
    if input.dim() not in (batched_dims - 1, batched_dims):
        raise RuntimeError(f"{name}: Expected {batched_dims - 1}D or {batched_dims}D input, but received a "
                           f"{input.dim()}D input. Note that {name} exists to provide channel-wise dropout on "
                           "inputs with 1 spatial dimension, a channel dimension, and an optional batch dimension "
                           f"(i.e. {batched_dims - 1}D or {batched_dims}D inputs)." if batched_dims == 3 else
                           f"{name}: Expected {batched_dims - 1}D or {batched_dims}D input, got {input.dim()}D")
    if not training or p == 0.0:
        return input
    mask = _F().dropout(input.new_ones(*_feature_mask_shape(input, batched_dims)), p, True)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, L) or (C, L) inputs."""
    return _feature_dropout("dropout1d", input, p, training, inplace, 3)


def dropout3d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels of (N, C, D, H, W) or (C, D, H, W) inputs."""
    if input.dim() not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.dim()}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release.")
        _check_p(p)
        if not training or p == 0.0:
            return input
        # PyTorch reads it as unbatched: a batch dimension is added in front, so the channels
        # are the first dimension.
        mask = _F().dropout(input.new_ones(input.shape[0], *([1] * (input.dim() - 1))), p, True)
        return input.mul_(mask) if inplace else input * mask
    return _feature_dropout("dropout3d", input, p, training, inplace, 5)


# ---- normalization, patches, shuffles ------------------------------------------------------------

def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha * mean of x^2 over `size` neighbouring channels) ** beta, the window
    zero-padded by size // 2 before and (size - 1) // 2 after."""
    if input.dim() < 3:
        raise ValueError(f"Expected 3D or higher dimensionality input (got {input.dim()} dimensions)")
    if input.numel() == 0:
        return input
    sq = input * input
    pads = [0, 0] * (input.dim() - 2) + [size // 2, (size - 1) // 2]
    padded = _F().pad(sq, pads)
    div = padded.unfold(1, size, 1).sum([-1]) / size
    return input / (div * alpha + k).pow(beta)


def _pair(value, name):
    if isinstance(value, int):
        return [value, value]
    value = list(value)
    if len(value) != 2:
        raise ValueError(f"{name} must be an int or a pair of ints")
    return value


def _block_positions(hp, wp, kernel, dilation, stride, device):
    """For a padded (hp, wp) image: the flat position of every (kernel row, kernel column, block)
    entry of im2col, as one int64 vector in (ki, kj, block) order, and the block grid (oh, ow)."""
    (kh, kw), (dh, dw), (sh, sw) = kernel, dilation, stride
    oh, ow = (hp - (dh * (kh - 1) + 1)) // sh + 1, (wp - (dw * (kw - 1) + 1)) // sw + 1
    ki = _ops.arange(kh, device=device).reshape([kh, 1, 1, 1])
    kj = _ops.arange(kw, device=device).reshape([1, kw, 1, 1])
    bi = _ops.arange(max(oh, 0), device=device).reshape([1, 1, max(oh, 0), 1])
    bj = _ops.arange(max(ow, 0), device=device).reshape([1, 1, 1, max(ow, 0)])
    return ((bi * sh + ki * dh) * wp + bj * sw + kj * dw).reshape([-1]), oh, ow


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C * kh * kw, L), each column one sliding block in (c, kh, kw)
    order and the blocks in row-major order. One index_select of the padded image's positions
    (its backward an indexed accumulation, which the compiler lowers)."""
    if input.dim() not in (3, 4):
        raise NotImplementedError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.dim()}D)")
    kernel, dil, pad, strd = (_pair(v, n) for v, n in ((kernel_size, "kernel_size"), (dilation, "dilation"),
                                                        (padding, "padding"), (stride, "stride")))
    batched = input.dim() == 4
    x = input if batched else input.unsqueeze(0)
    if pad[0] or pad[1]:
        x = _F().pad(x, [pad[1], pad[1], pad[0], pad[0]])
    n, c, hp, wp = x.shape
    where, oh, ow = _block_positions(hp, wp, kernel, dil, strd, input.device)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input with spatial size ({hp - 2 * pad[0]}, {wp - 2 * pad[1]}), kernel_size="
                           f"({kernel[0]}, {kernel[1]}), dilation=({dil[0]}, {dil[1]}), padding=({pad[0]}, {pad[1]}), "
                           "calculated shape of the array of sliding blocks is non-positive")
    out = x.reshape([n, c, hp * wp]).index_select(2, where).reshape([n, c * kernel[0] * kernel[1], oh * ow])
    return out if batched else out.squeeze(0)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, unfold's adjoint: (N, C * kh * kw, L) -> (N, C, H, W), summing the values that
    blocks put on the same position (one scatter_add into the padded image)."""
    if input.dim() not in (2, 3):
        raise NotImplementedError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                                  f"(got {input.dim()}D)")
    (H, W), kernel, dil, pad, strd = (
        _pair(v, n) for v, n in ((output_size, "output_size"), (kernel_size, "kernel_size"), (dilation, "dilation"),
                                 (padding, "padding"), (stride, "stride")))
    batched = input.dim() == 3
    cols = input if batched else input.unsqueeze(0)
    n, ckk, length = cols.shape
    kk = kernel[0] * kernel[1]
    if ckk % kk:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={ckk} and kernel_size=({kernel[0]}, {kernel[1]})")
    c = ckk // kk
    hp, wp = H + 2 * pad[0], W + 2 * pad[1]
    where, oh, ow = _block_positions(hp, wp, kernel, dil, strd, input.device)
    if oh * ow != length:
        raise RuntimeError(f"Given output_size=({H}, {W}), kernel_size=({kernel[0]}, {kernel[1]}), dilation="
                           f"({dil[0]}, {dil[1]}), padding=({pad[0]}, {pad[1]}), stride=({strd[0]}, {strd[1]}), "
                           f"expected size of input's dimension 2 to match the calculated number of sliding blocks "
                           f"{oh} * {ow} = {oh * ow}, but got input.size(2)={length}.")
    index = where.reshape([1, 1, kk * length]).expand([n, c, kk * length])
    values = cols.reshape([n, c, kk * length])
    image = _ops.zeros([n, c, hp * wp], dtype=input.dtype, device=input.device).scatter_add(2, index, values)
    image = image.reshape([n, c, hp, wp])[:, :, pad[0]:pad[0] + H, pad[1]:pad[1] + W]
    return image if batched else image.squeeze(0)


def channel_shuffle(input, groups):
    """(N, g * k, ...) -> channels interleaved across the g groups."""
    if groups <= 0:
        raise RuntimeError(f"Number of groups to divide channels in must be positive. Value of groups:{groups}")
    c = input.shape[1]
    if c % groups:
        raise RuntimeError(f"Number of channels must be divisible by groups. Got {c} channels and {groups} groups.")
    rest = list(input.shape[2:])
    x = input.reshape([input.shape[0], groups, c // groups] + rest)
    return x.transpose(1, 2).reshape(list(input.shape))


def pdist(input, p=2):
    """Distances between every pair of rows i < j of an (N, M) input, in row-major order of the
    upper triangle: N (N - 1) / 2 values."""
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    from .._math_composites import cdist
    from .._stacking import triu_indices
    n = input.shape[0]
    d = cdist(input, input, p=p, compute_mode="donot_use_mm_for_euclid_dist")
    idx = triu_indices(n, n, 1, device=input.device)
    return d[idx[0], idx[1]]


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1):
    """softmax((logits + Gumbel noise) / tau); with hard, the one-hot of its argmax in the forward
    and the soft sample's gradient (straight-through)."""
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.")
    # Gumbel(0, 1) noise as -log(Exp(1)), drawn with exponential_ as torch draws it, so a seeded
    # run samples torch's values.
    gumbels = -_ops.empty_like(logits).exponential_().log()
    y_soft = _F().softmax((logits + gumbels) / tau, dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = _ops.zeros_like(logits).scatter(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    warnings.warn("`nn.functional.upsample` is deprecated. Use `nn.functional.interpolate` instead.", stacklevel=2)
    return _F().interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_nearest` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return _F().interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    warnings.warn("`nn.functional.upsample_bilinear` is deprecated. Use `nn.functional.interpolate` instead.",
                  stacklevel=2)
    return _F().interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _F().max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _F().max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return _F().adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return _F().adaptive_max_pool2d(input, output_size, True)


# ---- losses ------------------------------------------------------------------------------------

def _reduced(loss, size_average, reduce, reduction):
    F = _F()
    return F._reduce(loss, F._legacy_reduction(size_average, reduce, reduction))


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where the target is 1, max(0, margin - x) where it is -1."""
    margin_part = _ops.where(target != 1, (margin - input).clamp_min(0), 0.0)
    self_part = _ops.where(target != -1, input, 0.0)
    return _reduced(margin_part + self_part, size_average, reduce, reduction)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x))."""
    return _reduced((-target * input).exp().log1p(), size_average, reduce, reduction)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes of the per-class binary logistic loss."""
    F = _F()
    loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    loss = loss.sum([input.dim() - 1]) / input.shape[-1]
    return _reduced(loss, size_average, reduce, reduction)


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """Per sample: the mean over classes j != y of max(0, margin - x[y] + x[j]) ** p (times
    weight[y])."""
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    if weight is not None and weight.dim() != 1:
        raise ValueError("weight must be one-dimensional")  # torch's check (gather failed instead)
    x = input if input.dim() == 2 else input.reshape([1, -1])
    y = target.reshape([-1, 1])
    c = x.shape[1]
    picked = x.gather(1, y)
    terms = (margin - picked + x).clamp_min(0)
    if p == 2:
        terms = terms * terms
    if weight is not None:
        terms = terms * weight.gather(0, y.reshape([-1])).reshape([-1, 1])
    others = _ops.arange(c, device=input.device).reshape([1, c]) != y
    loss = _ops.where(others, terms, 0.0).sum([1]) / c
    if input.dim() < 2:
        loss = loss.reshape(list(target.shape))
    return _reduced(loss, size_average, reduce, reduction)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """Per sample: the sum over target classes j (target's entries up to the first -1) and
    non-target classes i of max(0, 1 - (x[j] - x[i])), over the number of classes."""
    x = input if input.dim() == 2 else input.reshape([1, -1])
    t = target if target.dim() == 2 else target.reshape([1, -1])
    c = x.shape[1]
    valid = (t != -1).to(_C.int64).cumprod(1).bool()
    classes = _ops.arange(c, device=input.device).reshape([1, 1, c])
    is_target = ((t.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)  # n, c
    margins = (1 - (x.unsqueeze(2) - x.unsqueeze(1))).clamp_min(0)  # [n, j, i]
    pairs = is_target.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = _ops.where(pairs, margins, 0.0).sum([1, 2]) / c
    if input.dim() < 2:
        loss = loss.reshape([])
    return _reduced(loss, size_average, reduce, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """exp(x) - y x (log_input) or x - y log(x + eps); with full, Stirling's term for y > 1."""
    if log_input:
        loss = input.exp() - target * input
    else:
        loss = input - target * (input + eps).log()
    if full:
        safe = _ops.where(target > 1, target, 1.0)
        stirling = safe * safe.log() - safe + 0.5 * (2 * math.pi * safe).log()
        loss = loss + _ops.where(target > 1, stirling, 0.0)
    return _reduced(loss, size_average, reduce, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """0.5 (log var + (x - y)^2 / var), var clamped at eps for the value only (its gradient is
    the unclamped one, as torch's in-place clamp under no_grad gives)."""
    if isinstance(var, (int, float)):
        var = _ops.full_like(input, float(var))
    if var.shape != input.shape:
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1:
            pass
        else:
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    with no_grad():
        if (var < 0).any():
            raise ValueError("var has negative entry/entries")
        lift = var.clamp(min=eps) - var
    var = var + lift
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return loss.mean() if reduction == "mean" else loss.sum() if reduction == "sum" else loss


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with a custom distance (pairwise_distance by default);
    with swap, d(a, n) is min(d(a, n), d(p, n))."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    dist = distance_function if distance_function is not None else _F().pairwise_distance
    pos, neg = dist(anchor, positive), dist(anchor, negative)
    if swap:
        neg = _ops.minimum(neg, dist(positive, negative))
    loss = (margin + pos - neg).clamp_min(0)
    return _F()._reduce(loss, reduction)


# ---- embedding_bag -------------------------------------------------------------------------------

def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):
    """The sum, mean or max of each bag's embeddings: bags are the rows of a 2-D input, or the
    runs of a 1-D input that start at `offsets`. Entries equal to padding_idx are left out (of
    the count too); an empty bag gives zeros. Built from index_select and index_add /
    scatter_reduce, so its gradient is the embedding's."""
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"mode has to be one of sum, mean or max, got {mode}")
    if sparse:
        raise NotImplementedError("embedding_bag: sparse=True (sparse gradients) is not supported by kiln")
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq=True is not supported by kiln")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}'). Please open a feature request "
                                  "on GitHub.")
    if input.dtype not in (_C.int64, _C.int32):
        raise ValueError(f"embedding_bag: expected input to be an integer tensor, got {input.dtype}")
    if input.dim() == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences.")
        bags, length = input.shape
        offsets = _ops.arange(bags, device=input.device) * length
        input = input.reshape([-1])
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape([-1])
        include_last_offset = False
    elif input.dim() == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.dim() != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.dim()}")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    if max_norm is not None:
        _F()._embedding_renorm_(weight, input, max_norm, norm_type)
    offsets = offsets.to(_C.int64)
    n_bags = offsets.shape[0] - 1 if include_last_offset else offsets.shape[0]
    n = input.shape[0]
    # The bag of each entry: how many offsets are at or before its position, minus one.
    position = _ops.arange(n, device=input.device)
    bag = (position.unsqueeze(1) >= offsets[:n_bags].unsqueeze(0)).to(_C.int64).sum([1]) - 1
    keep = bag >= 0
    if include_last_offset:
        keep = keep & (position < offsets[n_bags])
    if padding_idx is not None:
        keep = keep & (input != padding_idx)
    rows = weight.index_select(0, input.to(_C.int64))
    bag = bag.clamp_min(0)
    d = weight.shape[1]
    if mode == "max":
        fill = _ops.full([n_bags, d], float("-inf"), dtype=weight.dtype, device=weight.device)
        masked = _ops.where(keep.unsqueeze(1), rows, float("-inf"))
        out = fill.scatter_reduce(0, bag.unsqueeze(1).expand([n, d]), masked, "amax", include_self=True)
        return _ops.where(out == float("-inf"), 0.0, out)
    weights = keep.to(weight.dtype)
    if per_sample_weights is not None:
        weights = weights * per_sample_weights
    total = _ops.zeros([n_bags, d], dtype=weight.dtype, device=weight.device).index_add(
        0, bag, rows * weights.unsqueeze(1))
    if mode == "sum":
        return total
    count = _ops.zeros([n_bags], dtype=weight.dtype, device=weight.device).index_add(0, bag, keep.to(weight.dtype))
    return total / count.clamp_min(1).unsqueeze(1)
