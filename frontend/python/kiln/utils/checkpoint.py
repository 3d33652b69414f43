"""kiln.utils.checkpoint (torch.utils.checkpoint): activation checkpointing, both of torch's variants.

use_reentrant=False (torch's recommended one): the function runs with grad on, recording its
graph as usual (so gradients reach everything it uses, for backward() and autograd.grad alike),
under saved-tensor hooks (kiln.autograd.graph) that keep no tensor, only its position. The first
time the backward needs one, the function runs again from the same inputs and random state
under hooks that collect what it saves, and the backward gets the recomputed tensors.

use_reentrant=True (torch's default when it is not given, with torch's warning): the function
runs without recording; the backward runs it again with grad on, from the saved inputs and
random state, and backpropagates through that recomputation inside the outer backward, so only
the inputs get gradients through the node and parameters accumulate .grad (as torch's, it does
not serve autograd.grad of parameters); when no input requires grad nothing is recorded (torch
warns that gradients will be None).

Traced by kiln.compile, a checkpointed call is traced as a plain call: the compiled graph's
partitioner chooses what the backward keeps (values equal; memory as the compiled graph's)."""
import warnings

from .. import _C
from .._compiling import is_compiling
from ..autograd.function import Function
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential"]

_REENTRANT_WARNING = (
    "kiln.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, "
    "calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, but if "
    "you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants.")


def _is_tensor(x):
    return isinstance(x, _C.TensorBase)


class _Recompute(Function):
    @staticmethod
    def forward(ctx, run, preserve_rng_state, *args):
        ctx.run = run
        ctx.rng_state = _C.get_rng_state() if preserve_rng_state else None
        ctx.tensor_slots = [i for i, a in enumerate(args) if _is_tensor(a)]
        ctx.args = [None if _is_tensor(a) else a for a in args]
        ctx.save_for_backward(*[args[i] for i in ctx.tensor_slots])
        with no_grad():
            return run(*args)

    @staticmethod
    def backward(ctx, *grads):
        args = list(ctx.args)
        inputs = []
        for slot, saved in zip(ctx.tensor_slots, ctx.saved_tensors):
            inp = saved.detach()
            inp.requires_grad_(saved.requires_grad)
            args[slot] = inp
            inputs.append(inp)
        outer_state = _C.get_rng_state()
        if ctx.rng_state is not None:
            _C.set_rng_state(ctx.rng_state)
        try:
            with enable_grad():
                outputs = ctx.run(*args)
        finally:
            _C.set_rng_state(outer_state)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if _is_tensor(o) and o.requires_grad and g is not None]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        from ..autograd import backward
        backward([o for o, _ in pairs], [g for _, g in pairs])
        grads_in = [None] * len(args)
        for slot, inp in zip(ctx.tensor_slots, inputs):
            grads_in[slot] = inp.grad if inp.requires_grad else None
        return (None, None, *grads_in)


class _RecomputeFrame:
    """One non-reentrant checkpointed call: the saved tensors' positions while it runs, the
    recomputed tensors by position once the backward asked for one."""

    def __init__(self, run, args, rng_state):
        self.run, self.args, self.rng_state = run, args, rng_state
        self.count = 0
        self.recomputed = {}

    def pack(self, t):
        self.count += 1
        return self.count - 1

    def unpack(self, position):
        if position not in self.recomputed:
            self.recompute()
        return self.recomputed.pop(position)

    def recompute(self):
        saved = []

        def keep(t):
            saved.append(t)
            return len(saved) - 1

        def unreachable(position):
            raise RuntimeError("kiln.utils.checkpoint: a tensor of the recomputation was unpacked")

        outer_state = _C.get_rng_state()
        if self.rng_state is not None:
            _C.set_rng_state(self.rng_state)
        try:
            with enable_grad(), saved_tensors_hooks(keep, unreachable):
                self.run(*self.args)
        finally:
            _C.set_rng_state(outer_state)
        if len(saved) != self.count:
            raise RuntimeError(f"kiln.utils.checkpoint: the recomputation saved {len(saved)} tensors for backward "
                               f"where the forward saved {self.count}: the checkpointed function must do the same "
                               "operations each time it runs")
        self.recomputed = dict(enumerate(saved))


def _checkpoint_without_reentrant(run, preserve_rng_state, args):
    frame = _RecomputeFrame(run, args, _C.get_rng_state() if preserve_rng_state else None)
    with saved_tensors_hooks(frame.pack, frame.unpack):
        return run(*args)


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               early_stop=True, preserve_rng_state=True, **kwargs):
    """function(*args, **kwargs), recomputed in the backward instead of keeping its activations."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    if context_fn is not None:
        raise NotImplementedError("kiln.utils.checkpoint: context_fn (selective checkpointing) is not supported")
    if use_reentrant and kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    run = function if not kwargs else (lambda *a: function(*a, **kwargs))
    if not use_reentrant:
        if is_compiling() or not _C.is_grad_enabled():
            return run(*args)
        return _checkpoint_without_reentrant(run, preserve_rng_state, args)
    needs_grad = _C.is_grad_enabled() and any(_is_tensor(a) and a.requires_grad for a in args)
    if not needs_grad and _C.is_grad_enabled():
        warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", UserWarning,
                      stacklevel=2)
    return _Recompute.apply(run, preserve_rng_state, *args)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """Runs a Sequential (or list of modules) in `segments` checkpointed chunks; the last chunk
    runs plainly (its activations are needed for the backward right away)."""
    if use_reentrant is None:
        warnings.warn(_REENTRANT_WARNING, UserWarning, stacklevel=2)
        use_reentrant = True
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and not isinstance(functions, (list, tuple)):
        functions = list(functions.children())

    def run_segment(start, end):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x
        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run_segment(start, end), input, use_reentrant=use_reentrant,
                           preserve_rng_state=preserve)
    return run_segment(end + 1, len(functions) - 1)(input)
