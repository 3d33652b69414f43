"""Custom kiln.autograd.Functions under kiln.compile: one graph node whose forward and Python
backward are traced on fakes (frontend/binding/CustomFunctionBinding.h), so the forward and
backward graphs hold plain ops; values and gradients equal eager kiln and torch. A Function that
cannot be traced breaks the graph and runs eagerly, still right."""
import numpy as np
import pytest

import kiln
from oracle import need_torch

BACKENDS = ["eager", "aot_eager", "inductor"]


pytestmark = pytest.mark.usefixtures("strict_capture")


def _functions(T):
    class RoundSTE(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            return T.round(x * scale) / scale

        @staticmethod
        def backward(ctx, g):
            return g, None

    class Swish(T.autograd.Function):
        @staticmethod
        def forward(ctx, x, beta):
            s = T.sigmoid(beta * x)
            ctx.save_for_backward(x, s)
            ctx.beta = beta
            ctx.config = {"name": "swish", "terms": (1, 2)}
            return x * s

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            assert ctx.config["terms"] == (1, 2)
            gx = g * (s + ctx.beta * x * s * (1 - s)) if ctx.needs_input_grad[0] else None
            return gx, None

    class ScaleShift(T.autograd.Function):
        """Non-tensor arguments of several kinds, and two tensor outputs, one not differentiable."""

        @staticmethod
        def forward(ctx, x, w, scale, mode, shift=None):
            ctx.scale, ctx.mode = scale, mode
            ctx.save_for_backward(w)
            y = x * w * scale if mode == "mul" else x + w * scale
            if shift is not None:
                y = y + shift
            idx = T.argmax(y, dim=-1)
            ctx.mark_non_differentiable(idx)
            return y, idx

        @staticmethod
        def backward(ctx, gy, gidx):
            (w,) = ctx.saved_tensors
            assert gidx is None or not gidx.requires_grad
            gx = gy * w * ctx.scale if ctx.mode == "mul" else gy
            return gx, None, None, None, None

    return RoundSTE, Swish, ScaleShift


def _grads(T, fn, inputs):
    out = fn(*inputs)
    loss = out if out.dim() == 0 else out.sum()
    leaves = [t for t in inputs if isinstance(t, T.Tensor) and t.requires_grad]
    grads = T.autograd.grad(loss, leaves, allow_unused=True)
    return loss.detach().numpy(), [None if g is None else g.detach().numpy() for g in grads]


def _check(make_fn, make_inputs, backend, graphs=1, breaks=0, rtol=1e-5, atol=1e-6):
    """The compiled function against eager kiln and torch, and its graph/break counts."""
    got = _grads(kiln, kiln.compile(make_fn(kiln), backend=backend), make_inputs(kiln))
    eager = _grads(kiln, make_fn(kiln), make_inputs(kiln))
    torch = need_torch()
    ref = _grads(torch, make_fn(torch), make_inputs(torch))
    for a, b in ((got, eager), (got, ref)):
        np.testing.assert_allclose(a[0], b[0], rtol=rtol, atol=atol)
        for ga, gb in zip(a[1], b[1]):
            assert (ga is None) == (gb is None)
            if ga is not None:
                np.testing.assert_allclose(ga, gb, rtol=rtol, atol=atol)
    kiln.compiler.reset()
    e = kiln.explain(make_fn(kiln))(*make_inputs(kiln))
    assert (e.graph_count, e.graph_break_count) == (graphs, breaks), e.break_reasons
    return e


def _inputs(*shapes, seed=0):
    def make(T):
        r = np.random.default_rng(seed)
        return [T.tensor(r.standard_normal(s).astype(np.float32), requires_grad=True) for s in shapes]

    return make


@pytest.mark.parametrize("backend", BACKENDS)
def test_straight_through_estimator_is_one_graph(backend):
    def make(T):
        RoundSTE, _, _ = _functions(T)

        def fn(x, w):
            return (RoundSTE.apply(x @ w, 4.0) ** 2).sum()

        return fn

    _check(make, _inputs((3, 4), (4, 5)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_saved_tensors_and_ctx_attributes(backend):
    def make(T):
        RoundSTE, Swish, _ = _functions(T)

        def fn(x, w):
            return Swish.apply(RoundSTE.apply(x @ w, 8.0), 1.5) * 2

        return fn

    _check(make, _inputs((3, 4), (4, 5)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_tensor_arguments_and_non_differentiable_output(backend):
    def make(T):
        _, _, ScaleShift = _functions(T)

        def fn(x, w, b):
            y, idx = ScaleShift.apply(x, w, 0.5, "mul", b)
            z, _ = ScaleShift.apply(y, w, 2.0, "add")
            return z * (idx.float().unsqueeze(-1) + 1)

        return fn

    _check(make, _inputs((3, 4), (3, 4), (4,)), backend)


def test_setup_context_needs_input_grad_and_materialize_grads():
    def make(T):
        class MulAdd(T.autograd.Function):
            @staticmethod
            def forward(x, y, alpha):
                return x * y + alpha, x - y

            @staticmethod
            def setup_context(ctx, inputs, output):
                x, y, alpha = inputs
                ctx.save_for_backward(x, y)
                ctx.set_materialize_grads(False)

            @staticmethod
            def backward(ctx, ga, gb):
                x, y = ctx.saved_tensors
                gx = gy = None
                if ga is not None:
                    gx = ga * y if ctx.needs_input_grad[0] else None
                    gy = ga * x if ctx.needs_input_grad[1] else None
                if gb is not None:
                    gx = gb if gx is None else gx + gb
                    gy = -gb if gy is None else gy - gb
                return gx, gy, None

        def fn(x, y):
            a, _ = MulAdd.apply(x, y, 3.0)  # the second output gets no gradient: None in backward
            return a.exp().sum()

        return fn

    def inputs(T):
        x, y = _inputs((4, 3), (4, 3), seed=3)(T)
        return [x, y.detach()]  # needs_input_grad == (True, False)

    for backend in BACKENDS:
        kiln.compiler.reset()
        _check(make, inputs, backend)


def test_once_differentiable_backward():
    def make(T):
        function_module = T.autograd.function

        class Clip(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x.clamp(-0.5, 0.5)

            @staticmethod
            @function_module.once_differentiable
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * (x.abs() <= 0.5).to(g.dtype)

        def fn(x):
            return (Clip.apply(x * 2) * x).sum()

        return fn

    for backend in BACKENDS:
        kiln.compiler.reset()
        _check(make, _inputs((5, 4), seed=2), backend)


class _CheckpointFunction:
    """guided-diffusion's CheckpointFunction (gradient checkpointing written as a Function):
    forward under no_grad, backward re-runs the forward under enable_grad and calls autograd.grad
    with respect to the inputs and the module's parameters, which the module reads by itself."""

    @staticmethod
    def make(T):
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

        class Block(T.nn.Module):
            def __init__(self):
                super().__init__()
                self.lin1 = T.nn.Linear(6, 6)
                self.lin2 = T.nn.Linear(6, 6)

            def forward(self, x):
                args = (x,) + tuple(self.parameters())
                return CheckpointFunction.apply(self._forward, 1, *args)

            def _forward(self, x):
                return self.lin2(T.nn.functional.silu(self.lin1(x))) + x

        net = T.nn.Sequential(Block(), Block())
        r = np.random.default_rng(5)
        with T.no_grad():
            for p in net.parameters():
                p.copy_(T.tensor(r.standard_normal(tuple(p.shape)).astype(np.float32) * 0.3))
        return net


@pytest.mark.parametrize("backend", BACKENDS)
def test_checkpoint_function_is_one_graph(backend):
    nets = {}

    def make(T):
        if T not in nets:
            nets[T] = _CheckpointFunction.make(T)
        net = nets[T]

        def fn(x):
            return (net(x) ** 2).mean()

        return fn

    def grads(T, fn, x):
        net = nets[T]
        loss = fn(x)
        params = list(net.parameters())
        return [loss] + list(T.autograd.grad(loss, [x] + params))

    x_np = np.random.default_rng(6).standard_normal((4, 6)).astype(np.float32)
    torch = need_torch()
    make(kiln), make(torch)
    got = grads(kiln, kiln.compile(make(kiln), backend=backend), kiln.tensor(x_np, requires_grad=True))
    eager = grads(kiln, make(kiln), kiln.tensor(x_np, requires_grad=True))
    ref = grads(torch, make(torch), torch.tensor(x_np, requires_grad=True))
    for a, b, c in zip(got, eager, ref):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(a.detach().numpy(), c.detach().numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(make(kiln))(kiln.tensor(x_np, requires_grad=True))
    assert (e.graph_count, e.graph_break_count) == (1, 0), e.break_reasons


@pytest.mark.parametrize("counting", [False, True])
def test_checkpoint_function_training_steps_compile_once(counting):
    graphs = []

    def counting_backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    net = _CheckpointFunction.make(kiln)
    opt = kiln.optim.SGD(net.parameters(), lr=0.1)
    ref_net = _CheckpointFunction.make(kiln)

    def step(x):
        loss = (net(x) ** 2).mean()
        loss.backward()
        return loss

    compiled = kiln.compile(step, backend=counting_backend if counting else "inductor")
    ref_opt = kiln.optim.SGD(ref_net.parameters(), lr=0.1)
    r = np.random.default_rng(7)
    for _ in range(3):
        x = kiln.tensor(r.standard_normal((4, 6)).astype(np.float32))
        opt.zero_grad()
        ref_opt.zero_grad()
        loss = compiled(x)
        (ref_net(x) ** 2).mean().backward()
        for p, q in zip(net.parameters(), ref_net.parameters()):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
        assert np.isfinite(loss.item())
        opt.step()
        ref_opt.step()
    if counting:  # the graph before the break at backward(), compiled once (nothing after it)
        assert len(graphs) == 1, [str(g.graph) for g in graphs]


def test_double_backward_inside_the_compiled_function():
    # As torch.compile: autograd.grad(create_graph=True) of a Function's output inside the
    # compiled code is traced (a gradient penalty), and the penalty is differentiated again.
    def make(T):
        class Cube(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x ** 3

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                return g * 3 * x ** 2

        def fn(x):
            y = Cube.apply(x).sum()
            (g,) = T.autograd.grad(y, x, create_graph=True)
            return (g ** 2).sum()

        return fn

    for backend in BACKENDS:
        kiln.compiler.reset()
        _check(make, _inputs((5,), seed=8), backend)


def test_untraceable_backward_breaks_and_stays_right():
    def make(T):
        class DataDependent(T.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * 2

            @staticmethod
            def backward(ctx, g):
                (x,) = ctx.saved_tensors
                scale = float(x.abs().max().item())  # reads values: no graph can hold it
                return g * 2 / scale

        def fn(x):
            return (DataDependent.apply(x + 1) * x).sum()

        return fn

    e = _check(make, _inputs((4, 3), seed=9), "inductor", graphs=2, breaks=1)
    assert any("DataDependent" in str(r) and "cannot be traced" in str(r) for r in e.break_reasons)


def test_forward_with_a_side_effect_breaks():
    log = []

    class Logged(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            log.append(x.shape)  # must happen at every call: no graph can replay it
            return x * 3

        @staticmethod
        def backward(ctx, g):
            return g * 3

    def fn(x):
        return Logged.apply(x * 2).sum()

    x = kiln.randn(3, requires_grad=True)
    compiled = kiln.compile(fn)
    for _ in range(3):
        (g,) = kiln.autograd.grad(compiled(x), [x])
        np.testing.assert_allclose(g.numpy(), np.full(3, 6.0, np.float32))
    assert len(log) == 3
    kiln.compiler.reset()
    e = kiln.explain(fn)(x)
    assert any("Logged" in str(r) and "log.append" in str(r) for r in e.break_reasons), e.break_reasons


def test_forward_writing_its_input_breaks_and_stays_right():
    class ScaleInPlace(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def fn(x):
        y = x * 1
        return ScaleInPlace.apply(y).sum()

    x = kiln.randn(4, requires_grad=True)
    (g,) = kiln.autograd.grad(kiln.compile(fn)(x), [x])
    np.testing.assert_allclose(g.numpy(), np.full(4, 2.0, np.float32))
    e = kiln.explain(fn)(x)
    assert any("ScaleInPlace" in str(r) for r in e.break_reasons), e.break_reasons


def test_bad_ctx_use_raises_as_eagerly():
    class SavesANumber(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3.0)
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class WrongGradCount(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            return g  # two inputs, one gradient

    x = kiln.randn(3, requires_grad=True)
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type float"):
        SavesANumber.apply(x)  # eagerly: the message names the argument (it raised a tensor's bool error)
    with pytest.raises(TypeError, match="save_for_backward can only save variables, but argument 1 is of type float"):
        kiln.compile(lambda t: SavesANumber.apply(t).sum())(x)
    kiln.compiler.reset()
    with pytest.raises(RuntimeError, match=r"incorrect number of gradients \(expected 2, got 1\)"):
        out = kiln.compile(lambda a, b: WrongGradCount.apply(a, b).sum())(x, kiln.randn(3, requires_grad=True))
        out.backward()


def test_inference_is_inlined_as_before():
    RoundSTE, Swish, _ = _functions(kiln)

    def fn(x):
        return Swish.apply(RoundSTE.apply(x, 4.0), 1.5)

    x = kiln.randn(3, 4)
    e = kiln.explain(fn)(x)
    assert (e.graph_count, e.graph_break_count) == (1, 0)
    assert not any("apply_captured" in str(n.target) for g in e.graphs for n in g.graph.nodes)
    with kiln.no_grad():
        xr = kiln.randn(3, 4, requires_grad=True)
        np.testing.assert_allclose(kiln.compile(fn)(xr).numpy(), fn(xr).numpy(), rtol=1e-6)


def test_captured_graph_holds_one_node_per_application():
    RoundSTE, Swish, _ = _functions(kiln)

    def fn(x):
        return Swish.apply(RoundSTE.apply(x, 4.0), 1.5).sum()

    e = kiln.explain(fn)(kiln.randn(3, 4, requires_grad=True))
    targets = [n.target for g in e.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert targets.count("kiln.autograd.function.apply_captured") == 2
    assert not any(str(t).startswith("aten.sigmoid") or str(t).startswith("aten.round") for t in targets)


@pytest.mark.parametrize("returns", ["input", "view_as", "clone"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_reversal_returning_its_input(returns, backend):
    # A forward returning its input as it is gives an alias with the Function's history; the
    # joint trace read the input's node through it and lost that history (the backward ignored
    # the Function: wrong gradients).
    def make(T):
        class GradReverse(T.autograd.Function):
            @staticmethod
            def forward(ctx, x, alpha):
                ctx.alpha = alpha
                return x if returns == "input" else x.view_as(x) if returns == "view_as" else x.clone()

            @staticmethod
            def backward(ctx, g):
                return -ctx.alpha * g, None

        def fn(x, w):
            h = x @ w
            r = GradReverse.apply(h, 0.5)
            return (r * h).sum() + r.sum()

        return fn

    _check(make, _inputs((2, 4), (4, 3), seed=11), backend)


def _swish_with_setup_context(T):
    class Swish(T.autograd.Function):
        @staticmethod
        def forward(x, beta):
            return x * T.sigmoid(beta * x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, beta = inputs
            s = T.sigmoid(beta * x)  # an intermediate saved for the backward
            ctx.save_for_backward(x, s)
            ctx.beta = beta

        @staticmethod
        def backward(ctx, g):
            x, s = ctx.saved_tensors
            return g * (s + ctx.beta * x * s * (1 - s)), None

    return Swish


@pytest.mark.parametrize("backend", BACKENDS)
def test_func_grad_over_a_function_is_traced(backend):
    # kiln.func.grad's engine runs on the capture's fakes through the Function's backward node:
    # what its forward saved must be graph values (the transform raised through a compiled
    # region's backward with create_graph=True).
    def make(T):
        Swish = _swish_with_setup_context(T)

        def fn(x):
            return (T.func.grad(lambda t: Swish.apply(t, 1.5).sum())(x) * x).sum()

        return fn

    _check(make, _inputs((5,), seed=12), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_penalty_through_saved_intermediates(backend):
    def make(T):
        Swish = _swish_with_setup_context(T)

        def fn(x):
            y = Swish.apply(x * 2, 1.5).sum()
            (g,) = T.autograd.grad(y, x, create_graph=True)
            return (g ** 2).sum()

        return fn

    e = _check(make, _inputs((6,), seed=13), backend)
    # The forward's ops recorded for the capture-time backward stay only where it reads them.
    targets = [str(n.target) for g in e.graphs for n in g.graph.nodes if n.op == "call_function"]
    assert targets.count("kiln.autograd.function.apply_captured") == 1


def test_setup_context_runs_without_grad_as_torch():
    # It ran with grad on: an intermediate it saved kept its history, so a double backward
    # differentiated through it (a second derivative unlike torch's).
    seen = []

    class Twice(kiln.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            seen.append((kiln.is_grad_enabled(), (inputs[0] * 3).requires_grad))

        @staticmethod
        def backward(ctx, g):
            return g * 2

    Twice.apply(kiln.randn(3, requires_grad=True))
    assert seen == [(False, False)]


def test_captured_applications_live_as_long_as_a_graph_holds_them():
    """The registry of captured applications (kiln.autograd.function._applications) keeps only
    what a kept graph holds: a frame whose trace fails at every call (here the user's code
    raises) made one entry per call; a re-trace at a break leaves none of the first trace's;
    kiln.compiler.reset() drops the rest."""
    from kiln.autograd import function

    class Square(kiln.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return 2 * g * x

    def raising(x, d):
        return Square.apply(x) + d["missing"]

    def branching(x):
        y = Square.apply(x)
        if y.sum() > 0:  # data-dependent: the graph up to here, traced twice
            return y + 1
        return y - 1

    x = kiln.tensor([1.0, -2.0, 3.0], requires_grad=True)
    before = len(function._applications)
    compiled = kiln.compile(raising)
    for _ in range(200):
        with pytest.raises(KeyError):
            compiled(x, {})
    assert len(function._applications) == before
    compiled = kiln.compile(branching)
    for _ in range(3):
        out = compiled(x)
        (g,) = kiln.autograd.grad(out.sum(), [x])
        np.testing.assert_allclose(out.detach().numpy(), [2.0, 5.0, 10.0])
        np.testing.assert_allclose(g.numpy(), [2.0, -4.0, 6.0])
    assert len(function._applications) == before + 1  # the one the graph before the branch holds
    kiln.compiler.reset()
    assert not function._applications
