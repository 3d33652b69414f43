"""Copies into contiguous tensors from transposed sources take a blocked transpose
(runtime/cpu/CopyKernels.cpp, copyTransposed): every element where numpy puts it, for each
element size, batch layouts, row strides beyond the rows (a sliced source), edges that are not
multiples of the tile, and the cases that must keep the element loop."""

import kiln
import numpy as np
import pytest

DTYPES = ["bool", "uint8", "float16", "int32", "float32", "float64", "int64"]


def _array(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    if dtype == "bool":
        return r.random(shape) < 0.5
    return (r.standard_normal(shape) * 50).astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(32, 32), (70, 45), (33, 100)])
def test_t_contiguous(dtype, shape):
    a = _array(shape, dtype)
    got = kiln.from_numpy(a).t().contiguous()
    assert got.is_contiguous()
    np.testing.assert_array_equal(got.numpy(), a.T)


@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_batched_heads_and_strided_batches(dtype):
    # attention's k.transpose(-2, -1) of heads permuted out of [b, s, h, d]: batch strides that
    # are not row-major over the batch
    a = _array((2, 40, 3, 36), dtype)
    k = kiln.from_numpy(a).permute(0, 2, 3, 1)  # [2, 3, 36, 40], element (b, h, d, s)
    np.testing.assert_array_equal(k.contiguous().numpy(), np.transpose(a, (0, 2, 3, 1)))
    # a batch dim with a step, and a row stride beyond the rows (a column slice of the source)
    big = _array((5, 64, 80), dtype, seed=1)
    src = kiln.from_numpy(big)[::2, :, 3:75].transpose(-2, -1)  # [3, 72, 64], ld 80
    np.testing.assert_array_equal(src.contiguous().numpy(), np.swapaxes(big[::2, :, 3:75], -1, -2))


def test_copy_into_a_contiguous_destination():
    a = _array((48, 64), "float32")
    dst = kiln.zeros(64, 48)
    dst.copy_(kiln.from_numpy(a).t())
    np.testing.assert_array_equal(dst.numpy(), a.T)
    # a dtype change or a broadcast takes the element loop and still converts
    dst64 = kiln.zeros(64, 48, dtype=kiln.float64)
    dst64.copy_(kiln.from_numpy(a).t())
    np.testing.assert_array_equal(dst64.numpy(), a.T.astype(np.float64))


def test_a_copy_between_two_parts_of_one_storage():
    # dst and src share a storage (the tiled path leaves such copies to the element loop)
    a = _array((40, 40), "float32")
    x = kiln.from_numpy(a.copy())
    want = x.t().contiguous().numpy()
    buf = kiln.from_numpy(np.concatenate([a.ravel(), np.zeros(1600, np.float32)]))
    src = buf[:1600].view(40, 40).t()
    dst = buf[1600:].view(40, 40)
    dst.copy_(src)
    np.testing.assert_array_equal(dst.numpy(), want)


def test_a_copy_from_memory_it_partly_overwrites_is_refused():
    # PyTorch's assert_no_partial_overlap: dense source and destination whose memory intersects
    # without being the same elements (a.copy_(a[0]) broadcast a row over itself, silently).
    a = kiln.arange(6.0).view(2, 3)
    for dst, src in ((a, a[0]), (a.view(-1)[1:], a.view(-1)[:-1]), (a[0], a.view(-1)[1:4])):
        with pytest.raises(RuntimeError, match=r"copy_: unsupported operation: some elements of the "
                                                r"input tensor and the written-to tensor refer to a "
                                                r"single memory location.*float32"):
            dst.copy_(src)
    assert a.tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    # The same elements (a view of the same memory) and disjoint parts are copies PyTorch makes.
    a.copy_(a.view(2, 3))
    a[1].copy_(a[0])
    assert a.tolist() == [[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
