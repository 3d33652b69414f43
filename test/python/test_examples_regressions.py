"""Regressions found running pytorch/examples' model code with `import torch` changed to
`import kiln as torch` (the files are not vendored: each test keeps the few lines that failed)."""
import pytest

import kiln


def test_spmm_of_strided_matrices():
    # gcn/main.py: torch.spmm(adj_mat, support) (kiln has no sparse layout: both are strided).
    a, b = kiln.randn(5, 4), kiln.randn(4, 3)
    assert kiln.allclose(kiln.spmm(a, b), a @ b)
    with pytest.raises(RuntimeError, match="mm"):
        kiln.spmm(kiln.randn(5, 4), kiln.randn(3, 3))


# torchvision 0.28's classification models (resnet, mobilenet, efficientnet, convnext, vit, swin,
# densenet, regnet, googlenet, ...) with their torch imports pointed at kiln.

def test_jit_annotations_are_no_ops_and_script_is_refused():
    # densenet.py: @torch.jit.unused, @torch.jit._overload_method; vit/swin: torch.jit.is_scripting().
    @kiln.jit.unused
    def f(x):
        return x + 1

    @kiln.jit.ignore(drop=True)
    def g(x):
        return x * 2

    assert f(1) == 2 and g(2) == 4 and kiln.jit._overload_method(f) is f
    assert kiln.jit.is_scripting() is False and kiln.jit.is_tracing() is False
    assert kiln.jit.annotate(list, [1]) == [1] and kiln.jit.fork(f, 3).wait() == 4
    with pytest.raises(NotImplementedError, match="kiln.compile"):
        kiln.jit.script(f)
    with pytest.raises(NotImplementedError, match="TorchScript"):
        kiln.jit.trace(f, (kiln.ones(1),))

    def uses_is_scripting(x):
        if not kiln.jit.is_scripting():
            return x.relu()
        return x

    x = kiln.randn(5)
    assert kiln.equal(kiln.compile(uses_is_scripting, fullgraph=True)(x), x.relu())


def test_assert_and_log_api_usage():
    kiln._assert(True, "fine")
    with pytest.raises(AssertionError, match="wrong shape"):
        kiln._assert(False, "wrong shape")
    kiln._C._log_api_usage_once("torchvision.models.resnet")  # a no-op hook, as in torch


def test_numpy_style_aliases():
    # regnet.py: torch.divide(...); and the rest of torch's aliases with their in-place forms.
    a, b = kiln.tensor([[4.0, -2.0], [3.0, 1.0]]), kiln.tensor([[2.0, 2.0], [1.0, 4.0]])
    assert kiln.equal(kiln.divide(a, b), a / b) and kiln.equal(a.multiply(b), a * b)
    assert kiln.equal(kiln.subtract(a, b), a - b) and kiln.equal(a.absolute(), a.abs())
    assert kiln.equal(kiln.greater(a, b), a > b) and kiln.equal(a.less_equal(b), a <= b)
    assert kiln.equal(kiln.not_equal(a, b), a != b) and kiln.equal(a.greater_equal(b), a >= b)
    c = a.clone()
    c.divide_(b)
    assert kiln.equal(c, a / b)
    c = a.clone()
    c.swapaxes_(0, 1)
    assert kiln.equal(c, a.t())
    assert kiln.fix(kiln.tensor([-1.5, 2.5])).tolist() == [-1.0, 2.0]


def test_silu_inplace():
    # efficientnet.py: nn.SiLU(inplace=True) (F.silu(x, inplace=True) called a missing x.silu_()).
    x = kiln.linspace(-3, 3, 7)
    ref = kiln.nn.functional.silu(x)
    y = kiln.nn.functional.silu(x, inplace=True)
    assert y is x and kiln.allclose(x, ref)
    a = kiln.randn(4, requires_grad=True)
    kiln.nn.SiLU(inplace=True)(a * 1).sum().backward()
    s = kiln.sigmoid(a.detach())
    assert kiln.allclose(a.grad, s * (1 + a.detach() * (1 - s)), atol=1e-6)


# openai/whisper's model.py (and its log-Mel front end: test_spectral.py), its torch imports
# pointed at kiln.

