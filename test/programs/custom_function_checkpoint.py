"""Gradient checkpointing written as a custom autograd.Function (openai/guided-diffusion's
CheckpointFunction): forward under no_grad, backward re-runs the block under enable_grad and calls
autograd.grad with respect to its inputs and the block's parameters, which the block reads by
itself; the parameters come from a `self.parameters()` generator handed to a helper. One
training step: forward, loss, gradients of the input and of every parameter."""
from cutil import init_module, randn, rng

TAGS = ["autograd", "custom-function", "tier2"]
RTOL, ATOL = 1e-5, 1e-6


def build(T):
    nn = T.nn
    F = T.nn.functional

    class CheckpointFunction(T.autograd.Function):
        @staticmethod
        def forward(ctx, run_function, length, *args):
            ctx.run_function = run_function
            ctx.input_tensors = list(args[:length])
            ctx.input_params = list(args[length:])
            with T.no_grad():
                output_tensors = ctx.run_function(*ctx.input_tensors)
            return output_tensors

        @staticmethod
        def backward(ctx, *output_grads):
            ctx.input_tensors = [x.detach().requires_grad_(True) for x in ctx.input_tensors]
            with T.enable_grad():
                shallow_copies = [x.view_as(x) for x in ctx.input_tensors]
                output_tensors = ctx.run_function(*shallow_copies)
            input_grads = T.autograd.grad(output_tensors, ctx.input_tensors + ctx.input_params,
                                          output_grads, allow_unused=True)
            del ctx.input_tensors
            del ctx.input_params
            del output_tensors
            return (None, None) + input_grads

    def checkpoint(func, inputs, params, flag):
        if flag:
            args = tuple(inputs) + tuple(params)
            return CheckpointFunction.apply(func, len(inputs), *args)
        return func(*inputs)

    class ResBlock(nn.Module):
        def __init__(self, ch):
            super().__init__()
            self.norm = nn.GroupNorm(2, ch)
            self.conv = nn.Conv2d(ch, ch, 3, padding=1)

        def forward(self, x):
            return checkpoint(self._forward, (x,), self.parameters(), True)

        def _forward(self, x):
            return x + self.conv(F.silu(self.norm(x)))

    net = nn.Sequential(ResBlock(4), ResBlock(4))
    init_module(T, net)
    params = list(net.parameters())

    def fn(x):
        loss = (net(x) ** 2).mean()
        grads = T.autograd.grad(loss, [x] + params)
        return (loss,) + tuple(grads)

    r = rng(171)
    return fn, [(randn(T, r, 2, 4, 6, 6, requires_grad=True),)]
