"""NumPy code inside compiled functions (TorchDynamo's torch._numpy, rebuilt): while kiln.compile
traces a frame, a NumPy array that `t.numpy()`, `np.asarray(t)` or a NumPy function made from
graph values is a `TracedArray`, a kiln tensor (a fake of the trace) with NumPy's semantics.
NumPy functions, ufuncs, ndarray methods and operators on it run kiln ops, so they become graph
nodes; where an array leaves the graph the glue turns the tensor back into an ndarray (or into a
NumPy scalar where NumPy gives one: frontend/capture/Numpy.cpp).

Result dtypes and "scalar or array" are NumPy's own answers: each operation first asks NumPy on a
tiny stand-in array of the same dtype and rank (`_oracle`), then computes the values with kiln
ops in that dtype. What this module does not implement raises NotImplementedError, which the
tracer turns into a graph break naming the function ("numpy function np.xxx is not traced").

The mapping from NumPy names to kiln ops is written once, in the tables at the end."""

import warnings

import kiln


class NotTraced(NotImplementedError):
    """A NumPy operation this module does not trace (a graph break at it)."""


def _np():
    import numpy  # only reached from traced code that already uses numpy

    return numpy


_KILN_TO_NUMPY = {
    "bool": "bool",
    "uint8": "uint8",
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float16": "float16",
    "float32": "float32",
    "float64": "float64",
}


def numpy_dtype(kdtype):
    name = str(kdtype).replace("kiln.", "")
    if name not in _KILN_TO_NUMPY:
        raise NotTraced(f"a numpy array of kiln dtype {name} (numpy has no such dtype)")
    return _np().dtype(_KILN_TO_NUMPY[name])


def kiln_dtype(npdtype):
    np = _np()
    d = np.dtype(npdtype)
    if d.name not in _KILN_TO_NUMPY.values():
        raise NotTraced(f"a numpy array of dtype {d.name} (kiln has no such dtype)")
    return getattr(kiln, d.name)


class TracedArray:
    """A NumPy array during a trace: `tensor` holds its values (a graph value), `scalar` says it
    stands for a NumPy scalar (np.float32(...)) rather than an ndarray."""

    __slots__ = ("tensor", "scalar")
    __array_priority__ = 1000

    def __init__(self, tensor, scalar=False):
        self.tensor = tensor
        self.scalar = scalar

    @property
    def dtype(self):
        return numpy_dtype(self.tensor.dtype)

    @property
    def shape(self):
        return tuple(int(s) for s in self.tensor.shape)

    @property
    def ndim(self):
        return self.tensor.dim()

    @property
    def size(self):
        return self.tensor.numel()

    @property
    def itemsize(self):
        return self.dtype.itemsize

    @property
    def nbytes(self):
        return self.size * self.itemsize

    @property
    def T(self):
        return _transpose(self)

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def _data_dependent(self, what):
        raise NotTraced(f"{what} of a numpy array (its value is data: data-dependent)")

    def __bool__(self):
        self._data_dependent("bool()")

    def __float__(self):
        self._data_dependent("float()")

    def __int__(self):
        self._data_dependent("int()")

    def __index__(self):
        self._data_dependent("an index from")

    def item(self, *args):
        self._data_dependent("ndarray.item()")

    def tolist(self):
        self._data_dependent("ndarray.tolist()")

    def __repr__(self):
        self._data_dependent("repr()")

    __str__ = __repr__

    def __format__(self, spec):
        self._data_dependent("format()")

    def __array__(self, *args, **kwargs):
        self._data_dependent("np.asarray() of a traced array outside the graph")

    def __getattr__(self, name):
        np = _np()
        if hasattr(np.ndarray, name):
            raise NotTraced(f"ndarray.{name} is not traced")
        raise AttributeError(f"'numpy.ndarray' object has no attribute '{name}'")

    # Operators: NumPy's ufuncs.
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__":
            raise NotTraced(f"numpy ufunc method np.{ufunc.__name__}.{method} is not traced")
        return apply_ufunc(ufunc, inputs, kwargs)

    def __array_function__(self, func, types, args, kwargs):
        return call_numpy(func, *args, **kwargs)

    def __getitem__(self, key):
        return _getitem(self, key)

    def __setitem__(self, key, value):
        _setitem(self, key, value)

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return iter([_getitem(self, i) for i in range(self.shape[0])])

    def __neg__(self):
        return _ufunc("negative", self)

    def __pos__(self):
        return _ufunc("positive", self)

    def __abs__(self):
        return _ufunc("absolute", self)

    def __invert__(self):
        return _ufunc("invert", self)

    def __matmul__(self, other):
        return _matmul(self, other)

    def __rmatmul__(self, other):
        return _matmul(other, self)


