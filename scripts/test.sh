#!/usr/bin/env bash
# The README's test command (and CI's): install what is missing, build, and
# run every test (GoogleTest, lit, the NumPy oracle, the PyTorch check).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --test
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j 2
