"""lit configuration: kiln's text tests, checked with LLVM's FileCheck."""
import os
import shutil
import sys

import lit.formats

config.name = "kiln"
config.test_format = lit.formats.ShTest()
config.suffixes = [".test", ".kir"]
config.test_source_root = os.path.dirname(__file__)
repo = os.path.abspath(os.path.join(config.test_source_root, "..", ".."))

python = sys.executable
filecheck = shutil.which("FileCheck") or next(
    (p for p in (f"/usr/lib/llvm-{v}/bin/FileCheck" for v in (19, 18, 17, 16, 15, 14)) if os.path.exists(p)), None)
if filecheck is None:
    lit_config.fatal("FileCheck not found: apt-get install llvm-14-tools")

# kiln-opt is a C++ tool built by the CMake build (make build) into build/tools/.
# KILN_BUILD_DIR: the build folder of another interpreter (make test PYTHON=python3.12).
kiln_opt = os.path.join(os.environ.get("KILN_BUILD_DIR") or os.path.join(repo, "build"), "tools", "kiln-opt")
if not os.path.exists(kiln_opt):
    lit_config.warning(f"{kiln_opt} not found: run `make build` first")

config.substitutions.append(("%python", python))
config.substitutions.append(("%kiln-ops", f"{python} {repo}/tools/kiln_ops.py"))
config.substitutions.append(("%kiln-partition", f"{python} {repo}/tools/kiln_partition.py"))
config.substitutions.append(("%kiln-opt", kiln_opt))
config.substitutions.append(("FileCheck", filecheck))
config.environment["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
