"""Which frames kiln.compile never tries to capture: code of kiln itself (kiln.nn and kiln.optim
included, and the generated code of its GraphModules), of the standard library and of installed
packages. These run eagerly when called from an uncaptured frame; the callback marks their code
SKIP once, so the decision costs nothing afterwards. A compiled function's own (root) frame is
always traced, and kiln code called from a traced frame is traced with it (inlined or run for
real on fakes: docs/capture.md).

This is TorchDynamo's rule for its own library (torch/_dynamo/trace_rules.py: torch.nn,
torch.autograd, torch._tensor are in MOD_SKIPLIST, entered from eager code they are not
captured): a training loop that runs eagerly (a graph break inside its `for`) calls
`model(x)`, `F.cross_entropy`, `clip_grad_norm_`, `loss.backward()`, `model.train()` eagerly,
and only the user's own frames under them (a module's `forward`, entered from kiln's
`Module.__call__`) are captured, each as a graph of its own. Capturing kiln's frames there made
a graph (and a break) of every library call: a GPT training loop compiled 17 graphs where
torch.compile compiles 2. The exception is an optimizer's step (kiln._compiling's
capture_from_eager entries, checked by the frame callback), captured as TorchDynamo captures
torch.optim's."""
import functools
import os
import site
import sysconfig

GLUE_FILENAME_PREFIX = "<kiln glue "
# The generated forward of kiln.fx GraphModules: the compiled program's own pieces (fallback
# kernels between compiled segments, graphs run op by op) run inside a compiled frame's glue
# (a whole training step's backward runs there) and must not be captured again.
GRAPH_MODULE_FILENAME_PREFIX = "<kiln.fx.GraphModule."


def _real_dir(path):
    return os.path.join(os.path.realpath(path), "")


def _library_dirs():
    paths = sysconfig.get_paths()
    dirs = {paths[key] for key in ("stdlib", "platstdlib", "purelib", "platlib") if key in paths}
    dirs.update(site.getsitepackages())
    dirs.add(site.getusersitepackages())
    return tuple(sorted({_real_dir(d) for d in dirs if d}))


def _kiln_dir():
    return _real_dir(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_LIBRARY_DIRS = _library_dirs()
_KILN_DIR = _kiln_dir()


# Cached: the frame callback asks again at every call of a frame that runs eagerly without a
# cache entry (a resume function with no tensor in scope, a helper called from one), and
# os.path.realpath's lstat per path component cost 27 us of each such call.
@functools.lru_cache(maxsize=4096)
def is_skipped_file(filename):
    """True for a code object's co_filename whose frames are not captured."""
    if filename.startswith((GLUE_FILENAME_PREFIX, GRAPH_MODULE_FILENAME_PREFIX, "<frozen ")):
        return True
    if filename.startswith("<"):
        return False  # exec'd or interactive user code: <string>, <stdin>, notebook cells
    path = os.path.realpath(filename)
    return path.startswith((_KILN_DIR,) + _LIBRARY_DIRS)
