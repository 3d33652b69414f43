"""Device-generic tensor tests: creation, copies in every direction, .to/.cpu/.cuda, views and
memory stats on the `device` fixture's device (cpu by default; KILN_TEST_DEVICE=cuda runs them
on a GPU, or on the fake driver in test_cuda_fake_driver.py). Values are checked on the host."""
import numpy as np
import pytest

import kiln


def host(t):
    return t.cpu().numpy()


def on(t, device):
    """t is on `device` ('cuda' means the current CUDA device)."""
    want = kiln.device(device)
    return t.device.type == want.type and (want.index is None or t.device.index == want.index)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.float64, kiln.int64, kiln.int32, kiln.int8,
                                   kiln.uint8, kiln.bool, kiln.float16, kiln.bfloat16])
def test_factories_fill_every_dtype(device, dtype):
    z, o = kiln.zeros(3, 5, dtype=dtype, device=device), kiln.ones(3, 5, dtype=dtype, device=device)
    assert on(z, device) and on(o, device) and z.dtype == dtype
    assert z.float().cpu().tolist() == [[0.0] * 5] * 3
    assert o.float().cpu().tolist() == [[1.0] * 5] * 3
    value = True if dtype == kiln.bool else 7
    f = kiln.full((4,), value, dtype=dtype, device=device)
    assert f.cpu().tolist() == [value] * 4


def test_full_eight_byte_patterns(device):
    # 8-byte values whose two halves differ cannot be a 4-byte memset: staged through the host.
    for value, dtype in [(1.5, kiln.float64), (-1, kiln.int64), (2**33 + 5, kiln.int64), (0.0, kiln.float64)]:
        assert kiln.full((3,), value, dtype=dtype, device=device).cpu().tolist() == [value] * 3


def test_ranges_eye_and_like(device):
    assert kiln.arange(5, device=device).cpu().tolist() == [0, 1, 2, 3, 4]
    assert np.allclose(host(kiln.linspace(0, 1, 5, device=device)), np.linspace(0, 1, 5))
    assert host(kiln.eye(3, device=device)).tolist() == np.eye(3).tolist()
    x = kiln.ones(2, 3, device=device)
    for made in (kiln.zeros_like(x), kiln.ones_like(x), kiln.full_like(x, 4.0), kiln.empty_like(x),
                 x.new_zeros(4), x.new_ones(4), x.new_full((4,), 2.0), x.new_empty(4)):
        assert on(made, device)
    assert kiln.full_like(x, 4.0).cpu().tolist() == [[4.0] * 3] * 2
    assert x.new_full((2,), 3).cpu().tolist() == [3.0, 3.0]
    r = kiln.rand(100, device=device)
    assert on(r, device) and 0 <= host(r).min() and host(r).max() < 1


def test_tensor_from_data_and_back(device):
    data = [[1.5, -2.0, 3.25], [0.0, 4.0, -5.5]]
    t = kiln.tensor(data, device=device)
    assert on(t, device) and t.shape == (2, 3) and t.dtype == kiln.float32
    assert t.tolist() == data
    assert t.cpu().tolist() == data
    assert kiln.tensor(7, device=device).item() == 7
    assert t[1, 2].item() == -5.5


def test_copy_in_every_direction(device):
    src = kiln.arange(12, dtype=kiln.float32).reshape(3, 4)
    d = kiln.empty(3, 4, device=device)
    d.copy_(src)                                   # host -> device
    assert host(d).tolist() == src.tolist()
    d2 = kiln.zeros(3, 4, device=device)
    d2.copy_(d)                                    # device -> device
    assert host(d2).tolist() == src.tolist()
    back = kiln.zeros(3, 4)
    back.copy_(d2)                                 # device -> host
    assert back.tolist() == src.tolist()


def test_copy_converts_broadcasts_and_handles_strides(device):
    src = kiln.arange(12, dtype=kiln.float32).reshape(3, 4)
    d = src.to(device)
    i = kiln.zeros(4, 3, dtype=kiln.int32, device=device)
    i.copy_(d.t())                                 # strided source, dtype change, on the device
    assert host(i).tolist() == src.t().to(kiln.int32).tolist()
    row = kiln.zeros(3, 4, device=device)
    row.copy_(kiln.tensor([1.0, 2.0, 3.0, 4.0]))   # broadcast from the host
    assert host(row).tolist() == [[1.0, 2.0, 3.0, 4.0]] * 3
    col = kiln.zeros(3, 4, device=device)
    col[:, 1].copy_(kiln.tensor([7.0, 8.0, 9.0]))  # strided destination: the rest survives
    assert host(col).tolist() == [[0, 7, 0, 0], [0, 8, 0, 0], [0, 9, 0, 0]]
    col[1:, ::2].fill_(5)
    assert host(col).tolist() == [[0, 7, 0, 0], [5, 8, 5, 0], [5, 9, 5, 0]]
    out = kiln.zeros(4, 3)
    out.copy_(d.t())                               # strided device source into the host
    assert out.tolist() == src.t().tolist()


