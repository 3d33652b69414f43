# kiln: `make run` (demo) and `make test` (every test). Both install what is missing first.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
APT_PACKAGES := libdnnl-dev libopenblas-openmp-dev libgtest-dev llvm-14-tools
TORCH_VERSION := 2.13.0
JOBS ?= 2
export CMAKE_BUILD_PARALLEL_LEVEL := $(JOBS)

.PHONY: run test build deps venv test-ctest test-lit test-pytest bench bench-smoke bench-deps clean conformance

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

$(VENV)/.installed: pyproject.toml
	python3 -m venv --system-site-packages $(VENV)
	$(PIP) install -q --upgrade "pip>=23" 
	$(PIP) install -q numpy pytest lit pyyaml "nanobind>=2.0" "scikit-build-core>=0.10" ninja cmake
	$(PIP) install -q torch==$(TORCH_VERSION) || echo "torch $(TORCH_VERSION) unavailable: differential tests will skip"
	touch $@

venv: deps $(VENV)/.installed

build: venv
	$(PIP) install -q --no-build-isolation --no-deps -e .

test-ctest:
	cd build && ctest --output-on-failure -j$(JOBS)

test-lit:
	$(VENV)/bin/lit -sv test/lit

test-pytest:
	$(PY) -m pytest test/python -q

conformance: build
	$(PY) ../shared/conformance/run.py --mode eager,compile

# The benchmark suite (bench/README.md): results in bench/results/<timestamp>/. matplotlib is
# installed for the plots; BENCH_JAX=1 also installs jax (about 600 MB) for the jax.jit column.
# BENCH_ARGS passes options to bench/run.py (e.g. BENCH_ARGS="-k softmax --sizes small").
bench: build bench-deps
	$(PY) bench/run.py $(BENCH_ARGS)

bench-smoke: build bench-deps
	$(PY) bench/run.py --smoke --out $$(mktemp -d)

bench-deps:
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PIP) install -q matplotlib || echo "matplotlib unavailable: no plots"
	@if [ "$(BENCH_JAX)" = 1 ]; then $(PY) -c "import jax" 2>/dev/null || $(PIP) install -q jax jaxlib; fi

clean:
	rm -rf build $(VENV)
