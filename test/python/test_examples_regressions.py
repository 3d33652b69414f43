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
