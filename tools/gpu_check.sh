#!/usr/bin/env bash
# The one-shot GPU check of issue 18, for a session lent a GPU machine (15 minutes of device
# time in all): build kiln there, run the device-generic tests on CUDA, the CUDA codegen tests
# and the GPU benches, each step time-boxed, logs and JSON under $OUT (at most 8 files come
# back: summary.txt with the machine, build.log, smoke.log, pytest.log, bench.log and the two
# benches' JSON). Worst case about 9 minutes (typical: a 16-core build ~2-3 min, smoke ~10 s,
# tests ~1.5 min, benches ~2 min, torch.compile's own compiles included); a step that fails
# does not stop the later ones, except a failed build or a smoke import that crashes: then the
# smoke step's diagnostics (faulthandler, cuda-gdb backtrace, the shared libraries each import
# order resolves, PYTHONMALLOC=debug, ASan's allocator where the compiler has it) are the
# result, and nothing else runs.
#
#   tools/gpu_check.sh --prepare   here (no GPU): copy the Debian packages kiln builds against
#                                  (oneDNN, OpenBLAS-OpenMP; the GPU image lacks them and has no
#                                  network) into .gpu-debs/ (ignored by git; ~20 MB)
#   tools/gpu_check.sh             there: device.run(command="tools/gpu_check.sh",
#                                  carry=[".gpu-debs"], timeout_s=560)
#   tools/gpu_check.sh --dry-run   here: every step on the fake CUDA driver (kernels on the CPU
#                                  emulator) with the existing build; steps that need real
#                                  hardware print why they skip
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
DEBS="bookworm: libdnnl2 libdnnl-dev libopenblas0-openmp libopenblas-openmp-dev libgfortran5 libquadmath0 ocl-icd-libopencl1"

if [ "${1:-}" = "--prepare" ]; then
  mkdir -p .gpu-debs
  for p in ${DEBS#bookworm: }; do
    f=$(ls /var/cache/apt/archives/${p}_*_amd64.deb 2>/dev/null | head -1)
    if [ -n "$f" ]; then cp "$f" .gpu-debs/; else (cd .gpu-debs && apt-get download "$p"); fi
  done
  # The Python build requirements too, in case the GPU image lacks them (pure-Python wheels, and
  # PyYAML for its CPython 3.12).
  PIP=${PIP:-.venv/bin/pip}
  $PIP download -q --no-deps -d .gpu-debs/wheels scikit-build-core pathspec packaging nanobind pytest iniconfig pluggy 2>&1 | grep -v WARNING
  $PIP download -q --no-deps -d .gpu-debs/wheels --python-version 3.12 --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 pyyaml 2>&1 | grep -v WARNING
  grep -qx '/.gpu-debs/' .gitignore || echo "(add /.gpu-debs/ to .gitignore)"
  du -sh .gpu-debs
  exit 0
fi

DRY=0
if [ "${1:-}" = "--dry-run" ]; then
  DRY=1
  PY=${PY:-$ROOT/.venv/bin/python}
  FAKE=${KILN_BUILD_DIR:-$ROOT/build}/test/fake_cuda/libkiln_fake_cuda.so
  [ -f "$FAKE" ] || { echo "dry run: the fake driver is not built ($FAKE)"; exit 1; }
  export KILN_CUDA_DRIVER=$FAKE KILN_NVRTC=$FAKE KILN_CUBLAS=$FAKE
else
  PY=${PY:-python3}
fi
export PYTHONUNBUFFERED=1

: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
# step NAME SECONDS LOG COMMAND...: runs the command with a time limit, logs it, notes the result.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS
  timeout -k 10 "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  local what=ok
  [ $rc = 124 ] && what="TIMED OUT after ${limit}s"
  [ $rc != 0 ] && [ $rc != 124 ] && what="FAILED (rc $rc)"
  note "$(printf '%-28s %-24s %4ds  (log: %s)' "$name" "$what" $((SECONDS - t0)) "$(basename "$log")")"
  tail -n 3 "$log" | sed 's/^/    /' | tee -a "$SUMMARY"
  return $rc
}

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || echo "no nvidia-smi"
  "$PY" -c 'import sys; print("python", sys.version.split()[0])'
  "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.is_available())' 2>&1 | tail -1
  c++ --version 2>&1 | head -1
  nproc
} >"$OUT/env.tmp" 2>&1
note "== kiln GPU check ($( [ $DRY = 1 ] && echo 'dry run on the fake driver' || echo 'real GPU')): $(grep -m1 '^python' "$OUT/env.tmp")"
sed 's/^/  /' "$OUT/env.tmp" >>"$SUMMARY"
rm -f "$OUT/env.tmp"