def test_numpy_scalar_times_tensor_is_a_tensor():
    # sinusoids(): torch.exp(-np.log(10000) / 31 * torch.arange(32)): NumPy's operator deferred
    # to nothing and made an ndarray of the tensor's data (kiln.exp then refused it).
    import numpy as np
    r = np.float64(2.0) * kiln.arange(3)
    assert isinstance(r, kiln.Tensor) and r.dtype == kiln.float32 and r.tolist() == [0.0, 2.0, 4.0]
    assert isinstance(np.float32(1.0) - kiln.arange(3.0), kiln.Tensor)
    assert isinstance(np.float64(2.0) < kiln.arange(3), kiln.Tensor)


def test_conv_forward_takes_input_weight_bias_and_can_be_overridden():
    # whisper's Conv1d overrides _conv_forward(x, weight, bias) to cast the weight; weight
    # standardization (BiT's StdConv2d) calls it with its own weight.
    class CastConv1d(kiln.nn.Conv1d):
        def _conv_forward(self, x, weight, bias):
            return super()._conv_forward(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))

    class StdConv2d(kiln.nn.Conv2d):
        def forward(self, x):
            w = self.weight
            w = (w - w.mean(dim=(1, 2, 3), keepdim=True)) / (w.var(dim=(1, 2, 3), keepdim=True) + 1e-5).sqrt()
            return self._conv_forward(x, w, self.bias)

    c1 = CastConv1d(3, 4, 3, padding=1, padding_mode="reflect")
    x = kiln.randn(2, 3, 8)
    assert kiln.allclose(c1(x), kiln.nn.functional.conv1d(kiln.nn.functional.pad(x, [1, 1], mode="reflect"),
                                                          c1.weight, c1.bias), atol=1e-6)
    c2 = StdConv2d(3, 4, 3)
    y = kiln.randn(1, 3, 6, 6)
    explained = kiln.explain(c2)(y)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    assert kiln.allclose(kiln.compile(c2)(y), c2(y), atol=1e-5)


def test_super_forward_of_a_kiln_module_compiles_without_a_break():
    # whisper's (and CLIP's) `class LayerNorm(nn.LayerNorm): forward = super().forward(x.float())`:
    # kiln's forward ran for real and read the weight by itself, which the tracer refused
    # ("a tensor made from Python data while kiln library code ran"): a break per LayerNorm.
    class LayerNorm(kiln.nn.LayerNorm):
        def forward(self, x):
            return super().forward(x.float()).type(x.dtype)

    model = kiln.nn.Sequential(kiln.nn.Linear(8, 8), LayerNorm(8), kiln.nn.Linear(8, 2))
    x = kiln.randn(4, 8)
    explained = kiln.explain(model)(x)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    model(x).pow(2).sum().backward()
    eager = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    kiln.compile(model)(x).pow(2).sum().backward()
    for g, p in zip(eager, model.parameters()):
        assert kiln.allclose(p.grad, g, atol=1e-5)


def test_module_keyed_cache_dict_compiles():
    # whisper's kv cache: a dict keyed by the key/value Linear modules, filled by forward hooks.
    class Attention(kiln.nn.Module):
        def __init__(self):
            super().__init__()
            self.key, self.value = kiln.nn.Linear(4, 4), kiln.nn.Linear(4, 4)

        def forward(self, x, cache):
            for layer in (self.key, self.value):
                out = layer(x)
                cache[layer] = out if layer not in cache else kiln.cat([cache[layer], out], 0)
            return cache[self.key].sum() + cache[self.value].sum()

    model = Attention()
    compiled, ref_cache, cache = kiln.compile(model), {}, {}
    for _ in range(3):
        x = kiln.randn(1, 4)
        assert kiln.allclose(compiled(x, cache), model(x, ref_cache), atol=1e-5)
    assert [tuple(v.shape) for v in cache.values()] == [(3, 4), (3, 4)]
    assert set(cache) == {model.key, model.value}
    explained = kiln.explain(model)(kiln.randn(1, 4), {})
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


# openai/guided-diffusion (unet.py, gaussian_diffusion.py, respace.py, fp16_util.py).