def _binary(name, reflected=False):
    def op(self, other):
        if isinstance(other, kiln.Tensor):
            raise NotTraced("an operator between a numpy array and a kiln tensor")
        return _ufunc(name, other, self) if reflected else _ufunc(name, self, other)

    return op


def _inplace(name):
    def op(self, other):
        if isinstance(other, kiln.Tensor):
            raise NotTraced("an operator between a numpy array and a kiln tensor")
        return apply_ufunc(getattr(_np(), name), (self, other), {"out": (self,)})

    return op


_OPERATORS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "and": "bitwise_and",
    "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift", "rshift": "right_shift",
}
for _op, _name in _OPERATORS.items():
    setattr(TracedArray, f"__{_op}__", _binary(_name))
    setattr(TracedArray, f"__r{_op}__", _binary(_name, reflected=True))
    setattr(TracedArray, f"__i{_op}__", _inplace(_name))
for _op, _name in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                   "eq": "equal", "ne": "not_equal"}.items():
    setattr(TracedArray, f"__{_op}__", _binary(_name))
TracedArray.__hash__ = None


# --- NumPy's answers on stand-ins ---------------------------------------------------------------

def _stand_in(x):
    """What NumPy is asked with in place of x: a one-element array of x's dtype and rank (a
    scalar of its dtype for a NumPy scalar); other values as they are."""
    np = _np()
    if isinstance(x, TracedArray):
        if x.scalar:
            return x.dtype.type(1)
        return np.ones((1,) * x.ndim, x.dtype)
    if isinstance(x, (list, tuple)):
        return type(x)(_stand_in(v) for v in x)
    return x


def _oracle(fn, *args, **kwargs):
    """fn (a NumPy function) applied to stand-ins: its result's dtype and kind are NumPy's rules
    for the real call."""
    np = _np()
    # (the stand-ins' values are ones: no warning of theirs is the program's)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*(_stand_in(a) for a in args), **{k: _stand_in(v) for k, v in kwargs.items()})


def _wrap_like(tensor, answer):
    """tensor (the values kiln computed) as what NumPy answered: its dtype, a scalar or an array."""
    np = _np()
    dtype = np.asarray(answer).dtype
    kd = kiln_dtype(dtype)
    if tensor.dtype != kd:
        tensor = tensor.to(kd)
    return TracedArray(tensor, scalar=isinstance(answer, np.generic))


def _value(x):
    """An operand as kiln takes it: a traced array's tensor, a NumPy scalar as a Python number."""
    np = _np()
    if isinstance(x, TracedArray):
        return x.tensor
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (bool, int, float)):
        return x
    if isinstance(x, kiln.Tensor):
        raise NotTraced("a numpy function applied to a kiln tensor")
    if isinstance(x, np.ndarray):
        raise NotTraced("a numpy array from outside the graph mixed with a traced array")
    if isinstance(x, (list, tuple)):
        return as_array(x).tensor
    raise NotTraced(f"a numpy operation on a {type(x).__name__}")


def as_array(x):
    """x as a traced array (np.asarray's rule for Python data and NumPy scalars)."""
    np = _np()
    if isinstance(x, TracedArray):
        return x
    if isinstance(x, kiln.Tensor):
        if x.requires_grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        return TracedArray(x)
    if isinstance(x, (list, tuple)) and any(isinstance(v, (TracedArray, kiln.Tensor, list, tuple)) for v in x):
        return _stack([as_array(v) for v in x], 0)
    if isinstance(x, (list, tuple, bool, int, float, np.generic)):
        # Python data in traced code (`a * [1, 2, 3]`): constants of the graph, made by its ops
        # (a tensor made from the data here would be baked into the trace's fakes).
        a = np.asarray(x)
        if a.size > 256:
            raise NotTraced("a Python list of more than 256 numbers mixed with a traced array")
        kd = kiln_dtype(a.dtype)
        items = [kiln.full([], v, dtype=kd) for v in a.reshape(-1).tolist()]
        t = kiln.stack(items).reshape(a.shape) if items else kiln.zeros(a.shape, dtype=kd)
        return TracedArray(t, scalar=isinstance(x, np.generic))
    raise NotTraced(f"np.asarray of a {type(x).__name__}")


# --- ufuncs -------------------------------------------------------------------------------------

def _ufunc(name, *inputs):
    return apply_ufunc(getattr(_np(), name), inputs, {})