# 1. Build (the real run only): the Debian packages unpacked beside the tree when the image lacks them.
if [ $DRY = 0 ]; then
  DEFINES=(-C cmake.define.KILN_BUILD_TESTS=OFF -C cmake.define.KILN_WERROR=OFF)  # its GCC 13 warns more
  if ! ls /usr/lib/x86_64-linux-gnu/libdnnl.so >/dev/null 2>&1; then
    if ls .gpu-debs/*.deb >/dev/null 2>&1; then
      DEPS=/tmp/kiln-deps
      mkdir -p $DEPS
      for f in .gpu-debs/*.deb; do dpkg -x "$f" $DEPS; done
      L=$DEPS/usr/lib/x86_64-linux-gnu
      export LD_LIBRARY_PATH=$L:$L/openblas-openmp:${LD_LIBRARY_PATH:-}
      DEFINES+=(-C cmake.define.KILN_DNNL_INCLUDE=$DEPS/usr/include -C cmake.define.KILN_DNNL_LIB=$L/libdnnl.so
                -C cmake.define.KILN_CBLAS_OMP_INCLUDE=$DEPS/usr/include/x86_64-linux-gnu/openblas-openmp
                -C cmake.define.KILN_OPENBLAS_OMP_LIB=$L/openblas-openmp/libopenblas.so)
    else
      note "no oneDNN on this machine and no .gpu-debs/ carried (run tools/gpu_check.sh --prepare here first)"
    fi
  fi
  for m in scikit_build_core:scikit-build-core nanobind:nanobind yaml:pyyaml pytest:pytest; do
    "$PY" -c "import ${m%%:*}" 2>/dev/null && continue
    note "installing ${m#*:} from .gpu-debs/wheels (the image lacks it)"
    "$PY" -m pip install -q --no-index --find-links .gpu-debs/wheels "${m#*:}" >>"$OUT/build.log" 2>&1 || note "  failed"
  done
  export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
  step "build (-j$(nproc))" 330 "$OUT/build.log" "$PY" -m pip install --no-build-isolation --no-deps \
    -C build-dir=build-gpu "${DEFINES[@]}" -e . || { note "build failed: nothing else can run"; exit 1; }
fi

# 2. Smoke: kiln imported alone, after numpy and after torch (the first GPU machine crashed in
# `import numpy; import kiln`), each running one CUDA op. A crash there makes every later step
# fail for the same reason, so the check stops after collecting what says where it crashed.
SMOKE_OP='import kiln; x = kiln.ones(4, device="cuda"); y = (x * 2 + 1).cpu(); assert y.tolist() == [3.0] * 4, y; print("ok:", kiln.cuda.get_device_name(0))'
smoke_all() {
  local ok=0 first
  for first in "" "import numpy; " "import torch; "; do
    echo "--- ${first:-(kiln alone) }$SMOKE_OP"
    timeout -k 5 60 "$PY" -X faulthandler -c "$first$SMOKE_OP" || { echo "rc $?"; ok=1; }
  done
  return $ok
}
# Where a crashing import crashed and what it had loaded: the native backtrace (the GPU image has
# cuda-gdb, which debugs host programs too, and no gdb), the libraries the dynamic loader picked
# (two runtimes of one library, e.g. libstdc++ or libgomp, are a suspect), CPython's debug
# allocator (overflows and double frees of Python memory) and ASan's allocator preloaded
# (invalid frees reported with the freeing stack).
smoke_diagnose() {
  local crash="import numpy; import kiln; print('imported')" so
  so=$("$PY" -c 'import importlib.util as u; print(u.find_spec("kiln._C").origin)' 2>/dev/null)
  echo "--- ldd $so"; [ -n "$so" ] && ldd "$so"
  for dbg in cuda-gdb gdb; do
    command -v $dbg >/dev/null || continue
    echo "--- $dbg backtrace of: $crash"
    timeout -k 5 90 $dbg -q -batch -ex run -ex bt -ex "info sharedlibrary" --args "$PY" -c "$crash" 2>&1 | tail -n 150
    break
  done
  for first in "import numpy; import kiln" "import kiln"; do
    echo "--- libraries resolved by: $first"
    LD_DEBUG=libs timeout -k 5 60 "$PY" -c "$first" 2>&1 |
      grep -E "calling init: .*(stdc\+\+|gomp|gfortran|quadmath|dnnl|openblas|libgcc_s|_C\.)" | sed 's/^ *[0-9]*: *//'
  done
  echo "--- PYTHONMALLOC=debug: $crash"
  PYTHONMALLOC=debug timeout -k 5 60 "$PY" -X dev -X faulthandler -c "$crash" 2>&1 | tail -n 60
  local asan
  asan=$(c++ -print-file-name=libasan.so 2>/dev/null)
  if [ -n "$asan" ] && [ -f "$asan" ]; then
    echo "--- ASan allocator ($asan): $crash"
    LD_PRELOAD=$asan ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 PYTHONMALLOC=malloc \
      timeout -k 5 60 "$PY" -c "$crash" 2>&1 | tail -n 80
  fi
}
export -f smoke_all smoke_diagnose
export PY SMOKE_OP
if ! step "smoke (imports, one op)" 200 "$OUT/smoke.log" bash -c smoke_all; then
  step "smoke diagnostics" 240 "$OUT/smoke.log" bash -c smoke_diagnose
  if grep -q "^ok:" "$OUT/smoke.log"; then
    note "smoke: some import orders work (see smoke.log); going on"
  else
    note "smoke failed in every import order: nothing else can run"
    exit 1
  fi
