"""kiln.nn.functional: torch.nn.functional's functions over kiln's ops (composites of the table
for the activations, losses, padding, RMS norm and attention)."""
import math
import os as _os
import sys as _sys
import warnings

from .. import _C
from ..autograd.grad_mode import no_grad as _no_grad

_ops = _C._ops


def relu(input, inplace=False):
    return input.relu_() if inplace else _ops.relu(input)


def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _ops.silu_(input) if inplace else _ops.silu(input)


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


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] (+ bias[o]), as one product
    of input1 with the weight's (in1, out * in2) matrix and a reduction against input2."""
    if input1.dim() != input2.dim():
        raise RuntimeError(f"bilinear(): input dimensions do not match: got {input1.dim()} and {input2.dim()}")
    for d in range(input1.dim() - 1):
        if input1.shape[d] != input2.shape[d]:
            raise RuntimeError(f"bilinear(): input batch dimensions do not match at dim {d}: got "
                               f"{input1.shape[d]} and {input2.shape[d]}")
    if weight.dim() != 3:
        raise RuntimeError(f"bilinear(): weight must be 3-dimensional (out, in1, in2), got {list(weight.shape)}")
    out, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {in2}")
    if bias is not None and (bias.dim() != 1 or bias.shape[0] != out):
        raise RuntimeError(f"bilinear(): bias size does not match weight size: got {list(bias.shape)} but "
                           f"expected [{out}]")
    t = _ops.matmul(input1, weight.permute(1, 0, 2).reshape(in1, out * in2))
    y = (t.unflatten(-1, (out, in2)) * input2.unsqueeze(-2)).sum(-1)
    return y if bias is None else y + bias


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _ops.layer_norm(input, list(normalized_shape), weight, bias, eps)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    return _ops.dropout_(input, p, training) if inplace else _ops.dropout(input, p, training)


# -- activations (tier 2): composite ops of the table (ir/ops/activation.yaml) ----------------
def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _ops.leaky_relu_(input, negative_slope) if inplace else _ops.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return _ops.elu_(input, alpha) if inplace else _ops.elu(input, alpha)


def softplus(input, beta=1.0, threshold=20.0):
    return _ops.softplus(input, beta, threshold)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError("min_val cannot be greater than max_val")
    return _ops.hardtanh_(input, min_val, max_val) if inplace else _ops.hardtanh(input, min_val, max_val)


def relu6(input, inplace=False):
    return _ops.relu6_(input) if inplace else _ops.relu6(input)


def mish(input, inplace=False):
    return _ops.mish_(input) if inplace else _ops.mish(input)


def hardswish(input, inplace=False):
    return _ops.hardswish_(input) if inplace else _ops.hardswish(input)


# -- padding -------------------------------------------------------------------------------
def pad(input, pad, mode="constant", value=None):
    pad = [int(p) for p in pad]
    if len(pad) % 2 != 0:
        raise RuntimeError("Padding length must be divisible by 2")
    if len(pad) // 2 > input.dim():
        raise RuntimeError("Padding length should be less than or equal to two times the input dimension but got "
                           f"padding length {len(pad)} and input of dimension {input.dim()}")
    if mode == "constant":
        return _ops.constant_pad_nd(input, pad, 0 if value is None else value)
    if mode not in ("reflect", "replicate", "circular"):
        raise NotImplementedError(f"Unrecognised padding mode {mode}")
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    pairs = len(pad) // 2
    if pairs not in (1, 2, 3) or input.dim() not in (pairs + 1, pairs + 2):
        raise NotImplementedError(
            f"Padding size {len(pad)} is not supported for {input.dim()}D input tensor.\n"
            "Supported combinations for non-constant padding:\n"
            "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
            "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
            "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    out = input
    for i in range(pairs):
        dim = input.dim() - 1 - i
        out = out.index_select(dim, _pad_source_index(mode, input, dim, pad[2 * i], pad[2 * i + 1], i))
    return out


def _pad_source_index(mode, input, dim, before, after, pair):
    """For each position of the padded dim, the input position it copies (reflect, replicate, circular)."""
    n = input.shape[dim]
    if mode == "reflect" and (before >= n or after >= n):
        raise RuntimeError(f"Argument #{4 + 2 * pair}: Padding size should be less than the corresponding input "
                           f"dimension, but got: padding ({before}, {after}) at dimension {dim} of input "
                           f"{list(input.shape)}")
    if mode == "circular" and (before > n or after > n):
        raise RuntimeError("Padding value causes wrapping around more than once.")
    if n == 0:
        raise RuntimeError(f"pad: input of shape {list(input.shape)} has no elements to {mode} along dimension {dim}")
    # In ops (arange and arithmetic), not from a Python list: made from Python data inside a
    # compiled function, the index would be a tensor the tracer cannot bake (a graph break).
    j = _ops.arange(-before, n + after, dtype=_C.int64)
    if mode == "reflect":
        return (n - 1) - ((n - 1) - j.abs()).abs()
    if mode == "replicate":
        return j.clamp(0, n - 1)
    return j.remainder(n)


# -- losses (ir/ops/loss.yaml) ---------------------------------------------------------------
_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def _reduction_enum(reduction):
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _REDUCTIONS[reduction]


_KILN_DIR = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))