def apply_ufunc(ufunc, inputs, kwargs):
    np = _np()
    out = kwargs.pop("out", None)
    if isinstance(out, tuple):
        out = out[0] if len(out) == 1 else out
    for k in kwargs:
        if k != "dtype":
            raise NotTraced(f"numpy ufunc np.{ufunc.__name__} with {k}=")
    impl = _UFUNCS.get(ufunc.__name__)
    if impl is None:
        raise NotTraced(f"numpy function np.{ufunc.__name__} is not traced")
    answer = _oracle(ufunc, *inputs, **kwargs)
    # NumPy's inner loop: its operand dtypes (e.g. int32 / int32 runs in float64).
    weak = tuple(type(x) if type(x) in (int, float) else np.asarray(_stand_in(x)).dtype
                 for x in inputs)
    extra = {}
    if kwargs.get("dtype") is not None:
        extra["signature"] = (None,) * ufunc.nin + (np.dtype(kwargs["dtype"]),)
    loop = ufunc.resolve_dtypes(weak + (None,) * ufunc.nout, **extra)
    args = []
    for x, dt in zip(inputs, loop):
        v = _value(x)
        if isinstance(v, kiln.Tensor):
            v = v.to(kiln_dtype(dt)) if v.dtype != kiln_dtype(dt) else v
        elif type(x) not in (bool, int, float):
            v = dt.type(v).item()
        args.append(v)
    if not any(isinstance(a, kiln.Tensor) for a in args):
        # All NumPy scalars and Python numbers: a constant; NumPy computes it.
        raise NotTraced(f"numpy ufunc np.{ufunc.__name__} on constants only")
    args = [a if isinstance(a, kiln.Tensor) else kiln.full([], a, dtype=kiln_dtype(dt))
            for a, dt in zip(args, loop)]
    result = _wrap_like(impl(*args), answer)
    if out is None:
        return result
    if not isinstance(out, TracedArray):
        raise NotTraced(f"numpy ufunc np.{ufunc.__name__} with out= that is not a traced array")
    # In place (a += b): NumPy casts back with casting='same_kind'.
    if not np.can_cast(result.dtype, out.dtype, "same_kind"):
        # (the frame then runs eagerly, where NumPy raises its own UFuncTypeError)
        raise TypeError(f"Cannot cast ufunc '{ufunc.__name__}' output from {result.dtype!r} to "
                        f"{out.dtype!r} with casting rule 'same_kind'")
    out.tensor.copy_(result.tensor.broadcast_to(out.tensor.shape))
    return out


_UFUNCS = {
    "add": kiln.add, "subtract": kiln.sub, "multiply": kiln.mul, "divide": kiln.div,
    "floor_divide": kiln.floor_divide, "remainder": kiln.remainder, "fmod": kiln.fmod,
    "power": kiln.pow, "maximum": kiln.maximum, "minimum": kiln.minimum, "arctan2": kiln.atan2,
    "equal": kiln.eq, "not_equal": kiln.ne, "less": kiln.lt, "less_equal": kiln.le,
    "greater": kiln.gt, "greater_equal": kiln.ge, "logical_and": kiln.logical_and,
    "logical_or": kiln.logical_or, "logical_xor": kiln.logical_xor,
    "bitwise_and": kiln.bitwise_and, "bitwise_or": kiln.bitwise_or, "bitwise_xor": kiln.bitwise_xor,
    "negative": kiln.neg, "positive": lambda a: a.clone(), "absolute": kiln.abs, "fabs": kiln.abs,
    "invert": kiln.bitwise_not, "logical_not": kiln.logical_not, "sign": kiln.sign,
    "sqrt": kiln.sqrt, "square": kiln.square, "reciprocal": kiln.reciprocal, "exp": kiln.exp,
    "exp2": kiln.exp2, "expm1": kiln.expm1, "log": kiln.log, "log2": kiln.log2, "log10": kiln.log10,
    "log1p": kiln.log1p, "sin": kiln.sin, "cos": kiln.cos, "tan": kiln.tan, "arcsin": kiln.asin,
    "arccos": kiln.acos, "arctan": kiln.atan, "sinh": kiln.sinh, "cosh": kiln.cosh,
    "tanh": kiln.tanh, "floor": kiln.floor, "ceil": kiln.ceil, "trunc": kiln.trunc,
    "rint": kiln.round, "isnan": kiln.isnan, "isinf": kiln.isinf, "isfinite": kiln.isfinite,
}


# --- indexing -----------------------------------------------------------------------------------

def _index_key(key):
    """An index as kiln takes it; integer-array indices stay traced arrays' tensors."""
    if isinstance(key, tuple):
        return tuple(_index_key(k) for k in key)
    if isinstance(key, TracedArray):
        if key.tensor.dtype == kiln.bool:
            raise NotTraced("indexing a numpy array with a boolean mask (data-dependent shape)")
        return key.tensor
    np = _np()
    if isinstance(key, np.integer):
        return int(key)
    if isinstance(key, (list, np.ndarray)):
        raise NotTraced("indexing a numpy array with a list or an outside array")
    return key


def _oracle_key(key):
    if isinstance(key, tuple):
        return tuple(_oracle_key(k) for k in key)
    if isinstance(key, TracedArray):
        return _np().zeros(key.shape, key.dtype)
    return key


