"""Helpers for the frame-capture tests: one interface over torch.compile and kiln.compile.

Every capture test program is written against a tensor library module `T` and runs with
`T = torch` (torch.compile / torch._dynamo.explain, the reference for what a correct capture
does) and with `T = kiln` (kiln.compile / kiln.explain). The `lib` fixture gives a `Lib`;
the kiln parameter skips while kiln has no `compile`.
Set KILN_CAPTURE_LIBS=kiln (or torch) to run one side only.
"""
import contextlib
import logging
import os
import warnings

import numpy as np
import pytest

# KILN_CAPTURE_LIBS=kiln (or torch) runs one side only.
LIBS = os.environ.get("KILN_CAPTURE_LIBS", "torch,kiln").split(",")


class Lib:
    """A tensor library plus its compiler entry points, named alike for torch and kiln."""

    def __init__(self, name):
        self.name = name
        if name == "torch":
            import torch
            import torch._dynamo

            self.T = torch
            self.dynamo = torch._dynamo
        else:
            import kiln

            self.T = kiln

    @property
    def is_kiln(self):
        return self.name == "kiln"

    def compile(self, fn=None, **kw):
        kw.setdefault("backend", "eager")
        return self.T.compile(fn, **kw) if fn is not None else self.T.compile(**kw)

    def explain(self, fn, *args, **kwargs):
        explain = self.dynamo.explain if self.name == "torch" else self.T.explain
        return explain(fn)(*args, **kwargs)

    def reset(self):
        if self.name == "torch":
            self.dynamo.reset()
        else:
            self.T.compiler.reset()

    def disable(self, fn):
        return self.dynamo.disable(fn) if self.name == "torch" else self.T.compiler.disable(fn)

    def config(self):
        return self.dynamo.config if self.name == "torch" else self.T.config

    @contextlib.contextmanager
    def recompile_limit(self, n):
        """Temporarily set the number of cache entries allowed per code object."""
        cfg = self.config()
        name = "recompile_limit" if hasattr(cfg, "recompile_limit") else "cache_size_limit"
        old = getattr(cfg, name)
        setattr(cfg, name, n)
        try:
            yield
        finally:
            setattr(cfg, name, old)

    def counting_backend(self):
        """A backend that records every graph module it is given and runs it as is."""
        calls = []

        def backend(gm, example_inputs):
            calls.append(gm)
            return gm.forward

        return backend, calls

    # data -------------------------------------------------------------------------------

    def randn(self, *shape, seed=0, dtype="float32"):
        a = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
        return self.T.from_numpy(np.array(a, copy=True))

    def arange_f(self, n, dtype="float32"):
        return self.T.from_numpy(np.arange(n, dtype=dtype))


def get_lib(name):
    if name == "torch":
        pytest.importorskip("torch")
    else:
        import kiln

        if not hasattr(kiln, "compile"):
            pytest.skip("kiln.compile is not implemented yet (issue 4: frame capture)")
    return Lib(name)


@pytest.fixture(params=LIBS)
def lib(request):
    """The library under test, with its compile caches cleared before and after the test."""
    L = get_lib(request.param)
    L.reset()
    yield L
    L.reset()


# comparison -------------------------------------------------------------------------------

def is_tensor(x):
    return hasattr(x, "dtype") and hasattr(x, "shape") and hasattr(x, "numpy")


def _np(x):
    x = x.detach()
    if str(x.dtype).endswith("bfloat16"):
        x = x.float()
    return np.array(x.numpy(), copy=True)


def assert_same(got, exp, rtol=1e-5, atol=1e-6, where="out"):
    """Compiled result `got` equals eager result `exp`: same structure and Python types,
    tensors with the same dtype and shape and close values, other values equal."""
    if is_tensor(exp):
        assert is_tensor(got), f"{where}: expected a tensor, got {type(got).__name__}"
        assert got.dtype == exp.dtype, f"{where}: dtype {got.dtype} != {exp.dtype}"
        assert tuple(got.shape) == tuple(exp.shape), f"{where}: shape {tuple(got.shape)} != {tuple(exp.shape)}"
        assert got.requires_grad == exp.requires_grad, f"{where}: requires_grad {got.requires_grad} != {exp.requires_grad}"
        a, b = _np(got), _np(exp)
        if a.dtype.kind in "biu":
            np.testing.assert_array_equal(a, b, err_msg=where)
        else:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        return
    assert type(got) is type(exp), f"{where}: type {type(got).__name__} != {type(exp).__name__}"
    if isinstance(exp, (tuple, list)):
        assert len(got) == len(exp), f"{where}: length {len(got)} != {len(exp)}"
        for i, (g, e) in enumerate(zip(got, exp)):
            assert_same(g, e, rtol, atol, f"{where}[{i}]")
    elif isinstance(exp, dict):
        assert list(got) == list(exp), f"{where}: keys {list(got)} != {list(exp)}"
        for k in exp:
            assert_same(got[k], exp[k], rtol, atol, f"{where}[{k!r}]")
    elif isinstance(exp, float):
        assert got == pytest.approx(exp, rel=rtol, abs=atol), f"{where}: {got} != {exp}"
    else:
        assert got == exp, f"{where}: {got!r} != {exp!r}"


class Call:
    """Arguments of one call, keywords included: Call(x, 2, mode="add")."""

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    @staticmethod
    def of(c):
        return c if isinstance(c, Call) else Call(*c)


