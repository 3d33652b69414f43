"""Every op with a decomposition: the decomposed graph computes what the eager op computes.

For each op of the table and each level ("core_aten", "prims"), a one-node graph calling the op
on each sample input (kiln.testing) is retraced with kiln.fx.retrace; the result graph must hold
only ops of that level (core ATen / prims) and, run on the real sample, give the
eager op's result (dtype and shape exact, values within the per-dtype tolerance), mutating its
inputs the same way. An op the retrace leaves as it is has no decomposition to that level and
is skipped, as is one whose decomposition leaves such an op (retrace decomposes recursively, so
an aten op left outside the level has none); tools/decomp_report.py lists both. An op whose
result's shape depends on the data (nonzero, masked_select) cannot be traced on fake tensors and
is skipped too. A prim left in a core ATen graph fails: decompositions to core ATen are written
in core ATen.
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

# Decompositions round intermediates to a 16-bit dtype where an eager kernel keeps float (dot's
# products, lerp's difference): a few ulps apart, as PyTorch's decompositions are.
LOW_PRECISION_TOL = {"float16": 4e-3, "bfloat16": 3.2e-2}


class _Undecomposed(Exception):
    """The retrace left aten ops without a decomposition to the level (named in the message)."""


def _values_are_defined(target):
    return target.split(".")[1] not in UNINITIALIZED and "random" not in testing.op_tags(target)


def _meta(x):
    if isinstance(x, (list, tuple)):
        return [_meta(y) for y in x]
    return (str(x.dtype).split(".")[-1], tuple(x.shape)) if hasattr(x, "dtype") else x


def _dtype_name(x):
    while isinstance(x, (list, tuple)) and x:
        x = x[0]
    return str(getattr(x, "dtype", "")).split(".")[-1]


def _compare(target, got, expected, where):
    if _values_are_defined(target):
        tol = LOW_PRECISION_TOL.get(_dtype_name(expected))
        try:
            assert_match(got, expected, rtol=tol, atol=tol)
        except AssertionError as e:
            raise AssertionError(f"{where}: {e}") from None
    else:
        assert _meta(got) == _meta(expected), where


DATA_DEPENDENT = "data-dependent"


def _check_sample(target, level, args, kwargs):
    """True when checked; None when the sample says nothing (eager refuses it); DATA_DEPENDENT
    when retracing it needs data (the result's shape depends on it); False when the retrace left
    the op itself; raises _Undecomposed when it left other aten ops without a decomposition."""
    eager_args, eager_kwargs = testing.clone_value(args), testing.clone_value(kwargs)
    try:
        expected = testing.run_eager(target, eager_args, eager_kwargs)
    except Exception:  # noqa: BLE001 - a sample kiln's eager op refuses says nothing here
        return None
    graph, inputs = graphs.op_graph(target, args, kwargs)
    try:
        result = graphs.retrace(graph, level)
    except RuntimeError as e:
        if "data-dependent" in str(e):  # boolean-mask indexing, nonzero: fakes cannot size the result
            return DATA_DEPENDENT
        raise
    ops = graphs.call_targets(result)
    if ops == [target]:
        return False
    where = f"{target} -> {level} {ops} on {_meta(list(args))} {kwargs}"
    outside = graphs.outside_level(result, level)
    prims_in_core = [t for t in outside if graphs.is_prim(t)]
    assert prims_in_core == [], f"{where}: prims in a core ATen graph\n{result}"
    if outside:
        raise _Undecomposed(" ".join(sorted(set(outside))))
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
    returns = kiln._C._fx.op_schema(target)["returns"]
    if any(ty not in ("Tensor", "Tensor[]") for _, ty in returns):
        pytest.skip(f"{target} returns a Python value computed from data: fakes cannot trace it")
    checked = data_dependent = 0
    for dtype in testing.supported_dtypes(target):
        for i, (args, kwargs) in enumerate(testing.sample_inputs(target, dtype)):
            if i >= CAP and dtype != "float32":
                break
            try:
                done = _check_sample(target, level, args, kwargs)
            except _Undecomposed as e:
                pytest.skip(f"{target} decomposes into {e}, which has no decomposition to {level}")
            if done is False:
                pytest.skip(f"{target} has no decomposition to {level}")
            data_dependent += done == DATA_DEPENDENT
            checked += done is True
    if not checked and data_dependent:
        pytest.skip(f"{target}: its result's shape depends on the data; fake tensors cannot trace it")
    assert checked, f"{target}: no sample ran eagerly and traced"


def test_one_node_graph_runs_the_op():
    args, kwargs = next(testing.sample_inputs("aten.add.Tensor", "float32"))
    graph, inputs = graphs.op_graph("aten.add.Tensor", args, {"alpha": 2})
    assert graphs.call_targets(graph) == ["aten.add.Tensor"]
    assert_match(graphs.run_graph(graph, inputs), kiln.add(*args, alpha=2))
