"""Eager ops on the `device` fixture's device (cpu by default; on CUDA, ops without a CUDA kernel
run a program generated from their decomposition: kiln/compiler/cuda_eager.py; on the fake
driver in test_cuda_fake_driver.py). Each result is compared with the same op on CPU copies."""
import numpy as np
import pytest

import kiln
from conftest import needs_cxx

pytestmark = needs_cxx
rng = np.random.default_rng(0)


def tensor(shape, device, scale=1.0, requires_grad=False):
    t = kiln.tensor((rng.standard_normal(shape) * scale).astype(np.float32)).to(device)
    return t.requires_grad_() if requires_grad else t


def close(got, want, device, rtol=1e-5, atol=1e-6):
    assert got.device.type == kiln.device(device).type
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


def test_pointwise_broadcast_scalars_and_in_place(device):
    x, y = tensor((6, 7), device), tensor((7,), device)
    xc, yc = x.cpu(), y.cpu()
    close(x + y, xc + yc, device)
    close((x * 2.5 - y).exp().clamp(max=3.0), (xc * 2.5 - yc).exp().clamp(max=3.0), device)
    close(kiln.where(x > 0, x, y), kiln.where(xc > 0, xc, yc), device)
    close(x.to(kiln.float16).float(), xc.to(kiln.float16).float(), device)
    z = x.clone()
    out = z.mul_(3.0)
    assert out is z
    close(z, xc * 3.0, device)


def test_reductions_and_named_returns(device):
    x = tensor((5, 40), device)
    xc = x.cpu()
    close(x.sum(1), xc.sum(1), device, atol=1e-5)
    close(x.mean(), xc.mean(), device)
    m, mc = x.max(1), xc.max(1)
    close(m.values, mc.values, device)
    assert m.indices.cpu().tolist() == mc.indices.tolist()
    close(kiln.softmax(x, -1), kiln.softmax(xc, -1), device)


def test_mlp_forward_backward(device):
    # A conformance-style two-layer MLP: forward, loss, backward; every gradient equal to the CPU's.
    def run(dev):
        g = np.random.default_rng(1)
        params = [kiln.tensor(g.standard_normal(s).astype(np.float32) * 0.3).to(dev).requires_grad_()
                  for s in [(24, 12), (24,), (5, 24), (5,)]]
        x = kiln.tensor(g.standard_normal((8, 12)).astype(np.float32)).to(dev)
        target = kiln.tensor(g.integers(0, 5, 8)).to(dev)
        w1, b1, w2, b2 = params
        h = kiln.nn.functional.relu(kiln.nn.functional.linear(x, w1, b1))
        loss = kiln.nn.functional.cross_entropy(kiln.nn.functional.linear(h, w2, b2), target)
        loss.backward()
        return loss, [p.grad for p in params]

    loss, grads = run(device)
    loss_cpu, grads_cpu = run("cpu")
    close(loss, loss_cpu, device, rtol=1e-5)
    for g, gc in zip(grads, grads_cpu):
        close(g, gc, device, rtol=1e-4, atol=1e-6)


def test_generated_kernels_are_cached_and_unlowerable_ops_name_themselves(device, monkeypatch):
    if not device.startswith("cuda"):
        pytest.skip("CUDA only: the generated eager kernels")
    from kiln.compiler import cuda_eager

    monkeypatch.setattr(kiln.config, "cuda_host_fallback", False)  # the error, not the host run

    x = tensor((3, 9), device)
    x.sigmoid()
    n = len(cuda_eager._cache)
    x.sigmoid()
    tensor((3, 9), device).sigmoid()  # same op, dtypes and layout: no new program
    assert len(cuda_eager._cache) == n
    with pytest.raises(NotImplementedError, match=r"kiln\.sort: no CUDA kernel"):
        kiln.sort(x)


