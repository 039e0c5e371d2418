#!/usr/bin/env python3
"""Makes the golden data of the byte-level BPE tokenizer test
(runtime/host/HfTokenizer.h, tests/unit/runtime/hf_tokenizer_test.cpp): three small
byte-level BPE tokenizers in the layouts of GPT-2, Llama 3 and Qwen2, trained
with Hugging Face's `tokenizers` on Multi30k and generated lines, a corpus of
lines (accents, CJK, emoji, code, whitespace runs, long numbers, special
tokens in the text), and what `tokenizers` makes of every line.

Run once, by hand, in a venv of its own (the test reads the files it writes and
needs neither Python nor `tokenizers`):

    python3 -m venv /tmp/tok-venv && /tmp/tok-venv/bin/pip install tokenizers
    /tmp/tok-venv/bin/python tests/tokenizers/make_bpe_golden.py

It writes, in tests/tokenizers/bpe/:
  tokenizer-gpt2.json    ByteLevel pre-tokenizer (GPT-2's regex), BPE, the
                         ByteLevel post-processor and decoder, <|endoftext|>;
  tokenizer-llama3.json  Split(Llama 3's regex, isolated) then ByteLevel (no
                         regex), BPE with ignore_merges, a TemplateProcessing
                         that puts <|begin_of_text|> first, Llama 3's specials;
  tokenizer-qwen2.json   NFC, Split(Qwen2's regex: single digits) then
                         ByteLevel, BPE, Qwen2's specials and one added token
                         that is not special (lstrip and rstrip);
  golden.jsonl.gz        one JSON object a line: {"t": text, "g"|"l"|"q": [ids,
                         decode(ids, skip specials)]}, and decode records
                         {"d": ids, "g"|"l"|"q": [decode(skip specials),
                         decode(keep specials)]}.

The corpus keeps to characters that Oniguruma (the regex engine of both
`tokenizers` and Transfuse) classifies alike in the Unicode versions of the
two builds: letters, digits and spaces assigned by Unicode 13.

The trainer breaks ties in hash order: a rerun gives other vocabularies and
ids (the test reads whatever the files say; commit the files of one run
together).
"""
import os
import random
import sys

import tokenizers
from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers,
                        pre_tokenizers, processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_wordpiece_golden import pools, read, write_golden  # noqa: E402

OUT = os.path.join(HERE, "bpe")

GPT2_SPECIALS = ["<|endoftext|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                   "<|end_header_id|>", "<|eot_id|>"]
QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
               r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "if x != None and y >= 3:", "#include <stdio.h>", "std::vector<int> v{1, 2, 3};",
        "    indented\n        more\n", "x = {'key': \"value\", 'n': 42}", "a->b.c[0]++;",
        "SELECT * FROM t WHERE id = 7;", "<div class=\"x\">Hi</div>", "$ ls -la | grep foo",
        "λx. x + 1", "// TODO: fix\r\n", "0xDEADBEEF & ~mask", "print(f\"{n:>10}\")"]
CONTRACTIONS = ["it's", "IT'S", "don't", "DON'T", "we're", "We'Re", "I've", "I'm", "you'll",
                "she'd", "O'Neil", "rock 'n' roll", "'s", "'ll", "''", "'"]
RUNS = ["   ", "    x", "\t\t", " \n ", "\n\n\n", "a  b   c", "trailing   ", "   leading",
        "\r\n\r\n", " \t \n", "x\n    y"]
NUMBERS = ["1", "12", "123", "1234", "12345", "1234567", "3.14159265358979",
           "100000000000000000000", "2024-12-03", "+1 (555) 010-9999", "1,234,567.89",
           "007", "٣٤٥", "१२३"]


def training_lines(rng):
    lines = read("train.en.gz") + read("train.de.gz")
    everything = [frag for pool in pools() for frag in pool] + CODE + CONTRACTIONS + RUNS + NUMBERS
    for _ in range(4000):
        lines.append(" ".join(rng.choice(everything) for _ in range(rng.randint(2, 8))))
    return lines