def _warn_at_caller(message):
    """warnings.warn pointing at the first frame outside kiln (the user's call), however many
    kiln frames lie between (an autocast wrapper, a module's forward)."""
    frame, level = _sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(_KILN_DIR):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, stacklevel=level)


def _legacy_reduction(size_average, reduce, reduction):
    """torch's deprecated size_average/reduce arguments, when given, decide the reduction."""
    if size_average is None and reduce is None:
        return reduction
    _warn_at_caller("size_average and reduce args will be deprecated, please use reduction='"
                    + _legacy_string(size_average, reduce) + "' instead.")
    return _legacy_string(size_average, reduce)


def _legacy_string(size_average, reduce):
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    if not reduce:
        return "none"
    return "mean" if size_average else "sum"


def _warn_target_size(input, target):
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"Using a target size ({_size_repr(target)}) that is different to the input size "
                      f"({_size_repr(input)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


def _size_repr(t):
    return f"kiln.Size({list(t.shape)})"


def _pointwise_loss(name, input, target, reduction, weight, *extra):
    _warn_target_size(input, target)
    if weight is None:
        return getattr(_ops, name)(input, target, _reduction_enum(reduction), *extra)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError("Weights and input must have the same size.")
    weighted = getattr(_ops, name)(input, target, 0, *extra) * weight
    if reduction == "none":
        return weighted
    if reduction == "sum":
        return weighted.sum()
    if reduction == "mean":
        return weighted.sum() / weight.sum()
    raise ValueError(f"Invalid reduction mode: {reduction}. Expected one of 'none', 'mean', 'sum'.")


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _pointwise_loss("mse_loss", input, target, reduction, weight)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _pointwise_loss("l1_loss", input, target, reduction, weight)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _warn_target_size(input, target)
    return _ops.smooth_l1_loss(input, target, _reduction_enum(reduction), beta)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if input.dim() < 1:
        raise ValueError(f"Expected 1 or more dimensions (got {input.dim()})")
    if input.dim() <= 2:
        return _ops.nll_loss(input, target, weight, _reduction_enum(reduction), ignore_index)
    # (N, C, d1, ...): the positions become rows of an (N * d1 * ..., C) input (torch's nll_loss_nd).
    batch = target.shape[0] if target.dim() else 1
    if input.shape[0] != batch:
        raise ValueError(f"Expected input batch_size ({input.shape[0]}) to match target batch_size ({batch}).")
    expected = [input.shape[0]] + list(input.shape[2:])
    if list(target.shape) != expected:
        raise RuntimeError(f"Expected target size {expected}, got {list(target.shape)}")
    rows = input.movedim(1, -1).reshape(-1, input.shape[1])
    out = _ops.nll_loss(rows, target.reshape(-1), weight, _reduction_enum(reduction), ignore_index)
    return out.view(expected) if reduction == "none" else out


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _ops.cross_entropy_loss(input, target, weight, _reduction_enum(reduction), ignore_index, label_smoothing)


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Using a target size ({_size_repr(target)}) that is different to the input size "
                         f"({_size_repr(input)}) is deprecated. Please ensure they have the same size.")
    return _ops.binary_cross_entropy(input, target, weight, _reduction_enum(reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"Target size ({_size_repr(target)}) must be the same as input size ({_size_repr(input)})")
    return _ops.binary_cross_entropy_with_logits(input, target, weight, pos_weight, _reduction_enum(reduction))


# -- normalization and attention (ir/ops/attention.yaml) --------------------------------------
def rms_norm(input, normalized_shape, weight=None, eps=None):
    return _ops.rms_norm(input, list(normalized_shape), weight, eps)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    return _ops.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale=scale,
                                             enable_gqa=enable_gqa)


