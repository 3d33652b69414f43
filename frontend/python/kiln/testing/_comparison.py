"""kiln.testing.assert_close (torch.testing.assert_close): tensors, numbers and nested
sequences/mappings of them compared elementwise with |actual - expected| <= atol + rtol *
|expected|, default tolerances by dtype as torch's, and torch's failure messages."""
import collections.abc
import math

import numpy as np

from .. import _C

__all__ = ["assert_allclose", "assert_close"]

# (rtol, atol) per dtype when neither is given (torch.testing's table).
_TOLERANCES = {
    _C.float16: (1e-3, 1e-5), _C.bfloat16: (1.6e-2, 1e-5), _C.float32: (1.3e-6, 1e-5), _C.float64: (1e-7, 1e-7),
}
_SCALAR_TOLERANCES = {float: (1e-7, 1e-7), complex: (1e-7, 1e-7)}


def _tolerances(dtype, rtol, atol):
    if (rtol is None) != (atol is None):
        raise ValueError(f"Both 'rtol' and 'atol' must be either specified or omitted, but got no "
                         f"{'rtol' if rtol is None else 'atol'}.")
    if rtol is not None:
        return rtol, atol
    return (_TOLERANCES.get(dtype, (0.0, 0.0)) if isinstance(dtype, _C.dtype)
            else _SCALAR_TOLERANCES.get(dtype, (0.0, 0.0)))


def _where(path):
    return "" if not path else "\n\nThe failure occurred for item " + "".join(f"[{p!r}]" for p in path)


def _fail(message, path, msg):
    if callable(msg):
        message = msg(message)
    elif msg is not None:
        message = msg
    raise AssertionError(message + ("" if msg is not None else _where(path)))


def _as_array(t):
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype in (_C.bfloat16, _C.float16):
        t = t.float()
    return t.numpy()


def _compare_tensors(actual, expected, rtol, atol, equal_nan, check_device, check_dtype, check_stride, path, msg):
    for name, a, e, check in (("shape", actual.shape, expected.shape, True),
                              ("device", actual.device, expected.device, check_device),
                              ("dtype", actual.dtype, expected.dtype, check_dtype),
                              ("stride()", actual.stride(), expected.stride(), check_stride)):
        if check and a != e:
            _fail(f"The values for attribute '{name}' do not match: {a} != {e}.", path, msg)
    rtol, atol = _tolerances(expected.dtype, rtol, atol)
    a, e = _as_array(actual), _as_array(expected)
    if a.dtype != e.dtype:
        common = np.promote_types(a.dtype, e.dtype)
        a, e = a.astype(common), e.astype(common)
    if a.dtype == np.bool_:
        bad = a != e
        diff = bad.astype(np.float64)
    else:
        af, ef = a.astype(np.float64), e.astype(np.float64)
        with np.errstate(invalid="ignore"):
            diff = np.abs(af - ef)
            bad = ~(diff <= atol + rtol * np.abs(ef))
        bad &= ~(np.isinf(af) & (af == ef))  # inf - inf is NaN, but equal infinities are close
        if equal_nan:
            bad &= ~(np.isnan(af) & np.isnan(ef))
    if not bad.any():
        return
    total, count = bad.size, int(bad.sum())
    lines = ["Tensor-likes are not equal!" if rtol == 0 and atol == 0 else "Tensor-likes are not close!", "",
             f"Mismatched elements: {count} / {total} ({100 * count / total:.1f}%)"]
    if a.dtype.kind in "fiu":
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = diff / np.abs(e.astype(np.float64))
        diff_masked = np.where(bad, diff, -np.inf)
        at = np.unravel_index(np.nanargmax(np.where(np.isnan(diff_masked), np.inf, diff_masked)), a.shape)
        rel_masked = np.where(bad, rel, -np.inf)
        rat = np.unravel_index(np.nanargmax(np.where(np.isnan(rel_masked), np.inf, rel_masked)), a.shape)
        lines.append(f"Greatest absolute difference: {diff[at]} at index {tuple(int(i) for i in at)} "
                     f"(up to {atol} allowed)")
        lines.append(f"Greatest relative difference: {rel[rat]} at index {tuple(int(i) for i in rat)} "
                     f"(up to {rtol} allowed)")
    _fail("\n".join(lines), path, msg)


