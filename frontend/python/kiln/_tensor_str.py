"""Tensor.__repr__: PyTorch's tensor printing (torch/_tensor_str.py), same text, computed with numpy.

The formatter picks one width and notation for the whole tensor: integer mode when every finite
value is a whole number, scientific notation when the magnitudes span more than 1000x or leave
[1e-4, 1e8]; tensors above `threshold` elements print only `edgeitems` per dimension.
"""
import contextlib
import dataclasses
import functools
import math

import numpy as np

from . import _C, _compiling


@dataclasses.dataclass
class _PrinterOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: bool | None = None


PRINT_OPTS = _PrinterOptions()


@functools.partial(_compiling.not_traced, reason="kiln.set_printoptions() (a global setting the graph cannot replay)")
def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """Set options for printing tensors (torch.set_printoptions): profile is 'default', 'short' or 'full'."""
    if profile is not None:
        if profile == "default":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems = 4, 1000, 3
        elif profile == "short":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems = 2, 1000, 2
        elif profile == "full":
            PRINT_OPTS.precision, PRINT_OPTS.threshold, PRINT_OPTS.edgeitems = 4, math.inf, 3
        PRINT_OPTS.linewidth = 80
    if precision is not None:
        PRINT_OPTS.precision = precision
    if threshold is not None:
        PRINT_OPTS.threshold = threshold
    if edgeitems is not None:
        PRINT_OPTS.edgeitems = edgeitems
    if linewidth is not None:
        PRINT_OPTS.linewidth = linewidth
    PRINT_OPTS.sci_mode = sci_mode


def get_printoptions():
    """The current print options, as keyword arguments for set_printoptions."""
    return dataclasses.asdict(PRINT_OPTS)


@contextlib.contextmanager
def printoptions(**kwargs):
    """Temporarily changes the print options (the arguments of set_printoptions)."""
    old = get_printoptions()
    set_printoptions(**kwargs)
    try:
        yield
    finally:
        set_printoptions(**old)


class _Formatter:
    def __init__(self, values, floating):
        self.floating_dtype = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        flat = values.reshape(-1)
        if not floating:
            for value in flat.tolist():
                self.max_width = max(self.max_width, len(f"{value}"))
            return
        nonzero_finite = flat[np.isfinite(flat) & (flat != 0)]
        if nonzero_finite.size == 0:
            return
        magnitudes = np.abs(nonzero_finite).astype(np.float64)
        lo, hi = magnitudes.min(), magnitudes.max()
        nonzero_finite = nonzero_finite.tolist()
        self.int_mode = all(value == math.ceil(value) for value in nonzero_finite)
        if PRINT_OPTS.sci_mode is None:
            self.sci_mode = bool(hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4)
        else:
            self.sci_mode = PRINT_OPTS.sci_mode
        precision = PRINT_OPTS.precision
        for value in nonzero_finite:
            if self.sci_mode:
                width = len(f"{value:.{precision}e}")
            elif self.int_mode:
                # whole floats print with a trailing "." to show they are floats
                width = len(f"{value:.0f}") + 1
            else:
                width = len(f"{value:.{precision}f}")
            self.max_width = max(self.max_width, width)

    def width(self):
        return self.max_width

    def format(self, value):
        if self.floating_dtype:
            if self.sci_mode:
                ret = f"{value:{self.max_width}.{PRINT_OPTS.precision}e}"
            elif self.int_mode:
                ret = f"{value:.0f}"
                if not (math.isinf(value) or math.isnan(value)):
                    ret += "."
            else:
                ret = f"{value:.{PRINT_OPTS.precision}f}"
        else:
            ret = f"{value}"
        return (self.max_width - len(ret)) * " " + ret


class _ComplexFormatter:
    """torch's complex printing: the real and imaginary parts each get their own formatter, and
    an element prints as `re+imj` (the imaginary part's sign joins the two)."""

    def __init__(self, values):
        self.real = _Formatter(values.real, True)
        self.imag = _Formatter(values.imag, True)

    def width(self):
        # _vector_str adds 2 per element; torch adds the imaginary width and the "j"
        return self.real.width() + self.imag.width() + 1

    def format(self, value):
        real_str = self.real.format(value.real)
        imag_str = (self.imag.format(value.imag) + "j").lstrip()
        return real_str + imag_str if imag_str[0] in "+-" else real_str + "+" + imag_str


