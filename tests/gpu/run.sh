#!/bin/bash
# Runs every CUDA test on a GPU machine and writes the results to a file.
#
# Build here first (bash scripts/build.sh: with nvcc it builds
# build/tests/gpu/cuda_kernels_test for sm_80 and sm_90, the CUDA runtime
# linked statically), then on the GPU machine, from the repository root:
#
#   bash tests/gpu/run.sh [BUILD_DIR] [RESULTS]
#
# (defaults: build, and $OUT/gpu-results.txt where $OUT is set, else
# gpu-results.txt). The machine needs only the NVIDIA driver: no toolkit,
# MLIR or Highway. Exit 0 when every test passed.
set -u
build=${1:-build}
results=${2:-${OUT:+$OUT/}gpu-results.txt}

runAll() {
  local status=0 rc
  echo "== $(date -u +%FT%TZ) $(uname -n)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  for test in "$build"/tests/gpu/cuda_kernels_test; do
    echo "== $test"
    "$test"
    rc=$?
    echo "== exit $rc"
    [ "$rc" -eq 0 ] || status=1
  done
  return $status
}

runAll 2>&1 | tee "$results"
status=${PIPESTATUS[0]}
echo "results: $results"
exit "$status"
