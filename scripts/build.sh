#!/usr/bin/env bash
# Configures and builds Transfuse (Ninja, ccache when present, 2 jobs).
#   bash scripts/build.sh                            -> build/
#   bash scripts/build.sh --sanitize address,undefined -> build-asan/ (clang-22, ASan +
#        UBSan, libFuzzer coverage and the fuzz targets of tests/fuzz)
#   bash scripts/build.sh --sanitize thread          -> build-tsan/ (clang-22, TSan)
# Ninja targets may follow (default: all), e.g. what one test label needs.
# Prints the build folder's name as its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build
# The plain build also builds the Python package's extension (python/),
# with the venv install-deps.sh fills.
pyvenv="${XDG_CACHE_HOME:-$HOME/.cache}/transfuse/python-venv"
args=(-DCMAKE_BUILD_TYPE=Release)
python=(-DTRANSFUSE_PYTHON_PACKAGE=ON -DPython_EXECUTABLE="$pyvenv/bin/python")
if [[ "${1:-}" == "--sanitize" ]]; then
  case "${2:-}" in
    address,undefined|undefined,address)
      dir=build-asan
      args+=(-DTRANSFUSE_SANITIZE=address,undefined -DTRANSFUSE_FUZZ=ON) ;;
    thread)
      dir=build-tsan
      args+=(-DTRANSFUSE_SANITIZE=thread) ;;
    *) echo "build.sh: --sanitize expects address,undefined or thread, got '${2:-}'" >&2; exit 2 ;;
  esac
  args+=(-DCMAKE_C_COMPILER=clang-22 -DCMAKE_CXX_COMPILER=clang++-22)
  python=(-DTRANSFUSE_PYTHON_PACKAGE=OFF)
  shift 2
fi
targets=()
for t in "$@"; do
  [[ "$t" == -* ]] && { echo "build.sh: unknown argument '$t'" >&2; exit 2; }
  targets+=("$t")
done
mkdir -p "$dir" && cmake -G Ninja -S . -B "$dir" "${args[@]}" "${python[@]}" > "$dir/cmake.log" 2>&1 || {
  cat "$dir/cmake.log"; exit 1; }
ninja -C "$dir" -j "${JOBS:-2}" "${targets[@]}" >&2
echo "$dir"