fi

# 3. The device-generic tests on CUDA (compiled programs included), then the CUDA codegen tests.
export KILN_TEST_DEVICE=cuda
step "pytest device-generic" 120 "$OUT/pytest.log" "$PY" -m pytest -q -p no:cacheprovider --maxfail=40 -rfE \
  test/python/test_device_tensors.py test/python/test_compile_on_device.py test/python/test_eager_on_device.py \
  test/python/test_creation.py
# (The real NVRTC: the image's nvidia-cuda-nvrtc wheel; in a dry run the one installed here.)
step "pytest CUDA codegen" 45 "$OUT/pytest.log" env -u KILN_NVRTC -u KILN_CUDA_DRIVER -u KILN_CUBLAS \
  "$PY" -m pytest -q -p no:cacheprovider test/python/test_cuda_codegen.py
note "conformance on CUDA: skipped (../shared/conformance/run.py has no device option; the device-generic MLP forward stands in)"

# 4. Benches (each skips with its reason where there is no real GPU).
step "bench cuda_copy" 30 "$OUT/bench.log" "$PY" bench/cuda_copy.py --mib 256 --json "$OUT/cuda_copy.json"
step "bench cuda_kernels" 120 "$OUT/bench.log" "$PY" bench/cuda_kernels.py --json "$OUT/cuda_kernels.json" \
  $( [ $DRY = 1 ] && echo --fake-ok )
note "== done in ${SECONDS}s; files in $OUT"