def check_compiles(L, fn, calls, graphs=1, **compile_kw):
    """Run `fn` eagerly and compiled on every call in `calls` (argument tuples or `Call`s),
    compare the results, and (when `graphs` is not None) check explain's counts on the first
    call: `graphs` graphs and no graph break."""
    compiled = L.compile(fn, **compile_kw)
    calls = [Call.of(c) for c in calls]
    for i, c in enumerate(calls):
        exp = fn(*c.args, **c.kwargs)
        got = compiled(*c.args, **c.kwargs)
        assert_same(got, exp, where=f"call{i}")
    if graphs is not None:
        L.reset()
        e = L.explain(fn, *calls[0].args, **calls[0].kwargs)
        assert (e.graph_count, len(e.break_reasons)) == (graphs, 0), explain_text(e)
    return compiled


def explain_text(e):
    reasons = [str(r)[:300] for r in getattr(e, "break_reasons", [])]
    return f"graph_count={e.graph_count} graph_break_count={e.graph_break_count} reasons={reasons}"


def reason_texts(e):
    """The text of each break reason of an ExplainOutput (kiln: reason + file:line + line;
    torch: GraphCompileReason's reason and user stack)."""
    out = []
    for r in e.break_reasons:
        parts = [str(r)]
        for attr in ("reason", "filename", "lineno", "line"):
            if hasattr(r, attr):
                parts.append(str(getattr(r, attr)))
        out.append(" ".join(parts))
    return out


# warnings and log records -----------------------------------------------------------------

class WarningCatcher(logging.Handler):
    """Collects both `warnings.warn` messages and WARNING log records: kiln may report the
    recompile limit either way, torch logs it (torch._dynamo logger)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages = []
        self._seen = set()

    def emit(self, record):
        if id(record) not in self._seen:  # a record propagating to two watched loggers
            self._seen.add(id(record))
            self.messages.append(record.getMessage())


@contextlib.contextmanager
def catch_warnings_and_logs():
    handler = WarningCatcher()
    # torch's loggers do not propagate to the root: watch every torch/kiln logger there is.
    names = [n for n in logging.root.manager.loggerDict if n.split(".")[0] in ("torch", "kiln")]
    roots = [logging.getLogger()] + [logging.getLogger(n) for n in ["torch", "kiln"] + names]
    for lg in roots:
        lg.addHandler(handler)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        try:
            yield handler.messages
        finally:
            for lg in roots:
                lg.removeHandler(handler)
            handler.messages.extend(str(w.message) for w in ws)


# cross-library comparison ------------------------------------------------------------------

def to_plain(x):
    """A library-independent form of a result: tensors as (dtype name, requires_grad, numpy
    array), dtypes and devices as strings, containers recursively."""
    if is_tensor(x):
        return ("tensor", str(x.dtype).split(".")[-1], bool(x.requires_grad), _np(x))
    if isinstance(x, (list, tuple)) and not type(x).__name__ == "Size":
        return type(x)(to_plain(v) for v in x)
    if type(x).__name__ == "Size":
        return tuple(x)
    if isinstance(x, dict):
        return {k: to_plain(v) for k, v in x.items()}
    if type(x).__name__ in ("dtype", "device"):
        return str(x).split(".")[-1]
    return x


def assert_plain_equal(got, exp, rtol=1e-5, atol=1e-5, where="out", check_grad=True):
    """`to_plain` results are equal (check_grad=False: requires_grad may differ)."""
    if isinstance(exp, tuple) and exp and exp[0] == "tensor" and len(exp) == 4:
        assert isinstance(got, tuple) and got[0] == "tensor", f"{where}: expected a tensor, got {got!r}"
        assert got[1] == exp[1], f"{where}: dtype {got[1]} != {exp[1]}"
        assert got[2] == exp[2] or not check_grad, f"{where}: requires_grad {got[2]} != {exp[2]}"
        assert got[3].shape == exp[3].shape, f"{where}: shape {got[3].shape} != {exp[3].shape}"
        if exp[3].dtype.kind in "biu":
            np.testing.assert_array_equal(got[3], exp[3], err_msg=where)
        else:
            np.testing.assert_allclose(got[3], exp[3], rtol=rtol, atol=atol, equal_nan=True, err_msg=where)
        return
    assert type(got) is type(exp), f"{where}: type {type(got).__name__} != {type(exp).__name__}"
    if isinstance(exp, (list, tuple)):
        assert len(got) == len(exp), f"{where}: length {len(got)} != {len(exp)}"
        for i, (g, e) in enumerate(zip(got, exp)):
            assert_plain_equal(g, e, rtol, atol, f"{where}[{i}]", check_grad)
    elif isinstance(exp, dict):
        assert list(got) == list(exp), f"{where}: keys {list(got)} != {list(exp)}"
        for k in exp:
            assert_plain_equal(got[k], exp[k], rtol, atol, f"{where}[{k!r}]", check_grad)
    elif isinstance(exp, float):
        assert got == pytest.approx(exp, rel=rtol, abs=atol), f"{where}: {got} != {exp}"
    else:
        assert got == exp, f"{where}: {got!r} != {exp!r}"


def has_autograd(T):
    """Whether results of ops on tensors that require grad require grad themselves (kiln's
    eager runtime records no autograd graph yet)."""
    w = T.ones(1).requires_grad_()
    return bool((w * 2).requires_grad)
