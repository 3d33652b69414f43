"""kiln.compile on the `device` fixture's device (cpu by default; KILN_TEST_DEVICE=cuda runs the
compiled programs on a GPU, or on the fake CUDA driver whose kernels run on the CPU emulator:
test_cuda_fake_driver.py). Each compiled function is compared with the same function run
eagerly on CPU copies of its inputs: pointwise, reductions, softmax, layer norm, an MLP forward
with GEMMs, sizes that change (symbolic sizes). Shapes stay small: the emulator runs a host
thread per CUDA thread."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx

pytestmark = needs_cxx
rng = np.random.default_rng(0)


def tensor(shape, device, dtype=np.float32, scale=1.0):
    return kiln.tensor((rng.standard_normal(shape) * scale).astype(dtype)).to(device)


def check(fn, args, device, rtol=1e-5, atol=1e-6):
    """fn compiled, on `device`, equals fn eager on the CPU; returns the compiled function."""
    compiled = kiln.compile(fn)
    got = compiled(*args)
    want = fn(*[a.cpu() if isinstance(a, kiln.Tensor) else a for a in args])
    got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
    for g, w in zip(got, want):
        assert g.device.type == kiln.device(device).type, (g.device, device)
        np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=rtol, atol=atol)
    return compiled


def test_pointwise(device, strict_inductor):
    def f(x, y):
        return (x * y + 1.5).relu() - x.sigmoid() / 2

    x, y = tensor((37, 19), device), tensor((19,), device)
    check(f, (x, y), device)


def test_reductions(device, strict_inductor):
    def f(x):
        return x.sum(1), x.amax(0), x.mean(), x.argmax(1)

    check(f, (tensor((24, 300), device),), device, rtol=1e-5, atol=1e-5)


def test_softmax_and_layer_norm(device, strict_inductor):
    def f(x, w, b):
        return kiln.softmax(x, -1), kiln.nn.functional.layer_norm(x, (x.shape[-1],), w, b)

    x = tensor((12, 160), device, scale=3.0)
    check(f, (x, tensor((160,), device), tensor((160,), device)), device, rtol=1e-5, atol=1e-5)


def test_mlp_forward_with_gemms(device, strict_inductor):
    def f(x, w1, b1, w2, b2):
        h = kiln.nn.functional.gelu(x @ w1.t() + b1)
        return kiln.log_softmax(kiln.nn.functional.linear(h, w2, b2), -1)

    args = (tensor((16, 32), device), tensor((48, 32), device, scale=0.2), tensor((48,), device),
            tensor((10, 48), device, scale=0.2), tensor((10,), device))
    check(f, args, device, rtol=1e-4, atol=1e-5)


def test_symbolic_sizes(device, strict_inductor):
    def f(x, y):
        return (x + y).sum(-1) * 2

    compiled = None
    for n in (6, 9, 13):  # the third size runs the program compiled over a size symbol
        compiled = check(f, (tensor((n, 40), device), tensor((n, 40), device)), device, atol=1e-5)
    assert compiled is not None


def test_cubins_go_to_the_configured_kernel_cache(device, strict_inductor):
    # Regression: the CUDA path used ~/.cache/kiln (or $KILN_CACHE_DIR) whatever
    # kiln.config.cache_dir said; the C++ path always followed it.
    if not device.startswith("cuda"):
        pytest.skip("CUDA only: NVRTC's CUBINs")
    import os

    artifacts = os.path.join(strict_inductor, "artifacts")
    before = len(os.listdir(artifacts)) if os.path.isdir(artifacts) else 0
    check(lambda x: x.abs() * 3.25 - 1, (tensor((7, 11), device),), device)
    assert len(os.listdir(artifacts)) > before


@pytest.mark.filterwarnings("ignore:.*it runs on the CPU, its tensors copied")
def test_ops_without_a_lowering_between_compiled_segments(device, strict_inductor):
    # sort and a convolution have no lowering: they run eagerly between compiled segments (on
    # CUDA the segments are CUDA programs and those ops run on the host, their tensors copied
    # there and back: kiln/compiler/cuda_eager.py); strict mode: no fallback to eager.
    def f(x, w):
        values, indices = x.flatten(1).sort(1)
        h = kiln.nn.functional.conv2d(x.relu(), w, padding=1)
        return (values * 2 + 1).tanh(), indices + 1, h.mean((2, 3)) * 0.5 + h.amax((2, 3))

    check(f, (tensor((2, 3, 6, 6), device), tensor((4, 3, 3, 3), device, scale=0.3)), device,
          rtol=1e-4, atol=1e-5)


@pytest.mark.filterwarnings("ignore:.*it runs on the CPU, its tensors copied")
def test_ops_without_a_lowering_over_size_symbols(device, strict_inductor, capsys):
    # dynamic=True with a fallback op: the segments compile over the size symbols on CUDA too
    # (they compiled for static sizes there: "ops without a lowering (fallbacks) on CUDA").
    def f(x):
        values, indices = (x * 2).sort(1)
        return (values + 1).tanh(), indices

    compiled = kiln.compile(f, dynamic=True)
    kiln.set_logs(dynamic=True)
    try:
        for n in (5, 9, 13):
            x = tensor((n, 7), device)
            got, want = compiled(x), f(x.cpu())
            for g, w in zip(got, want):
                assert g.device.type == kiln.device(device).type
                np.testing.assert_allclose(g.cpu().numpy(), w.numpy(), rtol=1e-5, atol=1e-6)
    finally:
        kiln.set_logs()
    log = capsys.readouterr().err
    assert "is over size symbols: x: f32[s0, s1]" in log and "static sizes" not in log, log


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_16_bit_linear_with_bias(device, dtype):
    # A 16-bit addmm decomposes to an f32 product of the 16-bit operands (the bias added before
    # the one rounding): a GEMM with 16-bit operands and an f32 result on either target.
    dt = getattr(kiln, dtype)
    x, w, b = (tensor(s, device).to(dt) for s in ((8, 16), (4, 16), (4,)))
    compiled = kiln.compile(lambda x, w, b: kiln.nn.functional.linear(x, w, b))
    got = compiled(x, w, b).cpu().float().numpy()
    want = kiln.nn.functional.linear(x.cpu(), w.cpu(), b.cpu()).float().numpy()
    np.testing.assert_array_equal(got, want)


def test_library_code_makes_tensors_on_the_inputs_device(device):
    # kiln's embedding_bag runs on fakes while tracing and asks for arange(device=input.device):
    # the fake's meta device was recorded as the CPU, so the graph mixed CPU and CUDA tensors.
    bag = kiln.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0).to(device)
    ids = kiln.tensor([1, 0, 4, 4, 9, 0, 13, 2, 19]).to(device)
    offsets = kiln.tensor([0, 2, 5, 7]).to(device)
    ids2d = kiln.tensor([[1, 2, 3], [4, 0, 6]]).to(device)

    def fn(i, o, i2):
        return bag(i, o), bag(i2)
    compiled = kiln.compile(fn)
    got = compiled(ids, offsets, ids2d)
    bag_cpu = kiln.nn.EmbeddingBag(20, 6, mode="mean", padding_idx=0)
    bag_cpu.load_state_dict({k: v.cpu() for k, v in bag.state_dict().items()})
    want = (bag_cpu(ids.cpu(), offsets.cpu()), bag_cpu(ids2d.cpu()))
    for g, w in zip(got, want):
        assert g.device.type == kiln.device(device).type
        np.testing.assert_allclose(g.detach().cpu().numpy(), w.detach().numpy(), rtol=1e-6, atol=1e-6)


def test_autocast_of_another_device_type_changes_nothing(device):
    # Under autocast("cpu") the traced fakes (meta) of CUDA tensors were cast as CPU tensors:
    # compiled CUDA matmuls ran in bfloat16 where eager (and torch) keep float32.
    w = tensor((8, 8), device)
    other = "cuda" if kiln.device(device).type == "cpu" else "cpu"

    def fn(x):
        with kiln.autocast(other, dtype=kiln.bfloat16 if other == "cpu" else kiln.float16,
                           enabled=other == "cpu" or kiln.cuda.is_available()):
            return x @ w, (x @ w).dtype

    x = tensor((4, 8), device)
    (got, got_dtype), (want, want_dtype) = kiln.compile(fn)(x), fn(x)
    assert got_dtype == want_dtype == kiln.float32 and got.dtype == kiln.float32
    np.testing.assert_allclose(got.cpu().numpy(), want.cpu().numpy(), rtol=1e-5, atol=1e-5)
