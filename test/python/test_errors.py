"""Bad inputs: kiln raises the exception type PyTorch raises, with a message naming the op,
the shapes and the dtypes, and never crashes the process."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

# (label, fn(T) -> anything that must raise, words the kiln message must contain)
CASES = [
    ("broadcast", lambda T: T.ones(2, 3) + T.ones(4), ["add", "3", "4"]),
    ("broadcast_inplace", lambda T: T.ones(3).add_(T.ones(2, 3)), ["add_", "[3]", "[2, 3]"]),
    ("inplace_cast", lambda T: T.ones(3, dtype=T.int64).add_(1.5), ["Float", "Long"]),
    ("int_requires_grad", lambda T: T.ones(3, dtype=T.int64).requires_grad_(), ["floating point"]),
    ("bad_arg_type", lambda T: T.add(T.ones(2), "x"), ["add", "str"]),
    ("missing_arg", lambda T: T.add(T.ones(2)), ["add"]),
    ("unknown_kwarg", lambda T: T.ones(2).sum(bogus=1), ["sum", "bogus"]),
    ("dim_out_of_range", lambda T: T.ones(2, 3).sum(5), ["range", "5"]),
    ("squeeze_dim", lambda T: T.ones(2, 3).unsqueeze(4), ["range"]),
    ("index_out_of_range", lambda T: T.ones(3)[5], ["5", "3"]),
    ("too_many_indices", lambda T: T.ones(3)[0, 0], ["indices", "1"]),
    ("view_bad_size", lambda T: T.ones(2, 3).view(4), ["[4]", "6"]),
    ("view_two_infer", lambda T: T.ones(2, 3).view(-1, -1), ["inferred"]),
    ("view_noncontig", lambda T: T.ones(2, 3).t().view(6), ["view", "reshape"]),
    ("reshape_bad_size", lambda T: T.ones(2, 3).reshape(5), ["[5]", "6"]),
    ("permute_wrong_len", lambda T: T.ones(2, 3).permute(0), ["permute"]),
    ("expand_bad", lambda T: T.ones(2, 3).expand(3, 3), ["expand"]),
    ("cat_ndim", lambda T: T.cat([T.ones(2, 3), T.ones(3)]), ["cat"]),
    ("cat_sizes", lambda T: T.cat([T.ones(2, 3), T.ones(2, 4)]), ["cat", "3", "4"]),
    ("cat_empty_list", lambda T: T.cat([]), ["cat"]),
    ("stack_sizes", lambda T: T.stack([T.ones(2), T.ones(3)]), ["stack"]),
    ("mm_shapes", lambda T: T.mm(T.ones(2, 3), T.ones(4, 5)), ["2x3", "4x5"]),
    ("mm_dtype", lambda T: T.mm(T.ones(2, 3), T.ones(3, 2, dtype=T.float64)), ["float", "double"]),
    ("matmul_1d", lambda T: T.matmul(T.ones(3), T.ones(4)), ["3", "4"]),
    ("item_many", lambda T: T.ones(3).item(), ["3", "elements"]),
    ("bool_ambiguous", lambda T: bool(T.ones(3)), ["ambiguous"]),
    ("mean_int", lambda T: T.ones(3, dtype=T.int64).mean(), ["mean", "Long"]),
    ("int_div_zero", lambda T: T.ones(3, dtype=T.int64) // 0, ["ZeroDivisionError"]),
    ("sub_bool", lambda T: T.ones(2, dtype=T.bool) - T.ones(2, dtype=T.bool), ["Subtraction", "bool"]),
    ("neg_bool", lambda T: -T.ones(2, dtype=T.bool), ["bool"]),
    ("bitwise_float", lambda T: T.ones(2) & T.ones(2), ["bitwise_and", "Float"]),
    ("max_empty", lambda T: T.ones(0).max(), ["max", "numel"]),
    ("argmax_empty_dim", lambda T: T.ones(0, 3).argmax(0), ["argmax"]),
    ("negative_size", lambda T: T.zeros(-1), ["negative"]),
    ("bad_device", lambda T: T.zeros(2, device="tpu"), ["tpu"]),
    ("arange_bad_step", lambda T: T.arange(0, 10, 0), ["step"]),
    ("randint_low_high", lambda T: T.randint(5, 2, (3,)), ["from", "to"]),
    ("div_rounding", lambda T: T.div(T.ones(2), 2, rounding_mode="up"), ["rounding_mode"]),
    ("slice_step", lambda T: T.ones(5)[::-1], ["step"]),
    ("masked_fill_mask_dtype", lambda T: T.ones(3).masked_fill(T.ones(3), 0.0), ["masked_fill", "bool"]),
    ("tril_1d", lambda T: T.ones(3).tril(), ["tril"]),
    ("t_3d", lambda T: T.ones(2, 2, 2).t(), ["t()", "3"]),
    ("split_zero", lambda T: T.ones(4).split(0), ["split"]),
    ("layer_norm_shape", lambda T: T.nn.functional.layer_norm(T.ones(2, 3), (4,)), ["normalized_shape"]),
    ("softmax_dim", lambda T: T.ones(2, 3).softmax(2), ["range"]),
    ("numpy_requires_grad", lambda T: T.ones(2).requires_grad_().numpy(), ["requires grad", "detach"]),
    ("from_numpy_list", lambda T: T.from_numpy([1, 2]), ["ndarray"]),
    ("linear_shapes", lambda T: T.nn.functional.linear(T.ones(2, 3), T.ones(4, 5)), ["2x3", "5x4"]),
]


@pytest.mark.parametrize("label,fn,words", CASES, ids=[c[0] for c in CASES])
def test_same_exception_type_as_torch(label, fn, words):
    torch = need_torch()
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(Exception) as got:
        fn(kiln)
    assert type(got.value) is type(expected.value) or isinstance(got.value, type(expected.value)), (
        f"kiln raised {type(got.value).__name__}: {got.value}\n"
        f"torch raised {type(expected.value).__name__}: {expected.value}")
    message = str(got.value)
    for w in words:
        assert w in message, f"{w!r} not in kiln's message: {message!r}"


def test_process_survives_many_bad_calls():
    """A burst of bad calls of every kind leaves the runtime usable."""
    for _, fn, _ in CASES * 3:
        try:
            fn(kiln)
        except Exception:
            pass
    assert (kiln.ones(2) + 1).numpy().tolist() == [2.0, 2.0]


def test_from_numpy_negative_strides():
    with pytest.raises(ValueError, match="negative"):
        kiln.from_numpy(np.arange(4.0)[::-1])


def test_bfloat16_numpy():
    with pytest.raises(TypeError, match="BFloat16"):
        kiln.ones(2, dtype=kiln.bfloat16).numpy()
