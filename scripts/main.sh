#!/usr/bin/env bash
# The README's main command: install what is missing, build, then
#  1. compile the paper's base Transformer for the CPU with every fusion,
#     run it and check it against the fp64 reference backend (--verify:
#     random weights, padded inputs of three sizes, concurrent runs);
#  2. print the per-strategy table: each fusion strategy compiled and timed
#     side by side at batch 8, source and target length 64.
# Extra arguments go to `transfuse bench model` (e.g. --threads 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
build/tools/transfuse compile models/transformer-base.json -o out/transformer-base \
  --fusion all --max-batch 8 --max-seq-len 64 --verify
build/tools/transfuse bench model models/transformer-base.json \
  --fusion none,attention,layernorm,epilogue,projections,all \
  --batch 8 --src-len 64 --tgt-len 64 "$@"
