"""Testing helpers shared by kiln's op tests: sample inputs per op of the table (see samples.py)."""
from .samples import (  # noqa: F401
    ALL_DTYPES, NoSamples, clone_value, op_tags, op_targets, run_eager, sample_inputs,
    supported_dtypes, to_torch, torch_op, uncovered_ops,
)
