#!/usr/bin/env bash
# The one-shot GPU check of issue 18, for a session lent a GPU machine (15 minutes of device
# time in all): build kiln there, make sure it imports in every order (the remedy matrix below),
# run the device-generic tests on CUDA, the CUDA codegen tests and the GPU benches, each step
# time-boxed within one budget (GPU_CHECK_BUDGET seconds, default 540: the lead's call gives
# timeout_s=560), logs and JSON under $OUT (at most 8 files come back: summary.txt with the
# machine, build.log, smoke.log, pytest.log, conformance.log, bench.log, cuda_kernels.json,
# rebuild.log).
# Typical: a 16-core build ~2.5 min, smoke ~15 s, tests ~1.5 min, benches ~2 min. A step that
# fails does not stop the later ones, except a failed build or a smoke matrix in which no remedy
# imports kiln in every order.
#
#   tools/gpu_check.sh --prepare   here (no GPU): copy the Debian packages kiln builds against
#                                  (oneDNN, OpenBLAS-OpenMP; the GPU image lacks them and has no
#                                  network) into .gpu-debs/ (ignored by git; ~20 MB)
#   tools/gpu_check.sh             there: device.run(command="tools/gpu_check.sh",
#                                  carry=[".gpu-debs"], timeout_s=560)
#   tools/gpu_check.sh --dry-run   here: every step on the fake CUDA driver (kernels on the CPU
#                                  emulator) with the existing build; steps that need real
#                                  hardware print why they skip. KILN_SMOKE_SIMULATE_CRASH=<remedy>
#                                  makes the smoke probes crash until that remedy (to try the
#                                  matrix: e.g. kiln-first)
#
# The smoke matrix. Session 10's GPU machine (H200 under gVisor, Ubuntu 24.04, GCC 13.3 at
# /opt/gcc, Python 3.12.3) built kiln, then `import numpy; import kiln` segfaulted and `import
# torch; import kiln` aborted with `free(): invalid pointer`, while `import kiln` alone (which
# imports numpy afterwards) worked. Not reproduced on the CPU machines (GCC 12, pyenv 3.12.1/
# 3.11): ASan and PYTHONMALLOC=debug runs are clean there. What can make import order matter:
# which C++/OpenMP runtime (libstdc++, libgcc_s, libgomp: torch's wheel carries a libgomp.so.1
# of its own, with the soname kiln._C asks for) is loaded first and so serves everyone; memory
# freed by another allocator than the one that gave it (pymalloc vs malloc); heap layout exposing
# a latent memory error; code of the image's compiler (-O3 -march=native under gVisor's CPU
# model). So the smoke step runs tools/gpu_smoke_probe.py (import <first>, import kiln, one CUDA
# op, listing the runtimes mapped after each import) with nothing, numpy and torch first, under
# each remedy in turn until one has no crash in any order, and keeps that remedy's environment
# for the rest of the run:
#   as-built          nothing changed
#   malloc            PYTHONMALLOC=malloc (a pymalloc/malloc mismatch stops mattering)
#   preload-runtimes  LD_PRELOAD of the libstdc++, libgcc_s and libgomp kiln._C resolves alone
#                     (one C++ and one OpenMP runtime, loaded first, for every library)
#   own-libs-only     LD_LIBRARY_PATH holding only the carried libraries the image lacks (the
#                     carried libgfortran/libquadmath/libOpenCL no longer shadow the image's)
#   kiln-C-first      a sitecustomize importing kiln._C before anything (its libraries first)
#   kiln-first        a sitecustomize importing kiln before anything (the order that worked)
#   portable-rebuild  only if all the above fail: rebuild with KILN_NATIVE=OFF and -O2 (~2.5 min)
# smoke.log starts with the matrix (one row per remedy tried, one column per import order) and
# the runtimes each order had mapped; the probes' output and, when as-built crashed, the
# diagnostics (cuda-gdb backtrace, PYTHONMALLOC=debug, ASan's allocator) follow. When as-built
# crashed and time is left after the benches, the portable rebuild runs as an experiment
# (rebuild.log, and its matrix row appended to smoke.log): does the crash follow the flags?
set -u
cd "$(dirname "$0")/.."
ROOT=$PWD
OUT=${OUT:-$ROOT/gpu-check-out}
mkdir -p "$OUT"
SUMMARY=$OUT/summary.txt
BUDGET=${GPU_CHECK_BUDGET:-540}
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
  # The conformance runner and programs (../shared does not travel to the GPU machine).
  if [ -d ../shared/conformance ]; then
    rm -rf .gpu-debs/conformance && mkdir -p .gpu-debs/conformance
    cp -r ../shared/conformance/run.py ../shared/conformance/cutil.py ../shared/conformance/programs .gpu-debs/conformance/
  fi
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
TMPD=$(mktemp -d /tmp/kiln-gpu-check.XXXXXX)

