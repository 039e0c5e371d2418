#!/usr/bin/env bash
# Builds the fuzz targets of tests/fuzz (build-asan/: clang-22, ASan + UBSan,
# libFuzzer) and runs each for SECONDS (default 60), one after another:
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     TARGET: safetensors config mlir model_inputs
#                                                   hf_config tokenizer image onnx
# FUZZ_JOBS=N runs N targets at once (default 1).
# Prints per target the executions, the coverage (edges, features) and, on a
# crash, the path of the reproducer; exits non-zero when any target crashed,
# leaked, timed out or ran out of memory. The corpus each run grows is kept in
# build-asan/fuzz/corpus/TARGET (seeded from tests/fuzz/corpus/TARGET, and for
# mlir from the lit tests' cases); reproducers go to build-asan/fuzz/crashes/.
# Rerun one: build-asan/fuzz/bin/fuzz_TARGET FILE.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
((${#targets[@]})) || targets=(safetensors config mlir model_inputs hf_config tokenizer image onnx)
[[ "$seconds" =~ ^[0-9]+$ ]] || { echo "fuzz.sh: SECONDS must be an integer, got '$seconds'" >&2; exit 2; }

set -e
bash scripts/install-deps.sh --test
dir=$(bash scripts/build.sh --sanitize address,undefined | tail -n 1)
set +e
source scripts/sanitizer-env.sh

# Extra seeds: every `// -----` case of the lit tests is an MLIR seed, and
# the shipped tiny configs are config seeds.
seeds=$dir/fuzz/seeds
rm -rf "$seeds" && mkdir -p "$seeds/mlir" "$seeds/config"
for f in tests/lit/passes/*.mlir tests/lit/ir/*.mlir tests/lit/tools/inputs/cpu/*.mlir; do
  awk -v out="$seeds/mlir/$(basename "$f" .mlir)" \
    '/^\/\/ -----/ { n++; next } { print > (out "-" n+0 ".mlir") }' "$f"
done
cp models/tiny-*.json "$seeds/config/"

# One target: runs it and writes its result line to $dir/fuzz/TARGET.result.
fuzz_one() {
  local t=$1 bin=$dir/fuzz/bin/fuzz_$1
  local corpus=$dir/fuzz/corpus/$t crashes=$dir/fuzz/crashes/$t log=$dir/fuzz/$t.log
  mkdir -p "$corpus" "$crashes"
  local extra=() dict=()
  [[ -d "$seeds/$t" ]] && extra+=("$seeds/$t")
  [[ -f tests/fuzz/dict/$t.dict ]] && dict=(-dict=tests/fuzz/dict/$t.dict)
  "$bin" "$corpus" "tests/fuzz/corpus/$t" "${extra[@]}" "${dict[@]}" \
    -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$crashes/" > "$log" 2>&1
  local rc=$? result
  local execs cov ft
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -n 1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -n 1 | awk '{print $2}')
  if ((rc == 0)); then
    result=ok
  else
    local repro kind
    repro=$(grep -o "Test unit written to [^ ]*" "$log" | tail -n 1 | sed 's/Test unit written to //')
    kind=$(grep -m1 -oE "ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-z-]+|runtime error|FUZZ_CHECK failed" "$log")
    result="CRASH (${kind:-exit $rc}): ${repro:-no reproducer, see $log}"
  fi
  printf '%-14s %12s %8s %8s  %s\n' "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$result" \
    > "$dir/fuzz/$t.result"
  return $rc
}

# FUZZ_JOBS targets at a time (default 1: one core each).
jobs=${FUZZ_JOBS:-1}
status=0
running=0
for t in "${targets[@]}"; do
  [[ -x "$dir/fuzz/bin/fuzz_$t" ]] || { echo "fuzz.sh: unknown target '$t'" >&2; status=2; continue; }
  rm -f "$dir/fuzz/$t.result"
  fuzz_one "$t" &
  running=$((running + 1))
  if ((running >= jobs)); then
    wait -n || status=1
    running=$((running - 1))
  fi
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
printf '%-14s %12s %8s %8s  %s\n' target executions edges features result
for t in "${targets[@]}"; do
  [[ -f "$dir/fuzz/$t.result" ]] && cat "$dir/fuzz/$t.result"
done
exit $status
