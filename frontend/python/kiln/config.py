"""kiln.config: settings of kiln.compile, read at each compile (assign them at any time).

- strict: when True, a backend that raises while compiling a graph makes the call raise
  (kiln.compiler.BackendCompilerFailed) instead of warning once and running the frame
  eagerly. kiln's own tests set it so that a broken backend cannot pass unnoticed.
- recompile_limit: how many cache entries (each a graph with its guards) one code object may
  collect. A frame whose guards fail on every entry once the limit is reached runs eagerly
  from then on (until kiln.compiler.reset()), with a one-time warning naming the failing
  guard: unbounded recompiles would cost more than they save.
- verbose: when True, warnings about frames that run eagerly after a backend failure carry
  the backend's full traceback instead of its one-line message.

- cuda_host_fallback: when True (the default), an op on CUDA tensors that has no CUDA kernel
  and whose decomposition does not compile for CUDA (sort, a convolution, ...), eager or a
  fallback step of a compiled graph, runs on the CPU with its tensors copied there and back,
  with a UserWarning once per op naming it and why; when False it raises NotImplementedError
  (kiln/compiler/cuda_eager.py).

Generated C++ (kiln._C._codegen, read at each compile):

- cpp_compiler: the C++ compiler (one program name or path); None means $KILN_CXX, else c++.
- cpp_flags: flags added after kiln's own (-O3 -march=native -fopenmp -shared -fPIC
  -std=c++17); they are part of the cache key.
- large_program_cpp_flags: flags added after cpp_flags for a program with 256 KB of C++ or more
  beyond the prelude (thousands of ops; the kernels of the benchmark suite are far below). The
  default ["-O1"] keeps the loops' `omp simd` vectorization and the inlined math of the prelude
  and takes about 30-40% less g++ time than -O3 (a wide DAG of 10,000 ops, 2 cores), for loops
  about 8% slower where they are math-heavy (tanh, exp, erf, log_softmax, one thread); []
  compiles them like any other program.
  Part of the cache keys.
- cache_dir: the kernel cache folder; None means $KILN_CACHE_DIR, else ~/.cache/kiln.
- debug_dir: when set (from $KILN_DEBUG_DIR at import), every compiled graph writes its
  stages there as files (kiln/compiler/debug_dir.py; `kiln run script.py --dump DIR`).
"""
import os

strict = False
recompile_limit = 8
verbose = False
cuda_host_fallback = True

cpp_compiler = None
cpp_flags = []
large_program_cpp_flags = ["-O1"]
cache_dir = None
debug_dir = os.environ.get("KILN_DEBUG_DIR") or None
