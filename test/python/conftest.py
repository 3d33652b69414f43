"""pytest setup: tests import their shared helpers from this folder."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import shutil

import pytest

# Tests that compile C++ (the inductor backend) need the system compiler.
needs_cxx = pytest.mark.skipif(shutil.which(os.environ.get("KILN_CXX", "c++")) is None,
                               reason="no C++ compiler")


@pytest.fixture
def strict_inductor(tmp_path_factory, monkeypatch):
    """kiln.compile in strict mode (a backend failure raises) with one kernel cache folder for the
    session (graphs shared by tests compile once); compiled functions reset before and after, as
    parametrized cases share code objects."""
    import kiln

    path = str(tmp_path_factory.getbasetemp() / "inductor-cache")
    monkeypatch.setattr(kiln.config, "cache_dir", path)
    monkeypatch.setattr(kiln.config, "strict", True)
    kiln.compiler.reset()
    yield path
    kiln.compiler.reset()
