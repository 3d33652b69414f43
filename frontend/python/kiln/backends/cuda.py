"""kiln.backends.cuda (torch.backends.cuda): matmul precision flags. kiln's CUDA GEMMs (cuBLAS)
always compute in full f32 precision: allow_tf32 (False by default, as torch's) is kept and
set by kiln.set_float32_matmul_precision, but TF32 is never used."""
from .. import cuda as _cuda


class _MatmulFlags:
    def __init__(self):
        self.allow_tf32 = False
        self.allow_fp16_reduced_precision_reduction = True
        self.allow_bf16_reduced_precision_reduction = True


matmul = _MatmulFlags()


def is_built():
    """Whether kiln can run on CUDA here: its CUDA runtime is loaded at run time (dlopen), so
    this is kiln.cuda.is_available()."""
    return _cuda.is_available()