def test_generated_kernels_are_cached_per_layout_class_not_per_size(device):
    if not device.startswith("cuda"):
        pytest.skip("CUDA only: the generated eager kernels")
    from kiln.compiler import cuda_eager

    cuda_eager.clear_cache()  # (programs of earlier tests would make the counts below smaller)

    def counts():
        return len(cuda_eager._cache), len(cuda_eager._by_sizes)

    def check_sizes(op, make, sizes, programs, per_size):
        """`op` at each of `sizes` equals the CPU's, compiling `programs` layout-class programs
        and `per_size` exact-size ones in all."""
        before = counts()
        for s in sizes:
            args = make(s)
            close(op(*args), op(*[a.cpu() for a in args]), device, rtol=1e-5, atol=1e-5)
        assert counts() == (before[0] + programs, before[1] + per_size), (op, sizes)

    # Contiguous: one program over the sizes; a broadcast operand's size-1 dim is specialized.
    check_sizes(lambda x: x.tanh(), lambda s: [tensor(s, device)], [(3, 10), (5, 17), (12, 2)], 1, 0)
    check_sizes(lambda x, y: x * y, lambda s: [tensor(s, device), tensor((s[0], 1), device)],
                [(3, 10), (7, 4)], 1, 0)
    # Equal sizes share a symbol: a call where they differ is another layout class.
    check_sizes(lambda x, y: x - y, lambda s: [tensor(s, device), tensor(s[1:], device)],
                [(6, 6), (4, 4), (4, 9)], 2, 0)
    # A reduction, and layer_norm, whose normalized_shape argument keeps the last dim static.
    check_sizes(lambda x: x.sum(1), lambda s: [tensor(s, device)], [(3, 10), (5, 17)], 1, 0)
    ln = lambda x: kiln.nn.functional.layer_norm(x, (8,))  # noqa: E731
    check_sizes(ln, lambda s: [tensor(s, device)], [(3, 8), (11, 8)], 1, 0)
    # Channels-last (NHWC in memory, NCHW sizes): the channels static, N, H, W symbols.
    def nhwc(s):
        t = tensor((s[0], s[2], s[3], s[1]), device).permute(0, 3, 1, 2)
        assert cuda_eager.layout_class(t) == "channels_last"
        return [t]

    check_sizes(lambda x: x.sigmoid(), nhwc, [(2, 3, 4, 5), (3, 3, 7, 6)], 1, 0)
    # Any other layout (a transposed view): compiled per size.
    t_exp = lambda x: x.t().exp()  # noqa: E731
    check_sizes(t_exp, lambda s: [tensor(s, device)], [(3, 10), (5, 17), (5, 17)], 2, 2)
    # A size past the guarded range compiles again, over a wider range (then serves both).
    x = tensor((2, 5000), device)
    before = counts()
    close(x.tanh(), x.cpu().tanh(), device)
    y = tensor((3, 7), device)
    close(y.tanh(), y.cpu().tanh(), device)
    assert counts() == before and cuda_eager._cache[cuda_eager._key("tanh", 1, (x,), {}, False)].max_size == 20000


