#!/usr/bin/env bash
# Configures and builds Transfuse in ./build (Ninja, ccache when present, 2 jobs).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build && cmake -G Ninja -S . -B build -DCMAKE_BUILD_TYPE=Release > build/cmake.log 2>&1 || {
  cat build/cmake.log; exit 1; }
ninja -C build -j "${JOBS:-2}"
