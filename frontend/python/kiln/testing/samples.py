"""Sample inputs for every op overload of the table, built from its schema plus per-op specs.

`sample_inputs("aten.add.Tensor", kiln.float32)` yields `(args, kwargs)` of fresh kiln values:
shapes that broadcast, a non-contiguous view, 0-d, size-1 and empty dims. An op's tensor
arguments come from its schema (`kiln._C._fx.op_schema`); `_SPECS` says what a schema cannot:
valid dims, value domains (positive for log), index tensors within range, matmul shapes.
Samples are valid inputs where the spec can make them so; a few (reductions of empty tensors,
0-d corner cases) may raise in PyTorch too, which tests treat as "both must raise".
"""
import functools
import zlib

import numpy as np

import kiln

ALL_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64",
              "float16", "bfloat16", "float32", "float64")


class T:
    """How to make one tensor argument: shape, non-contiguous view, dtype and value range."""

    def __init__(self, shape, nc=False, dtype=None, low=None, high=None, nonzero=False, values=None,
                 special=False):
        self.shape, self.nc, self.dtype = tuple(shape), nc, dtype
        self.low, self.high, self.nonzero = low, high, nonzero
        self.values = values          # explicit data (nested lists), shape ignored
        self.special = special        # float data with nan / inf mixed in


def NC(*shape):
    """A non-contiguous view of this shape (a transpose, or a strided slice for 1-d)."""
    return T(shape, nc=True)


def _t(x):
    return x if isinstance(x, T) or x is None or isinstance(x, list) else T(x)


def _as_dtype(d):
    return getattr(kiln, d) if isinstance(d, str) else d


def dtype_name(d):
    return str(d).split(".")[-1]


def _is_float(dt):
    return dtype_name(dt) in ("float16", "bfloat16", "float32", "float64")


def _is_int(dt):
    return dtype_name(dt) in ("uint8", "int8", "int16", "int32", "int64")


class _Maker:
    """Deterministic tensor factory for one (op, dtype)."""

    def __init__(self, dtype, seed):
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)

    def data(self, shape, dt, spec):
        r, name = self.rng, dtype_name(dt)
        if name == "bool":
            return r.integers(0, 2, size=shape).astype(np.bool_)
        low = -4 if spec.low is None else spec.low
        high = 4 if spec.high is None else spec.high
        if name == "uint8":
            low = max(low, 0)
        if _is_int(dt):
            a = r.integers(int(np.ceil(low)), int(np.floor(high)) + 1, size=shape)
            if spec.nonzero:
                a[a == 0] = 1
            return a.astype(name)
        a = r.uniform(low, high, size=shape)
        if spec.nonzero:
            small = np.abs(a) < 0.25
            a[small] = np.where(a[small] < 0, -0.5, 0.5)
        if spec.special and a.size:
            flat = a.reshape(-1)
            flat[r.permutation(a.size)[:3]] = [np.nan, np.inf, -np.inf][: min(3, a.size)]
        return a.astype(np.float32 if name == "bfloat16" else name)

    def tensor(self, spec):
        dt = _as_dtype(spec.dtype) if spec.dtype is not None else self.dtype
        if spec.values is not None:
            a = np.array(spec.values, dtype=np.bool_ if dtype_name(dt) == "bool" else np.float64)
            a = a.astype(np.float32 if dtype_name(dt) in ("bfloat16", "float16") else
                         (np.bool_ if dtype_name(dt) == "bool" else dtype_name(dt)))
            return _from_numpy(a, dt)
        shape = spec.shape
        if spec.nc and len(shape) >= 2:
            swapped = shape[:-2] + (shape[-1], shape[-2])
            return _from_numpy(self.data(swapped, dt, spec), dt).transpose(-1, -2)
        if spec.nc and len(shape) == 1:
            return _from_numpy(self.data((2 * shape[0],), dt, spec), dt)[::2]
        return _from_numpy(self.data(shape, dt, spec), dt)


def _from_numpy(a, dt):
    # np.array(copy) keeps 0-d arrays 0-d.
    t = kiln.from_numpy(np.array(a, copy=True, order="C"))
    return t.to(dt) if dtype_name(t.dtype) != dtype_name(dt) else t


# ---------------------------------------------------------------------------------------------
# Default cases: one entry per sample, the shapes of the op's tensor arguments in schema order.

_UNARY = [((2, 3),), (NC(3, 4),), ((),), ((1,),), ((0, 3),), ((2, 1, 4),), (NC(5),)]
_BINARY = [((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 1, 3), (4, 1)), (NC(2, 3), (2, 3)),
           ((2, 3), NC(2, 3)), ((), ()), ((2, 3), ()), ((), (2, 3)), ((0, 3), (1, 3)),
           ((1,), (2, 1))]
