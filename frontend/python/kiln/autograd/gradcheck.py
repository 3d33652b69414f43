"""gradcheck / gradgradcheck: analytical gradients (the engine) against finite differences.

Slow-mode only, as torch.autograd.gradcheck(fast_mode=False): the full Jacobian both ways, one
backward per output element and two forward evaluations per input element, so use small inputs
(float64, as PyTorch advises).
"""
import itertools

from .. import _C


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck when the Jacobians disagree."""


def _tuple(x):
    return tuple(x) if isinstance(x, (list, tuple)) else (x,)


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


def _diff_inputs(inputs):
    return [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]


def _outputs(func, inputs, mask=None):
    """func's floating outputs; with `mask`, only those it marks (the differentiable ones)."""
    outs = [o for o in _tuple(func(*inputs)) if _is_tensor(o) and o.dtype.is_floating_point]
    return outs if mask is None else [o for o, m in zip(outs, mask) if m]


def _flat_values(outputs):
    vals = []
    for o in outputs:
        vals.extend(float(v) for v in o.detach().reshape(-1).tolist())
    return vals


def _numerical_jacobian(func, inputs, diff, eps, mask):
    """cols[input][element] = d(all outputs, flattened) / d input[element]."""
    from .grad_mode import no_grad

    jac = []
    for i in diff:
        x = inputs[i]
        cols = []
        for idx in itertools.product(*[range(s) for s in x.shape]):
            # Only the writes into the input run under no_grad: `func` runs in the caller's grad
            # mode, as torch's gradcheck calls it (a compiled `func` then serves both this and
            # the analytical pass with one graph, instead of recompiling for the grad mode).
            with no_grad():
                orig = x[idx].item()
                x[idx] = orig + eps
            plus = _flat_values(_outputs(func, inputs, mask))
            with no_grad():
                x[idx] = orig - eps
            minus = _flat_values(_outputs(func, inputs, mask))
            with no_grad():
                x[idx] = orig
            cols.append([(p - m) / (2 * eps) for p, m in zip(plus, minus)])
        jac.append(cols)
    return jac


def _analytical_jacobian(func, inputs, diff):
    from . import grad as autograd_grad
    zeros = _C._ops.zeros

    outputs = [o for o in _outputs(func, inputs) if o.requires_grad]
    targets = [inputs[i] for i in diff]
    # rows[input][element][output_flat_index]
    jac = [[[0.0] * sum(o.numel() for o in outputs) for _ in range(inputs[i].numel())] for i in diff]
    row = 0
    for o in outputs:
        for k in range(o.numel()):
            g = zeros(list(o.shape), dtype=o.dtype)
            g.view(-1)[k] = 1.0
            grads = autograd_grad(o, targets, g, retain_graph=True, allow_unused=True)
            for t, gi in enumerate(grads):
                if gi is None:
                    continue
                if tuple(gi.shape) != tuple(targets[t].shape):
                    raise GradcheckError(f"Gradient has incorrect size: got {tuple(gi.shape)}, expected "
                                         f"{tuple(targets[t].shape)}")
                for e, v in enumerate(gi.detach().reshape(-1).tolist()):
                    jac[t][e][row + k] = float(v)
        row += o.numel()
    return jac


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True, nondet_tol=0.0,
              check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
              check_batched_forward_grad=False, check_forward_ad=False, check_backward_ad=True,
              fast_mode=False, masked=None):
    """True when func's analytical Jacobian matches finite differences for every input that
    requires grad; else raises GradcheckError (or returns False with raise_exception=False)."""
    inputs = _tuple(inputs)
    diff = _diff_inputs(inputs)
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but none of "
                         "the them have requires_grad=True.")
    # Outputs that carry no gradient (integer ones, or marked non-differentiable) are not checked.
    mask = [o.requires_grad for o in _outputs(func, inputs)]
    numerical = _numerical_jacobian(func, inputs, diff, eps, mask)
    analytical = _analytical_jacobian(func, inputs, diff)
    for t, i in enumerate(diff):
        for e, (ncol, arow) in enumerate(zip(numerical[t], analytical[t])):
            for k, (n, a) in enumerate(zip(ncol, arow)):
                if abs(a - n) > atol + rtol * abs(n):
                    msg = (f"Jacobian mismatch for output {k} with respect to input {i},\n"
                           f"numerical:{n}\nanalytical:{a}\n(element {e} of input {i})")
                    if raise_exception:
                        raise GradcheckError(msg)
                    return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False, masked=False):
    """gradcheck of the gradient itself: the backward, recorded with create_graph=True, checked
    against finite differences of the first backward."""
    from . import grad as autograd_grad
    randn_like = _C._ops.randn_like

    inputs = _tuple(inputs)
    diff = _diff_inputs(inputs)
    if grad_outputs is None:
        grad_outputs = tuple(randn_like(o).requires_grad_() for o in _outputs(func, inputs))
    grad_outputs = _tuple(grad_outputs)
    n = len(inputs)

    def first_backward(*args):
        ins, gos = args[:n], args[n:]
        outs = [o for o in _outputs(func, ins) if o.requires_grad]
        grads = autograd_grad(outs, [ins[i] for i in diff], gos[:len(outs)], create_graph=True,
                              allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(first_backward, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception)
