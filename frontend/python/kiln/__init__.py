"""kiln: a tensor runtime with a PyTorch-compatible API and a graph-capture compiler."""
from . import _C
from ._C import (  # noqa: F401
    bfloat16, bool, device, dtype, float16, float32, float64, int8, int16, int32, int64, uint8,
    from_numpy, memory_stats, reset_peak_memory_stats, empty_cache, is_grad_enabled,
    Generator, default_generator, manual_seed, seed, initial_seed, get_rng_state, set_rng_state,
)
from ._tensor import Tensor, Size  # noqa: F401
from ._creation import tensor, as_tensor, from_dlpack  # noqa: F401
from ._tensor_str import set_printoptions, get_printoptions, printoptions  # noqa: F401
from ._ops import _export_ops
from ._indexing import bucketize, einsum, nonzero, unique, _install_methods  # noqa: F401
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
    aminmax, count_nonzero, diff, fmax, fmin, heaviside, hypot, logaddexp, xlogy,
)
_install_composites(Tensor)
del _install_composites
from ._composites_extra import (  # noqa: E402,F401
    atleast_1d, atleast_2d, atleast_3d, cartesian_prod, cdist, column_stack, copysign, diag_embed, dstack,
    float_power, frac, hsplit, hstack, kron, logit, nanmean, nansum, ravel, rot90, row_stack, sgn, take_along_dim,
    tensor_split, tile, trace, tril_indices, triu_indices, vsplit, vstack, isin, _install_methods as _install_extra,
)
_install_extra(Tensor)
del _install_extra
from ._random import install as _install_random  # noqa: E402
_install_random(globals(), Tensor)
del _install_random

from .autograd import (  # noqa: E402,F401
    enable_grad, inference_mode, is_inference_mode_enabled, no_grad, set_grad_enabled,
)
from . import autograd, nn  # noqa: E402,F401
from . import optim  # noqa: E402,F401
from . import linalg  # noqa: E402,F401
from . import distributions  # noqa: E402,F401
from . import utils  # noqa: E402,F401
from .serialization import load, save  # noqa: E402,F401
from . import fx  # noqa: E402,F401
from . import config  # noqa: E402,F401
from . import cuda  # noqa: E402,F401
from . import amp, backends  # noqa: E402,F401
from .amp import autocast  # noqa: E402,F401
from ._runtime_flags import (  # noqa: E402,F401
    are_deterministic_algorithms_enabled, get_float32_matmul_precision, is_autocast_enabled,
    is_deterministic_algorithms_warn_only_enabled, set_float32_matmul_precision, use_deterministic_algorithms,
)
cuda.amp = amp.cuda_amp  # torch.cuda.amp.GradScaler / autocast
from ._logging import set_logs  # noqa: E402,F401
from . import compiler  # noqa: E402,F401
from .compiler import compile, explain  # noqa: E402,F401