: >"$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
left() { echo $((BUDGET - SECONDS)); }
# step NAME SECONDS LOG COMMAND...: runs the command with a time limit (cut to what is left of
# the budget), logs it, notes the result; a step with under 15 s left is skipped.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0=$SECONDS room=$(($(left) - 5))
  if [ $room -lt 15 ]; then
    note "$(printf '%-28s %s' "$name" "SKIPPED: the budget (${BUDGET}s) is spent")"
    return 125
  fi
  [ $limit -gt $room ] && limit=$room
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
  uname -r
  nproc
} >"$OUT/env.tmp" 2>&1
note "== kiln GPU check ($( [ $DRY = 1 ] && echo 'dry run on the fake driver' || echo 'real GPU')): $(grep -m1 '^python' "$OUT/env.tmp")"
sed 's/^/  /' "$OUT/env.tmp" >>"$SUMMARY"
rm -f "$OUT/env.tmp"

# 1. Build (the real run only): the Debian packages unpacked beside the tree when the image lacks them.
CARRIED=""  # the folder of the carried libraries, when they are on LD_LIBRARY_PATH
DEFINES=(-C cmake.define.KILN_BUILD_TESTS=OFF -C cmake.define.KILN_WERROR=OFF)  # its GCC 13 warns more
if [ $DRY = 0 ]; then
  if ! ls /usr/lib/x86_64-linux-gnu/libdnnl.so >/dev/null 2>&1; then
    if ls .gpu-debs/*.deb >/dev/null 2>&1; then
      DEPS=/tmp/kiln-deps
      mkdir -p $DEPS
      for f in .gpu-debs/*.deb; do dpkg -x "$f" $DEPS; done
      CARRIED=$DEPS/usr/lib/x86_64-linux-gnu
      export LD_LIBRARY_PATH=$CARRIED:$CARRIED/openblas-openmp:${LD_LIBRARY_PATH:-}
      DEFINES+=(-C cmake.define.KILN_DNNL_INCLUDE=$DEPS/usr/include -C cmake.define.KILN_DNNL_LIB=$CARRIED/libdnnl.so
                -C cmake.define.KILN_CBLAS_OMP_INCLUDE=$DEPS/usr/include/x86_64-linux-gnu/openblas-openmp
                -C cmake.define.KILN_OPENBLAS_OMP_LIB=$CARRIED/openblas-openmp/libopenblas.so)
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

# 2. Smoke: the remedy matrix (see the top of this file).
SMOKE_ROWS=$TMPD/smoke-rows     # the matrix and the runtimes mapped: the head of smoke.log
SMOKE_DETAIL=$TMPD/smoke-detail # the probes' output and the diagnostics: its tail
: >"$SMOKE_ROWS"; : >"$SMOKE_DETAIL"
ORDERS="none numpy torch"
# What a probe's exit status says, in a word: a crash is a signal (rc 128+n) or a timeout.
verdict() {
  case $1 in
    0) echo ok ;; 3) echo op-error ;; 4) echo absent ;; 124) echo TIMEOUT ;;
    134) echo SIGABRT ;; 135) echo SIGBUS ;; 136) echo SIGFPE ;; 137) echo SIGKILL ;; 139) echo SIGSEGV ;;
    132) echo SIGILL ;; *) echo "rc$1" ;;
  esac
}
# smoke_row REMEDY: the three probes at once under the current environment; one matrix row.
# Succeeds when no order crashed (an op error is a bug for the tests to show, not a crash).
smoke_row() {
  local remedy=$1 first rc crashed=0 row
  row=$(printf '%-22s' "$remedy${REBUILT:+ (rebuilt)}")
  for first in $ORDERS; do
    ( KILN_SMOKE_REMEDY=$remedy timeout -k 5 60 "$PY" -X faulthandler tools/gpu_smoke_probe.py \
        --first $first --device cuda >"$TMPD/probe-$first" 2>&1
      echo $? >"$TMPD/rc-$first" ) 2>/dev/null &
  done
  wait
  for first in $ORDERS; do
    rc=$(cat "$TMPD/rc-$first" 2>/dev/null || echo 1)
    row+=$(printf ' %-12s' "$(verdict "$rc")")
    case $rc in 0|3|4) ;; *) crashed=1 ;; esac
    {
      echo "--- [$remedy] first=$first: $(verdict "$rc")"
      grep -v '^\[' "$TMPD/probe-$first" | tail -n 25
    } >>"$SMOKE_DETAIL"
    # The runtimes each order had mapped under the first remedy tried (as built).
    [ -f "$TMPD/maps-$first" ] || grep '^\[' "$TMPD/probe-$first" >"$TMPD/maps-$first"
  done
  echo "$row" >>"$SMOKE_ROWS"
  return $crashed
}
# The environment each remedy changes, as it was before any: a remedy starts from it.
BASE_LD_PRELOAD=${LD_PRELOAD-}; BASE_PYTHONMALLOC=${PYTHONMALLOC-}; BASE_PYTHONPATH=${PYTHONPATH-}
BASE_LD_LIBRARY_PATH=${LD_LIBRARY_PATH-}
# kiln._C's path, as the installed kiln resolves it (that import is kiln alone, the order that
# worked), else the newest one built here.
find_kiln_so() {
  KILN_SO=$("$PY" -c 'import importlib.util as u; print(u.find_spec("kiln._C").origin)' 2>/dev/null | tail -1)
  [ -f "$KILN_SO" ] || KILN_SO=$(ls -t "$ROOT"/build*/frontend/_C.cpython-*.so 2>/dev/null | head -1)
  export KILN_SO
}
find_kiln_so
reset_env() {
  for v in LD_PRELOAD PYTHONMALLOC PYTHONPATH LD_LIBRARY_PATH; do
    local b=BASE_$v
    if [ -n "${!b}" ]; then export $v="${!b}"; else unset $v; fi
  done
}
# A folder of links to the carried libraries whose sonames the image does not have itself.
own_libs_dir() {
  local d=$TMPD/own-libs f
  mkdir -p "$d"
  for f in "$CARRIED"/*.so.[0-9]*; do
    [[ $(basename "$f") =~ \.so\.[0-9]+$ ]] || continue
    ldconfig -p | grep -q " $(basename "$f") " || ln -sf "$f" "$d/"
  done
  echo "$d"
}
# apply_remedy NAME: sets the remedy's environment (from the base one); fails, with the reason in
# WHY, where it does not apply on this machine. (Not in a subshell: its exports must stay.)
WHY=""
apply_remedy() {
  reset_env
  case $1 in
    as-built) ;;
    malloc) export PYTHONMALLOC=malloc ;;
    preload-runtimes)
      local libs
      libs=$(ldd "$KILN_SO" 2>/dev/null | awk '/lib(stdc\+\+|gcc_s|gomp)\.so/ {print $3}' | tr '\n' ' ')
      [ -n "$libs" ] || { WHY="ldd of kiln._C ($KILN_SO) names no runtime"; return 1; }
      export LD_PRELOAD="$libs${BASE_LD_PRELOAD:+ $BASE_LD_PRELOAD}" ;;
    own-libs-only)
      [ -n "$CARRIED" ] || { WHY="no carried libraries on LD_LIBRARY_PATH"; return 1; }
      local rest=${BASE_LD_LIBRARY_PATH//$CARRIED\/openblas-openmp/}
      rest=${rest//$CARRIED/}
      export LD_LIBRARY_PATH="$(own_libs_dir):$rest" ;;
    kiln-C-first | kiln-first)
      local d=$TMPD/$1
      mkdir -p "$d"
      if [ $1 = kiln-first ]; then
        echo "import kiln  # tools/gpu_check.sh: the kiln-first remedy" >"$d/sitecustomize.py"
      else
        [ -f "$KILN_SO" ] || { WHY="kiln._C not found"; return 1; }
        # Its libraries loaded (RTLD_LOCAL, as an import does) before anything; the import later
        # finds the library loaded and only runs its module init.
        printf 'import ctypes  # tools/gpu_check.sh: the kiln-C-first remedy\nctypes.CDLL(%s)\n' \
          "'$KILN_SO'" >"$d/sitecustomize.py"
      fi
      export PYTHONPATH="$d${BASE_PYTHONPATH:+:$BASE_PYTHONPATH}" ;;
    portable-rebuild)
      # KILN_NATIVE=OFF, -O2 everywhere, into its own build folder; it replaces the editable
      # install, so what runs after it runs the rebuilt kiln.
      [ $DRY = 0 ] || { WHY="dry run: no rebuild (the build here is the one in use)"; return 1; }
      if ! step "portable rebuild" 240 "$OUT/rebuild.log" "$PY" -m pip install --no-build-isolation \
             --no-deps -C build-dir=build-gpu-portable "${DEFINES[@]}" -C cmake.define.KILN_NATIVE=OFF \
             -C "cmake.define.CMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG" -C cmake.define.KILN_RUNTIME_OPT=-O2 \
             -e . >/dev/null; then
        WHY="the rebuild failed or was skipped (rebuild.log)"
        return 1
      fi
      REBUILT=1
      find_kiln_so ;;
    *) WHY="unknown remedy $1"; return 1 ;;
  esac
}
# The environment a remedy sets, to log with its row.
remedy_env() {
  env | grep -E '^(LD_PRELOAD|PYTHONMALLOC|PYTHONPATH|LD_LIBRARY_PATH)=' | sed 's/^/      /'
}
# smoke_matrix REMEDY...: tries each until one has no crash in any order; CHOSEN names it.
CHOSEN=""
TRIED=""
smoke_matrix() {
  local r
  for r in "$@"; do
    [ $(left) -gt 30 ] || { echo "(out of time before $r)" >>"$SMOKE_ROWS"; break; }
    TRIED+=" $r"
    if ! apply_remedy "$r"; then
      printf '%-22s n/a: %s\n' "$r" "$WHY" >>"$SMOKE_ROWS"
      continue
    fi
    { echo "--- environment of $r:"; remedy_env; } >>"$SMOKE_DETAIL"
    if smoke_row "$r"; then
      [ -n "$CHOSEN" ] || CHOSEN=$r
      return 0
    fi
  done
  return 1
}
write_smoke_log() {
  {
    echo "== smoke: kiln imported with nothing / numpy / torch imported first, one CUDA op each"
    printf '%-22s %-12s %-12s %-12s\n' remedy kiln-alone numpy-first torch-first
    cat "$SMOKE_ROWS"
    echo "chosen: ${CHOSEN:-none}  (kept for the rest of the run)"
    echo "== runtimes mapped after each import, as built (kiln._C: $KILN_SO)"
    for first in $ORDERS; do
      [ -f "$TMPD/maps-$first" ] && grep -v "^\[start\]" "$TMPD/maps-$first" | sed "s|^|  $first-first |"
    done
    echo "== details"
    cat "$SMOKE_DETAIL"
    [ -f "$TMPD/diag" ] && cat "$TMPD/diag"
  } >"$OUT/smoke.log"
}
# Where the as-built crash crashed and what it had loaded: a native backtrace (the GPU image has
# cuda-gdb, which debugs host programs too, and no gdb), the order the loader initialized the
# runtimes in, CPython's debug allocator (API mismatches, overflows of Python memory) and ASan's
# allocator preloaded (invalid frees reported with the freeing stack).
smoke_diagnose() {
  local crash="import $1; import kiln; print('imported')"
  echo "=== diagnostics of the as-built crash: $crash"
  echo "--- ldd $KILN_SO"; ldd "$KILN_SO"
  echo "--- ldconfig -p (runtimes)"; ldconfig -p | grep -E 'lib(stdc\+\+|gomp|gfortran|quadmath|OpenCL)\.so'
  for dbg in cuda-gdb gdb; do
    command -v $dbg >/dev/null || continue
    echo "--- $dbg backtrace"
    timeout -k 5 60 $dbg -q -batch -ex run -ex bt -ex "info sharedlibrary" --args "$PY" -c "$crash" 2>&1 | tail -n 120
    break
  done
  echo "--- libraries initialized, in order"
  LD_DEBUG=libs timeout -k 5 40 "$PY" -c "$crash" 2>&1 |
    grep -E "calling init: .*(stdc\+\+|gomp|gfortran|quadmath|dnnl|openblas|OpenCL|libgcc_s|_C\.)" | sed 's/^ *[0-9]*: *//'
  echo "--- PYTHONMALLOC=debug"
  PYTHONMALLOC=debug timeout -k 5 40 "$PY" -X dev -X faulthandler -c "$crash" 2>&1 | tail -n 40
  # (libstdc++ preloaded with it: else ASan's __cxa_throw interceptor finds nothing to wrap and
  # the first C++ exception aborts with "CHECK failed ... real___cxa_throw".)
  local asan std
  asan=$(c++ -print-file-name=libasan.so 2>/dev/null)
  std=$(ldd "$KILN_SO" | awk '/libstdc\+\+/ {print $3}')
  if [ -n "$asan" ] && [ -f "$asan" ]; then
    echo "--- ASan allocator ($asan $std)"
    LD_PRELOAD="$asan $std" ASAN_OPTIONS=detect_leaks=0:verify_asan_link_order=0 PYTHONMALLOC=malloc \
      timeout -k 5 40 "$PY" -c "$crash" 2>&1 | tail -n 60
  fi
}
export -f smoke_diagnose
export PY

