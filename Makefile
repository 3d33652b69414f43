# kiln: `make run` (demo) and `make test` (every test). Both install what is missing first.
SHELL := /bin/bash
# PYTHON picks the interpreter (issue 17): `make test PYTHON=python3.12` builds and tests in a venv
# and build folder of that version's own (.venv-3.12, build-3.12) beside the default python3's
# (.venv, build). A name that is not on PATH is looked up in pyenv's versions.
PYTHON ?= python3
PYTHON_EXE := $(shell p=$$($(PYTHON) -c 'import sys; print(sys.executable)' 2>/dev/null) && echo $$p || \
                ls -d $$(pyenv root 2>/dev/null)/versions/*/bin/$(PYTHON) 2>/dev/null | tail -1)
ifeq ($(PYTHON_EXE),)
$(error $(PYTHON) not found (on PATH or in pyenv))
endif
ifeq ($(PYTHON),python3)
VENV := .venv
BUILD_DIR := build
else
PYVER := $(shell $(PYTHON_EXE) -c 'import sys; print("%d.%d" % sys.version_info[:2])')
VENV := .venv-$(PYVER)
BUILD_DIR := build-$(PYVER)
endif
export KILN_BUILD_DIR := $(CURDIR)/$(BUILD_DIR)
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
APT_PACKAGES := libdnnl-dev libopenblas-openmp-dev libgtest-dev llvm-14-tools
TORCH_VERSION := 2.13.0
JOBS ?= 2
export CMAKE_BUILD_PARALLEL_LEVEL := $(JOBS)

.PHONY: run test build deps venv test-ctest test-lit test-pytest test-capture bench bench-smoke bench-deps clean conformance

run: build
	$(PY) bench/demo.py

test: build
	@$(MAKE) --no-print-directory test-ctest test-lit test-pytest

deps:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	fi

# torch for another Python comes only from local wheels (no multi-GB download): without it the
# differential tests skip, and the conformance runner compares with a recorded oracle.
TORCH_PIP_FLAGS := $(if $(filter python3,$(PYTHON)),,--no-index)

$(VENV)/.installed: pyproject.toml
	$(PYTHON_EXE) -m venv --system-site-packages $(VENV)
	$(PIP) install -q --upgrade "pip>=23" 
	$(PIP) install -q numpy pytest lit pyyaml "nanobind>=2.0" "scikit-build-core>=0.10" ninja cmake
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q $(TORCH_PIP_FLAGS) torch==$(TORCH_VERSION) || \
	  echo "torch $(TORCH_VERSION) unavailable: differential tests will skip"
	$(PIP) install -q nvidia-cuda-nvrtc || echo "nvidia-cuda-nvrtc unavailable: the NVRTC tests will skip"
	$(PIP) install -q einops || echo "einops unavailable: its tests will skip"
	touch $@

venv: deps $(VENV)/.installed

# Another interpreter's build compiles only the extension and links the default build's core
# libraries (cmake/ImportCore.cmake), so the default build comes first.
ifeq ($(PYTHON),python3)
build: venv
	$(PIP) install -q --no-build-isolation --no-deps -C build-dir=$(BUILD_DIR) -e .
else
build: venv
	@$(MAKE) --no-print-directory build PYTHON=python3
	$(PIP) install -q --no-build-isolation --no-deps -C build-dir=$(BUILD_DIR) \
	  -C cmake.define.KILN_CORE_BUILD_DIR=$(CURDIR)/build -e .
endif

test-ctest:
	cd $(BUILD_DIR) && ctest --output-on-failure -j$(JOBS)

test-lit:
	$(VENV)/bin/lit -sv test/lit

test-pytest:
	$(PY) -m pytest test/python -q

# The conformance programs: the shared sample and ours (test/programs). ORACLE_RECORD=DIR saves PyTorch's results (run with the default
# python3, which has torch); ORACLE=DIR compares with them where torch is absent (PYTHON=python3.12).
# ../shared from the main checkout; ../../shared from a worktree under /work/wt.
CONFORMANCE := $(firstword $(wildcard ../shared/conformance/run.py ../../shared/conformance/run.py) ../shared/conformance/run.py)
conformance: build
	$(PY) $(CONFORMANCE) $(dir $(CONFORMANCE))programs test/programs --mode eager,compile $(if $(ORACLE),--oracle $(ORACLE)) \
	  $(if $(ORACLE_RECORD),--record-oracle $(ORACLE_RECORD))

# The frame capture and compile tests: what differs between Pythons (issue 17). CI runs these
# under python3.12 besides `make test` under python3 (see .ci/run).
CAPTURE_TESTS := test_capture_versions test_capture_bytecode test_capture_guards test_capture_regressions \
                 test_capture_trackers test_capture_fallback test_graph_breaks test_eval_frame \
                 test_compile_api test_guards test_nn_compile
test-capture: build
	$(PY) -m pytest $(addprefix test/python/,$(addsuffix .py,$(CAPTURE_TESTS))) -q

# The benchmark suite (bench/README.md): results in bench/results/<timestamp>/. matplotlib is
# installed for the plots; BENCH_JAX=1 also installs jax (about 600 MB) for the jax.jit column.
# BENCH_ARGS passes options to bench/run.py (e.g. BENCH_ARGS="-k softmax --sizes small").
# Its GPU section (bench/cuda_copy.py, bench/cuda_kernels.py) runs after it; without a GPU each
# says why and exits 0.
bench: build bench-deps
	$(PY) bench/run.py $(BENCH_ARGS)
	$(PY) bench/cuda_copy.py
	$(PY) bench/cuda_kernels.py

bench-smoke: build bench-deps
	$(PY) bench/run.py --smoke --out $$(mktemp -d)

bench-deps:
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) install -q matplotlib || echo "matplotlib unavailable: no plots"
	@if [ "$(BENCH_JAX)" = 1 ]; then $(PY) -c "import jax" 2>/dev/null || $(PIP) install -q jax jaxlib; fi

clean:
	rm -rf $(BUILD_DIR) $(VENV)
