#!/usr/bin/env python3
"""Makes the golden data of the Marian tokenizer test (runtime/host/Tokenizer.h,
MarianTokenizer; tests/unit/runtime/tokenizer_test.cpp): two small SentencePiece
models trained here with the `sentencepiece` package (source.spm on English,
target.spm on German: Multi30k and the byte-level BPE corpus's lines), a joint
vocab.json in Marian's order (</s> 0, <unk> 1, the pieces, two language codes,
<pad> last: ids unlike the models' own), the same with separate vocabularies
(separate/), and what transformers' MarianTokenizer (the slow tokenizer: Marian
has no fast one; sacremoses not installed, so no Moses punctuation
normalization) makes of each line: source ids (EOS last), target ids, and the
decode of the target ids.

Run once, by hand, in a venv with transformers and sentencepiece (no sacremoses):

    /work/venv-hf/bin/pip install transformers sentencepiece protobuf
    /work/venv-hf/bin/python tests/tokenizers/make_marian_golden.py

It writes tests/tokenizers/marian/{source.spm, target.spm, vocab.json,
tokenizer_config.json, golden.jsonl.gz} and marian/separate/ (vocab.json from the
source pieces, target_vocab.json from the target's, used with the same models).
"""
import gzip
import io
import json
import os
import random
import shutil
import sys

import sentencepiece as spm
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_wordpiece_golden import read, write_golden  # noqa: E402

OUT = os.path.join(HERE, "marian")


def train(lines, path, normalization):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model,
                                   vocab_size=600, character_coverage=1.0, model_type="unigram",
                                   normalization_rule_name=normalization, minloglevel=2)
    with open(path, "wb") as f:
        f.write(model.getvalue())
    return spm.SentencePieceProcessor(model_file=path)


def pieces(sp):
    return [sp.id_to_piece(i) for i in range(sp.get_piece_size())
            if not (sp.is_control(i) or sp.is_unknown(i))]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, ensure_ascii=False, indent=1)


def main():
    rng = random.Random(20261204)
    os.makedirs(os.path.join(OUT, "separate"), exist_ok=True)
    en, de = read("train.en.gz"), read("train.de.gz")
    # The source with OPUS-MT's normalization (nmt_nfkc, whose rule table
    # is most of the file), the target without (identity: a small file).
    src = train(en, os.path.join(OUT, "source.spm"), "nmt_nfkc")
    tgt = train(de, os.path.join(OUT, "target.spm"), "identity")
    joint = ["</s>", "<unk>"]
    for p in pieces(src) + pieces(tgt):
        if p not in joint:
            joint.append(p)
    joint += [">>de<<", ">>fr<<", "<pad>"]
    write_json(os.path.join(OUT, "vocab.json"), {p: i for i, p in enumerate(joint)})
    write_json(os.path.join(OUT, "tokenizer_config.json"),
               {"source_lang": "en", "target_lang": "de", "separate_vocabs": False,
                "unk_token": "<unk>", "eos_token": "</s>", "pad_token": "<pad>",
                "model_max_length": 512, "tokenizer_class": "MarianTokenizer"})
    # separate/ holds only its vocabularies and config: the test copies the
    # models beside them, as this does for transformers.
    sep = os.path.join(OUT, "separate")
    for name, ps in (("vocab.json", pieces(src)), ("target_vocab.json", pieces(tgt))):
        write_json(os.path.join(sep, name),
                   {p: i for i, p in enumerate(["</s>", "<unk>"] + ps + ["<pad>"])})
    write_json(os.path.join(sep, "tokenizer_config.json"),
               {"source_lang": "en", "target_lang": "de", "separate_vocabs": True,
                "model_max_length": 512, "tokenizer_class": "MarianTokenizer"})

    val = read("val.en.gz") + read("val.de.gz")
    rng.shuffle(val)
    with gzip.open(os.path.join(HERE, "bpe", "golden.jsonl.gz"), "rt", encoding="utf-8") as f:
        hard = [r["t"] for r in map(json.loads, f) if "t" in r and "\n" not in r["t"]]
    lines = val[:600] + hard[800:1400] + [
        ">>de<< A man is walking.", ">>fr<<Two dogs.", ">>xx<< unknown code", ">>de<<", "",
        " leading and trailing ", "ÄÖÜ äöü ß", "１２３ ＡＢＣ", "tab\there"]
    sep_full = os.path.join(OUT, "separate-full")
    shutil.rmtree(sep_full, ignore_errors=True)
    shutil.copytree(sep, sep_full)
    for f in ("source.spm", "target.spm"):
        shutil.copy(os.path.join(OUT, f), os.path.join(sep_full, f))
    toks = {"j": transformers.MarianTokenizer.from_pretrained(OUT),
            "s": transformers.MarianTokenizer.from_pretrained(sep_full)}
    records = []
    for text in lines:
        rec = {"t": text}
        for key, tok in toks.items():
            source = tok(text).input_ids
            target = tok(text_target=text).input_ids
            rec[key] = [source, target, tok.decode(target, skip_special_tokens=True)]
        records.append(rec)
    shutil.rmtree(sep_full)
    path = os.path.join(OUT, "golden.jsonl.gz")
    write_golden(path, records)
    print(f"transformers {transformers.__version__}, sentencepiece {spm.__version__}: "
          f"{len(records)} lines -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
