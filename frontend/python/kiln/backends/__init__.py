"""kiln.backends: the backend flags training scripts set (torch.backends analogue).

kiln's CPU kernels are its own generated C++ and oneDNN/OpenBLAS GEMMs, its CUDA GEMMs cuBLAS
in full f32 precision; it uses neither cuDNN nor MPS. The flags are kept so scripts that set
them run unchanged, and each says below whether kiln reads it.
"""
from . import cpu, cuda, cudnn, mkldnn, mps, openmp  # noqa: F401

__all__ = ["cpu", "cuda", "cudnn", "mkldnn", "mps", "openmp"]
