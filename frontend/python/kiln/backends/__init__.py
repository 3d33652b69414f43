"""kiln.backends: the switches training scripts set on torch.backends (cudnn.benchmark,
cuda.matmul.allow_tf32, ...). They select among CUDA library algorithms in torch; kiln has no
cuDNN and no TF32 path, so they are recorded and read back but change no result (as torch's do on
a CPU run)."""
import types as _types


class _Flags(_types.ModuleType):
    def __init__(self, name, doc, **flags):
        super().__init__(name, doc)
        self.__dict__.update(flags)


cudnn = _Flags("kiln.backends.cudnn", "cuDNN switches (no cuDNN in kiln: recorded only).", enabled=True,
               benchmark=False, deterministic=False, allow_tf32=True)
cudnn.is_available = lambda: False
cudnn.version = lambda: None

cuda = _Flags("kiln.backends.cuda", "CUDA math switches (recorded only).")
cuda.matmul = _Flags("kiln.backends.cuda.matmul", "", allow_tf32=False, allow_fp16_reduced_precision_reduction=True,
                     allow_bf16_reduced_precision_reduction=True)
cuda.enable_flash_sdp = cuda.enable_mem_efficient_sdp = cuda.enable_math_sdp = lambda enabled: None
cuda.flash_sdp_enabled = cuda.mem_efficient_sdp_enabled = cuda.math_sdp_enabled = lambda: True

mkldnn = _Flags("kiln.backends.mkldnn", "oneDNN switch (recorded only).", enabled=True)
mkldnn.is_available = lambda: True

mps = _Flags("kiln.backends.mps", "Apple MPS: not a kiln device.")
mps.is_available = lambda: False
mps.is_built = lambda: False

__all__ = ["cudnn", "cuda", "mkldnn", "mps"]