CHEAP_REMEDIES="as-built malloc preload-runtimes own-libs-only kiln-C-first kiln-first"
t0=$SECONDS
REBUILT=""
smoke_matrix $CHEAP_REMEDIES || smoke_matrix portable-rebuild kiln-first
AS_BUILT_ROW=$(grep -m1 '^as-built' "$SMOKE_ROWS")
note "$(printf '%-28s %-24s %4ds  (log: smoke.log)' "smoke matrix" "chosen: ${CHOSEN:-NONE}" $((SECONDS - t0)))"
sed 's/^/    /' "$SMOKE_ROWS" | tee -a "$SUMMARY"
# The diagnostics of the as-built crash (its first crashing order), with any remedy's environment
# put aside: at once when nothing else can run, else after the benches.
diagnose_as_built() {
  local crashing
  crashing=$(echo "$AS_BUILT_ROW" | awk '{ if ($3 !~ /^(ok|op-error|absent)$/) print "numpy"; else if ($4 !~ /^(ok|op-error|absent)$/) print "torch" }')
  ( reset_env; step "smoke diagnostics" 100 "$TMPD/diag" bash -c "smoke_diagnose ${crashing:-numpy}" ) >/dev/null
  note "smoke diagnostics (as built, ${crashing:-numpy} first): in smoke.log"
}
write_smoke_log
if [ -z "$CHOSEN" ]; then
  diagnose_as_built
  write_smoke_log
  note "no remedy imports kiln in every order: nothing else can run (smoke.log)"
  exit 1
