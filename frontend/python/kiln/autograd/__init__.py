"""kiln.autograd: reverse-mode automatic differentiation (torch.autograd's API).

The engine is C++ (runtime/autograd/): every op that records for autograd gives its outputs a
`grad_fn` node built from the op table's derivative formulas; `backward` and `grad` run those
nodes from the roots, newest first. See docs/autograd.md.
"""
from .. import _C
from .function import Function, FunctionCtx, once_differentiable  # noqa: F401
from .grad_mode import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from .gradcheck import gradcheck, gradgradcheck  # noqa: F401
from .anomaly_mode import detect_anomaly, set_detect_anomaly  # noqa: F401
from . import functional, graph, profiler  # noqa: F401,E402

__all__ = ["backward", "grad", "Function", "gradcheck", "gradgradcheck", "detect_anomaly", "set_detect_anomaly",
           "no_grad", "enable_grad", "set_grad_enabled", "inference_mode"]


def _as_tuple(x):
    if x is None:
        return ()
    if isinstance(x, (list, tuple)):
        return tuple(x)
    return (x,)


def _make_grads(outputs, grads, is_grads_batched=False):
    """The root gradients: given ones checked against their outputs, ones for scalar outputs."""
    ones_like = _C._ops.ones_like

    out = []
    for i, (o, g) in enumerate(zip(outputs, grads)):
        if g is None:
            if o.requires_grad and o.numel() != 1:
                raise RuntimeError("grad can be implicitly created only for scalar outputs")
            if not o.dtype.is_floating_point:
                raise RuntimeError(
                    f"grad can be implicitly created only for real scalar outputs but got {o.dtype}")
            out.append(ones_like(o))
            continue
        if not isinstance(g, _C.TensorBase):
            raise TypeError(f"gradients can be either Tensors or None, but got {type(g).__name__}")
        if tuple(g.shape) != tuple(o.shape):
            from .._tensor import Size

            raise RuntimeError(
                f"Mismatch in shape: grad_output[{i}] has a shape of {Size(g.shape)!r} and "
                f"output[{i}] has a shape of {Size(o.shape)!r}.")
        if g.dtype.is_floating_point != o.dtype.is_floating_point:
            raise TypeError(
                f"For complex Tensors, both grad_output and output are required to have the same dtype. "
                f"Mismatch in dtype: grad_output[{i}] has a dtype of {g.dtype} and output[{i}] has a "
                f"dtype of {o.dtype}.")
        out.append(g)
    return out


def _refuse_sparse(what, tensors):
    """A sparse tensor's C++ tensor is a placeholder (kiln/sparse): the engine cannot take one."""
    for t in tensors or ():
        if isinstance(t, _C.TensorBase) and t.is_sparse:
            raise NotImplementedError(f"{what} a sparse tensor (layout kiln.sparse_coo): use its values "
                                      "(kiln.sparse_coo_tensor(indices, values) with values requiring grad), or "
                                      "read a sparse leaf's .grad after backward()")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Accumulates into `.grad` of the graph's leaves (or of `inputs`) the gradient of `tensors`."""
    if grad_variables is not None:
        grad_tensors = grad_variables
    tensors = _as_tuple(tensors)
    grad_tensors = _as_tuple(grad_tensors) or (None,) * len(tensors)
    if len(grad_tensors) != len(tensors):
        raise RuntimeError(f"got {len(grad_tensors)} tensors and {len(tensors)} gradients")
    inputs = _as_tuple(inputs)
    if inputs is not None and len(inputs) == 0 and inputs != ():
        raise RuntimeError("'inputs' argument to backward() cannot be empty.")
    if retain_graph is None:
        retain_graph = create_graph
    _refuse_sparse("backward from", tensors)
    _refuse_sparse("backward(inputs=...) with", inputs)
    grads = _make_grads(tensors, grad_tensors)
    _C._run_backward(list(tensors), grads, bool(retain_graph), bool(create_graph), list(inputs), True, True)


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """The gradients of `outputs` with respect to `inputs` (a tuple), without touching `.grad`."""
    zeros_like = _C._ops.zeros_like

    single = isinstance(inputs, _C.TensorBase)
    outputs = _as_tuple(outputs)
    inputs = _as_tuple(inputs)
    grad_outputs = _as_tuple(grad_outputs) or (None,) * len(outputs)
    if len(grad_outputs) != len(outputs):
        raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} "
                           f"grad_outputs and {len(outputs)} outputs")
    if allow_unused is None:
        allow_unused = materialize_grads
    if materialize_grads and not allow_unused:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if retain_graph is None:
        retain_graph = create_graph
    _refuse_sparse("autograd.grad of", outputs)
    _refuse_sparse("autograd.grad with respect to", inputs)
    grads = _make_grads(outputs, grad_outputs)
    result = _C._run_backward(list(outputs), grads, bool(retain_graph), bool(create_graph), list(inputs),
                              bool(allow_unused), False)
    if materialize_grads:
        result = [zeros_like(i) if g is None else g for g, i in zip(result, inputs)]
    del single
    return tuple(result)
