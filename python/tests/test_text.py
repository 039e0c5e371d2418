"""Text in and out from Python through the tokenizers an artifact carries:
embed on a sentence-transformers directory, translate on a Marian directory,
generate on a GPT-2 directory, each equal to the CLI on the same text, and
embed equal to the NumPy oracle. The directories are tiny random models with
the tokenizers of tests/tokenizers, written here."""

import gzip
import json
import os
import shutil

import numpy as np
import pytest

import bert_e2e
import llama_e2e
import marian_e2e
import transfuse
from conftest import ROOT, cli

TOKENIZERS = os.path.join(ROOT, "tests", "tokenizers")


def golden(path, n, keep):
    with gzip.open(os.path.join(TOKENIZERS, path), "rt", encoding="utf-8") as f:
        return [r for r in map(json.loads, f) if keep(r)][:n]


def test_embed_equals_the_cli_and_the_oracle(tmp_path):
    records = golden("wordpiece/golden.jsonl.gz", 9,
                     lambda r: "t" in r and "p" not in r and int(r["m"]) == 0
                     and "\n" not in r["t"] and 0 < len(r["u"][0]) <= 40)
    texts = [r["t"] for r in records]
    cfg = dict(bert_e2e.CONFIG, vocab_size=3000, max_position_embeddings=64)
    weights = bert_e2e.bert_weights(cfg, np.random.default_rng(0))
    model = str(tmp_path / "st")
    bert_e2e.write_dir(model, cfg, weights)
    shutil.copy(os.path.join(TOKENIZERS, "wordpiece", "tokenizer.json"), model)
    bert_e2e.write_sentence_transformers(model, "mean", True)

    m = transfuse.compile(model, tmp_path / "art", max_batch=32, max_seq_len=64, weights=model)
    got = m.embed(texts)
    (tmp_path / "lines.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    cli("embed", m.dir, "--weights", model, "--input", tmp_path / "lines.txt",
        "--out", tmp_path / "cli.npy")
    assert got.shape == (len(texts), cfg["hidden_size"])
    assert np.array_equal(got, np.load(tmp_path / "cli.npy"))
    # The tokenizer's ids are transformers' (the golden data), and ids embed the same.
    ids = [r["u"][0] for r in records]
    assert [m.tokenizer().encode(t) for t in texts] == ids
    assert np.array_equal(m.embed(ids), got)
    assert np.array_equal(m.embed(texts, batch=4), got)  # other batches: the same bits
    want = bert_e2e.embed_oracle(cfg, weights, ids, "mean", True)
    assert np.abs(got - want).max() <= 1e-4


def test_translate_text_equals_the_cli(tmp_path):
    tok = os.path.join(TOKENIZERS, "marian")
    with open(os.path.join(tok, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    cfg = dict(marian_e2e.MARIAN, vocab_size=len(vocab), pad_token_id=vocab["<pad>"],
               decoder_start_token_id=vocab["<pad>"], eos_token_id=vocab["</s>"],
               bad_words_ids=[[vocab["<pad>"]]])
    model = str(tmp_path / "marian")
    llama_e2e.write_dir(model, cfg, marian_e2e.marian_weights(cfg, np.random.default_rng(1)))
    for f in ("source.spm", "target.spm", "vocab.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tok, f), model)
    texts = [r["t"] for r in golden("marian/golden.jsonl.gz", 5,
                                    lambda r: 0 < len(r["j"][0]) < 40)]
    m = transfuse.compile(model, tmp_path / "art", max_batch=4, max_seq_len=48, weights=model)
    got = m.translate(texts, beam=2, max_len=6)
    (tmp_path / "src.txt").write_text("".join(t + "\n" for t in texts), encoding="utf-8")
    done = cli("translate", m.dir, "--weights", model, "--input", tmp_path / "src.txt",
               "--beam", 2, "--max-len", 6)
    assert all(isinstance(t, str) for t in got)
    assert got == done.stdout.split("\n")[:len(texts)]
    # Ids in, ids out: the same translations before the text is made.
    ids = m.translate([m.tokenizer("marian").encode(t) for t in texts], beam=2, max_len=6)
    assert [m.tokenizer("marian").decode(i) for i in ids] == got


def test_generate_text_equals_the_cli(tmp_path):
    with open(os.path.join(TOKENIZERS, "bpe", "tokenizer-gpt2.json")) as f:
        tok = json.load(f)
    vocab = max(max(tok["model"]["vocab"].values()), max(a["id"] for a in tok["added_tokens"])) + 1
    eos = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<|endoftext|>")
    cfg = dict(llama_e2e.GPT2, vocab_size=vocab, bos_token_id=eos, eos_token_id=eos)
    model = str(tmp_path / "gpt2")
    llama_e2e.write_dir(model, cfg, llama_e2e.gpt2_weights(np.random.default_rng(2), cfg))
    shutil.copy(os.path.join(TOKENIZERS, "bpe", "tokenizer-gpt2.json"),
                os.path.join(model, "tokenizer.json"))
    prompts = ["A dog runs in the park.", "Zwei Männer stehen am Strand", "x = 42"]
    m = transfuse.compile(model, tmp_path / "art", max_batch=3, max_seq_len=32, weights=model)
    got = m.generate(prompts, max_new=8, min_len=8)
    (tmp_path / "p.txt").write_text("".join(p + "\n" for p in prompts), encoding="utf-8")
    done = cli("generate", m.dir, "--weights", model, "--prompt-file", tmp_path / "p.txt",
               "--max-new", 8, "--min-len", 8)
    assert all(isinstance(t, str) for t in got)
    assert got == done.stdout.split("\n")[:len(prompts)]
    with pytest.raises(transfuse.Error, match="line 2: a prompt of .* over the cache's 32"):
        m.generate(["x", " ".join(f"w{i}" for i in range(40))], max_new=4)