fi
[ "$CHOSEN" = portable-rebuild ] || apply_remedy "$CHOSEN"
[ "$CHOSEN" = as-built ] || note "running the rest with the $CHOSEN remedy: $(remedy_env | tr -s ' ' | tr '\n' ' ')"

# 3. The device-generic tests on CUDA (compiled programs included), then the CUDA codegen tests.
export KILN_TEST_DEVICE=cuda
# (test_creation.py's device-generic tests only, as test_cuda_fake_driver runs them: its other tests
# compare with the torch installed there, and torch 2.11 dies of SIGFPE on arange(0.5, 5, 0.5,
# dtype=int64), which 2.13 rejects.)
step "pytest device-generic" 150 "$OUT/pytest.log" "$PY" -m pytest -q -p no:cacheprovider --maxfail=40 -rfE \
  test/python/test_device_tensors.py test/python/test_compile_on_device.py test/python/test_eager_on_device.py \
  test/python/test_creation.py -k "not test_creation.py or cuda"
# (The real NVRTC: the image's nvidia-cuda-nvrtc wheel; in a dry run the one installed here.)
step "pytest CUDA codegen" 45 "$OUT/pytest.log" env -u KILN_NVRTC -u KILN_CUDA_DRIVER -u KILN_CUBLAS \
  KILN_CONFORMANCE_DIR="$ROOT/$( [ -f ../shared/conformance/run.py ] && echo ../shared/conformance || echo .gpu-debs/conformance )" \
  "$PY" -m pytest -q -p no:cacheprovider test/python/test_cuda_codegen.py