def _flip_negative_steps(t, key):
    """(t, key) with every negative-step slice made a positive one over a flipped dim (kiln's
    slices, like torch's, take positive steps only)."""
    parts = list(key) if isinstance(key, tuple) else [key]
    consuming = sum(1 for k in parts if k is not None and k is not Ellipsis)
    dim = 0
    for i, k in enumerate(parts):
        if k is Ellipsis:
            dim += t.dim() - consuming
            continue
        if k is None:
            continue
        if isinstance(k, slice) and k.step is not None and k.step < 0:
            n = t.shape[dim]
            start, stop, step = k.indices(n)
            count = len(range(start, stop, step))
            t = t.flip([dim])
            first = n - 1 - start
            parts[i] = slice(first, first + (count - 1) * -step + 1, -step) if count else slice(0, 0)
        dim += 1
    return t, tuple(parts) if isinstance(key, tuple) else parts[0]


def _getitem(a, key):
    np = _np()
    kkey = _index_key(key)
    answer = np.broadcast_to(np.ones((), a.dtype), a.shape)[_oracle_key(key)]
    t, kkey = _flip_negative_steps(a.tensor, kkey)
    return _wrap_like(t[kkey], answer)


def _setitem(a, key, value):
    kkey = _index_key(key)
    v = _value(value)
    if isinstance(v, kiln.Tensor) and v.dtype != a.tensor.dtype:
        v = v.to(a.tensor.dtype)
    a.tensor[kkey] = v


# --- functions and methods ----------------------------------------------------------------------

def _axes(axis, ndim):
    if axis is None:
        return list(range(ndim))
    if isinstance(axis, (tuple, list)):
        return [int(d) for d in axis]
    return [int(axis)]


def _reduction(name, kiln_fn, **defaults):
    def reduce(a, axis=None, dtype=None, out=None, keepdims=False, **kwargs):
        np = _np()
        if out is not None:
            raise NotTraced(f"np.{name} with out=")
        a = as_array(a)
        opts = dict(defaults)
        opts.update(kwargs)
        if dtype is not None:
            opts["dtype"] = dtype
        answer = _oracle(getattr(np, name), a, axis=axis, keepdims=keepdims, **opts)
        opts.pop("dtype", None)
        t = a.tensor
        compute = kiln_dtype(np.asarray(answer).dtype)
        if name not in ("any", "all", "max", "min", "amax", "amin") and t.dtype != compute:
            t = t.to(compute)
        dims = _axes(axis, a.ndim)
        if a.ndim == 0:
            r = kiln_fn(t, None, keepdims, **opts)
        else:
            r = kiln_fn(t, dims, keepdims, **opts)
        return _wrap_like(r, answer)

    reduce.__name__ = name
    return reduce


def _sum(t, dims, keepdim):
    return t.clone() if dims is None else kiln.sum(t, dims, keepdim=keepdim)


def _prod(t, dims, keepdim):
    if dims is None:
        return t.clone()
    r = t
    for d in sorted((d % t.dim() for d in dims), reverse=True):
        r = kiln.prod(r, d, keepdim=keepdim)
    return r


def _mean(t, dims, keepdim):
    return t.clone() if dims is None else kiln.mean(t, dims, keepdim=keepdim)


def _amax(t, dims, keepdim):
    return t.clone() if dims is None else kiln.amax(t, dims, keepdim=keepdim)


def _amin(t, dims, keepdim):
    return t.clone() if dims is None else kiln.amin(t, dims, keepdim=keepdim)


def _any(t, dims, keepdim):
    b = t != 0
    return b if dims is None else kiln.any(b, dims, keepdim=keepdim) if len(dims) else b


def _all(t, dims, keepdim):
    b = t != 0
    return b if dims is None else kiln.all(b, dims, keepdim=keepdim) if len(dims) else b


def _var(t, dims, keepdim, ddof=0):
    return (t * 0) if dims is None else kiln.var(t, dims, correction=ddof, keepdim=keepdim)


def _std(t, dims, keepdim, ddof=0):
    return (t * 0) if dims is None else kiln.std(t, dims, correction=ddof, keepdim=keepdim)


def _arg(name, kiln_fn):
    def arg(a, axis=None, out=None, keepdims=False):
        np = _np()
        if out is not None:
            raise NotTraced(f"np.{name} with out=")
        a = as_array(a)
        answer = _oracle(getattr(np, name), a, axis=axis, keepdims=keepdims)
        if axis is None:
            r = kiln_fn(a.tensor.reshape(-1), 0)
            if keepdims:
                r = r.reshape((1,) * a.ndim)
        else:
            r = kiln_fn(a.tensor, int(axis), keepdim=keepdims)
        return _wrap_like(r, answer)

    return arg


