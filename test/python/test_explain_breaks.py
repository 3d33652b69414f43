"""kiln.explain counts graph breaks in nested frames as torch._dynamo.explain does (issue 16): a
break inside a helper the compiled frame calls, a resume function's own breaks, a custom
Function applied in a helper. graph_count, graph_break_count, the break reasons (one per graph a
break ended) and each reason's user stack (line numbers from the compiled frame down to the
breaking line) equal torch's on the same code; the compiled results equal eager."""
import io

import numpy as np
import pytest

import kiln
from kiln.compiler import bytecode
from oracle import need_torch

pytestmark = [pytest.mark.skipif(not bytecode.supported(), reason="graph breaks resume on 3.11 to 3.13 only"),
              pytest.mark.usefixtures("strict_capture")]


def _programs(T):
    sink = io.StringIO()

    def helper(x):
        y = x.sin()
        print("h", file=sink)
        return y.cos()

    def twice_nested(x):
        return helper(x) * 3

    def helper_first(x):
        print("p", file=sink)
        return x

    def helper_breaks_twice(x):
        x = x.sin()
        print("1", file=sink)
        x = x.cos()
        print("2", file=sink)
        return x.exp()

    class Double(T.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def apply_in_helper(x):
        print("q", file=sink)
        return Double.apply(x)

    def helper_item(x):
        return x * x.sum().item()

    def helper_if(x):
        if x.sum() > 0:
            return x * 2
        return x * 3

    def helper_data(p):
        p.data.mul_(0.5)  # traced as a detached alias (it was a break)
        return p

    return {
        "call": lambda x: helper(x * 2) + 1,
        "two_levels": lambda x: twice_nested(x + 1) - 1,
        "in_loop": lambda x: [x := helper(x) for _ in range(3)][-1],
        "first_thing": lambda x: helper_first(x * 2) + 1,
        "function_in_helper": lambda x: apply_in_helper(x.sin()).cos(),
        "two_breaks_in_helper": lambda x: helper_breaks_twice(x + 1) * 2,
        "called_twice": lambda x: (lambda a: a + helper(a * 2))(helper(x + 1)),
        "item_in_helper": lambda x: helper_item(x + 1) - 1,
        "branch_in_helper": lambda x: (lambda y: helper_if(y) + helper_if(-y))(x.cos()),
        "data_in_helper": lambda x: helper_data(x * 2) + 1,
    }


def _with_top_level_breaks(T):
    sink = io.StringIO()

    def helper(x):
        y = x.sin()
        print("h", file=sink)
        return y.cos()

    def resume_breaks_again(x):
        x = x + 1
        print("o", file=sink)
        x = helper(x)  # a break inside the resume function's own call
        print("o2", file=sink)
        return x * 2

    def item_then_print(x):
        y = x.sum()
        if y.item() > 0:
            x = x + 1
        print("a", file=sink)
        return x * 2

    return {"resume_breaks_again": resume_breaks_again, "item_then_print": item_then_print}


def _summary(explained, stack_lines):
    return (explained.graph_count, explained.graph_break_count,
            [stack_lines(r) for r in explained.break_reasons])


@pytest.mark.parametrize("make", [_programs, _with_top_level_breaks])
def test_nested_break_counts_and_stacks_equal_torch(make):
    torch = need_torch()
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    kiln_programs, torch_programs = make(kiln), make(torch)
    for name, fn in kiln_programs.items():
        torch._dynamo.reset()
        want = _summary(torch._dynamo.explain(torch_programs[name])(torch.tensor(x)),
                        lambda r: [f.lineno for f in r.user_stack])
        got = kiln.explain(fn)(kiln.tensor(x))
        assert _summary(got, lambda r: [frame[1] for frame in r.user_stack]) == want, (name, str(got))
        assert got.break_graphs == sorted(got.break_graphs), name
        kiln.compiler.reset()
        eager = make(kiln)[name](kiln.tensor(x))
        compiled = kiln.compile(make(kiln)[name])
        for _ in range(2):
            np.testing.assert_allclose(compiled(kiln.tensor(x)).numpy(), eager.numpy(), rtol=1e-5, atol=1e-6)
        kiln.compiler.reset()


def test_break_reason_text_names_the_stack_and_the_graphs(capsys):
    """str(explain) gives each reason's user stack, outermost first, and the graphs on either
    side; KILN_LOGS=graph_breaks logs the stack of a break inside an inlined call and the graphs
    compiled so far; a break with no graph before it is listed apart."""
    fn = _programs(kiln)["two_levels"]
    text = str(kiln.explain(fn)(kiln.ones(3)))
    first = text.index("Break Reason 1:")
    stack = text[first:text.index("Break Reason 2:")]
    assert [line.split(", in ")[1] for line in stack.splitlines() if ", in " in line] == [
        "<lambda>", "twice_nested", "helper"], stack
    assert "Graphs: 1 up to this break, 4 after it" in stack
    assert "Other Breaks (no graph compiled up to them" in text  # twice_nested's call of helper
    kiln.compiler.reset()
    kiln.set_logs(graph_breaks=True)
    try:
        kiln.compile(fn)(kiln.ones(3))
    finally:
        kiln.set_logs(graph_breaks=False)
    err = capsys.readouterr().err
    assert "user stack:" in err and "graphs this compiled function has compiled: 1" in err, err


def test_tensor_data_is_a_detached_alias_in_the_graph():
    """`p.data.add_(g)` after backward (word_language_model's SGD by hand) compiles: the graph
    writes the parameter through the alias, as eager; `.data` carries no autograd history."""
    torch = need_torch()

    def make(T):
        T.manual_seed(0)
        model = T.nn.Sequential(T.nn.Linear(4, 8), T.nn.Tanh(), T.nn.Linear(8, 3))

        def step(x):
            model.zero_grad()
            loss = model(x).pow(2).mean()
            loss.backward()
            T.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            for p in model.parameters():
                p.data.add_(p.grad, alpha=-0.1)
            h = model[0](x).data
            return loss.detach(), h.requires_grad

        return model, step

    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    torch_model, torch_step = make(torch)
    want = [torch_step(torch.from_numpy(x)) for _ in range(3)]
    model, step = make(kiln)
    compiled = kiln.compile(step)
    for loss, requires_grad in want:
        got_loss, got_requires_grad = compiled(kiln.from_numpy(x))
        np.testing.assert_allclose(got_loss.numpy(), loss.numpy(), rtol=1e-5)
        assert got_requires_grad is requires_grad is False
    for p, q in zip(model.parameters(), torch_model.parameters()):
        np.testing.assert_allclose(p.detach().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    kiln.compiler.reset()
    e = kiln.explain(make(kiln)[1])(kiln.from_numpy(x))
    torch._dynamo.reset()
    t = torch._dynamo.explain(make(torch)[1])(torch.from_numpy(x))
    assert (e.graph_count, e.graph_break_count) == (t.graph_count, t.graph_break_count) == (2, 1), str(e)