# The conformance programs with their tensors on CUDA, against torch on CUDA (tools/
# conformance_device.py; torch on the CPU in a dry run): the shared sample first, then test/programs.
CONF_DIR=$( [ -f ../shared/conformance/run.py ] && echo ../shared/conformance || echo .gpu-debs/conformance )
CONF_JOBS=$(nproc)
step "conformance on CUDA (sample)" 100 "$OUT/conformance.log" "$PY" tools/conformance_device.py \
  --conformance-dir "$CONF_DIR" --jobs $CONF_JOBS --timeout 90 "$CONF_DIR/programs"
# test/programs before the benches (session 17's second run reached 87 of 117 after them), each
# with at most 150 s, leaving the benches 90 s.
if [ $(left) -gt 150 ]; then
  limit=$(( $(left) - 90 )); [ $limit -gt 150 ] && limit=150
  step "conformance on CUDA (test/programs)" $limit "$OUT/conformance.log" "$PY" \
    tools/conformance_device.py --conformance-dir "$CONF_DIR" --jobs $CONF_JOBS --timeout 60 test/programs
fi

# 4. Benches (each skips with its reason where there is no real GPU).
# (No JSON of cuda_copy: at most 8 files come back; its numbers are in bench.log.)
step "bench cuda_copy" 30 "$OUT/bench.log" "$PY" bench/cuda_copy.py --mib 256
step "bench cuda_kernels" 120 "$OUT/bench.log" "$PY" bench/cuda_kernels.py --json "$OUT/cuda_kernels.json" \
  $( [ $DRY = 1 ] && echo --fake-ok )

# 5. When as built crashed: its diagnostics, the rows not tried yet, then the portable rebuild,
# while time is left (what the next session needs to fix the cause rather than work around it).
if [ "$CHOSEN" != as-built ]; then
  diagnose_as_built
  rest=""
  for r in $CHEAP_REMEDIES; do [[ " $TRIED " == *" $r "* ]] || rest+=" $r"; done
  CHOSEN_BEFORE=$CHOSEN
  for r in $rest; do smoke_matrix "$r" >/dev/null; done
  if [[ " $TRIED " != *" portable-rebuild "* ]] && [ $(left) -gt 200 ]; then
    smoke_matrix portable-rebuild >/dev/null
  fi
  CHOSEN=$CHOSEN_BEFORE
  write_smoke_log
  note "smoke matrix after the benches (experiments):"
  sed 's/^/    /' "$SMOKE_ROWS" | tee -a "$SUMMARY"
fi
rm -rf "$TMPD"
note "== done in ${SECONDS}s; files in $OUT"
