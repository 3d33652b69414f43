"""kiln: a tensor runtime with a PyTorch-compatible API and a graph-capture compiler."""
from . import _C
# torch._C._log_api_usage_once(event): a usage-logging hook model libraries (torchvision, Hugging
# Face) call from constructors; PyTorch logs nothing unless a logger is installed, kiln has none.
_C._log_api_usage_once = lambda event: None
from . import version  # noqa: E402
from .version import __version__  # noqa: F401
from ._C import (  # noqa: F401
    bfloat16, bool, device, dtype, float16, float32, float64, int8, int16, int32, int64, uint8,
    from_numpy, memory_stats, reset_peak_memory_stats, empty_cache, is_grad_enabled,
    Generator, default_generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state,
)
from ._tensor import Tensor, Size  # noqa: F401
from ._tensor import LEGACY_TENSOR_TYPES as _LEGACY_TENSOR_TYPES

globals().update(_LEGACY_TENSOR_TYPES)  # FloatTensor, LongTensor, ...
from ._creation import tensor, as_tensor, from_dlpack, logspace  # noqa: F401
from ._tensor_str import set_printoptions, get_printoptions, printoptions  # noqa: F401
from ._ops import _export_ops
from ._indexing import bucketize, einsum, histc, histogram, nonzero, unique, unique_consecutive, _install_methods  # noqa: F401
from ._dtype_info import finfo, iinfo  # noqa: F401

half, float, double = float16, float32, float64
long, int, short = int64, int32, int16

_export_ops(globals())
del _export_ops
_install_methods(Tensor)
del _install_methods
from ._composites import (  # noqa: E402,F401
    broadcast_shapes, broadcast_tensors, broadcast_to, diag, diagonal, is_floating_point, is_tensor, meshgrid,
    numel, _install_methods as _install_composites,
    aminmax, count_nonzero, diff, fix, fmax, fmin, heaviside, hypot, logaddexp, logaddexp2, xlogy,
)
_install_composites(Tensor)
del _install_composites
from ._stacking import (  # noqa: E402,F401
    atleast_1d, atleast_2d, atleast_3d, block_diag, cartesian_prod, column_stack, combinations, dsplit, dstack,
    fliplr, flipud, hsplit, hstack, rot90, row_stack, tensor_split, tril_indices, triu_indices, vsplit, vstack,
    _install_methods as _install_stacking,
)
from ._math_composites import (  # noqa: E402,F401
    acosh, asinh, atanh, cdist, copysign, corrcoef, cov, cross, deg2rad, float_power, frac, isin, isneginf, isposinf,
    kron, logit, nanmean, nansum, rad2deg, signbit, sinc, spmm, take_along_dim, tensordot, trace, trapezoid, trapz,
    cumulative_trapezoid, _install_methods as _install_math,
)
from ._promotion import can_cast, promote_types, result_type  # noqa: E402,F401
from ._layout import layout, strided, sparse_coo  # noqa: E402,F401
from . import sparse  # noqa: E402,F401
from .sparse import sparse_coo_tensor  # noqa: E402,F401
sparse._install_methods(Tensor)
from ._memory_format import (  # noqa: E402,F401
    memory_format, contiguous_format, channels_last, channels_last_3d, preserve_format,
    _install_methods as _install_memory_format,
)
_install_memory_format(Tensor)
_install_math(Tensor)
_install_stacking(Tensor)
del _install_math, _install_stacking
# NumPy-style aliases torch has, as functions and methods, with their in-place forms
# (x.divide_(y), kiln.greater(a, b), x.swapaxes_(0, 1)): the same objects as the ops they name.
for _name, _op in (("arcsin", "asin"), ("arccos", "acos"), ("arctan", "atan"), ("arctan2", "atan2"),
                   ("absolute", "abs"), ("divide", "div"), ("multiply", "mul"), ("subtract", "sub"),
                   ("greater", "gt"), ("greater_equal", "ge"), ("less", "lt"), ("less_equal", "le"),
                   ("not_equal", "ne"), ("fix", "trunc"), ("swapaxes", "transpose"), ("swapdims", "transpose")):
    for _suffix in ("", "_"):
        if not hasattr(Tensor, _name + _suffix) and hasattr(Tensor, _op + _suffix):
            setattr(Tensor, _name + _suffix, getattr(Tensor, _op + _suffix))
        if _name + _suffix not in globals() and _op + _suffix in globals():
            globals()[_name + _suffix] = globals()[_op + _suffix]
del _name, _op, _suffix
arcsin, arccos, arctan, arctan2 = asin, acos, atan, atan2  # noqa: F821 (ops exported above)
arcsinh, arccosh, arctanh = asinh, acosh, atanh
from ._foreach import install as _install_foreach  # noqa: E402
_install_foreach(globals())
from .autograd.anomaly_mode import (  # noqa: E402,F401
    is_anomaly_check_nan_enabled, is_anomaly_enabled, set_anomaly_enabled)