def _cumulative(name, kiln_fn):
    def cum(a, axis=None, dtype=None, out=None):
        np = _np()
        if out is not None:
            raise NotTraced(f"np.{name} with out=")
        a = as_array(a)
        answer = _oracle(getattr(np, name), a, axis=axis, dtype=dtype)
        kd = kiln_dtype(np.asarray(answer).dtype)
        t = a.tensor.reshape(-1) if axis is None else a.tensor
        return _wrap_like(kiln_fn(t.to(kd), 0 if axis is None else int(axis)), answer)

    return cum


def _astype(a, dtype, copy=True, **kwargs):
    if kwargs:
        raise NotTraced(f"ndarray.astype with {', '.join(kwargs)}")
    kd = kiln_dtype(dtype)
    t = as_array(a).tensor
    if t.dtype == kd:
        return TracedArray(t.clone() if copy else t, as_array(a).scalar)
    return TracedArray(t.to(kd), as_array(a).scalar)


def _shape_arg(shape, rest):
    if rest:
        return (shape,) + tuple(rest)
    if isinstance(shape, int):
        return (shape,)
    return tuple(shape)


def _reshape(a, shape, *rest, order="C"):
    if order != "C":
        raise NotTraced("np.reshape with order other than 'C'")
    return TracedArray(as_array(a).tensor.reshape(_shape_arg(shape, rest)))


def _ravel(a, order="C"):
    if order != "C":
        raise NotTraced("np.ravel with order other than 'C'")
    return TracedArray(as_array(a).tensor.reshape(-1))


def _flatten(a, order="C"):
    if order != "C":
        raise NotTraced("ndarray.flatten with order other than 'C'")
    return TracedArray(as_array(a).tensor.reshape(-1).clone())


def _transpose(a, *axes):
    a = as_array(a)
    if len(axes) == 1 and (axes[0] is None or isinstance(axes[0], (tuple, list))):
        axes = axes[0]
    if not axes:
        axes = tuple(reversed(range(a.ndim)))
    return TracedArray(a.tensor.permute(*axes))


def _np_transpose(a, axes=None):
    return _transpose(a, axes)


def _swapaxes(a, axis1, axis2):
    return TracedArray(as_array(a).tensor.transpose(axis1, axis2))


def _squeeze(a, axis=None):
    t = as_array(a).tensor
    if axis is None:
        return TracedArray(t.squeeze())
    for d in sorted((d % t.dim() for d in _axes(axis, t.dim())), reverse=True):
        if t.shape[d] != 1:
            raise ValueError("cannot select an axis to squeeze out which has size not equal to one")
        t = t.squeeze(d)
    return TracedArray(t)


def _expand_dims(a, axis):
    t = as_array(a).tensor
    n = t.dim() + len(_axes(axis, 0))
    for d in sorted(d % n for d in _axes(axis, 0)):
        t = t.unsqueeze(d)
    return TracedArray(t)


def _common(arrays):
    np = _np()
    arrays = [as_array(x) for x in arrays]
    dt = np.result_type(*(x.dtype for x in arrays))
    kd = kiln_dtype(dt)
    return [x.tensor.to(kd) for x in arrays]


def _concatenate(arrays, axis=0, out=None, dtype=None):
    if out is not None or dtype is not None:
        raise NotTraced("np.concatenate with out= or dtype=")
    ts = _common(arrays)
    if axis is None:
        return TracedArray(kiln.cat([t.reshape(-1) for t in ts], 0))
    return TracedArray(kiln.cat(ts, axis))


def _stack(arrays, axis=0, out=None, dtype=None):
    if out is not None or dtype is not None:
        raise NotTraced("np.stack with out= or dtype=")
    return TracedArray(kiln.stack(_common(arrays), axis))


def _vstack(arrays, dtype=None):
    ts = [t if t.dim() >= 2 else t.reshape(1, -1) for t in _common(arrays)]
    return TracedArray(kiln.cat(ts, 0))


def _hstack(arrays, dtype=None):
    ts = [t.reshape(1) if t.dim() == 0 else t for t in _common(arrays)]
    return TracedArray(kiln.cat(ts, 0 if ts[0].dim() == 1 else 1))


def _where(cond, x=None, y=None):
    if x is None or y is None:
        raise NotTraced("np.where with one argument (data-dependent shape)")
    return apply_where(cond, x, y)


def apply_where(cond, x, y):
    np = _np()
    answer = _oracle(np.where, as_array(cond), x, y)
    kd = kiln_dtype(np.asarray(answer).dtype)
    c = as_array(cond).tensor
    c = c if c.dtype == kiln.bool else c != 0
    xs = [_value(v) for v in (x, y)]
    xs = [v.to(kd) if isinstance(v, kiln.Tensor) else kiln.full([], v, dtype=kd) for v in xs]
    return _wrap_like(kiln.where(c, xs[0], xs[1]), answer)


