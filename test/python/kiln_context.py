"""The KilnContext of generated C++ programs (codegen/CppPrelude.cpp) for tests that load a
program with ctypes and give it a BLAS of their own."""
import ctypes


class KilnContext(ctypes.Structure):
    _fields_ = [("alloc", ctypes.c_void_p), ("free", ctypes.c_void_p), ("sgemm", ctypes.c_void_p),
                ("dgemm", ctypes.c_void_p), ("num_threads", ctypes.c_int),
                ("sgemm_post", ctypes.c_void_p),
                ("error", ctypes.c_void_p),  # KilnError*: only programs with indirect indices use it
                ("sgemm_batched", ctypes.c_void_p), ("gemm16_batched", ctypes.c_void_p)]


_SGEMM_BATCHED = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.c_int64, ctypes.c_void_p, ctypes.c_int, ctypes.c_int64,
                                  ctypes.c_void_p, ctypes.c_int, ctypes.c_int64)
_callbacks = []  # ctypes callbacks must outlive every program that calls them


def sgemm_batched(blas):
    """ctx->sgemm_batched as a loop of `blas`'s cblas_sgemm, one call per batch entry."""
    f32 = ctypes.sizeof(ctypes.c_float)

    def run(ta, tb, batch, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc):
        for i in range(batch):
            blas.cblas_sgemm(101, ta, tb, m, n, k, ctypes.c_float(1.0), ctypes.c_void_p(a + i * sa * f32),
                             lda, ctypes.c_void_p(b + i * sb * f32), ldb, ctypes.c_float(0.0),
                             ctypes.c_void_p(c + i * sc * f32), ldc)

    _callbacks.append(_SGEMM_BATCHED(run))
    return ctypes.cast(_callbacks[-1], ctypes.c_void_p).value
