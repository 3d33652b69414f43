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
"""

strict = False
recompile_limit = 8
verbose = False
