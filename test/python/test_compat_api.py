"""Small torch API surfaces that third-party model files use (pytorch/examples, makemore,
gpt-fast): DataParallel on one device or none, safe_globals for weights_only loads,
testing.assert_allclose, cuda.is_bf16_supported, the torch.nn.modules.* import paths."""
import io
import pickle
import warnings

import numpy as np
import pytest

import kiln
from kiln import nn
from oracle import need_torch
from test_cuda_fake_driver import run_script


def test_data_parallel_without_cuda_calls_the_module():
    if kiln.cuda.is_available():
        pytest.skip("the machine has CUDA")
    m = nn.Linear(3, 2)
    dp = nn.DataParallel(m)
    x = kiln.randn(4, 3)
    assert dp.device_ids == [] and dp.module is m
    np.testing.assert_array_equal(dp(x).detach().numpy(), m(x).detach().numpy())
    assert list(dp.state_dict()) == ["module.weight", "module.bias"]  # as torch's checkpoints
    out = nn.parallel.data_parallel(m, x, range(2))
    np.testing.assert_array_equal(out.detach().numpy(), m(x).detach().numpy())
    scaled = nn.parallel.data_parallel(lambda a, scale: a * scale, (x,), module_kwargs={"scale": 2})
    np.testing.assert_array_equal(scaled.numpy(), (x * 2).numpy())
    assert kiln.cuda.is_bf16_supported() is False


def test_data_parallel_on_the_fake_device():
    out = run_script("""
        import kiln
        from kiln import nn
        m = nn.Linear(3, 2)
        dp = nn.DataParallel(m)
        assert dp.device_ids == [0] and m.weight.device.type == "cuda"
        y = dp(kiln.randn(4, 3))  # a host input moves to the module's device
        assert y.device.type == "cuda" and y.shape == (4, 2)
        try:
            nn.parallel.data_parallel(nn.Linear(3, 2), kiln.randn(4, 3), [0])
        except RuntimeError as e:
            assert "module must have its parameters and buffers on device cuda:0" in str(e)
        else:
            raise AssertionError("no error for a module on the cpu")
        try:
            nn.DataParallel(nn.Linear(3, 2), device_ids=[0, 1])
        except NotImplementedError as e:
            assert "device_ids=[0]" in str(e)
        print(kiln.cuda.is_bf16_supported() == (kiln.cuda.get_device_capability()[0] >= 8))
    """)
    assert out.strip() == "True"


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 2, 3)
        self.relu = nn.ReLU()

    def forward(self, x):
        return self.relu(self.conv(x))


def test_safe_globals_allow_a_whole_module_in_weights_only_loads():
    m = Net()
    buf = io.BytesIO()
    kiln.save(m, buf)
    buf.seek(0)
    with pytest.raises(pickle.UnpicklingError, match="unsupported global .*Net"):
        kiln.load(buf)
    with kiln.serialization.safe_globals([Net, nn.Conv2d, nn.ReLU]):
        assert kiln.serialization.get_safe_globals() == [Net, nn.Conv2d, nn.ReLU]
        buf.seek(0)
        back = kiln.load(buf)
    assert kiln.serialization.get_safe_globals() == []
    x = kiln.randn(1, 1, 5, 5)
    np.testing.assert_array_equal(back(x).detach().numpy(), m(x).detach().numpy())
    kiln.serialization.add_safe_globals([Net, (nn.Conv2d, "kiln.nn.modules.conv.Conv2d"), nn.ReLU])
    try:
        buf.seek(0)
        assert isinstance(kiln.load(buf), Net)
        with pytest.raises(ValueError, match="Expected tuple of length 2"):
            kiln.serialization.add_safe_globals([(nn.ReLU,)])
    finally:
        kiln.serialization.clear_safe_globals()
    assert kiln.serialization.get_safe_globals() == []


def test_assert_allclose_matches_torch():
    torch = need_torch()
    cases = [([1.0, float("nan")], [1.00001, float("nan")], {}), ([1, 2], [1.0, 2.0], {}),
             ([1.0], [1.01], {}), ([1.0], [1.01], dict(rtol=0.1, atol=0)),
             ([1.0, float("nan")], [1.0, 1.0], {}), ([1.0], [1.0 + 5e-5], {})]
    for actual, expected, kw in cases:
        outcomes = []
        for T in (kiln, torch):
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    T.testing.assert_allclose(T.tensor(actual), expected, **kw)
                    outcomes.append("ok")
                except AssertionError as e:
                    outcomes.append(str(e).splitlines()[0])
            assert any(issubclass(w.category, FutureWarning) for w in caught)
        assert outcomes[0] == outcomes[1], (actual, expected, kw)


def test_torch_nn_modules_paths():
    from kiln.nn.modules.activation import ReLU
    from kiln.nn.modules.conv import Conv2d
    from kiln.nn.modules.linear import Linear
    from kiln.utils.hooks import RemovableHandle
    assert (ReLU, Conv2d, Linear) == (nn.ReLU, nn.Conv2d, nn.Linear)
    assert isinstance(nn.Linear(1, 1).register_forward_hook(lambda *a: None), RemovableHandle)


def test_device_and_layout_flags_kiln_does_not_have_are_false_like_torch_on_cpu():
    torch = need_torch()
    names = ["is_sparse", "is_sparse_csr", "is_quantized", "is_mkldnn", "is_nested", "is_xpu", "is_mps", "is_xla",
             "is_ipu", "is_mtia", "is_maia", "is_vulkan"]
    k, t = kiln.ones(2), torch.ones(2)
    assert [getattr(k, n) for n in names] == [getattr(t, n) for n in names] == [False] * len(names)

    def f(x):  # dcgan's Generator.forward: a branch on the device, one graph
        if (x.is_cuda or x.is_xpu) and 2 > 1:
            return x
        return x * 2

    assert kiln.explain(f)(k).graph_count == 1


def test_word_language_model_safe_globals_load_a_whole_transformer():
    # word_language_model/generate.py and super_resolve.py name the layers by torch's module
    # paths in safe_globals; the same paths exist under kiln.nn.modules.
    from kiln.nn.modules import activation, container, dropout, linear, normalization, pixelshuffle, transformer
    layer = transformer.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
    model = transformer.TransformerEncoder(layer, 1)
    model.eval()
    buf = io.BytesIO()
    kiln.save(model, buf)
    allowed = [container.ModuleList, dropout.Dropout, linear.Linear, linear.NonDynamicallyQuantizableLinear,
               normalization.LayerNorm, transformer.TransformerEncoder, transformer.TransformerEncoderLayer,
               activation.MultiheadAttention, pixelshuffle.PixelShuffle,
               kiln.nn.functional.relu]  # the layer's activation function: as torch, it must be listed
    with kiln.serialization.safe_globals(allowed):
        buf.seek(0)
        back = kiln.load(buf)
    assert type(back.layers[0].self_attn.out_proj) is linear.NonDynamicallyQuantizableLinear
    x = kiln.randn(3, 2, 8)
    np.testing.assert_allclose(back(x).detach().numpy(), model(x).detach().numpy(), rtol=1e-6, atol=1e-6)


def test_stride_is_a_plain_tuple_as_torch():
    # Tensor.stride() returned a kiln.Size; torch returns a tuple (only sizes are a Size).
    t = kiln.ones(2, 3, 4).transpose(0, 2)
    assert type(t.stride()) is tuple and t.stride() == (1, 4, 12) and t.stride(-1) == 12
    assert type(t.shape) is kiln.Size and type(t.size()) is kiln.Size
    assert type(kiln.compile(lambda x: x.stride())(kiln.ones(2, 3))) is tuple