def test_to_cpu_cuda_and_dtype(device):
    x = kiln.tensor([[1.0, 2.5], [3.0, -4.5]])
    y = x.to(device)
    assert on(y, device)
    assert y.to(device) is y                       # nothing changes: the same tensor
    z = x.to(device, kiln.float64)
    assert on(z, device) and z.dtype == kiln.float64 and z.cpu().tolist() == x.tolist()
    assert y.to(kiln.int64).cpu().tolist() == [[1, 2], [3, -4]]
    assert y.cpu().device.type == "cpu" and y.cpu().tolist() == x.tolist()
    assert y.to(dtype=kiln.float16, device="cpu").dtype == kiln.float16
    assert y.type_as(kiln.zeros(1, dtype=kiln.int32)).device.type == "cpu"
    assert (y.is_cuda) == (kiln.device(device).type == "cuda")


def test_transfers_keep_a_dense_layout(device):
    # PyTorch's memory_format=preserve: a channels-last tensor (NHWC memory, NCHW sizes) moved to
    # the device and back keeps its strides and values; a gappy slice becomes dense in its order.
    nhwc = kiln.arange(2 * 4 * 5 * 3, dtype=kiln.float32).view(2, 4, 5, 3).permute(0, 3, 1, 2)
    want = nhwc.contiguous().tolist()
    for moved in (nhwc.to(device), nhwc.cuda() if kiln.device(device).type == "cuda" else nhwc.to(device),
                  nhwc.to(device, kiln.float64)):
        assert moved.stride() == nhwc.stride() and moved.cpu().stride() == nhwc.stride()
        assert moved.cpu().tolist() == want
    t = kiln.arange(12.0).view(3, 4).t()
    assert t.to(device).stride() == (1, 4) and t.to(device).cpu().tolist() == t.tolist()
    gappy = kiln.arange(24.0).view(4, 6)[:, ::2].t()  # sizes (3, 4), dims in memory order (1, 0)
    moved = gappy.to(device)
    assert moved.cpu().tolist() == gappy.tolist()
    if kiln.device(device).type == "cuda":
        assert moved.stride() == (1, 3)


def test_views_clone_and_contiguous(device):
    x = kiln.arange(24, dtype=kiln.float32).reshape(2, 3, 4)
    d = x.to(device)
    views = {
        "permute": (d.permute(2, 0, 1), x.permute(2, 0, 1)),
        "transpose": (d.transpose(0, 2), x.transpose(0, 2)),
        "slice": (d[:, 1:, ::2], x[:, 1:, ::2]),
        "select": (d[1], x[1]),
        "view": (d.view(6, 4), x.view(6, 4)),
        "unsqueeze": (d.unsqueeze(1), x.unsqueeze(1)),
        "expand": (d[:, :1].expand(2, 5, 4), x[:, :1].expand(2, 5, 4)),
        "flatten": (d.flatten(), x.flatten()),
    }
    for name, (dv, xv) in views.items():
        assert on(dv, device), name
        assert dv.shape == xv.shape and dv.stride() == xv.stride(), name
        assert host(dv).tolist() == xv.tolist(), name
        assert host(dv.contiguous()).tolist() == xv.tolist(), name
        assert host(dv.clone()).tolist() == xv.tolist(), name
    c = d.permute(2, 0, 1).contiguous()
    assert c.is_contiguous() and on(c, device)
    d.zero_()
    assert host(d).sum() == 0


def test_repr_names_the_device(device):
    t = kiln.tensor([1.0, 2.0], device=device)
    if kiln.device(device).type == "cuda":
        assert repr(t) == f"tensor([1., 2.], device='{t.device}')"
    else:
        assert repr(t) == "tensor([1., 2.])"


def test_memory_stats_follow_allocations(device):
    if kiln.device(device).type != "cuda":
        pytest.skip("the CUDA caching allocator's stats")
    kiln.cuda.empty_cache()
    before = kiln.cuda.memory_allocated()
    kiln.cuda.reset_peak_memory_stats()
    t = kiln.empty(1000, dtype=kiln.float32, device=device)   # 4000 bytes -> 4096
    assert kiln.cuda.memory_allocated() == before + 4096
    assert kiln.cuda.max_memory_allocated() >= before + 4096
    assert kiln.cuda.memory_reserved() >= kiln.cuda.memory_allocated()
    stats = kiln.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == before + 4096
    assert stats["num_ooms"] == 0
    del t
    assert kiln.cuda.memory_allocated() == before
    again = kiln.empty(1000, dtype=kiln.float32, device=device)  # reuses the cached block
    assert kiln.cuda.memory_stats()["segment.all.current"] == stats["segment.all.current"]
    del again
    kiln.cuda.empty_cache()
    assert kiln.cuda.memory_reserved() <= stats["reserved_bytes.all.current"]


def test_compute_on_cuda_runs_and_mixed_devices_are_refused(device):
    if kiln.device(device).type != "cuda":
        pytest.skip("CUDA only")
    x = kiln.ones(3, device=device)
    assert (x + x).cpu().tolist() == [2.0] * 3  # a kernel generated from add's decomposition
    assert (x * kiln.tensor(2.0)).cpu().tolist() == [2.0] * 3  # a CPU scalar tensor mixes in
    with pytest.raises(RuntimeError, match=r"kiln\.add\.Tensor: expected all tensors to be on the same device"):
        x + kiln.ones(3)  # a mixed call reaches the CUDA key too, never the CPU kernel
