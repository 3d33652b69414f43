"""kiln.__version__: the PyTorch API level with kiln's version as the local part, compared like
torch's TorchVersion; kiln.version.cuda is None."""
import re
from pathlib import Path

import kiln


def test_version_compares_numerically():
    v = kiln.__version__
    assert str(v).startswith("2.13.0+kiln")
    assert v >= "2.0" and v > "2.2" and v >= (2, 1) and v < "3" and v == "2.13" and v != "2.12.1"
    assert kiln.version.cuda is None and isinstance(v, str)


def test_kiln_part_matches_the_package_version():
    text = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == kiln.version.KILN_VERSION