def train(lines, pre, specials, ignore_merges=False, normalizer=None):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    if normalizer:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    trainer = trainers.BpeTrainer(vocab_size=1500, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.decoder = decoders.ByteLevel()
    return tok


def make_tokenizers(rng):
    lines = training_lines(rng)
    gpt2 = train(lines, pre_tokenizers.ByteLevel(add_prefix_space=False), GPT2_SPECIALS)
    gpt2.post_processor = processors.ByteLevel(trim_offsets=False)
    split = lambda pattern: pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    llama3 = train(lines, split(LLAMA3_REGEX), LLAMA3_SPECIALS, ignore_merges=True)
    bos = llama3.token_to_id("<|begin_of_text|>")
    llama3.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    qwen2 = train(lines, split(QWEN2_REGEX), QWEN2_SPECIALS, normalizer=normalizers.NFC())
    qwen2.add_tokens([AddedToken("<tool>", lstrip=True, rstrip=True, normalized=False)])
    return {"g": gpt2, "l": llama3, "q": qwen2}


def corpus_lines(rng):
    m30k = read("val.en.gz") + read("val.de.gz") + read("test_2016_flickr.en.gz") + \
        read("test_2016_flickr.de.gz")
    rng.shuffle(m30k)
    lines = m30k[:800]
    extra = CODE + CONTRACTIONS + RUNS + NUMBERS + GPT2_SPECIALS + LLAMA3_SPECIALS + \
        QWEN2_SPECIALS + ["<tool>", " <tool> ", "a<tool>b", "<|endoftext", "<|im_start|>user\nhi"]
    all_pools = pools() + [CODE, CONTRACTIONS, RUNS, NUMBERS, extra]
    for pool in all_pools:
        for frag in pool:
            lines.append(frag)
            lines.append("A man " + frag + " is here.")
            lines.append("Ein" + frag + "Hund")
    lines += ["", " ", "\n", "a", "Ġ", "ĠĠ", "ċ", "\u0100", "x\u0120y"]
    while len(lines) < 3000:
        parts = []
        for _ in range(rng.randint(1, 12)):
            pool = rng.choice(all_pools)
            parts.append(rng.choice(m30k).split(" ")[rng.randint(0, 3)] if rng.random() < 0.4
                         else rng.choice(pool))
            parts.append(rng.choice([" ", "  ", "\n", "\t", ""]))
        lines.append("".join(parts))
    return lines


def main():
    rng = random.Random(20261204)
    os.makedirs(OUT, exist_ok=True)
    names = {"g": "tokenizer-gpt2.json", "l": "tokenizer-llama3.json", "q": "tokenizer-qwen2.json"}
    for key, tok in make_tokenizers(rng).items():
        tok.save(os.path.join(OUT, names[key]), pretty=False)
    toks = {k: Tokenizer.from_file(os.path.join(OUT, n)) for k, n in names.items()}
    lines = corpus_lines(rng)
    records = []
    for text in lines:
        rec = {"t": text}
        for key, tok in toks.items():
            ids = tok.encode(text).ids
            rec[key] = [ids, tok.decode(ids, skip_special_tokens=True)]
        records.append(rec)
    # Decoding: ids of some lines cut at random (a token may end inside a
    # character), out-of-range ids, every special token.
    for i, text in enumerate(lines[::15]):
        for key, tok in toks.items():
            ids = tok.encode(text).ids
            if ids and i % 3 == 0:
                ids = ids[:rng.randint(0, len(ids))]
            if i % 7 == 0:
                ids = ids + [99999, tok.token_to_id(GPT2_SPECIALS[0]) or 0]
            records.append({"d": ids, key: [tok.decode(ids, skip_special_tokens=True),
                                            tok.decode(ids, skip_special_tokens=False)]})
    for key, tok in toks.items():
        ids = list(range(tok.get_vocab_size(with_added_tokens=True)))
        for chunk in range(0, len(ids), 97):
            part = ids[chunk:chunk + 97]
            records.append({"d": part, key: [tok.decode(part, skip_special_tokens=True),
                                             tok.decode(part, skip_special_tokens=False)]})
    path = os.path.join(OUT, "golden.jsonl.gz")
    write_golden(path, records)
    print(f"tokenizers {tokenizers.__version__}: {len(lines)} corpus lines, {len(records)} "
          f"records -> {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