_TERNARY = [((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), (NC(2, 3), (2, 3), ()),
            ((), (), ()), ((0, 3), (3,), (1, 3)), ((2, 1, 3), (1, 4, 1), (3,))]
_DEFAULT_CASES = {0: [()], 1: _UNARY, 2: _BINARY, 3: _TERNARY}
# Prims take operands of one shape (no broadcasting).
_SAME_SHAPE = [(2, 3), NC(2, 3), (), (0, 3), (1,), (2, 1, 4)]
_PRIMS_CASES = {0: [()], 1: _UNARY, 2: [(a, _t(a).shape) for a in _SAME_SHAPE],
                3: [(a, _t(a).shape, _t(a).shape) for a in _SAME_SHAPE]}

# Reduction inputs and, per input, dims that are valid for it (the last reduces an empty dim).
_REDUCE_INPUTS = [((2, 3, 4), [[1], [0, -1]]), (NC(3, 4), [[0], [1]]), ((), [[0]]), ((5,), [[0]]),
                  ((2, 0, 3), [[2], [1]])]


def _reduction(dim_kind, empty_ok=True, extra=({},), full=True):
    """Cases for a reduction: dim_kind is 'list' (int[] dim), 'int', or None (no dim arg)."""
    cases, i = [], 0
    for shape, dim_lists in _REDUCE_INPUTS:
        shape = _t(shape)
        empty = 0 in shape.shape
        for dims in dim_lists:
            if empty and dims is dim_lists[-1] and not empty_ok:
                continue
            if dim_kind is None:
                if empty and not empty_ok:
                    continue
                kw = {}
            elif dim_kind == "list":
                kw = {"dim": dims}
            else:
                kw = {"dim": dims[0]}
            if dim_kind is not None:
                kw["keepdim"] = bool(i % 2)
            kw.update(extra[i % len(extra)])
            cases.append(((shape,), kw))
            i += 1
            if dim_kind is None:
                break
    if dim_kind == "list" and full:
        cases.append((((2, 3),), {"dim": None, **extra[0]}))
    return cases


_MM = [((2, 3), (3, 4)), (NC(2, 3), (3, 4)), ((2, 3), NC(3, 4)), ((0, 3), (3, 2)), ((2, 0), (0, 3)),
       ((1, 1), (1, 1))]
_BMM = [((2, 2, 3), (2, 3, 4)), (NC(2, 2, 3), (2, 3, 4)), ((0, 2, 3), (0, 3, 1)), ((1, 2, 0), (1, 0, 2))]


def _idx(shape, high, low=0):
    return T(shape, dtype="int64", low=low, high=high - 1)


def _mask(shape):
    return T(shape, dtype="bool")


# Per-op specs. Keys: "name.overload" first, then "name", then the functional name of an
# in-place op ("add_" -> "add"). Fields:
#   cases: list of (tensor shapes, kwargs) replacing the default cases
#   kwargs: list of kwargs dicts cycled over the default cases (keys not in the schema drop)
#   args: per argument name, T fields for the default cases (ranges, nonzero, dtype)
#   scalar: per argument name, the Scalar value (or a function of the dtype)
#   dtype_kw: pass dtype=<the sample dtype> (creation ops); default: when no tensor argument
_POSITIVE = {"self": dict(low=0.1, high=4)}
_DIVISOR = {"other": dict(nonzero=True)}
_SHIFT = {"other": dict(low=0, high=3)}


def _spd(n, batch=(), seed=0):
    """Symmetric positive-definite matrices (nested lists) for the Cholesky samples."""
    a = np.random.default_rng(seed).uniform(-1, 1, size=tuple(batch) + (n, n))
    return (a @ np.swapaxes(a, -1, -2) + n * np.eye(n)).tolist()


def _linalg_specs(s):
    """Factorizations and solves (ir/ops/linalg.yaml): random square matrices (invertible almost
    surely), positive-definite ones for Cholesky, triangular solves on a diagonal away from 0."""
    square = [((3, 3),), ((2, 4, 4),), (NC(3, 3),), ((0, 2, 2),), ((1, 0, 0),)]
    s["linalg_cholesky_ex"] = dict(cases=[((T((3, 3), values=_spd(3)),), {}),
                                          ((T((2, 3, 3), values=_spd(3, (2,), 1)),), {"upper": True}),
                                          (((0, 2, 2),), {})])
    s["linalg_inv_ex"] = dict(cases=square)
    s["linalg_det"] = dict(cases=square)
    s["linalg_slogdet"] = dict(cases=square)
    s["linalg_solve"] = dict(cases=[((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3)), ((3, 3), (2, 3, 1)),
                                    (NC(3, 3), (3, 3)), (((3, 3), (2, 3)), {"left": False}), ((0, 0), (0, 2))])
    s["linalg_solve_triangular"] = dict(
        args={"self": dict(low=1, high=3)},
        cases=[(((3, 3), (3, 2)), {"upper": True}), (((2, 3, 3), (3, 1)), {"upper": False}),
               (((3, 3), (2, 3)), {"upper": True, "left": False}),
               (((3, 3), (3, 2)), {"upper": False, "unitriangular": True}), ((NC(3, 3), (2, 3, 2)), {"upper": False})])
    s["linalg_qr"] = dict(cases=[((4, 3),), ((2, 3, 4),), (((3, 3),), {"mode": "complete"}), ((NC(3, 3),), {})])
    s["linalg_eigh"] = dict(cases=[((3, 3),), ((2, 3, 3),), (((3, 3),), {"UPLO": "U"})])
    s["linalg_eigvalsh"] = dict(cases=[((3, 3),), ((2, 3, 3),), (((3, 3),), {"UPLO": "U"}), ((0, 0),)])
    # full_matrices=True only for square A: the extra columns of a tall A's U (rows of a wide A's
    # Vh) are arbitrary, which finite differences see and the formula (torch's) ignores.
    s["linalg_svd"] = dict(cases=[(((4, 3),), {"full_matrices": False}), (((2, 3, 4),), {"full_matrices": False}),
                                  ((3, 3),)])
    s["linalg_svdvals"] = dict(cases=[((4, 3),), ((2, 3, 4),), (NC(3, 3),), ((0, 2),)])


def _spec_table():
    s = {}
    for op in ("log", "log2", "log10", "sqrt", "rsqrt"):
        s[op] = dict(args=_POSITIVE)
    s["log1p"] = dict(args={"self": dict(low=-0.9, high=4)})
    for op in ("asin", "acos"):
        s[op] = dict(args={"self": dict(low=-0.95, high=0.95)})
    s["tan"] = dict(args={"self": dict(low=-1.3, high=1.3)})
    for op in ("div", "true_divide", "floor_divide", "remainder", "fmod"):
        s[op] = dict(args=_DIVISOR, scalar={"other": lambda dt: 2 if not _is_float(dt) else -1.5},
                     kwargs=[{}, {"rounding_mode": "trunc"}, {"rounding_mode": "floor"}])
    for op in ("div.Tensor_mode", "div.Scalar_mode"):
        s[op] = dict(s["div"], kwargs=[{"rounding_mode": "trunc"}, {"rounding_mode": "floor"},
                                       {"rounding_mode": None}])
    for op in ("div.Scalar_Tensor", "true_divide.Scalar_Tensor", "floor_divide.Scalar_Tensor",
               "remainder.Scalar_Tensor"):
        s[op] = dict(args={"other": dict(nonzero=True)}, scalar={"self": 3},
                     kwargs=[{}, {"rounding_mode": "floor"}])
    for op in ("add", "sub", "rsub"):
        s[op] = dict(kwargs=[{}, {"alpha": 2}])
    s["mul"] = dict()
    for op in ("bitwise_left_shift", "bitwise_right_shift"):
        s[op] = dict(args=_SHIFT, scalar={"other": 2, "self": 5})
    s["pow"] = dict(args={"exponent": dict(low=0, high=3)},
                    scalar={"exponent": lambda dt: 0.5 if _is_float(dt) else 2, "self": 2})
    s["pow.Tensor_Tensor"] = dict(args={"self": dict(low=0.1, high=3), "exponent": dict(low=0, high=3)})
    s["pow_.Tensor"] = s["pow.Tensor_Tensor"]
    s["round.decimals"] = dict(kwargs=[{"decimals": 1}, {"decimals": 0}, {"decimals": -1}])
    s["round_.decimals"] = s["round.decimals"]
    s["gelu"] = dict(kwargs=[{}, {"approximate": "tanh"}])
    s["nan_to_num"] = dict(args={"self": dict(special=True)},
                           kwargs=[{}, {"nan": 0.5, "posinf": 10.0, "neginf": -10.0}])
    for op in ("isnan", "isinf", "isfinite"):
        s[op] = dict(args={"self": dict(special=True)})
    s["where.self"] = dict(args={"condition": dict(dtype="bool")})
    s["where.Tensor_method"] = s["where.self"]
    s["masked_fill.Scalar"] = dict(cases=[((2, 3), _mask((2, 3))), ((2, 3), _mask((3,))),
                                          (NC(2, 3), _mask((2, 1))), ((), _mask(())),
                                          ((0, 3), _mask((3,)))])
    s["masked_fill.Tensor"] = dict(cases=[((2, 3), _mask((2, 3)), ()), (NC(2, 3), _mask((3,)), ()),
                                          ((), _mask(()), ()), ((0, 3), _mask((3,)), ())])
    s["masked_fill_.Scalar"] = s["masked_fill.Scalar"]
    s["masked_fill_.Tensor"] = s["masked_fill.Tensor"]
    for op in ("clamp", "clip"):
        s[op] = dict(kwargs=[{"min": -1, "max": 2}, {"min": -1}, {"max": 1}])
        s[op + ".Tensor"] = dict(cases=[((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), None),
                                        (NC(2, 3), None, (2, 1)), ((), (), ()),
                                        ((0, 3), (3,), (1, 3))])
        s[op + "_.Tensor"] = s[op + ".Tensor"]
    s["lerp"] = dict(scalar={"weight": 0.25}, args={"weight": dict(low=0, high=1)})
    s["addcmul"] = dict(kwargs=[{}, {"value": 0.5}])
    s["addcdiv"] = dict(args={"tensor2": dict(nonzero=True)}, kwargs=[{}, {"value": -2}])
    sq, step = T((2, 3), low=0), T((), dtype="float32", low=0, high=5)
    s["_fused_adam_"] = dict(cases=[
        (((2, 3), (2, 3), (2, 3), sq, None, step), {}),
        ((NC(3, 4), (3, 4), NC(3, 4), T((3, 4), low=0), T((3, 4), low=0), step),
         {"weight_decay": 0.1, "maximize": True, "lr": 0.01}),
        (((), (), (), T((), low=0), None, step), {"weight_decay": 0.1, "decoupled_weight_decay": True}),
        (((0, 3), (0, 3), (0, 3), T((0, 3), low=0), None, step), {}),
        (((40000,), (40000,), (40000,), T((40000,), low=0), T((40000,), low=0), step),
         {"beta1": 0.3, "beta2": 0.5, "eps": 1e-3})])
    s["_fused_sgd_"] = dict(cases=[
        (((2, 3), (2, 3), None), {"lr": 0.1}),
        (((2, 3), (2, 3), (2, 3)), {"lr": 0.05, "momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01}),
        ((NC(3, 4), (3, 4), NC(3, 4)), {"lr": 0.05, "momentum": 0.9, "nesterov": True, "maximize": True}),
        (((), (), ()), {"lr": 0.1, "momentum": 0.5, "first_step": True, "weight_decay": 0.1}),
        (((0, 3), (0, 3), (0, 3)), {"lr": 0.1, "momentum": 0.9}),
        (((40000,), (40000,), (40000,)), {"lr": 0.01, "momentum": 0.9, "nesterov": True})])
    s["isclose"] = dict(kwargs=[{}, {"rtol": 0.1, "atol": 0.5, "equal_nan": True}])
    s["allclose"] = s["isclose"]
    s["copy_"] = dict(cases=[((2, 3), (2, 3)), ((2, 3), (3,)), (NC(2, 3), (2, 3)), ((), ()),
                             ((0, 3), (1, 3)), ((2, 3), T((2, 3), dtype="float64"))])
    # Conversion.
    s["_to_copy"] = dict(kwargs=[{}, {"dtype": kiln.float64}, {"dtype": kiln.int32}])
    s["to.dtype"] = dict(kwargs=[{"dtype": kiln.float64}, {"dtype": kiln.int32},
                                 {"dtype": kiln.float32, "copy": True}])
    # PyTorch's aten::to.device requires the dtype (kiln's schema defaults it for Tensor.to).
    s["to.device"] = dict(kwargs=[{"device": kiln.device("cpu"), "dtype": kiln.float64},
                                  {"device": kiln.device("cpu"), "dtype": kiln.int64, "copy": True}])
    s["to.other"] = dict(cases=[((2, 3), T((2,), dtype="float64")), (NC(2, 3), T((), dtype="int32")),
                                ((), T((1,), dtype="bool"))])
    s["to.dtype_layout"] = dict(kwargs=[{"dtype": kiln.float64}, {}, {"dtype": kiln.int64, "copy": True}])
    # Creation.
    sizes = [{"size": [2, 3]}, {"size": []}, {"size": [0, 4]}]
    for op in ("empty", "zeros", "ones", "rand", "randn"):
        s[op] = dict(cases=[((), kw) for kw in sizes])
    s["empty_strided"] = dict(cases=[((), {"size": [2, 3], "stride": [1, 2]}),
                                     ((), {"size": [], "stride": []}),
                                     ((), {"size": [0, 4], "stride": [4, 1]})])
    s["full"] = dict(cases=[((), kw) for kw in sizes])
    s["scalar_tensor"] = dict(cases=[((), {})])
    for op in ("new_empty", "new_zeros", "new_ones", "new_full"):
        s[op] = dict(cases=[(((2, 3),), {"size": [3, 1]}), ((NC(2, 2),), {"size": []}),
                            (((),), {"size": [0, 2]})])
    for op in ("empty_like", "zeros_like", "ones_like", "full_like", "rand_like", "randn_like"):
        s[op] = dict(kwargs=[{}, {"dtype": kiln.float64}])
    s["arange"] = dict(cases=[((), {"end": 5}), ((), {"end": 0})])
    s["arange.start"] = dict(cases=[((), {"start": 1, "end": 7}), ((), {"start": -3, "end": 2})])
    s["arange.start_step"] = dict(cases=[((), {"start": 1, "end": 7, "step": 2}),
                                         ((), {"start": 10, "end": 1, "step": -3})])
    s["linspace"] = dict(cases=[((), {"start": 0, "end": 4, "steps": 5}),
                                ((), {"start": 3, "end": -2, "steps": 1}),
                                ((), {"start": 0, "end": 1, "steps": 0})])
    s["eye"] = dict(cases=[((), {"n": 3}), ((), {"n": 0})])
    s["eye.m"] = dict(cases=[((), {"n": 2, "m": 4}), ((), {"n": 3, "m": 1})])
    # Random.
    s["randint"] = dict(cases=[((), {"high": 5, "size": [2, 3]}), ((), {"high": 2, "size": []})])
    s["randint.low"] = dict(cases=[((), {"low": 1, "high": 5, "size": [2, 3]}),
                                   ((), {"low": 0, "high": 2, "size": [0]})])
    s["randperm"] = dict(cases=[((), {"n": 6}), ((), {"n": 0})])
    s["randint_like"] = dict(kwargs=[{"high": 4}])
    s["randint_like.low_dtype"] = dict(kwargs=[{"low": 1, "high": 4}])
    s["uniform_"] = dict(kwargs=[{}, {"from": -2.0, "to": 3.0}])
    s["normal_"] = dict(kwargs=[{}, {"mean": 1.0, "std": 0.5}])
    s["random_.to"] = dict(kwargs=[{"to": 2}])
    s["random_.from"] = dict(kwargs=[{"from": 0, "to": 2}, {"from": 1, "to": None}])
    for op in ("bernoulli", "bernoulli_"):
        s[op] = dict(args={"self": dict(low=0, high=1)}, kwargs=[{"p": 0.3}])
    s["exponential_"] = dict(kwargs=[{}, {"lambd": 2.5}])
    s["geometric_"] = dict(kwargs=[{"p": 0.3}])
    s["cauchy_"] = dict(kwargs=[{}, {"median": 1.0, "sigma": 0.5}])
    s["log_normal_"] = dict(kwargs=[{}, {"mean": 0.0, "std": 0.25}])
    s["poisson"] = dict(args={"self": dict(low=0, high=20)})
    # Linear algebra.
    s["mm"] = dict(cases=_MM)
    s["addmm"] = dict(cases=[((4,), *_MM[0]), ((2, 4), *_MM[1]), ((), *_MM[2]), ((1, 2), *_MM[3]),
                             ((2, 3), *_MM[4])],
                      kwargs=[{}, {"alpha": 2, "beta": 3}])
    s["addmm_"] = dict(cases=[((2, 4), *_MM[0]), (NC(2, 4), *_MM[1]), ((0, 2), *_MM[3])],
                       kwargs=[{}, {"alpha": 2, "beta": 3}])
    s["bmm"] = dict(cases=_BMM)
    s["baddbmm"] = dict(cases=[((2, 2, 4), *_BMM[0]), ((4,), *_BMM[1]), ((0, 2, 1), *_BMM[2]),
                               ((), *_BMM[3])], kwargs=[{}, {"alpha": 2, "beta": 3}])
    s["mv"] = dict(cases=[((2, 3), (3,)), (NC(2, 3), NC(3)), ((0, 3), (3,)), ((2, 0), (0,))])
    s["addmv"] = dict(cases=[((2,), (2, 3), (3,)), ((), NC(2, 3), (3,)), ((0,), (0, 3), (3,))],
                      kwargs=[{}, {"alpha": 2, "beta": 3}])
    s["dot"] = dict(cases=[((3,), (3,)), (NC(4), (4,)), ((0,), (0,))])
    _linalg_specs(s)
    s["matmul"] = dict(cases=[((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                              (NC(2, 2, 3), (3, 4)), ((2, 1, 2, 3), (3, 3, 2)), ((0, 3), (3,)),
                              ((3,), (2, 3, 4))])
    for op in ("outer", "ger"):
        s[op] = dict(cases=[((3,), (4,)), (NC(3), (1,)), ((0,), (2,))])
    s["linear"] = dict(cases=[((2, 3), (4, 3), (4,)), (NC(2, 3), (4, 3)), ((5, 2, 3), NC(4, 3), ()),
                              ((3,), (4, 3), (4,)), ((0, 3), (2, 3), (2,))])
    # Reductions.
    s["sum"] = dict(cases=_reduction(None, extra=({}, {"dtype": kiln.float64})))
    s["sum.dim_IntList"] = dict(cases=_reduction("list", extra=({}, {"dtype": kiln.float64})))
    s["mean"] = dict(cases=_reduction(None))
    s["mean.dim"] = dict(cases=_reduction("list"))
    s["prod"] = dict(cases=_reduction(None, extra=({}, {"dtype": kiln.float64})),
                     args={"self": dict(low=-2, high=2)})
    s["prod.dim_int"] = dict(cases=_reduction("int"))
    for op in ("amax", "amin"):
        s[op] = dict(cases=_reduction("list", empty_ok=False, full=False) + [(((2, 3),), {})])
    for op in ("max", "min"):
        s[op] = dict(cases=_reduction(None, empty_ok=False))
        s[op + ".dim"] = dict(cases=_reduction("int", empty_ok=False))
        s[op + ".other"] = dict()
    for op in ("argmax", "argmin"):
        s[op] = dict(cases=_reduction("int", empty_ok=False) + [(((2, 3),), {})])
    for op in ("var", "std", "var_mean", "std_mean"):
        s[op] = dict(cases=_reduction(None, extra=({}, {"unbiased": False})))
        s[op + ".dim"] = dict(cases=_reduction("list", extra=({}, {"unbiased": False})))
        s[op + ".correction"] = dict(cases=_reduction("list", extra=({}, {"correction": 0},
                                                                    {"correction": 2})))
    s["linalg_vector_norm"] = dict(cases=_reduction("list", extra=(
        {}, {"ord": 1}, {"ord": float("inf")}, {"ord": 0}, {"ord": 3.5}, {"dtype": kiln.float64})))
    s["norm"] = dict(cases=_reduction("list", extra=({}, {"p": 1}, {"p": None}, {"p": float("inf")})))
    s["norm.str"] = dict(cases=[(((2, 3),), {}), ((NC(3, 4),), {"dim": [0, 1], "keepdim": True}),
                                (((2, 3, 4),), {"p": "fro", "dim": [1]}), ((((),)), {})])
    s["logsumexp"] = dict(cases=_reduction("list", full=False))
    for op in ("all", "any"):
        s[op] = dict(cases=_reduction(None))
        s[op + ".dim"] = dict(cases=_reduction("int"))
        s[op + ".dims"] = dict(cases=_reduction("list"))
    for op in ("softmax.int", "log_softmax.int"):
        s[op] = dict(cases=[(((2, 3, 4),), {"dim": 1}), ((NC(3, 4),), {"dim": -1}), (((),), {"dim": 0}),
                            (((0, 3),), {"dim": 1}), (((2, 3),), {"dim": 0, "dtype": kiln.float64})])
    for op in ("cumsum", "cumprod"):
        s[op] = dict(cases=[(((2, 3, 4),), {"dim": 1}), ((NC(3, 4),), {"dim": -1}), (((),), {"dim": 0}),
                            (((0, 3),), {"dim": 1}), (((2, 3),), {"dim": 0, "dtype": kiln.float64})],
                     args={"self": dict(low=-2, high=2)})
    # Running extrema and logcumsumexp take cumsum's inputs without dtype=.
    scans = [c for c in s["cumsum"]["cases"] if "dtype" not in c[1]]
    for op in ("cummax", "cummin", "logcumsumexp"):
        s[op] = dict(cases=scans, args={"self": dict(low=-2, high=2)})
    s["erfinv"] = dict(args={"self": dict(low=-0.95, high=0.95)})
    s["layer_norm"] = dict(cases=[(((2, 3, 4), (4,), (4,)), {"normalized_shape": [4]}),
                                  ((NC(3, 4),), {"normalized_shape": [4]}),
                                  (((2, 3, 4), (3, 4), None), {"normalized_shape": [3, 4], "eps": 1e-3}),
                                  (((0, 4), None, (4,)), {"normalized_shape": [4]})])
    # Shapes and views.
    s["view"] = dict(cases=[(((2, 3, 4),), {"size": [6, 4]}), (((2, 3, 4),), {"size": [-1]}),
                            (((),), {"size": [1, 1]}), (((0, 3),), {"size": [3, -1]}),
                            ((NC(3, 4),), {"size": [3, 2, 2]})])
    s["reshape"] = dict(cases=[(((2, 3, 4),), {"shape": [6, 4]}), ((NC(3, 4),), {"shape": [-1]}),
                               (((),), {"shape": [1]}), (((0, 3),), {"shape": [3, 0, 1]}),
                               (((1,),), {"shape": []})])
    for op in ("view_as", "reshape_as"):
        s[op] = dict(cases=[((2, 3, 4), (6, 4)), ((2, 2), (4,)), ((), (1, 1)), ((0, 3), (3, 0))]
                     + ([(NC(3, 4), (12,))] if op == "reshape_as" else []))
    s["permute"] = dict(cases=[(((2, 3, 4),), {"dims": [2, 0, 1]}), ((NC(3, 4),), {"dims": [1, 0]}),
                               (((),), {"dims": []}), (((0, 3),), {"dims": [-1, 0]})])
    for op in ("transpose.int", "transpose_", "swapdims"):
        s[op] = dict(cases=[(((2, 3, 4),), {"dim0": 0, "dim1": 2}), ((NC(3, 4),), {"dim0": -1, "dim1": 0}),
                            (((),), {"dim0": 0, "dim1": -1}), (((0, 3),), {"dim0": 1, "dim1": 1})])
    s["swapaxes"] = dict(cases=[((sh,), {"axis0": kw["dim0"], "axis1": kw["dim1"]})
                                for (sh,), kw in s["swapdims"]["cases"]])
    for op in ("t", "t_"):
        s[op] = dict(cases=[((2, 3),), (NC(3, 4),), ((),), ((5,),), ((0, 2),)])
    sq = [((2, 1, 3, 1),), (NC(1, 4),), ((),), ((1,),), ((0, 1),)]
    s["squeeze"] = dict(cases=sq)
    s["squeeze.dim"] = dict(cases=[(((2, 1, 3, 1),), {"dim": 1}), ((NC(1, 4),), {"dim": -1}),
                                   (((),), {"dim": 0}), (((1,),), {"dim": 0}), (((0, 1),), {"dim": 0})])
    s["squeeze.dims"] = dict(cases=[(((2, 1, 3, 1),), {"dim": [1, 3]}), ((NC(1, 4),), {"dim": [0, 1]}),
                                    (((),), {"dim": []}), (((0, 1),), {"dim": [-1]})])
    s["unsqueeze"] = dict(cases=[(((2, 3),), {"dim": 0}), ((NC(3, 4),), {"dim": -1}), (((),), {"dim": 0}),
                                 (((0, 3),), {"dim": 1})])
    s["expand"] = dict(cases=[(((3, 1),), {"size": [2, 3, 4]}), ((NC(1, 4),), {"size": [-1, 4]}),
                              (((),), {"size": [2, 2]}), (((1,),), {"size": [0]}),
                              (((2, 3),), {"size": [2, 3], "implicit": True})])
    s["expand_as"] = dict(cases=[((3, 1), (2, 3, 4)), (NC(1, 4), (3, 4)), ((), (2,)), ((1,), (0,))])
    s["flatten.using_ints"] = dict(cases=[(((2, 3, 4),), {}), ((NC(3, 4),), {"start_dim": 0, "end_dim": 1}),
                                          (((),), {}), (((2, 0, 3),), {"start_dim": 1}),
                                          (((2, 3, 4, 5),), {"start_dim": 1, "end_dim": -2})])
    s["unflatten.int"] = dict(cases=[(((2, 12),), {"dim": 1, "sizes": [3, 4]}),
                                     ((NC(4, 6),), {"dim": 0, "sizes": [2, -1]}),
                                     (((0, 6),), {"dim": -1, "sizes": [2, 3]})])
    s["narrow"] = dict(cases=[(((4, 5),), {"dim": 1, "start": 1, "length": 2}),
                              ((NC(4, 5),), {"dim": 0, "start": -2, "length": 2}),
                              (((3,),), {"dim": 0, "start": 3, "length": 0})])
    s["select.int"] = dict(cases=[(((4, 5),), {"dim": 1, "index": 2}), ((NC(4, 5),), {"dim": 0, "index": -1}),
                                  (((3, 0),), {"dim": 0, "index": 1})])
    s["slice.Tensor"] = dict(cases=[(((4, 5),), {"dim": 1, "start": 1, "end": None, "step": 2}),
                                    ((NC(6, 5),), {"dim": 0, "start": -4, "end": 100}),
                                    (((4,),), {}), (((4, 3),), {"dim": 0, "start": 3, "end": 1})])
    s["slice_scatter"] = dict(cases=[(((4, 5), (4, 2)), {"dim": 1, "start": 1, "end": None, "step": 2}),
                                     ((NC(6, 5), (4, 5)), {"dim": 0, "start": -4, "end": 100}),
                                     (((4,), (4,)), {}), (((4, 3), (0, 3)), {"dim": 0, "start": 3, "end": 1}),
                                     (((4, 5), (4, 3)), {"dim": 1, "start": 1})])
    s["select_scatter"] = dict(cases=[(((4, 5), (4,)), {"dim": 1, "index": 2}),
                                      ((NC(4, 5), (5,)), {"dim": 0, "index": -1}),
                                      (((3, 0), (0,)), {"dim": 0, "index": 1}), (((3,), ()), {"dim": 0, "index": 2})])
    for op in ("movedim", "moveaxis"):
        s[op + ".intlist"] = dict(cases=[(((2, 3, 4),), {"source": [0, 1], "destination": [2, 0]}),
                                         ((NC(3, 4),), {"source": [-1], "destination": [0]}),
                                         (((),), {"source": [], "destination": []})])
        s[op + ".int"] = dict(cases=[(((2, 3, 4),), {"source": 0, "destination": -1}),
                                     ((NC(3, 4),), {"source": 1, "destination": 0}),
                                     (((0, 3),), {"source": 0, "destination": 1})])
    s["as_strided"] = dict(cases=[(((4, 6),), {"size": [2, 3], "stride": [6, 2], "storage_offset": 1}),
                                  (((4, 6),), {"size": [3, 3], "stride": [1, 4]}),
                                  (((5,),), {"size": [], "stride": [], "storage_offset": 4}),
                                  (((5,),), {"size": [0, 2], "stride": [1, 1]})])
    for op in ("cat", "concat", "concatenate"):
        s[op] = dict(cases=[(([(2, 3), (4, 3)],), {}), (([NC(2, 3), (2, 1)],), {"dim": 1}),
                            (([(2, 3), (0,)],), {"dim": -1}), (([(1, 2)],), {}),
                            (([(0, 3), (2, 3)],), {"dim": 0})])
    s["stack"] = dict(cases=[(([(2, 3), (2, 3)],), {}), (([NC(2, 3), (2, 3)],), {"dim": -1}),
                             (([(), ()],), {}), (([(0, 2)],), {"dim": 1})])
    s["split.Tensor"] = dict(cases=[(((5, 4),), {"split_size": 2}),
                                    ((NC(3, 4),), {"split_size": 3, "dim": 1}),
                                    (((0, 4),), {"split_size": 2, "dim": 1})])
    for op in ("split.sizes", "split_with_sizes"):
        key = "split_size" if op == "split.sizes" else "split_sizes"
        s[op] = dict(cases=[(((5, 4),), {key: [2, 3]}), ((NC(3, 4),), {key: [1, 0, 3], "dim": 1}),
                            (((0, 4),), {key: [4], "dim": 1})])
    s["chunk"] = dict(cases=[(((5, 4),), {"chunks": 2}), ((NC(3, 4),), {"chunks": 3, "dim": 1}),
                             (((0, 4),), {"chunks": 2, "dim": 1})])
    s["unbind.int"] = dict(cases=[(((3, 4),), {}), ((NC(3, 4),), {"dim": 1}), (((0, 4),), {"dim": 1})])
    for op in ("tril", "triu"):
        s[op] = dict(cases=[(((3, 4),), {}), ((NC(4, 3),), {"diagonal": 1}),
                            (((2, 3, 3),), {"diagonal": -1}), (((0, 3),), {})])
    s["repeat"] = dict(cases=[(((2, 3),), {"repeats": [2, 1]}), ((NC(2, 3),), {"repeats": [1, 2, 3]}),
                              (((),), {"repeats": [2]}), (((0, 2),), {"repeats": [2, 2]})])
    s["flip"] = dict(cases=[(((2, 3, 4),), {"dims": [0, 2]}), ((NC(3, 4),), {"dims": [-1]}),
                            (((),), {"dims": []}), (((0, 2),), {"dims": [1]})])
    s["roll"] = dict(cases=[(((2, 3),), {"shifts": [1]}),
                            ((NC(3, 4),), {"shifts": [1, -2], "dims": [0, 1]}),
                            (((4,),), {"shifts": [5], "dims": [0]}),
                            (((0, 2),), {"shifts": [1], "dims": [1]})])
    s["index.Tensor"] = dict(cases=[(((4, 3), [_idx((5,), 4)]), {}),
                                    ((NC(4, 3), [None, _idx((2, 2), 4, low=-4)]), {}),
                                    (((4, 3), [_mask((4, 3))]), {}),
                                    (((4, 3, 2), [_idx((2,), 4), _idx((3, 1), 3)]), {}),
                                    (((0, 3), [_idx((0,), 1)]), {})])
    s["index_put"] = dict(cases=[(((4, 3), [T((2,), dtype="int64", values=[2, 0])], (2, 3)), {}),
                                 ((NC(4, 3), [None, T((2,), dtype="int64", values=[1, -1])], (1,)), {}),
                                 (((4, 3), [_mask((4, 3))], ()), {}),
                                 (((4, 3), [_idx((5,), 4)], (3,)), {"accumulate": True})])
    # Complex <-> real views (docs/complex.md): view_as_real's input is complex whatever the
    # sample dtype; view_as_complex takes float32/float64 pairs.
    s["view_as_real"] = dict(cases=[((T((2, 3), dtype="complex64"),), {}), ((T((4,), dtype="complex128"),), {})])
    s["view_as_complex"] = dict(cases=[(((2, 3, 2),), {}), (((4, 2),), {})])
    s["index_select"] = dict(cases=[(((4, 3), _idx((5,), 3)), {"dim": 1}),
                                    ((NC(4, 3), _idx((2,), 4)), {"dim": 0}),
                                    (((), _idx((1,), 1)), {"dim": 0}),
                                    (((0, 3), _idx((0,), 1)), {"dim": 0})])
    s["gather"] = dict(cases=[(((4, 3), _idx((2, 3), 4)), {"dim": 0}),
                              ((NC(4, 3), _idx((4, 5), 3)), {"dim": 1}),
                              (((), _idx((), 1)), {"dim": 0}),
                              (((3, 2), _idx((0, 2), 3)), {"dim": 0})])
    _indexing_specs(s)
    _prims_specs(s)
    _nn_specs(s)
    _nn_kernel_specs(s)
    return s


def _nn_specs(s):
    """Specs of the nn composites: activations, dropout, losses, attention, RMS norm, padding."""
    s["leaky_relu"] = dict(kwargs=[{}, {"negative_slope": 0.2}])
    s["elu"] = dict(kwargs=[{}, {"alpha": 0.5, "scale": 2.0, "input_scale": 1.5}])
    s["softplus"] = dict(kwargs=[{}, {"beta": 2.0, "threshold": 3.0}])
    s["hardtanh"] = dict(kwargs=[{}, {"min_val": -2.0, "max_val": 0.5}])
    s["hardswish"] = dict(args={"self": dict(low=-5, high=5)})
    s["dropout"] = dict(cases=[(((2, 3),), {"p": 0.5, "train": True}), ((NC(3, 4),), {"p": 0.0, "train": True}),
                               (((),), {"p": 0.3, "train": False}), (((0, 3),), {"p": 0.5, "train": True})])
    for op in ("mse_loss", "l1_loss", "smooth_l1_loss"):
        s[op] = dict(kwargs=[{}, {"reduction": 0}, {"reduction": 2}, {"beta": 0.5}, {"beta": 0.0}])
    s["nll_loss"] = dict(cases=[
        (((3, 5), _idx((3,), 5), (5,)), {}), ((NC(4, 3), _idx((4,), 3)), {"reduction": 0}),
        (((5,), _idx((), 5)), {}), (((4, 3), T((4,), dtype="int64", values=[0, -100, 2, -100]), (3,)), {}),
        (((4, 3), T((4,), dtype="int64", values=[1, -1, 2, 0])), {"ignore_index": -1, "reduction": 0}),
        (((0, 3), _idx((0,), 3)), {"reduction": 2})])
    s["cross_entropy_loss"] = dict(cases=s["nll_loss"]["cases"] + [
        (((2, 4, 3), _idx((2, 3), 4), None), {"reduction": 2}),
        (((4, 3), _idx((4,), 3), (3,)), {"label_smoothing": 0.2}),
        (((4, 3), T((4,), dtype="int64", values=[1, -1, 2, 0])), {"ignore_index": -1, "label_smoothing": 0.1}),
        (((2, 3), T((2, 3), low=0, high=1)), {}), (((2, 3, 2), T((2, 3, 2), low=0, high=1), (3,)),
                                                  {"reduction": 0, "label_smoothing": 0.3})])
    prob = dict(low=0, high=1)
    s["binary_cross_entropy"] = dict(
        cases=[((2, 3), (2, 3)), ((NC(3, 4), (3, 4), (4,)), {"reduction": 0}), (((), ()), {"reduction": 2}),
               ((0, 3), (0, 3))], args={"self": prob, "target": dict(low=0, high=1)})
    s["binary_cross_entropy_with_logits"] = dict(
        cases=[((2, 3), (2, 3)), ((NC(3, 4), (3, 4), (4,), (4,)), {"reduction": 0}),
               (((2, 3), (2, 3), None, (3,)), {"reduction": 2}), ((0, 3), (0, 3))],
        args={"self": dict(low=-30, high=30), "target": dict(low=0, high=1), "pos_weight": dict(low=0.5, high=3),
              "weight": dict(low=0, high=2)})
    # Every sample uses each input's full length and the longest target for every sample, so that
    # PyTorch's log_alpha (left uninitialized past a sample's lengths) is defined everywhere.
    ctc = [
        (((5, 2, 4), T((2, 2), dtype="int64", values=[1, 2, 3, 3])), {"input_lengths": [5, 5], "target_lengths": [2, 2]}),
        (((NC(6, 3, 5)), T((3, 3), dtype="int64", values=[1, 1, 4, 2, 3, 2, 4, 4, 4])),
         {"input_lengths": [6, 6, 6], "target_lengths": [3, 3, 3], "blank": 0}),
        (((4, 2, 4), T((4,), dtype="int64", values=[0, 1, 1, 2])),
         {"input_lengths": [4, 4], "target_lengths": [2, 2], "blank": 3}),
        (((3, 1, 3), T((1, 1), dtype="int64", values=[1])), {"input_lengths": [3], "target_lengths": [1]})]
    s["_ctc_loss"] = dict(cases=ctc, args={"log_probs": dict(low=-3, high=0)})

    def lengths_as_tensors(kw):
        return tuple(T((len(kw[k]),), dtype="int64", values=kw[k]) for k in ("input_lengths", "target_lengths"))

    def without_lengths(kw):
        return {k: v for k, v in kw.items() if k not in ("input_lengths", "target_lengths")}

    s["_ctc_loss.Tensor"] = dict(cases=[(shapes + lengths_as_tensors(kw), without_lengths(kw)) for shapes, kw in ctc],
                                 args=s["_ctc_loss"]["args"])

    # The backward of any grad (N,), neg_log_likelihood (N,) and log_alpha (N, T, 2 * S + 1).
    def backward_extra(shapes, kw):
        steps, n, _ = _t(shapes[0]).shape
        return ((n,),), ((n,), (n, steps, 2 * max(kw["target_lengths"]) + 1))

    backward_args = {"log_probs": dict(low=-3, high=0), "log_alpha": dict(low=-6, high=0),
                     "neg_log_likelihood": dict(low=1, high=6)}
    s["_ctc_loss_backward"] = dict(args=backward_args, cases=[
        (backward_extra(shapes, kw)[0] + shapes + backward_extra(shapes, kw)[1], dict({"blank": 0}, **kw))
        for shapes, kw in ctc])
    s["_ctc_loss_backward.Tensor"] = dict(args=backward_args, cases=[
        (backward_extra(shapes, kw)[0] + shapes + lengths_as_tensors(kw) + backward_extra(shapes, kw)[1],
         dict({"blank": 0}, **without_lengths(kw))) for shapes, kw in ctc])
    s["scaled_dot_product_attention"] = dict(cases=[
        ((2, 3, 4), (2, 5, 4), (2, 5, 4)), (((2, 3, 4), (2, 5, 4), (2, 5, 4), _mask((3, 5))), {"scale": 0.3}),
        (((2, 2, 3, 4), (2, 2, 5, 4), NC(2, 2, 5, 4), (2, 1, 3, 5)), {}),
        (((2, 4, 4), (2, 4, 4), (2, 4, 4)), {"is_causal": True}),
        (((2, 4, 3, 8), (2, 2, 5, 8), (2, 2, 5, 8)), {"enable_gqa": True}),
        (((1, 0, 4), (1, 3, 4), (1, 3, 4)), {})])
    s["rms_norm"] = dict(cases=[(((2, 3, 4), (4,)), {"normalized_shape": [4]}),
                                ((NC(3, 4),), {"normalized_shape": [4]}),
                                (((2, 3, 4), (3, 4)), {"normalized_shape": [3, 4], "eps": 1e-3}),
                                (((0, 4), None), {"normalized_shape": [4]})])
    s["constant_pad_nd"] = dict(cases=[(((2, 3),), {"pad": [1, 2]}), ((NC(3, 4),), {"pad": [-1, 1, 2, 0], "value": 2}),
                                       (((),), {"pad": []}), (((0, 3),), {"pad": [1, 1, 1, 0]}),
                                       (((2, 3, 4),), {"pad": [0, 0, -1, -1]})])


def _nn_kernel_specs(s):
    """Convolution, pooling, batch/group norm and embedding (ir/ops/nn.yaml's kernels); the
    backward ops get gradients of the forward's output shape."""
    conv2 = dict(stride=[1, 1], padding=[1, 0], dilation=[1, 1], transposed=False, output_padding=[0, 0], groups=1)
    conv1 = dict(stride=[2], padding=[1], dilation=[2], transposed=False, output_padding=[0], groups=2)
    empty = dict(conv2, padding=[0, 0])
    s["convolution"] = dict(cases=[(((2, 3, 5, 5), (4, 3, 2, 2), (4,)), conv2),
                                   ((NC(2, 4, 6), (2, 2, 3), None), conv1),
                                   (((0, 2, 4, 4), (3, 2, 1, 1), (3,)), empty)])
    s["convolution_backward"] = dict(cases=[
        (((2, 4, 6, 4), (2, 3, 5, 5), (4, 3, 2, 2)), dict(conv2, bias_sizes=[4], output_mask=[1, 1, 1])),
        ((NC(2, 2, 2), (2, 4, 6), (2, 2, 3)), dict(conv1, bias_sizes=None, output_mask=[1, 1, 0])),
        (((0, 3, 4, 4), (0, 2, 4, 4), (3, 2, 1, 1)), dict(empty, bias_sizes=[3], output_mask=[0, 1, 1]))])
    pool = dict(kernel_size=[2, 2], stride=[2, 1], padding=[1, 0], dilation=[1, 1], ceil_mode=True)
    s["max_pool2d_with_indices"] = dict(cases=[(((2, 3, 5, 4),), pool),
                                               ((NC(2, 6, 5),), dict(kernel_size=[3], dilation=[2])),
                                               (((0, 2, 4, 4),), dict(kernel_size=[2, 2]))])
    s["max_pool2d_with_indices_backward"] = dict(cases=[
        (((2, 3, 3, 3), (2, 3, 5, 4), _idx((2, 3, 3, 3), 20)), pool),
        ((NC(2, 2, 1), (2, 6, 5), _idx((2, 2, 1), 30)), dict(pool, kernel_size=[3, 3], stride=[3, 3], padding=[0, 0],
                                                             ceil_mode=False))])
    avg = dict(kernel_size=[3, 2], stride=[2, 1], padding=[1, 0], ceil_mode=True, count_include_pad=False)
    s["avg_pool2d"] = dict(cases=[(((2, 3, 5, 4),), avg),
                                  ((NC(2, 6, 5),), dict(kernel_size=[2], divisor_override=3)),
                                  (((0, 2, 4, 4),), dict(kernel_size=[2, 2]))])
    s["avg_pool2d_backward"] = dict(cases=[
        (((2, 3, 3, 3), (2, 3, 5, 4)), dict(avg, divisor_override=None)),
        ((NC(2, 3, 2), (2, 6, 5)), dict(kernel_size=[2, 2], stride=[2, 2], padding=[0, 0], ceil_mode=False,
                                        count_include_pad=True, divisor_override=3))])
    s["_adaptive_avg_pool2d"] = dict(cases=[(((2, 3, 5, 7),), dict(output_size=[2, 3])),
                                            ((NC(2, 4, 6),), dict(output_size=[1, 1])),
                                            (((0, 2, 4, 4),), dict(output_size=[3, 3]))])
    s["_adaptive_avg_pool2d_backward"] = dict(cases=[(((2, 3, 2, 3), (2, 3, 5, 7)), {}),
                                                     ((NC(2, 3, 3), (2, 4, 6)), {})])
    s["native_batch_norm"] = dict(cases=[
        (((4, 3, 2, 2), (3,), (3,), (3,), T((3,), low=0.5, high=2)), dict(training=True, momentum=0.1, eps=1e-5)),
        ((NC(5, 3), None, None, (3,), T((3,), low=0.5, high=2)), dict(training=False, momentum=0.1, eps=1e-3)),
        (((3, 2, 4), (2,), None, None, None), dict(training=True, momentum=0.5, eps=1e-5))])
    s["native_batch_norm_backward"] = dict(cases=[
        (((4, 3, 2, 2), (4, 3, 2, 2), (3,), None, None, (3,), T((3,), low=0.5, high=2)),
         dict(train=True, eps=1e-5, output_mask=[1, 1, 1])),
        ((NC(5, 3), (5, 3), None, (3,), T((3,), low=0.5, high=2), None, None),
         dict(train=False, eps=1e-5, output_mask=[1, 0, 1]))])
    # (contiguous inputs: PyTorch's 16-bit group norm misreads non-contiguous ones)
    s["native_group_norm"] = dict(cases=[
        (((2, 4, 3, 2), (4,), (4,)), dict(N=2, C=4, HxW=6, group=2, eps=1e-5)),
        (((3, 6), None, None), dict(N=3, C=6, HxW=1, group=3, eps=1e-3))])
    s["native_group_norm_backward"] = dict(cases=[
        (((2, 4, 3), (2, 4, 3), (2, 2), T((2, 2), low=0.5, high=2), (4,)),
         dict(N=2, C=4, HxW=3, group=2, output_mask=[1, 1, 1])),
        (((3, 6), (3, 6), (3, 3), T((3, 3), low=0.5, high=2), None),
         dict(N=3, C=6, HxW=1, group=3, output_mask=[1, 0, 0]))])
    s["embedding"] = dict(cases=[(((5, 3), _idx((2, 4), 5)), {}),
                                 ((NC(6, 2), _idx((3,), 6)), dict(padding_idx=1)),
                                 (((4, 2), _idx((0,), 4)), {})])
    s["embedding_dense_backward"] = dict(cases=[
        (((2, 4, 3), _idx((2, 4), 5)), dict(num_weights=5, padding_idx=-1, scale_grad_by_freq=False)),
        ((NC(3, 2), _idx((3,), 6)), dict(num_weights=6, padding_idx=1, scale_grad_by_freq=True))])


def _ints(values):
    return T((), dtype="int64", values=values)


def _indexing_specs(s):
    """Specs of the scatter, index_*, masked, sorting and counting ops. Sorting samples hold
    distinct values along the sorted dim (PyTorch leaves the order of ties open); the first
    three, which every dtype runs, have rows of two (distinct even as bool)."""
    i24 = _ints([[2, 0, 1, 2], [0, 0, 2, 1]])
    scatter = [(((3, 4), i24, (2, 4)), {"dim": 0}),
               ((NC(3, 4), _ints([[3, 1], [0, 0], [2, 2]]), (3, 5)), {"dim": 1}),
               (((), _ints(0), ()), {"dim": 0}),
               (((3, 4), _idx((0, 4), 3), (2, 4)), {"dim": 0})]
    s["scatter.src"] = dict(cases=scatter)
    s["scatter_add"] = dict(cases=scatter)
    s["scatter.value"] = dict(cases=[(c[0][:2], c[1]) for c in scatter])
    s["scatter.reduce"] = dict(cases=[(c[0], dict(c[1], reduce=r)) for c in scatter
                                      for r in ("add", "multiply")])
    s["scatter.value_reduce"] = dict(cases=[(c[0][:2], dict(c[1], reduce=r)) for c in scatter
                                            for r in ("add", "multiply")])
    s["scatter_reduce.two"] = dict(cases=[(c[0], dict(c[1], reduce=r, include_self=i % 2 == 0))
                                          for i, (c, r) in enumerate(
                                              (c, r) for r in ("sum", "prod", "mean", "amax", "amin")
                                              for c in scatter[:2])])
    s["scatter_reduce_backward"] = dict(cases=[
        (((3, 4), (3, 4), i24, (2, 4), (3, 4)), {"dim": 0, "reduce": r, "include_self": inc})
        for r in ("sum", "mean", "amax", "amin", "prod") for inc in (True, False)],
        args={"self": dict(low=1, high=3), "src": dict(low=1, high=3)})
    index1 = [(((4, 3), _ints([2, 0, 2]), (3, 3)), {"dim": 0}),
              ((NC(3, 4), _ints([3, 1]), NC(3, 2)), {"dim": 1}),
              (((), _ints(0), ()), {"dim": 0}),
              (((3, 4), _idx((0,), 3), (0, 4)), {"dim": 0})]
    s["index_add"] = dict(cases=index1[:2] + [(index1[0][0], {"dim": 0, "alpha": 2})] + index1[2:])
    s["index_copy"] = dict(cases=[(((4, 3), _ints([2, 0, 3]), (3, 3)), {"dim": 0})] + index1[1:])
    s["index_fill.int_Scalar"] = dict(cases=[(((4, 3), _ints([2, 0, -1])), {"dim": 0}),
                                             ((NC(3, 4), _ints(1)), {"dim": 1}),
                                             (((), _ints([0])), {"dim": 0})])
    s["index_fill.int_Tensor"] = dict(cases=[(c[0] + ((),), c[1])
                                             for c in s["index_fill.int_Scalar"]["cases"]])
    masks = [((2, 3), _mask((2, 3))), (NC(2, 3), _mask((3,))), ((), _mask(())), ((0, 3), _mask((3,))),
             ((3,), _mask((2, 3)))]
    s["masked_select"] = dict(cases=masks)
    s["masked_scatter"] = dict(cases=[m + ((8,),) for m in masks[:4]] + [((3,), _mask((2, 3)), (2, 4))])
    s["masked_scatter_"] = dict(cases=[m + ((8,),) for m in masks[:4]])
    s["masked_select_backward"] = dict(cases=[((5,), (2, 3), T((2, 3), values=[[1, 0, 1], [1, 1, 1]],
                                                                dtype="bool")),
                                              ((4,), NC(2, 2), T((2,), values=[1, 1], dtype="bool"))])
    s["masked_scatter_backward"] = dict(cases=[(((2, 3), _mask((2, 3))), {"sizes": [7]}),
                                               ((NC(2, 3), _mask((3,))), {"sizes": [2, 3]})])
    flat = [(((3, 4), _ints([[0, -1], [11, 5]])), {}), ((NC(4, 3), _ints([3])), {}),
            (((), _ints([0, -1])), {}), (((2, 3), _idx((0,), 1)), {})]
    s["take"] = dict(cases=flat)
    s["put"] = dict(cases=[(c[0] + (_t(c[0][1]).shape if c[0][1].values is None
                                     else np.array(c[0][1].values).shape,), c[1]) for c in flat]
                    + [(((3, 4), _ints([1, 1, -11]), (3,)), {"accumulate": True})])
    s["put_"] = dict(cases=s["put"]["cases"][:4])
    s["nonzero"] = dict(args={"self": dict(low=-1, high=1)})
    for op in ("nonzero_numpy", "argwhere", "where"):
        s[op] = s["nonzero"]
    s["bincount"] = dict(cases=[((T((6,), values=[1, 4, 1, 0, 4, 4], dtype="int64"), None), {}),
                                ((T((5,), values=[0, 2, 2, 3, 1], dtype="int64"), (5,)), {}),
                                ((T((3,), values=[1, 0, 1], dtype="int64"), None), {"minlength": 4}),
                                ((T((0,), dtype="int64"), None), {"minlength": 2})])
    sorted_seq = T((5,), values=[-3, -1, 0, 2, 3])
    s["searchsorted.Tensor"] = dict(cases=[((sorted_seq, (2, 3)), {}),
                                           ((sorted_seq, NC(4,)), {"right": True}),
                                           ((T((2, 3), values=[[-2, 0, 1], [1, 2, 3]]), (2, 4)),
                                            {"side": "right", "out_int32": True}),
                                           ((sorted_seq, ()), {})])
    s["searchsorted.Scalar"] = dict(cases=[((sorted_seq,), {"self": 1}),
                                           ((sorted_seq,), {"self": 2, "right": True})])
    s["_unique2"] = dict(cases=[(((2, 3),), {}), ((NC(3, 4),), {"return_inverse": True}),
                                (((4,),), {"return_counts": True, "return_inverse": True}),
                                (((),), {}), (((0, 2),), {"return_counts": True})],
                         args={"self": dict(low=-2, high=2)})
    s["repeat_interleave.Tensor"] = dict(cases=[((T((3,), values=[1, 0, 2], dtype="int64"),), {}),
                                                ((T((), values=3, dtype="int64"),), {})])
    s["repeat_interleave.self_Tensor"] = dict(cases=[
        (((2, 3), T((3,), values=[1, 0, 2], dtype="int64")), {"dim": 1}),
        ((NC(2, 3), T((), values=2, dtype="int64")), {}),
        (((0, 3), T((1,), values=[2], dtype="int64")), {"dim": 0})])
    s["repeat_interleave.self_int"] = dict(cases=[(((2, 3),), {"repeats": 2}),
                                                  ((NC(2, 3),), {"repeats": 3, "dim": 0}),
                                                  (((),), {"repeats": 2})])
    # A gradient is floating: every sample is float64, whatever the sample dtype.
    f64 = dict(dtype="float64")
    s["cumprod_backward"] = dict(cases=[
        ((T((2, 4), **f64), T((2, 4), values=[[1, 0, 2, 3], [2, 0, 0, 1]], **f64),
          T((2, 4), values=[[1, 0, 0, 0], [2, 0, 0, 0]], **f64)), {"dim": 1}),
        ((T((3, 4), nc=True, **f64), T((3, 4), nonzero=True, **f64), T((3, 4), **f64)), {"dim": 0})])
    s["cummaxmin_backward"] = dict(cases=[
        ((T((2, 4), **f64), T((2, 4), **f64), T((2, 4), values=[[0, 1, 1, 3], [0, 0, 2, 2]], dtype="int64")),
         {"dim": 1}),
        ((T((3, 2), nc=True, **f64), T((3, 2), **f64), T((3, 2), values=[[0, 0], [1, 0], [1, 2]], dtype="int64")),
         {"dim": 0}),
        ((T((0, 3), **f64), T((0, 3), **f64), T((0, 3), dtype="int64")), {"dim": 1})])
    s["logcumsumexp_backward"] = dict(cases=[
        ((T((2, 4), **f64), T((2, 4), **f64), T((2, 4), **f64)), {"dim": 1}),
        ((T((3, 2), nc=True, **f64), T((3, 2), **f64), T((3, 2), low=2, high=4, **f64)), {"dim": 0}),
        ((T((), **f64), T((), **f64), T((), **f64)), {"dim": 0})])
    # Sorting: rows of distinct values (two per row first, so bool has no ties either).
    pairs = T((2, 2), values=[[1, 0], [0, 1]])
    distinct = T((2, 4), values=[[3, 1, 7, 0], [2, 6, 5, 4]])
    distinct_t = T((4, 2), values=[[3, 1], [7, 0], [2, 6], [5, 4]])
    rows = [((pairs,), {}), ((pairs,), {"dim": 0, "descending": True}),
            ((T((2,), values=[0, 1]),), {"descending": True}),
            ((distinct,), {}), ((distinct_t,), {"dim": 0}), ((distinct,), {"descending": True}),
            (((),), {}), (((0, 3),), {})]
    s["sort"] = dict(cases=rows)
    s["argsort"] = dict(cases=rows)
    s["sort.stable"] = dict(cases=[(c[0], dict(c[1], stable=i % 2 == 0)) for i, c in enumerate(rows)],
                            args={"self": dict(low=-1, high=1)})
    s["argsort.stable"] = dict(cases=[(c[0], dict(c[1], stable=True)) for c in rows])
    s["msort"] = dict(cases=[((pairs,), {}), ((distinct_t,), {}), (((),), {})])
    s["topk"] = dict(cases=[((pairs,), {"k": 1}), ((pairs,), {"k": 1, "dim": 0, "largest": False}),
                            ((pairs,), {"k": 2}), ((distinct,), {"k": 3}),
                            ((distinct_t,), {"k": 2, "dim": 0, "largest": False}),
                            (((),), {"k": 1}), (((0, 3),), {"k": 0, "dim": 0})])
    s["kthvalue"] = dict(cases=[((pairs,), {"k": 1}), ((pairs,), {"k": 2, "dim": 0, "keepdim": True}),
                                ((distinct,), {"k": 3}), ((distinct_t,), {"k": 2, "dim": 0}),
                                (((),), {"k": 1})])
    s["median.dim"] = dict(cases=[((pairs,), {"dim": 1}), ((pairs,), {"dim": 0, "keepdim": True}),
                                  ((distinct,), {"dim": 1}), ((distinct_t,), {"dim": 0}),
                                  (((),), {"dim": 0})])
    s["median"] = dict(cases=[((pairs,), {}), ((T((3,), values=[2, 0, 1]),), {}),
                              ((distinct,), {}), ((distinct_t,), {})])
    s["mode"] = dict(cases=[((T((2, 3), values=[[1, 1, 0], [0, 1, 0]]),), {}),
                            ((T((3, 2), values=[[1, 1], [1, 0], [0, 0]]),), {"dim": 0, "keepdim": True}),
                            (((),), {})])
    s["value_selecting_reduction_backward"] = dict(cases=[
        (((2,), T((2,), values=[1, 0], dtype="int64")), {"dim": 1, "sizes": [2, 3], "keepdim": False}),
        (((2, 1), T((2, 1), values=[[2], [0]], dtype="int64")),
         {"dim": 1, "sizes": [2, 3], "keepdim": True})])
    s["multinomial"] = dict(cases=[(((3,),), {"num_samples": 2}),
                                   (((2, 4),), {"num_samples": 6, "replacement": True}),
                                   ((NC(2, 5),), {"num_samples": 5})],
                            args={"self": dict(low=0.5, high=2)})
    s["einsum"] = dict(cases=[(([(2, 3), (3, 4)],), {"equation": "ij,jk->ik"}),
                              (([NC(3, 3)],), {"equation": "ii->i"}),
                              (([(2, 2, 3), (3,)],), {"equation": "...j,j"}),
                              (([(0, 3), (3,)],), {"equation": "ij,j->i"})])


def _prims_specs(s):
    """Specs of the Prims IR ops (keys "prims.<name>"); elementwise prims take their value
    ranges from the aten op of the same name."""
    s["prims.where"] = dict(args={"pred": dict(dtype="bool")})
    s["prims.pow"] = dict(args={"self": dict(low=0.1, high=3), "other": dict(low=0, high=3)})
    s["prims.convert_element_type"] = dict(kwargs=[{"dtype": kiln.float64}, {"dtype": kiln.int32},
                                                   {"dtype": kiln.bool}])
    s["prims.device_put"] = dict(kwargs=[{"device": kiln.device("cpu")}])
    s["prims.broadcast_in_dim"] = dict(cases=[
        (((3,),), {"shape": [2, 3], "broadcast_dimensions": [1]}),
        (((2, 1),), {"shape": [2, 4], "broadcast_dimensions": [0, 1]}),
        (((),), {"shape": [2], "broadcast_dimensions": []}),
        ((NC(2, 3),), {"shape": [4, 2, 3], "broadcast_dimensions": [1, 2]}),
        (((0,),), {"shape": [2, 0], "broadcast_dimensions": [1]})])
    s["prims.squeeze"] = dict(cases=[(((2, 1, 3, 1),), {"dimensions": [1, 3]}),
                                     ((NC(1, 4),), {"dimensions": [0]}), (((),), {"dimensions": []}),
                                     (((0, 1),), {"dimensions": [1]})])
    s["prims.transpose"] = dict(cases=[(((2, 3, 4),), {"permutation": [2, 0, 1]}),
                                       ((NC(3, 4),), {"permutation": [1, 0]}),
                                       (((),), {"permutation": []}), (((0, 3),), {"permutation": [1, 0]})])
    s["prims.slice"] = dict(cases=[(((4, 5),), {"start_indices": [1, 0], "limit_indices": [3, 5]}),
                                   ((NC(6, 5),), {"start_indices": [0, 1], "limit_indices": [6, 4],
                                                  "strides": [2, 1]}),
                                   (((),), {"start_indices": [], "limit_indices": []}),
                                   (((0, 3),), {"start_indices": [0, 1], "limit_indices": [0, 3]})])
    s["prims.as_strided"] = dict(cases=[
        (((4, 6),), {"size": [2, 3], "stride": [6, 2], "storage_offset": 1}),
        (((5,),), {"size": [], "stride": [], "storage_offset": 4}),
        (((5,),), {"size": [0, 2], "stride": [1, 1], "storage_offset": 0})])
    s["prims.reshape"] = dict(cases=[(((2, 3, 4),), {"shape": [6, 4]}), (((),), {"shape": [1, 1]}),
                                     ((NC(3, 4),), {"shape": [12]}), (((0, 3),), {"shape": [3, 0]})])
    s["prims.rev"] = dict(cases=[(((2, 3, 4),), {"dims": [0, 2]}), ((NC(3, 4),), {"dims": [1]}),
                                 (((),), {"dims": []}), (((0, 2),), {"dims": [1]})])
    s["prims.cat"] = dict(cases=[(([(2, 3), (4, 3)],), {"dim": 0}), (([NC(2, 3), (2, 1)],), {"dim": 1}),
                                 (([(0, 3), (2, 3)],), {"dim": 0})])
    reduce_cases = [(((2, 3, 4),), {"dims": [1]}), ((NC(3, 4),), {"dims": [0, 1]}),
                    (((),), {"dims": []}), (((2, 0, 3),), {"dims": [0]})]
    for op in ("sum", "prod", "amax", "amin"):
        s["prims." + op] = dict(cases=reduce_cases, args={"inp": dict(low=-2, high=2)})
    s["prims.var"] = dict(cases=[(((2, 3, 4),), {"dims": [1], "correction": 1.0}),
                                 ((NC(3, 4),), {"dims": [0, 1], "correction": 0}),
                                 (((2, 3),), {"dims": [1], "correction": 2.0})])
    for op in ("argmax", "argmin"):
        s["prims." + op] = dict(cases=[(((2, 3, 4),), {"dim": 1}), ((NC(3, 4),), {"dim": None}),
                                       (((),), {"dim": None})])
    s["prims.mm"] = dict(cases=_MM)
    s["prims.bmm"] = dict(cases=_BMM)
    dev = kiln.device("cpu")
    s["prims.iota"] = dict(cases=[((), {"length": 5, "start": 2, "step": 3, "device": dev}),
                                  ((), {"length": 0, "start": 0, "step": 1, "device": dev})],
                           dtype_kw=True)
    s["prims.full"] = dict(cases=[((), {"shape": [2, 3], "device": dev}),
                                  ((), {"shape": [], "device": dev})], dtype_kw=True)
    s["prims.uniform"] = dict(cases=[((), {"shape": [2, 3], "low": -1.0, "high": 2.0, "device": dev}),
                                     ((), {"shape": [0], "low": 0.0, "high": 1.0, "device": dev})],
                              dtype_kw=True)
    s["prims.normal"] = dict(cases=[((), {"shape": [2, 3], "mean": 1.0, "std": 0.5, "device": dev}),
                                    ((), {"shape": [], "mean": 0.0, "std": 1.0, "device": dev})],
                             dtype_kw=True)
    s["prims.empty_strided"] = dict(cases=[((), {"shape": [2, 3], "strides": [1, 2], "device": dev}),
                                           ((), {"shape": [0], "strides": [1], "device": dev})],
                                    dtype_kw=True)


_SPECS = _spec_table()


def _spec(target, schema):
    name, ov = schema["name"].split("::")[-1], schema["overload"]
    ns = target.split(".")[0]
    if ns != "aten":
        keys = [f"{ns}.{name}.{ov}" if ov else f"{ns}.{name}", f"{ns}.{name}"]
        for k in keys:
            if k in _SPECS:
                return _SPECS[k]
        aten = _SPECS.get(name, {})
        return {k: v for k, v in aten.items() if k in ("args", "scalar")}
    keys = [f"{name}.{ov}" if ov else name, name]
    if name.endswith("_") and schema["args"] and schema["args"][0]["mutated"]:
        keys += [f"{name[:-1]}.{ov}" if ov else name[:-1], name[:-1]]
    for k in keys:
        if k in _SPECS:
            return _SPECS[k]
    return {}


def _scalar(dt, arg, spec):
    v = spec.get("scalar", {}).get(arg)
    if v is not None:
        return v(dt) if callable(v) else v
    if dtype_name(dt) == "bool":
        return True
    return 3 if _is_int(dt) else 1.5


def _broadcast(shapes):
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        return None


class NoSamples(Exception):
    """An op the generator cannot make samples for; the message says why."""


def _build(schema, dt, spec, maker, shapes, kw):
    tensor_args = [a for a in schema["args"] if a["type"] in ("Tensor", "Tensor[]", "Tensor?[]")]
    given = dict(zip((a["name"] for a in tensor_args), shapes))
    args, kwargs, positional = [], {}, True
    arg_specs = spec.get("args", {})
    for a in schema["args"]:
        n, ty = a["name"], a["type"]
        if n in given:
            v = _value(given[n], n, maker, arg_specs)
        elif n in kw:
            v = kw[n]
        elif ty == "Scalar" and not a["has_default"] and not a["optional"]:
            v = _scalar(dt, n, spec)
        elif n == "dtype" and ty == "ScalarType" and spec.get("dtype_kw", not tensor_args):
            v = dt
        elif a["has_default"] or a["optional"] or (ty == "Tensor" and a["optional"]):
            positional = False
            continue
        else:
            raise NoSamples(f"no value for required argument {ty} {n}")
        if a["kwarg_only"] or not positional:
            kwargs[n] = v
        else:
            args.append(v)
    return tuple(args), kwargs


def _value(shape, name, maker, arg_specs):
    if shape is None:
        return None
    if isinstance(shape, list):
        return [_value(s, name, maker, {}) for s in shape]
    t = _t(shape)
    extra = arg_specs.get(name, {})
    if extra:
        t = T(t.shape, nc=t.nc, dtype=t.dtype or extra.get("dtype"),
              low=t.low if t.low is not None else extra.get("low"),
              high=t.high if t.high is not None else extra.get("high"),
              nonzero=t.nonzero or extra.get("nonzero", False), values=t.values,
              special=t.special or extra.get("special", False))
    return maker.tensor(t)


def _shape_of(x):
    x = _t(x)
    return x.shape if x is not None else ()


def _case_list(target, schema, spec):
    if "cases" in spec:
        return [c if len(c) == 2 and isinstance(c[1], dict) else (c, {}) for c in spec["cases"]]
    n = sum(1 for a in schema["args"] if a["type"] == "Tensor" and not a["optional"])
    names = {a["name"] for a in schema["args"]}
    kws = []
    for kw in spec.get("kwargs", [{}]):
        kw = {k: v for k, v in kw.items() if k in names}
        if kw not in kws:
            kws.append(kw)
    base = (_DEFAULT_CASES if target.startswith("aten.") else _PRIMS_CASES).get(n)
    if base is None:
        raise NoSamples(f"{n} tensor arguments and no cases in the spec")
    return [(shapes, kws[i % len(kws)]) for i, shapes in enumerate(base)] + \
           [(base[0], kw) for kw in kws[len(base):]]


def sample_inputs(target, dtype):
    """Yields (args, kwargs) of fresh kiln values for op overload `target` and tensors of `dtype`."""
    schema = kiln._C._fx.op_schema(target)
    dt = _as_dtype(dtype)
    spec = _spec(target, schema)
    cases = _case_list(target, schema, spec)
    maker = _Maker(dt, zlib.crc32(target.encode()))
    pointwise_inplace = _is_pointwise_inplace(target, schema)
    for shapes, kw in cases:
        if pointwise_inplace:
            tensors = [_shape_of(s) for s in shapes if s is not None and not isinstance(s, list)]
            if _broadcast(tensors) != tensors[0]:
                continue
        yield _build(schema, dt, spec, maker, shapes, kw)


@functools.lru_cache(maxsize=None)
def _table_by_schema():
    return {e["schema"]: e for e in kiln._C._op_table()}


def _tags(target):
    return tuple(_table_by_schema()[kiln._C._fx.op_schema(target)["schema"]]["tags"])


def op_tags(target):
    """The op table's tags of `target` ("aten.add.Tensor")."""
    return _tags(target)


def _is_pointwise_inplace(target, schema):
    return bool(schema["args"]) and schema["args"][0]["mutated"] and "pointwise" in _tags(target)


def op_targets():
    """Every op overload of the table, as graph targets."""
    return list(kiln._C._fx.op_targets())


def run_eager(target, args, kwargs):
    return kiln._C._fx.op_callable(target)(*args, **kwargs)


@functools.lru_cache(maxsize=None)
def supported_dtypes(target):
    """The dtypes (names) for which at least one sample of `target` runs eagerly in kiln."""
    out = []
    for d in ALL_DTYPES:
        try:
            samples = sample_inputs(target, d)
            for args, kwargs in samples:
                try:
                    run_eager(target, args, kwargs)
                except Exception:
                    continue
                out.append(d)
                break
        except NoSamples:
            return ()
    return tuple(out)


def uncovered_ops():
    """{target: why} for the table's ops that get no samples."""
    out = {}
    for t in op_targets():
        try:
            if not any(True for _ in sample_inputs(t, "float32")):
                out[t] = "no sample survives the in-place shape filter"
        except NoSamples as e:
            out[t] = str(e)
    return out


def clone_value(v):
    """A fresh copy of a sample value keeping each tensor's sizes and strides."""
    if isinstance(v, kiln.Tensor):
        out = kiln.empty_strided(list(v.shape), list(v.stride()), dtype=v.dtype)
        return out.copy_(v) if v.numel() else out
    if isinstance(v, (list, tuple)):
        return type(v)(clone_value(x) for x in v)
    if isinstance(v, dict):
        return {k: clone_value(x) for k, x in v.items()}
    return v


def to_torch(v):
    """The sample value `v` as PyTorch values: same dtype, shape, strides and data."""
    import torch

    if isinstance(v, kiln.Tensor):
        name = dtype_name(v.dtype)
        a = v.float() if name == "bfloat16" else v
        data = torch.from_numpy(np.array(a.contiguous().numpy(), copy=True))
        data = data.to(getattr(torch, name))
        if v.is_contiguous() or data.numel() == 0 or 0 in v.stride():
            return data
        out = torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=data.dtype)
        return out.copy_(data)
    if isinstance(v, kiln.dtype):
        return getattr(torch, dtype_name(v))
    if isinstance(v, kiln.device):
        return torch.device(str(v))
    if isinstance(v, (list, tuple)):
        return type(v)(to_torch(x) for x in v)
    if isinstance(v, dict):
        return {k: to_torch(x) for k, x in v.items()}
    return v


def _torch_python(name):
    import torch
    return getattr(torch, name)


def _torch_prim(name):
    import torch

    def slice_(a, start_indices, limit_indices, strides=None):
        strides = strides or [1] * len(start_indices)
        return a[tuple(slice(b, e, s) for b, e, s in zip(start_indices, limit_indices, strides))]

    # PyTorch has no such prims: the aten op computes the same.
    # as_strided: PyTorch's prim fails on 0-d sizes; the aten op is the same function.
    missing = {"mm": torch.ops.aten.mm.default, "bmm": torch.ops.aten.bmm.default,
               "argmax": torch.ops.aten.argmax.default, "argmin": torch.ops.aten.argmin.default,
               "slice": slice_, "as_strided": torch.ops.aten.as_strided.default}
    if name in missing:
        return missing[name]
    op = getattr(torch.ops.prims, name).default
    if name in ("iota", "full", "empty_strided", "normal"):
        return lambda *a, **k: op(*a, requires_grad=False, **k)
    if name == "uniform":
        return lambda shape, **k: op(shape, stride=torch.empty(shape).stride(), **k)
    return op


def _with_bool_mask(op):
    def call(*args, **kwargs):
        if "output_mask" in kwargs:
            kwargs["output_mask"] = [bool(b) for b in kwargs["output_mask"]]
        else:
            args = args[:-1] + ([bool(b) for b in args[-1]],)
        return op(*args, **kwargs)
    return call


def _torch_adam_step(self, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, state_step, *, lr=1e-3,
                     beta1=0.9, beta2=0.999, weight_decay=0.0, eps=1e-8, maximize=False,
                     decoupled_weight_decay=False):
    """kiln's _fused_adam_ as torch.optim.Adam's single-tensor step computes it (its op order)."""
    import torch

    grad = -grad if maximize else grad
    state_step += 1
    if weight_decay != 0:
        if decoupled_weight_decay:
            self.mul_(1 - lr * weight_decay)
        else:
            grad = grad.add(self, alpha=weight_decay)
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    step = state_step.item()
    step_size = lr / (1 - beta1 ** step)
    bias_correction2_sqrt = (1 - beta2 ** step) ** 0.5
    second = exp_avg_sq
    if max_exp_avg_sq is not None:
        torch.maximum(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
        second = max_exp_avg_sq
    denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
    return self.addcdiv_(exp_avg, denom, value=-step_size)


def _torch_sgd_step(self, grad, momentum_buffer, *, lr, momentum=0.0, dampening=0.0,
                    weight_decay=0.0, nesterov=False, maximize=False, first_step=False):
    """kiln's _fused_sgd_ as torch.optim.SGD's single-tensor step computes it (its op order)."""
    grad = -grad if maximize else grad
    if weight_decay != 0:
        grad = grad.add(self, alpha=weight_decay)
    if momentum != 0:
        if first_step:
            momentum_buffer.copy_(grad)
        else:
            momentum_buffer.mul_(momentum).add_(grad, alpha=1 - dampening)
        grad = grad.add(momentum_buffer, alpha=momentum) if nesterov else momentum_buffer
    return self.add_(grad, alpha=-lr)


def _torch_scatter_reduce_backward(grad, self, dim, index, src, reduce, include_self, result):
    """PyTorch's scatter_reduce gradients (torch/csrc/autograd/FunctionsManual.cpp), which it
    does not expose as an op."""
    import torch

    if reduce == "sum":
        grad_self, grad_src = grad, grad.gather(dim, index)
    elif reduce == "prod":
        masked_self = self.masked_fill(self == 0, 1)
        masked_self_result = masked_self.scatter_reduce(dim, index, src, reduce, include_self=include_self)
        grad_self = grad * masked_self_result / masked_self
        src_zero = src == 0
        zeros_per_slot = torch.zeros_like(self).scatter_add(dim, index, src_zero.to(self.dtype))
        src_num_zeros = zeros_per_slot.gather(dim, index)
        src_single_zero = torch.bitwise_and(src_zero, src_num_zeros == 1)
        masked_src = src.masked_fill(src_single_zero, 1)
        masked_src_result = self.scatter_reduce(dim, index, masked_src, reduce, include_self=include_self)
        grad_src = torch.where(src_single_zero, (grad * masked_src_result).gather(dim, index),
                               (grad * result).gather(dim, index) / src.masked_fill(src_zero, 1))
    elif reduce == "mean":
        n = torch.ones_like(grad) if include_self else torch.zeros_like(grad)
        n = n.scatter_add(dim, index, torch.ones_like(src))
        n = n.masked_fill(n == 0, 1)
        grad_self = grad / n
        grad_src = grad.gather(dim, index) / n.gather(dim, index)
    else:
        value = result.gather(dim, index)
        self_is_result = self == result
        src_is_result = src == value
        count = self_is_result.to(grad.dtype).scatter_add(dim, index, src_is_result.to(grad.dtype))
        share = grad / count
        grad_self = self_is_result * share
        grad_src = src_is_result * share.gather(dim, index)
    if not include_self:
        grad_self = grad_self.scatter(dim, index, 0)
    return [grad_self, grad_src]


def _torch_logcumsumexp_backward(grad, input, result, dim):
    """PyTorch's logcumsumexp gradient (torch/csrc/autograd/FunctionsManual.cpp), which it does
    not expose as an op."""
    import torch

    if grad.dim() == 0 or grad.numel() == 0:
        return grad
    lowest = torch.full_like(grad, torch.finfo(grad.dtype).min)
    log_abs = grad.abs().log()
    rev = lambda x: x.flip(dim).logcumsumexp(dim).flip(dim)  # noqa: E731
    pos = (rev(torch.where(grad > 0, log_abs, lowest) - result) + input).exp()
    neg = (rev(torch.where(grad < 0, log_abs, lowest) - result) + input).exp()
    return pos - neg


def torch_op(target):
    """PyTorch's callable for kiln op overload `target`: the overload of the same name in
    torch.ops (aten, prims) or, for the overloads PyTorch only has through its Python parser,
    the torch function."""
    import torch

    ns, name, ov = (target.split(".") + [""])[:3]
    if ns == "prims":
        return _torch_prim(name)
    special = {
        "scatter_reduce_backward": _torch_scatter_reduce_backward,
        "logcumsumexp_backward": _torch_logcumsumexp_backward,
        "empty": torch.ops.aten.empty.memory_format,
        "where.Tensor_method": lambda self, condition, other: torch.where(condition, self, other),
        "norm": torch.norm,
        "norm.str": torch.norm,
        # kiln's backward ops take output_mask as int[3] (the table has no bool lists), PyTorch's bool[3].
        "convolution_backward": _with_bool_mask(torch.ops.aten.convolution_backward.default),
        "native_batch_norm_backward": _with_bool_mask(torch.ops.aten.native_batch_norm_backward.default),
        "native_group_norm_backward": _with_bool_mask(torch.ops.aten.native_group_norm_backward.default),
        "_fused_adam_": _torch_adam_step,
        "_fused_sgd_": _torch_sgd_step,
    }
    key = f"{name}.{ov}" if ov else name
    if key in special:
        return special[key]
    if ov == "Scalar_Tensor":
        return _torch_python(name)
    packet = getattr(torch.ops.aten, name)
    return getattr(packet, ov or "default")


def main():
    """Prints, per op of the table, its sample count and supported dtypes, then the uncovered."""
    for t in op_targets():
        try:
            n = sum(1 for _ in sample_inputs(t, "float32"))
        except NoSamples:
            n = 0
        print(f"{t}: {n} samples, dtypes {' '.join(supported_dtypes(t)) or '-'}")
    missing = uncovered_ops()
    print(f"ops without samples: {len(missing)}")
    for t, why in missing.items():
        print(f"  {t}: {why}")
