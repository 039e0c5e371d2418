#!/usr/bin/python3
"""Transfuse against CTranslate2 on a Marian (OPUS-MT-shaped) directory, same weights.

Builds a MarianMTModel of opus-mt-en-de's shape (6 + 6 layers, d_model 512, 8 heads,
feed-forward 2048, swish, scaled embeddings, a shared vocabulary of 58101) with
random weights (seeded), saves it with save_pretrained beside a MarianTokenizer
(the test tokenizer of tests/tokenizers/marian, its vocab.json padded with filler
pieces to the vocabulary's size), converts that directory with CTranslate2's own
TransformersConverter (float32, and int8 for reference), checks that greedy
outputs agree, then times, interleaved and repeated:
  - `transfuse bench decode DIR --weights DIR --json` (encode + exactly
    --new-tokens steps per sentence, EOS ignored);
  - CTranslate2's translate_batch with min = max decoding length = --new-tokens,
    length_penalty 0, on the same sources and threads;
and prints tokens/s (new tokens of the best hypotheses per second of the whole
request) with each engine's best median.

  /work/venv-hf/bin/python bench/compare_marian.py --threads 2 [--cases 8x4,1x1]
"""
import argparse
import json
import os
import shutil
import tempfile

import numpy as np

from peers import bench_decode_ms, ct2_request_ms, ct2_table, run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOKENIZER = os.path.join(ROOT, "tests", "tokenizers", "marian")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--transfuse", default=os.path.join(ROOT, "build", "tools", "transfuse"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--src-len", type=int, default=24)
    p.add_argument("--new-tokens", type=int, default=32)
    p.add_argument("--cases", default="8x4,1x1", help="BATCHxBEAM, comma-separated")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--min-seconds", type=float, default=3.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    import ctranslate2
    import torch
    import transformers

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    tmp = tempfile.mkdtemp(prefix="compare-marian-")
    model = os.path.join(tmp, "marian")
    os.makedirs(model)
    V = 58101
    with open(os.path.join(TOKENIZER, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    pieces = sorted(vocab, key=vocab.get)[:-1]  # <pad> last again below
    pieces += ["w%d" % i for i in range(V - 1 - len(pieces))] + ["<pad>"]
    vocab = {piece: i for i, piece in enumerate(pieces)}
    with open(os.path.join(model, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    for name in ("source.spm", "target.spm", "tokenizer_config.json"):
        shutil.copy(os.path.join(TOKENIZER, name), os.path.join(model, name))
    pad, eos = vocab["<pad>"], vocab["</s>"]
    config = transformers.MarianConfig(
        vocab_size=V, d_model=512, encoder_layers=6, decoder_layers=6,
        encoder_attention_heads=8, decoder_attention_heads=8, encoder_ffn_dim=2048,
        decoder_ffn_dim=2048, activation_function="swish", scale_embedding=True,
        max_position_embeddings=512, pad_token_id=pad, eos_token_id=eos,
        decoder_start_token_id=pad, forced_eos_token_id=eos, bad_words_ids=[[pad]])
    hf = transformers.MarianMTModel(config).eval()
    hf.save_pretrained(model, safe_serialization=True)
    ct2 = {}
    for kind in ("float32", "int8"):
        out = os.path.join(tmp, "ct2-" + kind)
        ctranslate2.converters.TransformersConverter(model).convert(
            out, quantization=None if kind == "float32" else kind, force=True)
        ct2[kind] = out

    cases = [tuple(int(x) for x in c.split("x")) for c in args.cases.split(",")]
    rng = np.random.default_rng(args.seed + 1)
    sources = [[int(x) for x in rng.integers(2, V - 1, args.src_len)]
               for _ in range(max(b for b, _ in cases))]
    # Greedy outputs agree (the same model), EOS allowed.
    art = os.path.join(tmp, "artifact")
    run([args.transfuse, "compile", model, "--fusion", "all", "--max-batch", "4", "--max-beam",
         "1", "--max-seq-len", "64", "-o", art])
    src_file = os.path.join(tmp, "src.txt")
    with open(src_file, "w") as f:
        f.write("".join(" ".join(map(str, s)) + "\n" for s in sources[:4]))
    ours = [list(map(int, line.split())) for line in
            run([args.transfuse, "translate", art, "--ids", "--weights", model, "--input",
                 src_file, "--max-len", "20", "--threads", str(args.threads)]).splitlines()]
    translator = ctranslate2.Translator(ct2["float32"], device="cpu", intra_threads=args.threads)
    tokens = lambda ids: [pieces[i] for i in ids] + ["</s>"]  # noqa: E731
    theirs = [[vocab[t] for t in r.hypotheses[0]] for r in translator.translate_batch(
        [tokens(s) for s in sources[:4]], beam_size=1, max_decoding_length=20)]
    same = sum(a == b for a, b in zip(ours, theirs))
    print("greedy outputs of Transfuse and CTranslate2 float32 agree on %d of %d sources" %
          (same, len(ours)))

    def ct2_run(kind, batch, beam):
        return ct2_request_ms(ct2[kind], kind, args.threads, [tokens(s) for s in sources[:batch]],
                              beam, args.new_tokens, args.min_seconds)

    def ours_run(kind, batch, beam):
        return bench_decode_ms(args.transfuse, model, model, args.threads, args.min_seconds,
                               batch=batch, beam=beam, src_len=args.src_len,
                               new_tokens=args.new_tokens,
                               dtype="int8" if kind == "int8" else "f32")

    print("Marian 6+6, d 512, vocabulary %d, source %d, %d new tokens, %d threads, "
          "CTranslate2 %s" % (V, args.src_len, args.new_tokens, args.threads,
                              ctranslate2.__version__))
    ct2_table(cases, args.repeats, args.new_tokens, ours_run, ct2_run)

if __name__ == "__main__":
    main()