def test_calling_a_user_object_inlines_its_call():
    # respace._WrappedModel: an object with __call__ wrapping the model, made in the traced step
    # (and one made outside it): each call was a graph break.
    class Wrapped:
        def __init__(self, model, scale):
            self.model, self.scale = model, scale

        def __call__(self, x, t, **kwargs):
            return self.model(x * self.scale + t.float().unsqueeze(-1), **kwargs)

    lin = kiln.nn.Linear(4, 4)
    outer = Wrapped(lin, 2.0)
    x, t = kiln.randn(2, 4), kiln.tensor([1, 2])
    for fn in (lambda x, t: outer(x, t).sum(), lambda x, t: Wrapped(lin, 3.0)(x, t).sum()):
        explained = kiln.explain(fn)(x, t)
        assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
        assert float(kiln.compile(fn)(x, t)) == pytest.approx(float(fn(x, t)), rel=1e-6)


def test_distributed_without_a_process_group_and_flatten_helpers():
    import kiln.distributed as dist
    from kiln._utils import _flatten_dense_tensors, _unflatten_dense_tensors
    assert not dist.is_available() and not dist.is_initialized()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.get_world_size()
    with pytest.raises(ValueError, match="Default process group has not been initialized"):
        dist.all_reduce(kiln.ones(2), op=dist.ReduceOp.SUM)
    with pytest.raises(NotImplementedError, match="no distributed backend"):
        dist.init_process_group("gloo")
    tensors = [kiln.randn(2, 3), kiln.randn(4)]
    flat = _flatten_dense_tensors(tensors)
    assert tuple(flat.shape) == (10,)
    back = _unflatten_dense_tensors(flat, tensors)
    assert [tuple(b.shape) for b in back] == [(2, 3), (4,)] and all(kiln.equal(a, b) for a, b in zip(back, tensors))
    back[1].fill_(0)  # views of the flat buffer
    assert float(flat[6:].abs().sum()) == 0.0


# timm 1.0 / torchvision 0.28 imports (their layers call torch.fx.wrap at import time, and import
# torch.hub and torch.ops at the top).

def test_fx_wrap_while_the_module_is_importing(tmp_path, monkeypatch):
    # `@torch.fx.wrap` on a module-level function runs before the module has the attribute: the
    # name did not resolve back and kiln.fx.wrap raised, so `import timm` failed.
    (tmp_path / "wrapmod.py").write_text(
        "import kiln\n\n@kiln.fx.wrap\ndef leaf(x):\n    return x * 2 if x.sum() > 0 else x\n\n"
        "def fn(x):\n    return leaf(x) + 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import wrapmod
    gm = kiln.fx.symbolic_trace(wrapmod.fn)
    assert [n.target for n in gm.graph.nodes if n.op == "call_function"][0] == "wrapmod.leaf"
    x = kiln.ones(3)
    assert kiln.equal(gm(x), wrapmod.fn(x))


def test_hub_and_ops_namespaces(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    assert kiln.hub.get_dir() == str(tmp_path / "hub")
    kiln.hub.set_dir(str(tmp_path / "h"))
    try:
        assert kiln.hub.get_dir() == str(tmp_path / "h")
    finally:
        kiln.hub._hub_dir = None
    state = {"w": kiln.arange(3.0)}
    checkpoints = tmp_path / "hub" / "checkpoints"
    checkpoints.mkdir(parents=True)
    kiln.save(state, str(checkpoints / "w-0123.pth"))  # already downloaded: read from the cache
    loaded = kiln.hub.load_state_dict_from_url("https://example.invalid/models/w-0123.pth")
    assert kiln.equal(loaded["w"], state["w"])
    assert kiln.hub.HASH_REGEX.search("resnet18-f37072fd.pth").group(1) == "f37072fd"
    with pytest.raises(NotImplementedError, match="hubconf"):
        kiln.hub.load("pytorch/vision", "resnet18")
    assert kiln.equal(kiln.ops.aten.add.Tensor(kiln.ones(2), kiln.ones(2)), kiln.full((2,), 2.0))
    with pytest.raises(OSError, match="cannot load C\\+\\+ operator libraries"):
        kiln.ops.load_library("/nonexistent/_C.so")
    with pytest.raises(AttributeError, match="torchvision"):
        kiln.ops.torchvision.nms
