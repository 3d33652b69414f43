"""kiln.testing: assert_close and assert_allclose (torch.testing's), imported with kiln, and the
helpers kiln's own op tests share (sample inputs per op of the table: samples.py; graphs.py),
loaded on first use."""
import importlib

from ._comparison import assert_allclose, assert_close  # noqa: F401

_SAMPLE_NAMES = {"ALL_DTYPES", "NoSamples", "clone_value", "op_tags", "op_targets", "run_eager", "sample_inputs",
                 "supported_dtypes", "to_torch", "torch_op", "uncovered_ops"}


def __getattr__(name):
    if name in _SAMPLE_NAMES:
        return getattr(importlib.import_module(".samples", __name__), name)
    if name in ("samples", "graphs"):
        return importlib.import_module("." + name, __name__)
    raise AttributeError(f"module 'kiln.testing' has no attribute '{name}'")
