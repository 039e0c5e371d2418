#!/usr/bin/env bash
# The README's main command: install what is missing, build, and run the main
# job on the embedded default (the paper's base Transformer, random weights,
# one forward pass on the reference backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build/tools/transfuse demo "$@"