def _compare_scalars(actual, expected, rtol, atol, equal_nan, check_dtype, path, msg):
    if check_dtype and type(actual) is not type(expected):
        _fail(f"The (d)types do not match: {type(actual)} != {type(expected)}.", path, msg)
    rtol, atol = _tolerances(type(expected), rtol, atol)
    if actual == expected or (equal_nan and actual != actual and expected != expected):
        return
    diff = abs(actual - expected)
    if not (isinstance(actual, float) and math.isnan(actual)) and diff <= atol + rtol * abs(expected):
        return
    rel = diff / abs(expected) if expected else math.inf
    _fail(f"Scalars are not close!\n\nExpected {expected} but got {actual}.\nAbsolute difference: {diff} "
          f"(up to {atol} allowed)\nRelative difference: {rel} (up to {rtol} allowed)", path, msg)


def _compare(actual, expected, path, options):
    if isinstance(actual, _C.TensorBase) and isinstance(expected, _C.TensorBase):
        _compare_tensors(actual, expected, options["rtol"], options["atol"], options["equal_nan"],
                         options["check_device"], options["check_dtype"], options["check_stride"], path,
                         options["msg"])
    elif isinstance(actual, collections.abc.Mapping) and isinstance(expected, collections.abc.Mapping):
        if set(actual) != set(expected):
            _fail(f"The keys of the mappings do not match:\nMissing keys in the actual mapping: "
                  f"{sorted(set(expected) - set(actual), key=repr)}\nAdditional keys in the actual mapping: "
                  f"{sorted(set(actual) - set(expected), key=repr)}", path, options["msg"])
        for key in expected:
            _compare(actual[key], expected[key], path + [key], options)
    elif (isinstance(actual, collections.abc.Sequence) and isinstance(expected, collections.abc.Sequence)
          and not isinstance(actual, str) and not isinstance(expected, str)):
        if len(actual) != len(expected):
            _fail(f"The length of the sequences mismatch: {len(actual)} != {len(expected)}", path, options["msg"])
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, path + [i], options)
    elif isinstance(actual, (bool, int, float, complex)) and isinstance(expected, (bool, int, float, complex)):
        _compare_scalars(actual, expected, options["rtol"], options["atol"], options["equal_nan"],
                         options["check_dtype"], path, options["msg"])
    elif actual is None and expected is None:
        return
    else:
        raise TypeError(f"No comparison pair was able to handle inputs of type {type(actual)} and {type(expected)}."
                        + _where(path))


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raises AssertionError unless `actual` and `expected` are close (see the module doc)."""
    _compare(actual, expected, [], dict(allow_subclasses=allow_subclasses, rtol=rtol, atol=atol, equal_nan=equal_nan,
                                        check_device=check_device, check_dtype=check_dtype,
                                        check_stride=check_stride, msg=msg))


# torch.testing.assert_allclose's own (looser) defaults, by the promoted dtype of the pair.
_ALLCLOSE_TOLERANCES = {_C.float16: (1e-3, 1e-3), _C.float32: (1e-4, 1e-5), _C.float64: (1e-5, 1e-8)}


def assert_allclose(actual, expected, rtol=None, atol=None, equal_nan=True, msg=""):
    """torch.testing.assert_allclose (deprecated in torch for assert_close): numbers and lists
    become tensors (`expected` in `actual`'s dtype), dtypes need not match, NaNs compare equal by
    default, and the default tolerances are the loosest of the two dtypes' in the table above."""
    import warnings

    from .._creation import tensor
    from .._tensor import Tensor

    warnings.warn("`kiln.testing.assert_allclose()` is deprecated (as torch's since 1.12). Please use "
                  "`kiln.testing.assert_close()` instead.", FutureWarning, stacklevel=2)
    if not isinstance(actual, Tensor):
        actual = tensor(actual)
    if not isinstance(expected, Tensor):
        expected = tensor(expected, dtype=actual.dtype)
    if rtol is None and atol is None:
        pairs = [_ALLCLOSE_TOLERANCES.get(t.dtype, (0.0, 0.0)) for t in (actual, expected)]
        rtol, atol = max(p[0] for p in pairs), max(p[1] for p in pairs)
    assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=equal_nan, check_device=True, check_dtype=False,
                 check_stride=False, msg=msg or None)