def test_ops_without_a_cuda_program_run_on_the_host(device, monkeypatch):
    if not device.startswith("cuda"):
        pytest.skip("CUDA only: the host round trip")
    import warnings

    from kiln.compiler import cuda_eager

    monkeypatch.setattr(cuda_eager, "_warned", set())
    x = tensor((4, 9), device)
    xc = x.cpu()
    with pytest.warns(UserWarning, match=r"kiln\.sort: no CUDA kernel.*it runs on the CPU"):
        values, indices = x.sort(1)
    close(values, xc.sort(1).values, device)
    assert indices.device.type == "cuda" and indices.cpu().tolist() == xc.sort(1).indices.tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per op
        x.sort(0)
    # A data-dependent shape, and a convolution whose CPU result is channels-last: the layout
    # comes back with it (one transfer, no strided copy on the device).
    with pytest.warns(UserWarning, match=r"kiln\.nonzero"):
        assert kiln.nonzero(x > 0).cpu().tolist() == kiln.nonzero(xc > 0).tolist()
    img, w = tensor((2, 3, 6, 6), device), tensor((5, 3, 3, 3), device)
    with pytest.warns(UserWarning, match=r"kiln\.convolution"):
        got = kiln.nn.functional.conv2d(img, w, padding=1)
    want = kiln.nn.functional.conv2d(img.cpu(), w.cpu(), padding=1)
    assert got.stride() == want.stride()
    close(got, want, device, rtol=1e-5, atol=1e-5)
    # In place: the device tensor is written (and is the result), its input left alone.
    index = kiln.tensor([[0, 1, 2, 0, 1, 2, 3, 3, 0]] * 4)
    y = x.clone()
    # The warning names the op that ran on the host: scatter_reduce_ itself, or the out-of-place
    # scatter_reduce its compiled program calls (which of the two depends on whether the
    # program with that fallback in it compiles first).
    with pytest.warns(UserWarning, match=r"kiln\.scatter_reduce"):
        out = y.scatter_reduce_(1, index.to(device), x, "prod")
    assert out is y
    close(y, xc.clone().scatter_reduce_(1, index, xc, "prod"), device)
    close(x, xc, device)
    # prims.reshape of strides it cannot view: a CUDA clone, then a view (its CPU kernel serves
    # CUDA; without it an eager view graph reshaping an input recursed through the eager hook).
    from kiln.fx.targets import resolve

    close(resolve("prims.reshape")(x.t(), [36]), xc.t().reshape(36), device)
    flat = resolve("prims.reshape")(x, [36])  # viewable: a view
    assert flat._storage_id() == x._storage_id()
    close(flat, xc.reshape(36), device)
    # A prims op is its own, not aten's of the same name (the handler was told "sum": aten.sum
    # took prims.sum's dims as its dtype).
    close(resolve("prims.sum")(x, [0]), resolve("prims.sum")(xc, [0]), device, atol=1e-5)
    # kiln.config.cuda_host_fallback = False: the error naming the op.
    monkeypatch.setattr(kiln.config, "cuda_host_fallback", False)
    with pytest.raises(NotImplementedError, match=r"kiln\.topk: no CUDA kernel"):
        x.topk(2)


