#!/bin/bash
# Runs every CUDA test on a GPU machine and writes the results to a file.
#
# Build here first: bash scripts/build.sh (with nvcc it builds
# build/tests/gpu/cuda_kernels_test and cuda_train_kernels_test, the CUDA
# runtime linked statically, cuda_model_check and cuda_train_check), then
#   /usr/bin/python3 tests/gpu/prepare.py --transfuse build/tools/transfuse \
#       --out build/tests/gpu/models --full --bench --pack
# (the tiny configs compiled with --target cuda, their inputs and the
# reference backend's outputs, and train steps with --train against the cpu
# target's; with --bench transformer-base too, timed at
# B=8, S=T=64; --pack writes them to models.tar.xz, 10 MB where the folder
# is 100). cuda_bench times the kernels at the issue's shapes. Carry the
# test programs (build/tests/gpu/cuda_*) and build/tests/gpu/models.tar.xz
# to the GPU machine and run, from the repository root:
#
#   bash tests/gpu/run.sh [BUILD_DIR] [RESULTS]
#
# (defaults: build, and $OUT/gpu-results.txt where $OUT is set, else
# gpu-results.txt). The machine needs only the NVIDIA driver: no toolkit or
# MLIR; Highway's libraries come in build/tests/gpu/models/lib. Exit 0 when
# every test passed.
#
# `run.sh --models-only [--library L] BUILD_DIR` (ctest's cuda_models and
# cuda_model_check_cpu) runs only the model checks (with the artifact L of
# each model dir) and exits 77 when there is no device.
set -u
modelsOnly=0
library=()
if [ "${1:-}" = "--models-only" ]; then
  modelsOnly=1
  shift
fi
if [ "${1:-}" = "--library" ]; then  # cuda_model_check's --library (ctest)
  library=(--library "$2")
  shift 2
fi
build=${1:-build}
results=${2:-${OUT:+$OUT/}gpu-results.txt}
models="$build/tests/gpu/models"
# prepare.py --pack: the models travel packed (a tenth of their size).
if [ ! -d "$models" ] && [ -f "$models.tar.xz" ]; then
  tar -xJf "$models.tar.xz" -C "$(dirname "$models")" || exit 1
fi
export LD_LIBRARY_PATH="$models/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

# Runs one command; prints its exit; counts failures and skips (77).
failures=0
skips=0
runs=0
step() {
  echo "== $*"
  "$@"
  local rc=$?
  echo "== exit $rc"
  runs=$((runs + 1))
  if [ "$rc" -eq 77 ]; then skips=$((skips + 1)); elif [ "$rc" -ne 0 ]; then failures=$((failures + 1)); fi
}

runAll() {
  if [ "$modelsOnly" -eq 0 ]; then
    echo "== $(date -u +%FT%TZ) $(uname -n)"
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
    step "$build/tests/gpu/cuda_kernels_test"
    step "$build/tests/gpu/cuda_train_kernels_test"
    step "$build/tests/gpu/cuda_bench"
  fi
  for dir in "$models"/*/; do
    dir=${dir%/}
    if [ -f "$dir/train.safetensors" ]; then
      step "$build/tests/gpu/cuda_train_check" "$dir" "${library[@]}"
      continue
    fi
    [ -f "$dir/cases.txt" ] || continue
    if [ ${#library[@]} -gt 0 ] && [ ! -f "$dir/${library[1]}" ]; then
      echo "== $dir has no ${library[1]} (a bf16 model): skipped"
      continue
    fi
    step "$build/tests/gpu/cuda_model_check" "$dir" "${library[@]}"
    if [ "$modelsOnly" -eq 0 ] && [ -f "$dir/bench.safetensors" ]; then
      step "$build/tests/gpu/cuda_model_check" "$dir" --bench 50
    fi
  done
  echo "== $runs run, $failures failed, $skips skipped"
  if [ "$runs" -eq 0 ]; then
    echo "nothing to run: no models prepared under $models (tests/gpu/prepare.py)"
    return 1
  fi
  [ "$failures" -eq 0 ] || return 1
  [ "$runs" -gt 0 ] && [ "$skips" -eq "$runs" ] && return 77
  return 0
}

if [ "$modelsOnly" -eq 1 ]; then
  runAll
  exit $?
fi
runAll 2>&1 | tee "$results"
status=${PIPESTATUS[0]}
echo "results: $results"
exit "$status"
