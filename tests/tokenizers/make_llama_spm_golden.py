#!/usr/bin/env python3
"""Makes the golden data of the SentencePiece test of Llama 2 and Mistral
tokenizers (tests/unit/runtime/tokenizer_test.cpp): a tokenizer.model trained here
with the `sentencepiece` package in Llama 2's settings (BPE, byte fallback, digits
split, whitespace kept, no normalization, <unk> 0, <s> 1, </s> 2), and what
transformers' fast LlamaTokenizerFast (converted from that model; the reference,
as transformers uses it: AutoTokenizer on the directory, transformers 5 having no
slow tokenizer left) makes of each line of a corpus: ids (<s> first) and
decode(skip_special_tokens=True). Where sentencepiece itself (what transformers 4's
slow LlamaTokenizer ran, <s> added) gives other ids, the record says so ("slow").

Run once, by hand, in a venv with transformers, sentencepiece and protobuf:

    /work/venv-hf/bin/python tests/tokenizers/make_llama_spm_golden.py
"""
import gzip
import io
import json
import os
import random
import sys

import sentencepiece as spm
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_wordpiece_golden import read, write_golden  # noqa: E402

OUT = os.path.join(HERE, "llama-spm")


def main():
    rng = random.Random(20261204)
    os.makedirs(OUT, exist_ok=True)
    with gzip.open(os.path.join(HERE, "bpe", "golden.jsonl.gz"), "rt", encoding="utf-8") as f:
        hard = [r["t"] for r in map(json.loads, f) if "t" in r]
    # Special tokens' text is left out: sentencepiece reads "<s>" as text,
    # transformers as the token.
    hard = [t for t in hard if "<s>" not in t and "</s>" not in t and "<unk>" not in t]
    train = read("train.en.gz")[:20000] + read("train.de.gz")[:20000] + hard[:1500]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(train), model_writer=model, vocab_size=1000, model_type="bpe",
        byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity",
        character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2)
    path = os.path.join(OUT, "tokenizer.model")
    with open(path, "wb") as f:
        f.write(model.getvalue())
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "LlamaTokenizer", "add_bos_token": True,
                   "add_eos_token": False, "legacy": False, "bos_token": "<s>",
                   "eos_token": "</s>", "unk_token": "<unk>"}, f, indent=1)
    fast = transformers.AutoTokenizer.from_pretrained(OUT)
    sp = spm.SentencePieceProcessor(model_file=path)
    val = read("val.en.gz") + read("val.de.gz")
    rng.shuffle(val)
    lines = val[:600] + hard[1500:2300] + [
        "", " ", "  two leading spaces", "trailing  ", "\ttab", "line\nbreak", "12345 678",
        "ünïcödé ✓ 😀 東京", "\u3000ideographic space"]
    records, differ = [], 0
    for text in lines:
        ids = fast(text).input_ids
        rec = {"t": text, "ids": ids, "d": fast.decode(ids, skip_special_tokens=True)}
        slow_ids = [1] + sp.encode(text)
        if slow_ids != ids:
            rec["slow"] = slow_ids
            differ += 1
        records.append(rec)
    out = os.path.join(OUT, "golden.jsonl.gz")
    write_golden(out, records)
    print(f"transformers {transformers.__version__}, sentencepiece {spm.__version__}: "
          f"{len(records)} lines ({differ} where the slow tokenizer differs) -> {out} "
          f"({os.path.getsize(out)} bytes; the model {os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