def _vector_str(a, indent, summarize, formatter):
    # an element takes its width plus ", "
    element_length = formatter.width() + 2
    elements_per_line = max(1, math.floor((PRINT_OPTS.linewidth - indent) / element_length))
    edge = PRINT_OPTS.edgeitems
    if summarize and not edge:
        data = ["..."]
    elif summarize and a.shape[0] > 2 * edge:
        data = ([formatter.format(v) for v in a[:edge].tolist()] + [" ..."]
                + [formatter.format(v) for v in a[-edge:].tolist()])
    else:
        data = [formatter.format(v) for v in a.tolist()]
    lines = [", ".join(data[i:i + elements_per_line]) for i in range(0, len(data), elements_per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(a, indent, summarize, formatter):
    if a.ndim == 0:
        return formatter.format(a.item())
    if a.ndim == 1:
        return _vector_str(a, indent, summarize, formatter)
    edge = PRINT_OPTS.edgeitems
    if summarize and a.shape[0] > 2 * edge:
        rows = list(range(edge)) + [None] + list(range(a.shape[0] - edge, a.shape[0]))
    else:
        rows = range(a.shape[0])
    slices = ["..." if i is None else _tensor_str_with_formatter(a[i], indent + 1, summarize, formatter)
              for i in rows]
    return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(slices) + "]"


def _summarized(a):
    """Only the elements a summarized print shows (torch's get_summarized_data)."""
    edge = PRINT_OPTS.edgeitems
    if a.ndim == 0:
        return a
    if a.ndim == 1:
        return np.concatenate((a[:edge], a[-edge:])) if a.shape[0] > 2 * edge else a
    if not edge:
        return np.empty([0] * a.ndim, a.dtype)
    if a.shape[0] > 2 * edge:
        rows = [a[i] for i in range(edge)] + [a[i] for i in range(a.shape[0] - edge, a.shape[0])]
    else:
        rows = list(a)
    return np.stack([_summarized(r) for r in rows])


def _host_array(t):
    """The tensor's values as a numpy array (bfloat16, which numpy lacks, widened exactly)."""
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == _C.bfloat16:
        t = t.to(_C.float32)
    return t.numpy(force=True)


def _tensor_str(t, indent):
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > PRINT_OPTS.threshold
    a = _host_array(t)
    values = _summarized(a) if summarize else a
    formatter = (_ComplexFormatter(values) if t.dtype.is_complex
                 else _Formatter(values, t.dtype.is_floating_point))
    return _tensor_str_with_formatter(a, indent, summarize, formatter)


def _add_suffixes(tensor_str, suffixes, indent, force_newline=False):
    parts = [tensor_str]
    last_line_len = len(tensor_str) - tensor_str.rfind("\n") + 1
    for suffix in suffixes:
        if force_newline or last_line_len + len(suffix) + 2 > PRINT_OPTS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
            force_newline = False
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def _str(self):
    """repr(tensor), as PyTorch prints it with "torch" read as "kiln"."""
    cls = type(self)
    plain = cls.__module__.startswith("kiln") and cls.__name__ in ("Tensor", "Parameter")
    prefix = "tensor(" if plain else f"{cls.__name__}("
    indent = len(prefix)
    suffixes = []
    if self.device.type != "cpu":
        suffixes.append(f"device='{self.device}'")
    # float32 is the default dtype; int64 and bool are what Python ints and bools give.
    has_default_dtype = self.dtype in (_C.float32, _C.complex64, _C.int64, _C.bool)
    if self.is_meta:
        suffixes.append(f"size={tuple(self.shape)}")
        if self.dtype != _C.float32:
            suffixes.append(f"dtype={self.dtype}")
        tensor_str = "..."
    elif self.numel() == 0:
        # the shape is shown unless it is (0,), as numpy does; the dtype unless float32
        if self.dim() != 1:
            suffixes.append(f"size={tuple(self.shape)}")
        if self.dtype != _C.float32:
            suffixes.append(f"dtype={self.dtype}")
        tensor_str = "[]"
    else:
        if not PRINT_OPTS.edgeitems:
            suffixes.append(f"size={tuple(self.shape)}")
        if not has_default_dtype:
            suffixes.append(f"dtype={self.dtype}")
        tensor_str = _tensor_str(self, indent)
    grad_fn = getattr(self, "grad_fn", None)
    if grad_fn is not None:
        suffixes.append(f"grad_fn=<{grad_fn.name()}>")
    elif self.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + tensor_str, suffixes, indent)