def _canonical_mask(mask, name, dtype):
    """A bool mask (True = masked out) as a float mask of -inf and 0; float masks as they are."""
    if mask is None:
        return None
    if mask.dtype == _C.bool:
        return _ops.zeros_like(mask, dtype=dtype).masked_fill_(mask, float("-inf"))
    if not mask.is_floating_point():
        raise AssertionError(f"only bool and floating types of {name} are supported")
    return mask


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """torch's multi-head attention over (L, N, E) or unbatched (L, E) inputs: projections, heads,
    masks (bool True = masked out, or float added), attention, the output projection."""
    if static_k is not None or static_v is not None:
        raise NotImplementedError("multi_head_attention_forward: static_k and static_v are not supported by kiln")
    is_batched = query.dim() == 3
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None  # SDPA builds the causal mask itself
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", query.dtype)
        if key_padding_mask is not None:
            is_causal = False

    q, k, v = _in_projection(query, key, value, in_proj_weight, in_proj_bias, use_separate_proj_weight,
                             q_proj_weight, k_proj_weight, v_proj_weight)
    if attn_mask is not None:
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, key.shape[0])}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, key.shape[0])}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")
    if bias_k is not None and bias_v is not None:
        k = _ops.cat([k, bias_k.repeat(1, bsz, 1)])
        v = _ops.cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))

    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if add_zero_attn:
        k = _ops.cat([k, _ops.zeros([bsz * num_heads, 1, head_dim], dtype=k.dtype)], dim=1)
        v = _ops.cat([v, _ops.zeros([bsz * num_heads, 1, head_dim], dtype=v.dtype)], dim=1)
        attn_mask = None if attn_mask is None else pad(attn_mask, (0, 1))
        key_padding_mask = None if key_padding_mask is None else pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        padding = key_padding_mask.view(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        padding = padding.reshape(bsz * num_heads, 1, src_len)
        attn_mask = padding if attn_mask is None else attn_mask + padding
    if not training:
        dropout_p = 0.0

    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        scores = q_scaled @ k.transpose(-2, -1)
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = softmax(scores, dim=-1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = _ops.bmm(weights, v).transpose(0, 1).contiguous().view(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
        weights = weights.view(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights

    if attn_mask is not None:
        attn_mask = attn_mask.unsqueeze(0) if attn_mask.shape[0] == 1 else attn_mask.view(bsz, num_heads, -1, src_len)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, src_len, head_dim)
    v = v.view(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).contiguous().view(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).view(tgt_len, bsz, -1)
    return (out if is_batched else out.squeeze(1)), None


def _in_projection(query, key, value, in_proj_weight, in_proj_bias, separate, w_q, w_k, w_v):
    """The q, k, v projections: one GEMM for self-attention with the packed weight."""
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    if separate:
        return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)
    if query is key and key is value:
        qkv = linear(query, in_proj_weight, in_proj_bias)
        return qkv.chunk(3, dim=-1)
    w_q, w_k, w_v = in_proj_weight.chunk(3)
    return linear(query, w_q, b_q), linear(key, w_k, b_k), linear(value, w_v, b_v)


# -- more activations and losses, in plain Python over the table's ops ----------------------------
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def selu(input, inplace=False):
    fn = _ops.elu_ if inplace else _ops.elu
    return fn(input, _SELU_ALPHA, _SELU_SCALE)


def celu(input, alpha=1.0, inplace=False):
    fn = _ops.elu_ if inplace else _ops.elu
    return fn(input, alpha, 1.0, 1.0 / alpha)


def logsigmoid(input):
    # x - log1p(exp(x)) below 0, -log1p(exp(-x)) from 0 up: no overflow for large |x|, and the
    # derivative at 0 is sigmoid(0) = 0.5 (min(x, 0) - log1p(exp(-|x|)) gave 1 there: the
    # subgradients of min and abs added up). Each branch reads its clamped side of x, so the
    # unused one stays finite and its zero gradient stays zero.
    low = input.clamp_max(0)
    high = input.clamp_min(0)
    return _ops.where(input < 0, low - low.exp().log1p(), -(-high).exp().log1p())


def hardsigmoid(input, inplace=False):
    out = _ops.relu6(input + 3) / 6
    return input.copy_(out) if inplace else out


def softsign(input):
    return input / (input.abs() + 1)


def tanhshrink(input):
    return input - input.tanh()


def glu(input, dim=-1):
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    if input.shape[dim] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {dim % input.dim()} is size {input.shape[dim]}")
    a, b = input.chunk(2, dim)
    return a * b.sigmoid()


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim("softmin", input.dim())
    return _ops.softmax(-input, dim, dtype=dtype)


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    result = input / denom
    return result if out is None else out.copy_(result)


def one_hot(tensor, num_classes=-1):
    if tensor.dtype != _C.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type LongTensor.")
    if num_classes == -1:
        num_classes = int(tensor.max().item()) + 1 if tensor.numel() else 0
    # (A meta tensor, traced by kiln.compile, has no values to check: as with torch.compile, the
    # compiled one_hot of a given num_classes does not check its range; num_classes=-1 reads the
    # data, a graph break.)
    if tensor.numel() and not tensor.is_meta and (
            int(tensor.min().item()) < 0 or int(tensor.max().item()) >= num_classes):
        raise RuntimeError("Class values must be smaller than num_classes." if int(tensor.min().item()) >= 0
                           else "Class values must be non-negative.")
    classes = _ops.arange(num_classes, dtype=_C.int64)
    return (tensor.unsqueeze(-1) == classes).to(_C.int64)


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    # torch clamps each norm at eps separately, then divides the dot product by their product.
    n1 = x1.norm(2, dim).clamp_min(eps)
    n2 = x2.norm(2, dim).clamp_min(eps)
    return (x1 * x2).sum(dim) / (n1 * n2)


def pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    # torch adds eps to the difference (not the norm) and reduces the innermost dim of the
    # broadcast result.
    last = max(x1.dim(), x2.dim()) - 1
    return (x1 - x2 + eps).norm(p, last, keepdim)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    if not anchor.dim() == positive.dim() == negative.dim():
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {anchor.dim()}D, positive {positive.dim()}D, and negative "
                           f"{negative.dim()}D inputs")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    d_pos = pairwise_distance(anchor, positive, p, eps)
    d_neg = pairwise_distance(anchor, negative, p, eps)
    if swap:  # the harder of the two negatives' distances (to the anchor or to the positive)
        d_neg = _ops.minimum(d_neg, pairwise_distance(positive, negative, p, eps))
    return _reduce((margin + d_pos - d_neg).clamp_min(0), reduction)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    if not input1.dim() == input2.dim() == target.dim():
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {_size_repr(input1)}, input2: {_size_repr(input2)}, target: {_size_repr(target)} ")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    return _reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    d = target.dim()
    if d > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.dim() != d + 1 or input2.dim() != d + 1:
        raise RuntimeError(f"{d}D target tensor expects {d + 1}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    # torch's formula: squared magnitudes plus 1e-12 each, the cosine over their product's root.
    dot = (input1 * input2).sum(d)
    mag = ((input1 * input1).sum(d) + 1e-12) * ((input2 * input2).sum(d) + 1e-12)
    cos = dot / mag.sqrt()
    zero = _ops.zeros_like(cos)
    loss = _ops.where(target == 1, 1 - cos, zero) + _ops.where(target == -1, (cos - margin).clamp_min(0), zero)
    return _reduce(loss, reduction)


def _lengths(values, name, batch):
    """ctc_loss's per-sample lengths: a tensor as it is, else a list of ints (one int for an
    unbatched call)."""
    if isinstance(values, _C.TensorBase):
        return values
    if isinstance(values, int) and not isinstance(values, bool):
        values = [values]
    try:
        out = [int(v) for v in values]
    except TypeError:
        raise TypeError(f"ctc_loss(): argument '{name}' must be a tensor or a sequence of ints, "
                        f"not {type(values).__name__}") from None
    if len(out) != batch:
        raise RuntimeError(f"ctc_loss: {name} must have {batch} values (the batch size), got {len(out)}")
    return out


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """The connectionist temporal classification loss (torch's): log_probs (T, N, C) or unbatched
    (T, C) log-probabilities, targets padded (N, S) or concatenated, lengths as tensors or ints."""
    reduction_enum = _reduction_enum(reduction)
    if log_probs.dim() not in (2, 3):
        raise RuntimeError(f"ctc_loss: log_probs must be (T, N, C) or unbatched (T, C), got shape "
                           f"{list(log_probs.shape)}")
    batched = log_probs.dim() == 3
    if not batched:
        log_probs = log_probs.unsqueeze(1)  # targets stay 1-d: one sample's concatenated labels
        if isinstance(input_lengths, _C.TensorBase) and input_lengths.dim() == 0:
            input_lengths = input_lengths.unsqueeze(0)
        if isinstance(target_lengths, _C.TensorBase) and target_lengths.dim() == 0:
            target_lengths = target_lengths.unsqueeze(0)
    batch = log_probs.shape[1]
    input_lengths = _lengths(input_lengths, "input_lengths", batch)
    target_lengths = _lengths(target_lengths, "target_lengths", batch)
    if isinstance(input_lengths, _C.TensorBase) != isinstance(target_lengths, _C.TensorBase):
        # One as a tensor: both as tensors (the op takes two lists or two tensors).
        from .. import tensor
        if not isinstance(input_lengths, _C.TensorBase):
            input_lengths = tensor(input_lengths, dtype=target_lengths.dtype, device=target_lengths.device)
        else:
            target_lengths = tensor(target_lengths, dtype=input_lengths.dtype, device=input_lengths.device)
    loss = _ops._ctc_loss(log_probs, targets, input_lengths, target_lengths, blank, zero_infinity)[0]
    if zero_infinity:
        loss = _ops.where(loss == math.inf, loss.new_zeros(()), loss)
    if reduction_enum == 0:
        return loss if batched else loss.squeeze(0)
    if reduction_enum == 2:
        return loss.sum()
    # 'mean': each loss over its target length (at least 1), then the batch mean.
    if isinstance(target_lengths, _C.TensorBase):
        lengths = target_lengths.to(loss.dtype)
    else:
        from .. import tensor
        lengths = tensor(target_lengths, dtype=loss.dtype, device=loss.device)
    return (loss / lengths.clamp_min(1)).mean()


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    _warn_target_size(input, target)
    diff = (input - target).abs()
    loss = _ops.where(diff < delta, diff * diff * 0.5, (diff - 0.5 * delta) * delta)
    if weight is not None:
        if tuple(weight.shape) != tuple(input.shape):
            raise ValueError("Weights and input must have the same size.")
        loss = loss * weight
        if reduction == "mean":
            return loss.sum() / weight.sum()
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    elif reduction == "mean":
        _warn_at_caller("reduction: 'mean' divides the total loss by both the batch size and the support size."
                        "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                        "'mean' will be changed to behave the same as 'batchmean' in the next major release.")
    if log_target:
        pointwise = target.exp() * (target - input)
    else:
        # xlogy(t, t) - t * input, with 0 * log(0) = 0.
        pointwise = _ops.where(target == 0, target * 0, target * target.log()) - target * input
    if reduction == "batchmean":
        total = pointwise.sum()
        return total / input.shape[0] if input.dim() else total
    return _reduce(pointwise, reduction)


def _reduce(loss, reduction):
    enum = _reduction_enum(reduction)
    return loss if enum == 0 else (loss.mean() if enum == 1 else loss.sum())


def prelu(input, weight):
    if weight.numel() != 1 and (input.dim() < 2 or weight.numel() != input.shape[1]):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers = "
                           f"{weight.numel()} and channel size = {input.shape[1] if input.dim() >= 2 else 1}.")
    w = weight if weight.numel() == 1 or input.dim() < 2 else weight.view([-1] + [1] * (input.dim() - 2))
    return _ops.where(input > 0, input, input * w)


# ---------------------------------------------------------------------------------------------
# Convolution, pooling, batch/group norm, embedding: thin wrappers over the kernels of
# ir/ops/nn.yaml (runtime/cpu/{Convolution,Pooling,BatchNorm,GroupNorm,Embedding}Kernels.cpp).
# ---------------------------------------------------------------------------------------------
import math as _math  # noqa: E402


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


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _conv("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(name, dims, input, weight, bias, stride, padding, output_padding, groups, dilation):
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"Expected {dims + 1}D (unbatched) or {dims + 2}D (batched) input to {name}, "
                           f"but got input of size: {list(input.shape)}")
    if isinstance(padding, str):
        raise RuntimeError(f"{name}: padding must be an int or a tuple of ints, got the string {padding!r}")
    unbatched = input.dim() == dims + 1
    if unbatched:
        input = input.unsqueeze(0)
    out = _ops.convolution(input, weight, bias, _int_list(stride, dims, "stride"), _int_list(padding, dims, "padding"),
                           _int_list(dilation, dims, "dilation"), True,
                           _int_list(output_padding, dims, "output_padding"), groups)
    return out.squeeze(0) if unbatched else out


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding, output_padding, groups,
                           dilation)


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


# -- 1-d pooling over the 2-d kernels (a unit height), adaptive max pooling as a composite -------
def _as_2d(name, input, dims_ok=(2, 3)):
    if input.dim() not in dims_ok:
        raise RuntimeError(f"{name}: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, "
                           f"but got: {list(input.shape)}")
    return input.unsqueeze(-2)


def _single(value, name):
    value = _pool_list(value)
    if len(value) != 1:
        raise RuntimeError(f"{name} must be a single int, or a tuple of one int, but got {value}")
    return value


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    k = _single(kernel_size, "max_pool1d: kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "max_pool1d: stride")
    out, indices = _ops.max_pool2d_with_indices(_as_2d("max_pool1d", input), [1] + k, [1] + s,
                                                [0] + _single(padding, "max_pool1d: padding"),
                                                [1] + _single(dilation, "max_pool1d: dilation"), ceil_mode)
    # A unit height makes the 2-d flat indices (h * W + w) the 1-d positions.
    out, indices = out.squeeze(-2), indices.squeeze(-2)
    return (out, indices) if return_indices else out


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    k = _single(kernel_size, "avg_pool1d: kernel_size")
    s = k if stride is None or stride == [] else _single(stride, "avg_pool1d: stride")
    return _ops.avg_pool2d(_as_2d("avg_pool1d", input), [1] + k, [1] + s, [0] + _single(padding, "avg_pool1d: padding"),
                           ceil_mode, count_include_pad, None).squeeze(-2)


def _adaptive_sizes(name, input, output_size, dims):
    if input.dim() not in (dims + 1, dims + 2):
        raise RuntimeError(f"{name}(): Expected {dims + 1}D or {dims + 2}D tensor, but got {list(input.shape)}")
    size = [output_size] * dims if isinstance(output_size, int) or output_size is None else list(output_size)
    if len(size) != dims:
        raise RuntimeError(f"{name}: output_size must be {dims}")
    size = [input.shape[input.dim() - dims + i] if s is None else int(s) for i, s in enumerate(size)]
    for d in range(dims):
        if input.shape[input.dim() - dims + d] == 0 and size[d] > 0:
            raise RuntimeError(f"{name}(): Expected input to have non-zero size for non-batch dimensions, but input "
                               f"has sizes {list(input.shape)} with dimension {input.dim() - dims + d} being empty")
    return size


def adaptive_avg_pool1d(input, output_size):
    size = _adaptive_sizes("adaptive_avg_pool1d", input, output_size, 1)
    return _ops._adaptive_avg_pool2d(input.unsqueeze(-2), [1] + size).squeeze(-2)


def _adaptive_windows(n_in, n_out, device):
    """Output i's window [floor(i * n_in / n_out), ceil((i + 1) * n_in / n_out)) as an index table
    (n_out, K), K the longest window, short windows padded with their last index (which leaves a
    max and its first position unchanged)."""
    i = _ops.arange(n_out, dtype=_C.int64, device=device)
    start = (i * n_in).div(n_out, rounding_mode="floor")
    end = ((i + 1) * n_in + n_out - 1).div(n_out, rounding_mode="floor")
    longest = max(-(-(j + 1) * n_in // n_out) - (j * n_in // n_out) for j in range(n_out)) if n_out else 0
    j = _ops.arange(longest, dtype=_C.int64, device=device)
    return _ops.minimum(start.unsqueeze(1) + j, (end - 1).unsqueeze(1)), longest


def _adaptive_max_pool(name, input, output_size, dims, return_indices):
    size = _adaptive_sizes(name, input, output_size, dims)
    if not input.dtype.is_floating_point and name.startswith("adaptive_max_pool"):
        raise RuntimeError(f"\"{name}\" not implemented for '{str(input.dtype).split('.')[-1].capitalize()}'")
    x = input
    lead = input.dim() - dims
    windows = []
    for d in range(dims):
        n_in = input.shape[lead + d]
        table, k = _adaptive_windows(n_in, size[d], input.device)
        windows.append((table, k, n_in))
    # Gather every window's candidates: (..., out_0, k_0, out_1, k_1), then the candidates last.
    for d, (table, k, n_in) in enumerate(windows):
        axis = lead + 2 * d
        x = x.index_select(axis, table.reshape(-1))
        x = x.unflatten(axis, (size[d], k))
    order = list(range(lead)) + [lead + 2 * d for d in range(dims)] + [lead + 2 * d + 1 for d in range(dims)]
    x = x.permute(*order).flatten(lead + dims)
    values, pick = x.max(-1)
    if not return_indices:
        return values
    # The picked candidate's input position: row-major over the spatial dims of the window tables,
    # table d viewed along output dim d and candidate dim dims + d.
    flat = None
    for d, (table, k, n_in) in enumerate(windows):
        view = [1] * (2 * dims)
        view[d], view[dims + d] = size[d], k
        idx = table.reshape(view)
        flat = idx if flat is None else flat * n_in + idx
    flat = flat.expand(*size, *[k for _, k, _ in windows]).flatten(dims)
    flat = flat.expand(*values.shape, flat.shape[-1])
    return values, flat.gather(-1, pick.unsqueeze(-1)).squeeze(-1)


def adaptive_max_pool1d(input, output_size, return_indices=False):
    return _adaptive_max_pool("adaptive_max_pool1d", input, output_size, 1, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _adaptive_max_pool("adaptive_max_pool2d", input, output_size, 2, return_indices)


def _verify_spatial_size(size):
    count = 1
    for s in size[2:]:
        count *= s
    if count == 1:
        raise ValueError(f"Expected more than 1 spatial element when training, got input size {size}")


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):
    """Each (sample, channel) normalized over its positions: group_norm with a group per channel;
    the running statistics (when given) move toward the mean over samples of each instance's mean
    and unbiased variance, as torch's; use_input_stats=False normalizes with them instead."""
    if use_input_stats:
        _verify_spatial_size(list(input.shape))
    if input.dim() < 2:
        raise RuntimeError(f"instance_norm: expected an input with at least 2 dims (N, C, ...), got "
                           f"{list(input.shape)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise RuntimeError("instance_norm: running_mean and running_var must be defined when "
                               "use_input_stats=False")
        return _ops.native_batch_norm(input, weight, bias, running_mean, running_var, False, momentum, eps)[0]
    if running_mean is not None or running_var is not None:
        with _no_grad():
            dims = list(range(2, input.dim()))
            if running_mean is not None:
                running_mean.mul_(1 - momentum).add_(input.mean(dims).mean(0) * momentum)
            if running_var is not None:
                running_var.mul_(1 - momentum).add_(input.var(dims, unbiased=True).mean(0) * momentum)
    n, c = input.shape[0], input.shape[1]
    hw = 1
    for s in input.shape[2:]:
        hw *= s
    return _ops.native_group_norm(input, weight, bias, n, c, hw, c, eps)[0]


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
    # Every index, repeats included, rather than the unique rows: a repeated row gets the same
    # scale each time, so the repeated writes agree, and no op reads the indices' data (traced
    # under kiln.compile, the renorm stays in the graph).
    with _no_grad():
        rows = input.reshape(-1)
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


# ---------------------------------------------------------------------------------------------
# Upsampling and channel/space rearrangement as compositions of table ops (views, index_select,
# dropout of a per-channel mask): what decoders, GAN generators and super-resolution nets call.
# ---------------------------------------------------------------------------------------------
def pixel_shuffle(input, upscale_factor):
    """(*, C*r*r, H, W) -> (*, C, H*r, W*r), as PyTorch's."""
    r = int(upscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_shuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if r <= 0 or c % (r * r):
        raise RuntimeError(f"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square "
                           f"of upscale_factor, but input.size(-3)={c} is not divisible by {r * r}")
    n = len(lead)
    x = input.reshape(*lead, c // (r * r), r, r, h, w)
    x = x.permute(*range(n), n, n + 3, n + 1, n + 4, n + 2)
    return x.reshape(*lead, c // (r * r), h * r, w * r)


def pixel_unshuffle(input, downscale_factor):
    """(*, C, H*r, W*r) -> (*, C*r*r, H, W), as PyTorch's."""
    r = int(downscale_factor)
    if input.dim() < 3:
        raise RuntimeError(f"pixel_unshuffle expects input to have at least 3 dimensions, but got input with "
                           f"{input.dim()} dimension(s)")
    *lead, c, h, w = input.shape
    if r <= 0 or h % r or w % r:
        raise RuntimeError(f"pixel_unshuffle expects height and width to be divisible by downscale_factor, but "
                           f"input.size(-2)={h} and input.size(-1)={w} are not divisible by {r}")
    n = len(lead)
    x = input.reshape(*lead, c, h // r, r, w // r, r)
    x = x.permute(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * r * r, h // r, w // r)


_LINEAR_MODES = {"linear": 3, "bilinear": 4, "trilinear": 5}


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resizing of the last 1-3 dims, one dim at a time. mode='nearest' (PyTorch's: source index
    floor(i * in / out), or floor(i / scale) with scale_factor) is an index_select per dim;
    'nearest-exact' takes the pixel centre's (floor((i + 0.5) * in / out)); 'area' is an adaptive
    average pool to the output size; 'linear'/'bilinear'/'trilinear' blend the two neighbours each
    dim's source coordinate falls between (PyTorch's coordinates and weights, align_corners either
    way); 'bicubic' (4-D input) is PyTorch's cubic convolution (A = -0.75) over the four
    neighbours each dim's source coordinate falls among, edge indices clamped; antialias=True
    raises NotImplementedError."""
    spatial = input.dim() - 2
    if mode in _LINEAR_MODES or mode == "bicubic":
        align_corners = bool(align_corners)
    elif align_corners is not None:
        raise ValueError("align_corners option can only be set with the interpolating modes: linear | bilinear "
                         "| bicubic | trilinear")
    if (size is None) == (scale_factor is None):
        raise ValueError("only one of size or scale_factor should be defined" if size is not None
                         else "either size or scale_factor should be defined")
    if recompute_scale_factor and size is not None:
        raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
    if antialias:
        raise NotImplementedError("kiln.nn.functional.interpolate: antialias=True is not supported")
    if mode in _LINEAR_MODES and input.dim() != _LINEAR_MODES[mode] and 3 <= input.dim() <= 5:
        want = _LINEAR_MODES[mode]
        raise NotImplementedError(f"Got {input.dim()}D input, but {mode} mode needs {want}D input")
    if mode == "bicubic" and input.dim() != 4 and 3 <= input.dim() <= 5:
        raise NotImplementedError(f"Got {input.dim()}D input, but bicubic mode needs 4D input")
    if spatial < 1 or spatial > 3:
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.dim()}D) for "
                                  f"the modes: nearest | linear | bilinear | bicubic | trilinear | area | nearest-exact "
                                  f"(got {mode})")
    if mode not in ("nearest", "nearest-exact", "area", "bicubic") and mode not in _LINEAR_MODES:
        raise NotImplementedError(f"kiln.nn.functional.interpolate: mode={mode!r} is not supported "
                                  "(only 'nearest', 'nearest-exact', 'area', 'linear', 'bilinear', "
                                  "'bicubic', 'trilinear')")
    in_sizes = list(input.shape[2:])
    if size is not None:
        out = [int(s) for s in size] if isinstance(size, (list, tuple)) else [int(size)] * spatial
        if len(out) != spatial:
            raise ValueError(f"Input and output must have the same number of spatial dimensions, but got input with "
                             f"spatial dimensions of {in_sizes} and output size of {out}.")
        scales = [None] * spatial
    else:
        factors = list(scale_factor) if isinstance(scale_factor, (list, tuple)) else [scale_factor] * spatial
        if len(factors) != spatial:
            raise ValueError(f"Input and scale_factor must have the same number of spatial dimensions, but got input "
                             f"with spatial dimensions of {in_sizes} and scale_factor of shape {factors}.")
        out = [int(_math.floor(i * float(f))) for i, f in zip(in_sizes, factors)]
        scales = [None if recompute_scale_factor else float(f) for f in factors]
    if mode == "area":  # PyTorch's: an adaptive average pool to the output size
        pool = (adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d)[spatial - 1]
        return pool(input, out)
    x = input
    for d, (n_in, n_out, scale) in enumerate(zip(in_sizes, out, scales)):
        if mode in ("nearest", "nearest-exact"):
            x = _nearest_dim(x, 2 + d, n_in, n_out, scale, exact=mode == "nearest-exact")
        elif mode == "bicubic":
            x = _cubic_dim(x, 2 + d, n_in, n_out, scale, align_corners)
        else:
            x = _linear_dim(x, 2 + d, n_in, n_out, scale, align_corners)
    return x


def _nearest_dim(x, dim, n_in, n_out, scale, exact=False):
    if n_in == n_out:
        return x
    ratio = n_in / n_out if scale is None else 1.0 / scale
    # float32 index arithmetic as PyTorch's nearest kernels: min(floor(i * ratio), n_in - 1), or
    # for nearest-exact the pixel centre's, min(floor((i + 0.5) * ratio), n_in - 1)
    i = _ops.arange(n_out, dtype=_C.float32, device=x.device)
    src = ((i + 0.5 if exact else i) * ratio).to(_C.int64)
    return _ops.index_select(x, dim, src.clamp(max=n_in - 1))


def _output_coordinates(op, x, n_in, n_out, scale, align_corners):
    """What linear and cubic interpolation along one dim share: the math type (float64 for
    float64 input, else float32), the output indices in it, and the source/output size ratio
    (area_pixel_compute_scale)."""
    if n_in == 0 or n_out == 0:
        raise RuntimeError(f"{op}: input and output sizes should be greater than 0, but got input "
                           f"size {n_in} and output size {n_out}")
    math_type = _C.float64 if x.dtype == _C.float64 else _C.float32
    if align_corners:
        ratio = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        ratio = 1.0 / scale if scale is not None and scale > 0 else n_in / n_out
    return math_type, _ops.arange(n_out, dtype=math_type, device=x.device), ratio


def _linear_dim(x, dim, n_in, n_out, scale, align_corners):
    """Linear interpolation along one dim, as PyTorch's upsample_linear kernels: the source
    coordinate (area_pixel_compute_source_index) in the input's math type, its floor and the next
    index (clamped), and the weights 1 - lambda and lambda."""
    if n_in == n_out:
        return x
    math_type, i, ratio = _output_coordinates("upsample_linear", x, n_in, n_out, scale, align_corners)
    src = i * ratio if align_corners else (ratio * (i + 0.5) - 0.5).clamp(min=0)
    lo = src.to(_C.int64).clamp(max=n_in - 1)  # src >= 0: truncation is floor
    lam = (src - lo.to(math_type)).clamp(0, 1)
    hi = (lo + 1).clamp(max=n_in - 1)
    shape = [1] * x.dim()
    shape[dim] = n_out
    lam = lam.to(x.dtype).reshape(shape) if x.dtype != math_type else lam.reshape(shape)
    a, b = _ops.index_select(x, dim, lo), _ops.index_select(x, dim, hi)
    return a * (1 - lam) + b * lam


def _cubic_dim(x, dim, n_in, n_out, scale, align_corners):
    """Cubic convolution along one dim, as PyTorch's upsample_bicubic2d (which is separable): the
    source coordinate without the clamp at 0 linear mode has, its floor f and fraction t, the
    samples at f-1..f+2 (clamped to the input) weighted by the A = -0.75 kernel at t+1, t, 1-t, 2-t."""
    if n_in == n_out:
        return x
    math_type, i, ratio = _output_coordinates("upsample_bicubic2d", x, n_in, n_out, scale, align_corners)
    src = i * ratio if align_corners else ratio * (i + 0.5) - 0.5
    floor = src.floor()
    t = src - floor
    base = floor.to(_C.int64)
    a = -0.75

    def near(v):  # |v| <= 1
        return ((a + 2) * v - (a + 3)) * v * v + 1

    def far(v):  # 1 < |v| < 2
        return ((a * v - 5 * a) * v + 8 * a) * v - 4 * a

    shape = [1] * x.dim()
    shape[dim] = n_out
    out = None
    for offset, w in zip((-1, 0, 1, 2), (far(t + 1), near(t), near(1 - t), far(2 - t))):
        w = w.to(x.dtype).reshape(shape) if x.dtype != math_type else w.reshape(shape)
        term = _ops.index_select(x, dim, (base + offset).clamp(0, n_in - 1)) * w
        out = term if out is None else out + term
    return out


def dropout2d(input, p=0.5, training=True, inplace=False):
    """Zeroes whole channels: input times a dropout of a mask of ones of shape (N, C, 1, ...), as
    PyTorch's feature dropout. As in PyTorch, every input is read as batched: a 3-D input is
    (N, C, L), not an unbatched (C, H, W), and a 2-D one (N, C) drops single elements."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if input.dim() not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.dim()}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release.")
    if input.dim() == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim.")
    if input.dim() < 2:
        raise RuntimeError(f"dropout2d: Feature dropout requires at least 2 dimensions in the input, got "
                           f"{input.dim()}")
    if not training or p == 0.0:
        return input
    mask = dropout(input.new_ones(*input.shape[:2], *([1] * (input.dim() - 2))), p, True)
    return input.mul_(mask) if inplace else input * mask


from ._functional_extra import *  # noqa: E402,F401,F403 (threshold, unfold/fold, margin losses, ...)
from ._grid_sample import affine_grid, grid_sample  # noqa: E402,F401
from ._unpooling import max_unpool1d, max_unpool2d, max_unpool3d  # noqa: E402,F401
from ._pooling3d import (  # noqa: E402,F401
    adaptive_avg_pool3d, adaptive_max_pool3d, adaptive_max_pool3d_with_indices, avg_pool3d, max_pool3d,
    max_pool3d_with_indices,
)


# torch's autocast runs these in float32 (its C++ ops are on the float32 list; kiln writes them in
# Python): under autocast, float32 inputs and autocast off inside (kiln/_autocast_state.py).
from .._autocast_state import _autocast_float32 as _float32_under_autocast  # noqa: E402

for _name in ("ctc_loss", "huber_loss", "kl_div", "cosine_embedding_loss", "margin_ranking_loss", "triplet_margin_loss",
              "hinge_embedding_loss", "soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss",
              "poisson_nll_loss", "grid_sample"):
    globals()[_name] = _float32_under_autocast(globals()[_name])
_pad_any_dtype = pad
_pad_float32 = _float32_under_autocast(pad)


def pad(input, pad, mode="constant", value=None):  # noqa: F811
    if mode in ("reflect", "replicate"):  # reflection_pad*/replication_pad*: float32 lists
        return _pad_float32(input, pad, mode, value)
    return _pad_any_dtype(input, pad, mode, value)
