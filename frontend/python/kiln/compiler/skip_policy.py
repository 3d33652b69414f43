"""Which frames kiln.compile never tries to capture: code of kiln itself (except kiln/nn/, the
module forwards users compile; and the generated code of its GraphModules), of the standard
library and of installed packages. These run
eagerly when called from an uncaptured frame; the callback marks their code SKIP once, so the
decision costs nothing afterwards. A compiled function's own (root) frame is always traced."""
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


def _kiln_dirs():
    kiln_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return _real_dir(kiln_dir), _real_dir(os.path.join(kiln_dir, "nn"))


_LIBRARY_DIRS = _library_dirs()
_KILN_DIR, _KILN_NN_DIR = _kiln_dirs()


def is_skipped_file(filename):
    """True for a code object's co_filename whose frames are not captured."""
    if filename.startswith((GLUE_FILENAME_PREFIX, GRAPH_MODULE_FILENAME_PREFIX, "<frozen ")):
        return True
    if filename.startswith("<"):
        return False  # exec'd or interactive user code: <string>, <stdin>, notebook cells
    path = os.path.realpath(filename)
    if path.startswith(_KILN_DIR):
        return not path.startswith(_KILN_NN_DIR)
    return path.startswith(_LIBRARY_DIRS)