def test_integer_ops_indexing_and_its_index_error(device):
    x = kiln.arange(10).to(device)
    xc = x.cpu()
    assert (x * 3 // 2 % 4).cpu().tolist() == (xc * 3 // 2 % 4).tolist()
    assert ((x > 3) & (x < 8)).cpu().tolist() == ((xc > 3) & (xc < 8)).tolist()
    assert x[kiln.tensor([0, 3, 9]).to(device)].cpu().tolist() == [0, 3, 9]
    # On CUDA the kernel records the bad index in the program's KilnError, read back after it.
    with pytest.raises(IndexError, match="index 11 is out of bounds for dimension 0 with size 10"):
        x[kiln.tensor([11]).to(device)]


@pytest.mark.parametrize("dtype", [kiln.float16, kiln.bfloat16])
def test_16_bit_matmul(device, dtype):
    a, b = tensor((6, 8), device).to(dtype), tensor((8, 5), device).to(dtype)
    got = a @ b
    assert got.dtype == dtype
    close(got.float(), (a.cpu() @ b.cpu()).float(), device, rtol=1e-2, atol=1e-2)


def test_module_moves_between_devices(device):
    # Module.cpu() returned the module unmoved and Module.cuda() did not exist.
    lin = kiln.nn.Linear(4, 3)
    w = lin.weight
    moved = lin.to(device)
    assert moved is lin and lin.weight is w and lin.weight.device.type == kiln.device(device).type
    if kiln.device(device).type == "cuda":
        assert lin.cpu().weight.device.type == "cpu"
        assert lin.cuda().weight.device.type == "cuda" and lin.weight is w
    back = lin.cpu()
    assert back is lin and lin.weight.device.type == "cpu" and lin.bias.device.type == "cpu"


def test_batch_norm_eval_and_empty_results(device):
    # eval-mode native_batch_norm's saved statistics are empty: their kernels have no elements
    # (on CUDA: a grid of 0 blocks, which the launch refused).
    bn = kiln.nn.BatchNorm2d(3)
    with kiln.no_grad():
        bn.running_mean.copy_(kiln.tensor([0.1, -0.2, 0.3]))
        bn.running_var.copy_(kiln.tensor([1.5, 0.5, 2.0]))
    bn.eval()
    x = tensor((2, 3, 5, 5), device)
    want = bn(x.cpu())
    close(bn.to(device)(x), want, device, atol=1e-5)
    e = kiln.ones(0, 4, device=device)
    close((e.exp() + 1).sum(0), kiln.full((4,), 0.0), device)
    assert (e * 2).shape == (0, 4)


def test_save_and_load_keep_the_device(device, tmp_path):
    # kiln.save refused CUDA tensors; the file names the storage's device as torch's does.
    x = tensor((4, 5), device)
    state = {"w": x, "row": x[1], "n": 3}
    kiln.save(state, tmp_path / "s.pt")
    back = kiln.load(tmp_path / "s.pt")
    assert back["n"] == 3 and back["w"].device == x.device and back["row"].device == x.device
    close(back["w"], x.cpu(), device)
    close(back["row"], x.cpu()[1], device)
    back["w"].add_(1.0)  # the view still shares the loaded storage
    close(back["row"], x.cpu()[1] + 1.0, device)
    on_cpu = kiln.load(tmp_path / "s.pt", map_location="cpu")
    assert on_cpu["w"].device.type == "cpu"
    np.testing.assert_array_equal(on_cpu["w"].numpy(), x.cpu().numpy())


def test_reshape_that_copies_is_not_an_output_view(device):
    # repeat's prims are broadcast_in_dim + reshape: the reshape of a broadcast copies, yet the
    # compiled program took its output for a view of the input (as_strided past the storage's end).
    x = tensor((6, 8), device)
    close(x.repeat(1, 2), x.cpu().repeat(1, 2), device)
    f = kiln.compile(lambda a: a.repeat(2, 3), dynamic=True)
    for n in (6, 7, 9):
        a = tensor((n, 8), device)
        close(f(a), a.cpu().repeat(2, 3), device)
    g = kiln.compile(lambda a: a.t().reshape(-1), dynamic=True)
    for n in (5, 6):
        a = tensor((n, 3), device)
        close(g(a), a.cpu().t().reshape(-1), device)


def test_ops_run_on_the_host_return_what_the_op_returns(device):
    # On CUDA these run their CPU kernels on host copies: allclose's bool came back as a "tensor"
    # and the undefined weight gradient of a group norm without affine (instance norm) as None.
    x = tensor((3, 4), device)
    assert kiln.allclose(x, x * 1.0) is True
    assert kiln.allclose(x, x + 1.0) is False
    img = tensor((2, 4, 5, 5), device, requires_grad=True)
    norm = kiln.nn.InstanceNorm2d(4)
    g, = kiln.autograd.grad(norm(img).sin().sum(), [img])
    host = img.detach().cpu().requires_grad_()
    want, = kiln.autograd.grad(norm(host).sin().sum(), [host])
    close(g, want, device, rtol=1e-4, atol=1e-5)


def test_samplers_without_a_device_kernel(device):
    # multinomial and exponential_ (no CUDA program: their programs draw by calling the op itself)
    # and the gamma/Dirichlet samplers (numpy on the host) refused CUDA tensors; they draw on the
    # host, from the generator a CPU call draws from.
    def draws(dev):
        kiln.manual_seed(3)
        p = kiln.tensor([0.2, 0.3, 0.5]).to(dev)
        conc = kiln.tensor([[1.5, 0.7, 2.0]]).to(dev).requires_grad_()
        d = kiln.distributions.Dirichlet(conc).rsample()
        g, = kiln.autograd.grad((d * kiln.arange(3.0).to(dev)).sum(), [conc])
        beta = kiln.distributions.Beta(conc[:, :1], conc[:, 1:2]).rsample()
        return (kiln.multinomial(p, 5, replacement=True), kiln.empty(4).to(dev).exponential_(), d, g, beta)
    for got, want in zip(draws(device), draws("cpu")):
        close(got, want, device)
