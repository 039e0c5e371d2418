#!/usr/bin/env bash
# Multi30k English->German (docs/training.md, "The Multi30k result"): the
# paper's model at a small size trained on this machine's CPU cores from raw
# text for at most TIME_LIMIT minutes of wall time (tokenizer training and
# compilation included), the last checkpoints averaged, test_2016_flickr
# translated with beam search and scored with sacreBLEU. Run it in the
# background; it writes everything under RUN (default runs/multi30k):
#   nohup bash scripts/train-multi30k.sh > multi30k.log 2>&1 &
# Environment: RUN, DATA (default ../shared/data/multi30k), TIME_LIMIT
# (minutes, default 58), THREADS (default: every core), SEED (default 1),
# DTYPE (f32 by default; bf16: mixed-precision training and bf16
# translation, docs/bf16.md).
set -euo pipefail
cd "$(dirname "$0")/.."
RUN=${RUN:-runs/multi30k}
DATA=${DATA:-../shared/data/multi30k}
TIME_LIMIT=${TIME_LIMIT:-58}
THREADS=${THREADS:-$(nproc)}
SEED=${SEED:-1}
DTYPE=${DTYPE:-f32}
[[ -x build/tools/transfuse ]] || { bash scripts/install-deps.sh && bash scripts/build.sh; }
# sacreBLEU (PyPI) in a venv of its own, for scoring only.
VENV=${VENV:-.venv-bleu}
[[ -x $VENV/bin/sacrebleu ]] || { python3 -m venv "$VENV" && "$VENV/bin/pip" install -q sacrebleu; }

if [[ -e $RUN ]]; then echo "$RUN exists: move it away or set RUN" >&2; exit 1; fi
mkdir -p "$RUN"
# The run uses a copy of the compiler, so that rebuilding during the run
# changes nothing under it.
cp build/tools/transfuse "$RUN/transfuse"
T=$RUN/transfuse
lscpu | grep -E 'Model name|Flags' | sed 's/\(Flags:\).*\(avx512f\|avx2\).*/\1 ... \2 .../' > "$RUN/cpu.txt"
start=$(date +%s)
$T train models/multi30k-en-de.json \
  --src-train "$DATA/train.en.gz" --tgt-train "$DATA/train.de.gz" \
  --src-valid "$DATA/val.en.gz" --tgt-valid "$DATA/val.de.gz" \
  --tokenizer sentencepiece --vocab-size 8000 \
  --batch-tokens 3000 --warmup 400 --lr-factor 0.4 --label-smoothing 0.1 \
  --time-limit "$TIME_LIMIT" --seed "$SEED" --threads "$THREADS" --dtype "$DTYPE" \
  --checkpoint-dir "$RUN/ckpt" --keep 5 --no-progress --log-json "$RUN/train.jsonl"
end=$(date +%s)
echo "training wall time: $(( (end - start) / 60 )) min $(( (end - start) % 60 )) s" | tee "$RUN/wall-time.txt"

n=$(ls -d "$RUN"/ckpt/step-* | wc -l)
$T average-checkpoints "$RUN/ckpt" --last $(( n < 5 ? n : 5 )) -o "$RUN/ckpt/averaged"
# Choose on val: best (by validation loss), last and averaged, by BLEU.
zcat -f "$DATA/val.de.gz" > "$RUN/val.de"
zcat -f "$DATA/test_2016_flickr.de.gz" > "$RUN/test.de"
best=""; best_bleu=-1
for which in best last averaged; do
  zcat -f "$DATA/val.en.gz" | $T translate "$RUN/ckpt" --checkpoint $which --beam 4 --alpha 0.6 \
    --threads "$THREADS" --dtype "$DTYPE" > "$RUN/val.$which.de"
  bleu=$("$VENV/bin/sacrebleu" "$RUN/val.de" -i "$RUN/val.$which.de" -b -w 2)
  echo "val BLEU ($which checkpoint, beam 4): $bleu" | tee -a "$RUN/val-bleu.txt"
  if python3 -c "import sys; sys.exit(0 if $bleu > $best_bleu else 1)"; then best=$which; best_bleu=$bleu; fi
done
zcat -f "$DATA/test_2016_flickr.en.gz" | $T translate "$RUN/ckpt" --checkpoint "$best" --beam 4 \
  --alpha 0.6 --threads "$THREADS" --dtype "$DTYPE" > "$RUN/test.hyp.de"
"$VENV/bin/sacrebleu" "$RUN/test.de" -i "$RUN/test.hyp.de" | tee "$RUN/test-bleu.json"
echo "test_2016_flickr: the $best checkpoint (chosen on val)" | tee -a "$RUN/test-bleu.json"