def _clip(a, a_min=None, a_max=None, out=None, **kwargs):
    np = _np()
    if out is not None:
        raise NotTraced("np.clip with out=")
    a_min = kwargs.pop("min", a_min)
    a_max = kwargs.pop("max", a_max)
    if kwargs:
        raise NotTraced(f"np.clip with {', '.join(kwargs)}")
    r = a
    if a_min is not None:
        r = apply_ufunc(np.maximum, (r, a_min), {})
    if a_max is not None:
        r = apply_ufunc(np.minimum, (r, a_max), {})
    return r


def _matmul(a, b):
    np = _np()
    a, b = as_array(a), as_array(b)
    answer = _oracle(np.matmul, a, b)
    kd = kiln_dtype(np.asarray(answer).dtype)
    return _wrap_like(kiln.matmul(a.tensor.to(kd), b.tensor.to(kd)), answer)


def _dot(a, b, out=None):
    if out is not None:
        raise NotTraced("np.dot with out=")
    a, b = as_array(a), as_array(b)
    if a.ndim == 0 or b.ndim == 0:
        return apply_ufunc(_np().multiply, (a, b), {})
    if b.ndim > 2:
        raise NotTraced("np.dot of arrays with more than two dims")
    return _matmul(a, b)


def _copy(a, order="K"):
    a = as_array(a)
    return TracedArray(a.tensor.clone(), a.scalar)


def _like(fill):
    def like(a, dtype=None, order="K", subok=True, shape=None):
        return _full_like(a, fill, dtype, order, subok, shape)

    return like


def _full_like(a, fill_value, dtype=None, order="K", subok=True, shape=None):
    np = _np()
    a = as_array(a)
    if shape is not None:
        raise NotTraced("np.*_like with shape=")
    if isinstance(fill_value, TracedArray):
        raise NotTraced("np.full_like with a traced fill value")
    dt = np.dtype(dtype) if dtype is not None else a.dtype
    value = np.asarray(fill_value, dtype=dt).item()
    return TracedArray(kiln.full_like(a.tensor, value, dtype=kiln_dtype(dt)))


def _norm(x, ord=None, axis=None, keepdims=False):
    np = _np()
    if ord is not None:
        raise NotTraced("np.linalg.norm with ord=")
    a = as_array(x)
    answer = _oracle(np.linalg.norm, a, axis=axis, keepdims=keepdims)
    kd = kiln_dtype(np.asarray(answer).dtype)
    t = a.tensor.to(kd)
    dims = _axes(axis, a.ndim)
    return _wrap_like(kiln.sqrt(kiln.sum(t * t, dims, keepdim=keepdims)), answer)


def _count_nonzero(a, axis=None, keepdims=False):
    np = _np()
    a = as_array(a)
    answer = _oracle(np.count_nonzero, a, axis=axis, keepdims=keepdims)
    r = kiln.sum(a.tensor != 0, _axes(axis, a.ndim), keepdim=keepdims)
    if axis is None and not keepdims:
        # np.count_nonzero(a) is a Python int
        raise NotTraced("np.count_nonzero without axis (a Python int: data-dependent)")
    return _wrap_like(r, answer)


def _round(a, decimals=0, out=None):
    if out is not None or decimals != 0:
        raise NotTraced("np.round with decimals= or out=")
    a = as_array(a)
    if not a.dtype.kind == "f":
        return _copy(a)
    return TracedArray(kiln.round(a.tensor), a.scalar)


