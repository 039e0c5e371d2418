#!/usr/bin/env bash
# The README's test command: install what is missing, build, and run every
# test (GoogleTest, lit, the NumPy oracle, the PyTorch check; then the Python
# package's pytest suite).
#   bash scripts/test.sh                               build/, every test
#   bash scripts/test.sh --sanitize address,undefined  build-asan/, every test under
#                                                      ASan + UBSan (compiled artifacts too)
#                                                      but the cuda_* nvcc builds
#   bash scripts/test.sh --sanitize thread             build-tsan/, the concurrency tests
#                                                      (ctest label "concurrency") under TSan
# Extra arguments after these go to ctest (e.g. -R abi).
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=""
if [[ "${1:-}" == "--sanitize" ]]; then
  sanitize="${2:-}"
  shift 2 || { echo "test.sh: --sanitize needs a value" >&2; exit 2; }
fi
bash scripts/install-deps.sh --test
if [[ -z "$sanitize" ]]; then
  bash scripts/build.sh
  ctest --test-dir build --output-on-failure -j 2 "$@"
  # The Python package's tests (python/tests, pytest) on the package in
  # build/python; only with the whole suite (no ctest arguments).
  (($#)) && exit 0
  pyvenv="${XDG_CACHE_HOME:-$HOME/.cache}/transfuse/python-venv"
  exec env PYTHONPATH="$PWD/build/python" "$pyvenv/bin/python" -m pytest -q -p no:cacheprovider \
    python/tests
fi
if [[ "$sanitize" == thread ]]; then
  # Only what the concurrency tests run (the driver, which builds the
  # artifacts' libraries, and the runtime's and the ABI's tests).
  dir=$(bash scripts/build.sh --sanitize thread transfuse runtime_tests exec_abi_tests | tail -n 1)
  source scripts/sanitizer-env.sh
  exec ctest --test-dir "$dir" --output-on-failure -j 2 -L concurrency "$@"
fi
dir=$(bash scripts/build.sh --sanitize "$sanitize" | tail -n 1)
source scripts/sanitizer-env.sh
# The cuda_* tests are nvcc builds of generated CUDA (and checks of their
# reference outputs) that the plain run makes already: nothing of ours runs
# under the sanitizer there that lit's compile_cuda.test does not run.
exec ctest --test-dir "$dir" --output-on-failure -j 2 -E '^cuda_' "$@"
