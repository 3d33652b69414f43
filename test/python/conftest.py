"""pytest setup: tests import their shared helpers from this folder."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import shutil

import pytest

# Device-generic tests take the `device` fixture: "cpu" unless KILN_TEST_DEVICE names another
# ("cuda", "cuda:1"); `KILN_TEST_DEVICE=cuda make test` runs them on the GPU. A CUDA run where
# CUDA is unavailable skips them with the reason.
TEST_DEVICE = os.environ.get("KILN_TEST_DEVICE", "cpu")


@pytest.fixture(params=[TEST_DEVICE])
def device(request):
    if request.param.startswith("cuda"):
        import kiln

        if not kiln.cuda.is_available():
            pytest.skip(f"KILN_TEST_DEVICE={request.param}: {kiln.cuda.unavailable_reason()}")
    return request.param


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


@pytest.fixture
def training_compiles(monkeypatch):
    """Each training (forward + backward) compile of the test, in order: the symbols its
    inputs are over (`traces.describe()`), or None for static sizes."""
    from kiln.compiler import frame_callback

    seen = []
    original = frame_callback.FrameCallback._compile_training

    def counting(self, *args, **kwargs):
        compiled, gm, traces = original(self, *args, **kwargs)
        seen.append(traces.describe() if traces is not None else None)
        return compiled, gm, traces

    monkeypatch.setattr(frame_callback.FrameCallback, "_compile_training", counting)
    return seen


@pytest.fixture
def strict_capture():
    """kiln.compile in strict mode (a backend failure raises instead of running eagerly), compile
    caches reset before and after (parametrized cases share code objects). Files of capture
    tests use it for every test: `pytestmark = pytest.mark.usefixtures("strict_capture")`."""
    import kiln

    old = kiln.config.strict
    kiln.config.strict = True
    kiln.compiler.reset()
    yield
    kiln.config.strict = old
    kiln.compiler.reset()