def _median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    np = _np()
    if out is not None or isinstance(axis, (tuple, list)):
        raise NotTraced("np.median with out= or several axes")
    a = as_array(a)
    answer = _oracle(np.median, a, axis=axis, keepdims=keepdims)
    kd = kiln_dtype(np.asarray(answer).dtype)
    t = a.tensor if a.tensor.dtype == kd else a.tensor.to(kd)
    if axis is None:
        t, ax = t.reshape(-1), 0
    else:
        ax = int(axis) % t.dim()
    n = t.shape[ax]
    s = kiln.sort(t, dim=ax)[0]
    # NumPy's median: the mean of the two middle values (the one middle value twice when odd)
    m = (s.narrow(ax, (n - 1) // 2, 1) + s.narrow(ax, n // 2, 1)) / 2
    if axis is None:
        m = m.reshape((1,) * a.ndim if keepdims else ())
    elif not keepdims:
        m = m.squeeze(ax)
    return _wrap_like(m, answer)


def _outer(a, b, out=None):
    if out is not None:
        raise NotTraced("np.outer with out=")
    a, b = as_array(a), as_array(b)
    return apply_ufunc(_np().multiply, (TracedArray(a.tensor.reshape(-1, 1)), TracedArray(b.tensor.reshape(1, -1))), {})


def _diff(a, n=1, axis=-1, **kwargs):
    if kwargs:
        raise NotTraced("np.diff with prepend= or append=")
    a = as_array(a)
    np = _np()
    for _ in range(n):
        ax = axis % a.ndim
        size = a.shape[ax]
        hi = TracedArray(a.tensor.narrow(ax, 1, size - 1))
        lo = TracedArray(a.tensor.narrow(ax, 0, size - 1))
        a = apply_ufunc(np.not_equal if a.dtype == np.bool_ else np.subtract, (hi, lo), {})
    return a


def _scalar_type(cls, value=0):
    """np.float32(a) of a traced array: the value as a NumPy scalar of that type."""
    a = as_array(value)
    if a.ndim != 0:
        return _astype(a, cls)
    r = _astype(a, cls)
    r.scalar = True
    return r


_ASARRAY = ("asarray", "array", "asanyarray", "ascontiguousarray")


def call_numpy(fn, /, *args, **kwargs):
    """The traced call fn(*args, **kwargs) of a NumPy function or type on traced arrays (or kiln
    tensors: np.asarray(t))."""
    np = _np()
    if isinstance(fn, type) and issubclass(fn, np.generic):
        if kwargs or len(args) != 1:
            raise NotTraced(f"np.{fn.__name__}(...) of a traced value with these arguments")
        return _scalar_type(fn, args[0])
    if isinstance(fn, np.ufunc):
        return apply_ufunc(fn, args, dict(kwargs))
    name = getattr(fn, "__name__", repr(fn))
    module = getattr(fn, "__module__", "") or ""
    if module.startswith("numpy.random"):
        raise NotTraced(f"numpy function np.random.{name} is not traced")
    if name in _ASARRAY and fn is getattr(np, name):
        dtype = kwargs.pop("dtype", None)
        copy = kwargs.pop("copy", None)
        if kwargs or len(args) != 1:
            raise NotTraced(f"np.{name} with these arguments")
        a = as_array(args[0])
        if dtype is not None:
            return _astype(a, dtype, copy=bool(copy) if copy is not None else name == "array")
        return TracedArray(a.tensor.clone(), a.scalar) if name == "array" and copy is not False else a
    impl = _FUNCTIONS.get(name)
    if impl is None or getattr(np, name, None) is not fn and getattr(np.linalg, name, None) is not fn:
        prefix = "np.linalg." if module == "numpy.linalg" else "np."
        raise NotTraced(f"numpy function {prefix}{name} is not traced")
    return impl(*args, **kwargs)


def call_method(a, name, /, *args, **kwargs):
    """a.name(*args, **kwargs) of a traced array."""
    if name in ("item", "tolist"):
        return getattr(a, name)(*args)  # a data-dependent break naming the method
    impl = _METHODS.get(name)
    if impl is None:
        raise NotTraced(f"ndarray.{name} is not traced")
    return impl(a, *args, **kwargs)


def _self_reshape(a, *shape, order="C"):
    if len(shape) == 1:
        return _reshape(a, shape[0], order=order)
    return _reshape(a, shape, order=order)


def _fill(a, value):
    _setitem(a, Ellipsis, value)


def _sort(a, axis=-1, kind=None, order=None):
    a = as_array(a)
    if order is not None:
        raise NotTraced("np.sort with order=")
    t = a.tensor.reshape(-1) if axis is None else a.tensor
    return TracedArray(kiln.sort(t, -1 if axis is None else int(axis))[0])


def _argsort(a, axis=-1, kind=None, order=None):
    a = as_array(a)
    if order is not None or kind not in (None, "stable", "mergesort"):
        raise NotTraced("np.argsort with order= or an unstable kind (ties would order differently)")
    t = a.tensor.reshape(-1) if axis is None else a.tensor
    return TracedArray(kiln.sort(t, stable=True, dim=-1 if axis is None else int(axis))[1])


# NumPy name -> implementation, for np.* functions (looked up by the function's name, checked to
# be numpy's own) and for ndarray methods.
_REDUCTIONS = {
    "sum": _reduction("sum", _sum), "prod": _reduction("prod", _prod),
    "mean": _reduction("mean", _mean), "max": _reduction("max", _amax),
    "min": _reduction("min", _amin), "amax": _reduction("amax", _amax),
    "amin": _reduction("amin", _amin), "any": _reduction("any", _any),
    "all": _reduction("all", _all), "var": _reduction("var", _var, ddof=0),
    "std": _reduction("std", _std, ddof=0),
    "argmax": _arg("argmax", kiln.argmax), "argmin": _arg("argmin", kiln.argmin),
    "cumsum": _cumulative("cumsum", kiln.cumsum), "cumprod": _cumulative("cumprod", kiln.cumprod),
}
_FUNCTIONS = dict(_REDUCTIONS)
_FUNCTIONS.update({
    "reshape": _reshape, "ravel": _ravel, "transpose": _np_transpose, "swapaxes": _swapaxes,
    "squeeze": _squeeze, "expand_dims": _expand_dims, "concatenate": _concatenate,
    "stack": _stack, "vstack": _vstack, "hstack": _hstack, "where": _where, "clip": _clip,
    "matmul": _matmul, "dot": _dot, "copy": _copy, "zeros_like": _like(0),
    "ones_like": _like(1), "full_like": _full_like, "norm": _norm,
    "count_nonzero": _count_nonzero, "round": _round, "around": _round, "sort": _sort,
    "argsort": _argsort, "median": _median, "outer": _outer, "diff": _diff,
})
_METHODS = dict(_REDUCTIONS)
_METHODS.update({
    "astype": _astype, "reshape": _self_reshape, "ravel": _ravel, "flatten": _flatten,
    "transpose": _transpose, "swapaxes": _swapaxes, "squeeze": _squeeze, "clip": _clip,
    "dot": _dot, "copy": _copy, "round": _round, "fill": _fill, "argsort": _argsort,
})


# --- entry points of the tracer (frontend/capture/Numpy.cpp) -------------------------------------

def is_method(name):
    """Whether ndarray attribute `name` is read as a method (else it is read as a value). Methods
    this module lacks are too: calling one is then a break that calls the real array's."""
    return name in _METHODS or callable(getattr(_np().ndarray, name, None))


def numpy_class(a):
    """type(a) of a traced array: np.ndarray, or its NumPy scalar type."""
    return a.dtype.type if a.scalar else _np().ndarray


def tensor_numpy(t, force=False, *, device_type):
    """t.numpy() in traced code: the tensor's values as an array (sharing them, as eagerly)."""
    if t.requires_grad and not force:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                           "Use tensor.detach().numpy() instead.")
    if device_type != "cpu":
        raise NotTraced(f"Tensor.numpy() of a {device_type} tensor")
    if t.dtype == kiln.bfloat16:
        raise TypeError("Got unsupported ScalarType BFloat16")
    return TracedArray(t)


def supported_array(a):
    """Whether kiln can view ndarray `a` as a tensor (its dtype, strides whole items, aligned)."""
    if a.dtype.name not in _KILN_TO_NUMPY.values() or not a.dtype.isnative:
        return False
    return all(s >= 0 and s % a.itemsize == 0 for s in a.strides) and a.ctypes.data % a.itemsize == 0


def is_numpy_scalar(v):
    """Whether v is a NumPy float scalar of a dtype kiln has (ints stay constants: they may be
    sizes)."""
    np = _np()
    return isinstance(v, np.floating) and v.dtype.name in _KILN_TO_NUMPY.values()


def scalar_input(v):
    """A NumPy scalar argument as the 0-d tensor a graph takes (the glue converts it per call)."""
    return kiln.from_numpy(_np().asarray(v).reshape(()).copy())


_CREATION = ("zeros", "ones", "full", "empty", "arange", "linspace", "eye", "identity", "array",
             "asarray", "zeros_like", "ones_like", "full_like")


def foldable(fn):
    """Whether NumPy function fn may run at the trace when all its arguments are constants: it
    reads and changes no state (not np.random, np.save, np.set_printoptions, ...)."""
    np = _np()
    if isinstance(fn, np.ufunc) or fn in (np.dtype, np.finfo, np.iinfo):
        return True
    if isinstance(fn, type):
        return issubclass(fn, np.generic)
    name = getattr(fn, "__name__", None)
    if name is None or not (name in _FUNCTIONS or name in _CREATION):
        return False
    return getattr(np, name, None) is fn or getattr(np.linalg, name, None) is fn


def kiln_conversion(name, t, /, dtype=None, device=None, requires_grad=False, **kwargs):
    """kiln.<name>(a) of a traced array whose tensor is t: from_numpy, as_tensor and asarray
    share its memory (unless dtype or device differ), tensor copies it."""
    if kwargs or (name == "from_numpy" and (dtype is not None or device is not None)):
        raise TypeError(f"kiln.{name}() got unexpected arguments: {', '.join(kwargs) or 'dtype/device'}")
    if requires_grad:
        raise NotTraced(f"kiln.{name}(array, requires_grad=True) (a leaf made in the graph)")
    if name == "tensor":
        t = t.clone()
    move = {k: v for k, v in (("device", device), ("dtype", dtype)) if v is not None}
    return t.to(**move) if move else t


def constant_array(a):
    """A NumPy array computed from constants while tracing, as a tensor constant of the graph."""
    numpy_dtype_ok = a.dtype.name in _KILN_TO_NUMPY.values()
    if not numpy_dtype_ok:
        raise NotTraced(f"a numpy array of dtype {a.dtype.name} (kiln has no such dtype)")
    return kiln.from_numpy(_np().ascontiguousarray(a).copy())


def fresh_array(t):
    """A copy of graph constant t as a traced array (each call gets its own, as NumPy's would)."""
    return TracedArray(t.clone())