from ._torch_extra import (  # noqa: E402,F401
    addbmm, addr, asarray, batch_norm, chain_matmul, diagflat, fill, frombuffer, get_device, get_num_interop_threads,
    gradient, group_norm, inner, instance_norm, is_nonzero, is_same_size, is_signed, matrix_power, mvlgamma,
    set_default_tensor_type, set_flush_denormal, set_num_interop_threads, to_dlpack, typename, unravel_index, vdot,
)
from ._composites_extra import (  # noqa: E402,F401
    diag_embed, dist, frexp, index_reduce, isreal, narrow_copy, ravel, renorm, sgn, tile, unsafe_chunk, unsafe_split,
    vander,
    _install_methods as _install_extra)
_install_extra(Tensor)
del _install_extra
from ._complex import (  # noqa: E402,F401
    angle, cdouble, cfloat, complex, complex64, complex128, conj, conj_physical, imag, is_complex, is_conj, polar,
    real, resolve_conj, resolve_neg, _install_methods as _install_complex,
)
_install_complex(Tensor)
del _install_complex
from ._quantiles import nanmedian, nanquantile, quantile, _install_methods as _install_quantiles  # noqa: E402,F401
_install_quantiles(Tensor)
del _install_quantiles
from . import special  # noqa: E402
from .special import digamma, erfc, gcd, i0, lcm, ldexp, polygamma, gammaln as lgamma  # noqa: E402,F401
special._install_methods(Tensor)
from ._random import install as _install_random  # noqa: E402
_install_random(globals(), Tensor)
del _install_random

from .autograd import (  # noqa: E402,F401
    enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from . import autograd, nn  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import fft  # noqa: E402,F401
from ._spectral import install as _install_spectral  # noqa: E402

_install_spectral(globals(), Tensor)
del _install_spectral
from ._lapack import install as _install_lapack  # noqa: E402

_install_lapack(globals(), Tensor)
del _install_lapack
from . import distributions  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401
from . import fx  # noqa: E402,F401
from . import config  # noqa: E402,F401
from . import testing  # noqa: E402,F401
from . import cuda  # noqa: E402,F401
from . import accelerator, backends  # noqa: E402,F401
from . import amp, cpu, profiler  # noqa: E402,F401
from . import func  # noqa: E402,F401
from . import jit  # noqa: E402,F401
from . import hub, ops, random  # noqa: E402,F401


def _assert(condition, message):
    """torch._assert: `assert condition, message` as a function (model code calls it so that
    symbolic tracers can record it)."""
    if not condition:
        raise AssertionError(message)


from .func import vmap  # noqa: E402,F401
from .amp import autocast, is_autocast_available, is_autocast_enabled  # noqa: E402,F401
from ._autocast_state import (  # noqa: E402,F401
    autocast_decrement_nesting, autocast_increment_nesting, clear_autocast_cache, get_autocast_cpu_dtype,
    get_autocast_dtype, get_autocast_gpu_dtype, is_autocast_cache_enabled, is_autocast_cpu_enabled,
    set_autocast_cache_enabled, set_autocast_cpu_dtype, set_autocast_cpu_enabled, set_autocast_dtype,
    set_autocast_enabled)
from ._device_amp import cuda_amp as _cuda_amp  # noqa: E402
cuda.amp = _cuda_amp
del _cuda_amp
from ._settings import (  # noqa: E402,F401
    are_deterministic_algorithms_enabled, get_default_device, get_default_dtype, get_float32_matmul_precision,
    get_num_threads, is_deterministic_algorithms_warn_only_enabled, set_default_device, set_default_dtype,
    set_float32_matmul_precision, set_num_threads, use_deterministic_algorithms,
)
from ._logging import set_logs  # noqa: E402,F401
from . import compiler  # noqa: E402,F401
from .compiler import compile, explain  # noqa: E402,F401
from . import _dynamo  # noqa: E402,F401
from ._einops import install as _install_einops  # noqa: E402

_install_einops()  # einops.rearrange & co on kiln tensors, when einops is used
del _install_einops

# torch.range (deprecated; bound last: before this, `range` in this module is the builtin) and the
# nn.functional ops torch exports at the top level with the same arguments (torch.conv2d, ...).
from . import _torch_extra  # noqa: E402

range = _torch_extra.range_  # noqa: A001 - torch's name
for _name in _torch_extra.FUNCTIONAL_ALIASES:
    if _name not in globals():
        globals()[_name] = _torch_extra._alias(_name)
del _name

# torch's module-level constants (torch.inf in masks, torch.pi in RoPE, x[:, torch.newaxis]).
import math as _math  # noqa: E402 (kiln.float is a dtype here)

inf, nan, pi, e = _math.inf, _math.nan, _math.pi, _math.e
newaxis = None
del _math

