"""Every op with a decomposition: the decomposed graph computes what the eager op computes.

For each op of the table and each level ("core_aten", "prims"), a one-node graph calling the op
on each sample input (kiln.testing) is retraced with kiln.fx.retrace; the result graph must hold
only ops of that level (core ATen / prims) and, run on the real sample, give the
eager op's result (dtype and shape exact, values within the per-dtype tolerance), mutating its
inputs the same way. An op the retrace leaves as it is has no decomposition to that level and
is skipped (tools/decomp_report.py lists them).
"""
import pytest

import kiln
from kiln import testing
from kiln.testing import graphs
from oracle import assert_match

needs_retrace = pytest.mark.skipif(not graphs.retrace_available(),
                                   reason="kiln.fx.retrace is not available (decompositions not built)")

# Samples per (op, dtype): all of them for float32, the first few otherwise.
CAP = 2
UNINITIALIZED = {"empty", "empty_like", "new_empty", "empty_strided"}


def _values_are_defined(target):
    return target.split(".")[1] not in UNINITIALIZED and "random" not in testing.op_tags(target)


def _meta(x):
    if isinstance(x, (list, tuple)):
        return [_meta(y) for y in x]
    return (str(x.dtype).split(".")[-1], tuple(x.shape)) if hasattr(x, "dtype") else x


def _compare(target, got, expected, where):
    if _values_are_defined(target):
        try:
            assert_match(got, expected)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from None
    else:
        assert _meta(got) == _meta(expected), where


def _check_sample(target, level, args, kwargs):
    """Returns False when the op was left undecomposed, True when checked."""
    eager_args, eager_kwargs = testing.clone_value(args), testing.clone_value(kwargs)
    try:
        expected = testing.run_eager(target, eager_args, eager_kwargs)
    except Exception:  # noqa: BLE001 - a sample kiln's eager op refuses says nothing here
        return None
    graph, inputs = graphs.op_graph(target, args, kwargs)
    result = graphs.retrace(graph, level)
    ops = graphs.call_targets(result)
    if ops == [target]:
        return False
    where = f"{target} -> {level} {ops} on {_meta(list(args))} {kwargs}"
    assert graphs.outside_level(result, level) == [], f"{where}: ops outside {level}\n{result}"
    got = graphs.run_graph(result, inputs)
    _compare(target, got, expected, where)
    schema = kiln._C._fx.op_schema(target)
    for i, a in enumerate(schema["args"][: len(args)]):
        if a["mutated"]:
            _compare(target, args[i], eager_args[i], where + f" (mutated {a['name']})")
    return True


@needs_retrace
@pytest.mark.parametrize("level", graphs.LEVELS)
@pytest.mark.parametrize("target", testing.op_targets())
def test_decomposition_matches_eager(target, level):
    if graphs.kept_at(target, level):
        pytest.skip(f"{target} is kept at {level}")
    checked = 0
    for dtype in testing.supported_dtypes(target):
        for i, (args, kwargs) in enumerate(testing.sample_inputs(target, dtype)):
            if i >= CAP and dtype != "float32":
                break
            done = _check_sample(target, level, args, kwargs)
            if done is False:
                pytest.skip(f"{target} has no decomposition to {level}")
            checked += bool(done)
    assert checked, f"{target}: no sample ran eagerly"


def test_one_node_graph_runs_the_op():
    args, kwargs = next(testing.sample_inputs("aten.add.Tensor", "float32"))
    graph, inputs = graphs.op_graph("aten.add.Tensor", args, {"alpha": 2})
    assert graphs.call_targets(graph) == ["aten.add.Tensor"]
    assert_match(graphs.run_graph(graph, inputs), kiln.add(*args, alpha=2))
