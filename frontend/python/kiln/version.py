"""kiln.version (torch.version): `__version__` is the PyTorch API level kiln implements with
kiln's own version as the local part ("2.13.0+kiln0.1.0"), so that version checks in code written
for PyTorch take the branches for the API kiln provides; it compares like torch's TorchVersion
(numerically, against strings and tuples). `cuda` is None: kiln is not built against CUDA (it
loads the driver at run time, docs/cuda.md)."""
import re

__all__ = ["__version__", "cuda", "git_version", "hip", "TorchVersion"]

KILN_VERSION = "0.1.0"
TORCH_API = "2.13.0"


def _key(v):
    if isinstance(v, (tuple, list)):
        parts = [int(p) for p in v]
    else:
        parts = [int(p) for p in re.findall(r"\d+", str(v).split("+")[0].split("a")[0].split("b")[0].split("rc")[0])]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class TorchVersion(str):
    """A version string comparing by its numbers: "2.13.0" > "2.2", >= (2, 0)."""

    def __lt__(self, other):
        return _key(self) < _key(other)

    def __le__(self, other):
        return _key(self) <= _key(other)

    def __gt__(self, other):
        return _key(self) > _key(other)

    def __ge__(self, other):
        return _key(self) >= _key(other)

    def __eq__(self, other):
        if isinstance(other, str) and not isinstance(other, TorchVersion) and other == str(self):
            return True
        return _key(self) == _key(other)

    def __ne__(self, other):
        return not self == other

    __hash__ = str.__hash__


__version__ = TorchVersion(f"{TORCH_API}+kiln{KILN_VERSION}")
cuda = None
hip = None
git_version = "unknown"
