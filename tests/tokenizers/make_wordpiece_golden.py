#!/usr/bin/env python3
"""Makes the golden data of the WordPiece tokenizer test (runtime/host/HfTokenizer.h,
tests/unit/runtime/hf_tokenizer_test.cpp): small WordPiece vocabularies trained with
Hugging Face's `tokenizers` on Multi30k, a corpus of lines that stress the BERT
normalizer and pre-tokenizer, and what `tokenizers` makes of every line.

Run once, by hand, in a venv of its own (the test reads the files it writes and
needs neither Python nor `tokenizers`):

    python3 -m venv /tmp/tok-venv && /tmp/tok-venv/bin/pip install tokenizers
    /tmp/tok-venv/bin/python tests/tokenizers/make_wordpiece_golden.py

It writes, in tests/tokenizers/wordpiece/:
  tokenizer.json          "uncased": BertNormalizer(lowercase), BertPreTokenizer,
                          TemplateProcessing, WordPiece decoder: what
                          BertTokenizerFast builds from vocab.txt and
  vocab.txt, tokenizer_config.json   the same tokenizer for the vocab.txt loader;
  tokenizer-cased.json    "cased": its own vocabulary, BertNormalizer(lowercase
                          false, strip_accents false), BertProcessing, truncation
                          to 48 and padding to a multiple of 8 in the file;
  tokenizer-nfkc.json     "nfkc": the uncased vocabulary, Sequence[NFKC, Lowercase]
                          (full lowercase mapping, no accent stripping),
                          Sequence[WhitespaceSplit, Punctuation(contiguous)], no
                          post-processor, no decoder;
  tokenizer-strip.json    "strip": the uncased vocabulary, Sequence[NFD,
                          StripAccents, Lowercase], Whitespace, a template with
                          two separators between the pair, added tokens
                          (normalized, lstrip/rstrip, single_word);
  golden.jsonl.gz         one JSON object a line:
      {"t": text, "p": pair text (optional), "m": max length (0: none),
       "u"|"c"|"n"|"s": [ids, type ids or null when all 0, attention-mask sum,
                         truncated]}
      and decode records {"d": ids, "u"|"c"|"n"|"s": [decode(skip specials),
                          decode(keep specials)]}.

Characters are chosen among those that `tokenizers` and utf8proc classify
alike: `tokenizers` takes the C*, P* and Mn classes from Unicode 8.0 (the crate
unicode_categories), utf8proc from Unicode 15, so no code point assigned or
recategorized after Unicode 8.0 is a control, punctuation, mark or space here
(emoji of later versions are fine: So in one, unassigned in the other, a word
character in both).

The trainer breaks ties in hash order: a rerun gives another vocabulary and
other ids (the test reads whatever the files say, so any run is valid; commit
the files of one run together).
"""
import gzip
import json
import os
import random
import sys

import tokenizers
from tokenizers import (AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers,
                        processors, trainers)

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "wordpiece")
DATA = os.path.join(HERE, "..", "..", "..", "shared", "data", "multi30k")
if not os.path.isdir(DATA):
    DATA = "/work/shared/data/multi30k"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def read(name):
    with gzip.open(os.path.join(DATA, name), "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


# Words in other scripts and with accents, so that the vocabularies have
# pieces for them (training lines only; the corpus draws from the same pools).
ACCENTED = ["café", "naïve", "señor", "mañana", "Müller", "über", "Straße", "Øresund", "smørbrød",
            "français", "garçon", "Ångström", "Ærø", "élève", "Éire", "crème", "brûlée", "Zoë",
            "São", "Paulo", "Kraków", "Łódź", "Dvořák", "İstanbul", "ılık", "Şişli", "Tiếng",
            "Việt", "Nguyễn", "résumé", "coöperate", "jalapeño", "piñata", "Ålesund", "Göteborg",
            "Bjørn", "Þórr", "ðæm", "Čapek", "Žižek", "ﬁnal", "ﬂoor", "ＡＢＣ", "ｆｕｌｌ", "x²",
            "H₂O", "½", "Ⅻ", "㎞", "ǅemal", "ǈubljana"]
GREEK = ["Ελληνικά", "καλημέρα", "Αθήνα", "ΆΈΉΊΌΎΏ", "ΐΰ", "Σίσυφος", "ΟΔΥΣΣΕΥΣ", "λόγος"]
CYRILLIC = ["Привет", "мир", "Москва", "Ёлка", "ёж", "Україна", "Їжак", "Ђорђе", "Љубљана"]
CJK = ["我爱北京天安门", "中文分词", "東京タワーに行きました", "日本語のテキスト", "안녕하세요",
       "세계", "한국어", "漢字かな交じり文", "㐀㐁㐂", "𠀀𠀁𠀂", "𪜀𪜁", "𫝀𫝁", "𫠠𫠡", "豈更車",
       "乾隆", "廣東話", "繁體字", "ｶﾀｶﾅ"]
OTHER_SCRIPTS = ["مرحبا", "العربية", "שלום", "עברית", "नमस्ते", "हिन्दी", "สวัสดี", "ภาษาไทย",
                 "ქართული", "Հայերեն", "தமிழ்", "বাংলা", "ελληνικά"]
EMOJI = ["😀", "🎉", "👍", "👍🏽", "❤️", "🇩🇪", "🇫🇷", "👨\u200d👩\u200d👧", "🤖", "🥰", "🫠", "☃",
         "★", "♪", "✓", "→", "∑", "∞", "€", "£", "¥", "©", "®", "™", "°"]
PUNCT = ["!!!", "???", "...", "?!", "—", "–", "-", "--", "«", "»", "„", "“", "”", "‚", "‘", "’",
         "¿", "¡", "【", "】", "「", "」", "『", "』", "…", "@", "#", "$", "%", "^", "&", "*", "(",
         ")", "_", "+", "=", "{", "}", "[", "]", "|", "\\", ":", ";", "\"", "'", "<", ">", ",",
         ".", "?", "/", "~", "`", "·", "§", "¶", "†", "‡", "•", "‰", "′", "″", "‹", "›", "、",
         "。", "，", "！", "？", "：", "；", "（", "）", "〈", "〉", "〜", "¦", "¬", "±", "×", "÷"]
NUMBERS = ["0", "7", "42", "1999", "2024", "3.14159", "1,000,000", "12:30", "10%", "$5.99",
           "1234567890123456789012345", "٣٤٥", "१२३", "੧੨", "௧௨", "10⁶", "½", "¾", "①②",
           "0x1F", "1e-9", "+49", "-273.15", "5'11\"", "#1", "3rd", "21st", "4x4"]
SPACES = [" ", "  ", "\t", "\u00a0", "\u2002", "\u2003", "\u2009", "\u3000", "\u202f", "\u205f",
          "\u1680", "\u2028", "\u2029", "\n", "\r\n", " \t ", "\u000b", "\u000c", "\u0085"]
CONTROLS = ["\u0000", "\u0001", "\u0007", "\u001b", "\u001f", "\u007f", "\u0080", "\u009f",
            "\u00ad", "\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\u2060", "\ufeff",
            "\ufffd", "\ue000", "\U000f0000", "\u061c", "\u180e", "\U000e0001"]
COMBINING = ["e\u0301", "n\u0303", "a\u0308", "o\u0302\u0301", "a\u0323\u0302", "c\u0327",
             "u\u0308\u0304", "i\u0307", "A\u030a", "z\u030c", "\u0301", "e\u20dd", "a\u0489",
             "क\u093f", "ก\u0e31", "\u3099", "か\u3099", "e\u0301\u0301\u0301"]
SPECIAL_TEXT = ["[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "[mask]", "[ MASK ]", "a[SEP]b",
                "[MASK][MASK]", "x[CLS", "SEP]", "[[MASK]]", "<ent>", " <ent> ", "New York",
                "new york", "NEW YORK", "foo", "foobar", "a foo b", "foo.", "(foo)"]
LONG = ["a" * 100, "a" * 101, "b" * 150, "supercalifragilistic" * 6, "é" * 60, "é" * 101,
        "e\u0301" * 51, "Donaudampfschifffahrtsgesellschaftskapitänswitwe" * 3,
        "x" * 99 + "!", "ab" * 50, "ab" * 50 + "c", "中" * 120, "😀" * 101,
        "Rindfleischetikettierungsüberwachungsaufgabenübertragungsgesetz"]


def write_golden(path, records):
    """records as JSON lines, gzip'ed reproducibly (no timestamp); the golden files'
    format."""
    with gzip.GzipFile(path, "wb", mtime=0) as f:
        for r in records:
            f.write((json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n")
                    .encode("utf-8"))


def pools():
    words = ACCENTED + GREEK + CYRILLIC + CJK + OTHER_SCRIPTS
    return [words, EMOJI, PUNCT, NUMBERS, SPACES, CONTROLS, COMBINING, SPECIAL_TEXT, LONG]


def training_lines(rng):
    """Multi30k's training sentences and lines that use the other pools'
    letters, so that the vocabularies have pieces for them."""
    lines = read("train.en.gz") + read("train.de.gz")
    words = ACCENTED + GREEK + CYRILLIC + CJK + OTHER_SCRIPTS
    for _ in range(3000):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 9))))
    return lines


def train(lines, lowercase):
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None if lowercase else False,
        lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    trainer = trainers.WordPieceTrainer(vocab_size=3000, min_frequency=2,
                                        special_tokens=SPECIALS, show_progress=False)
    tok.train_from_iterator(lines, trainer)
    tok.decoder = decoders.WordPiece(prefix="##")
    return tok


def make_tokenizers(rng):
    lines = training_lines(rng)
    uncased = train(lines, lowercase=True)
    cls, sep = uncased.token_to_id("[CLS]"), uncased.token_to_id("[SEP]")
    uncased.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])

    cased = train(lines, lowercase=False)
    cased.post_processor = processors.BertProcessing(
        ("[SEP]", cased.token_to_id("[SEP]")), ("[CLS]", cased.token_to_id("[CLS]")))
    cased.enable_truncation(max_length=48)
    cased.enable_padding(pad_id=cased.token_to_id("[PAD]"), pad_token="[PAD]",
                         pad_to_multiple_of=8)

    nfkc = Tokenizer.from_str(uncased.to_str())
    nfkc.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    nfkc.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation(behavior="contiguous")])
    d = json.loads(nfkc.to_str())
    d["post_processor"] = None
    d["decoder"] = None
    nfkc = Tokenizer.from_str(json.dumps(d))

    strip = Tokenizer.from_str(uncased.to_str())
    strip.normalizer = normalizers.Sequence(
        [normalizers.NFD(), normalizers.StripAccents(), normalizers.Lowercase()])
    strip.pre_tokenizer = pre_tokenizers.Whitespace()
    strip.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    strip.add_tokens([AddedToken("New York", normalized=True),
                      AddedToken("foo", single_word=True, normalized=True)])
    strip.add_special_tokens([AddedToken("<ent>", lstrip=True, rstrip=True, normalized=False)])
    return {"u": uncased, "c": cased, "n": nfkc, "s": strip}


def corpus_lines(rng):
    """Multi30k's validation and test sentences, then generated lines."""
    m30k = read("val.en.gz") + read("val.de.gz") + read("test_2016_flickr.en.gz") + \
        read("test_2016_flickr.de.gz")
    rng.shuffle(m30k)
    lines = m30k[:1000]
    # Every fragment alone, inside a sentence and glued to a word.
    for pool in pools():
        for frag in pool:
            lines.append(frag)
            lines.append("A man " + frag + " is here.")
            lines.append("Ein" + frag + "Hund")
    lines += ["", " ", "\t\n", "\u3000", "[CLS]", "a", ".", "##", "##a", "a##b", "[UNK] [unk]"]
    # Random mixtures.
    all_pools = pools()
    while len(lines) < 2400:
        n = rng.randint(1, 12)
        parts = []
        for _ in range(n):
            pool = rng.choice(all_pools)
            if rng.random() < 0.4:
                parts.append(rng.choice(m30k).split(" ")[rng.randint(0, 3)] if m30k else "a")
            else:
                parts.append(rng.choice(pool))
            parts.append(rng.choice(SPACES[:4]) if rng.random() < 0.7 else "")
        lines.append("".join(parts))
    return lines


def enc_record(e):
    types = None if not any(e.type_ids) else e.type_ids
    return [e.ids, types, sum(e.attention_mask), len(e.overflowing) > 0]


def main():
    rng = random.Random(20240521)
    os.makedirs(OUT, exist_ok=True)
    toks = make_tokenizers(rng)
    names = {"u": "tokenizer.json", "c": "tokenizer-cased.json", "n": "tokenizer-nfkc.json",
             "s": "tokenizer-strip.json"}
    for key, tok in toks.items():
        tok.save(os.path.join(OUT, names[key]), pretty=False)
    toks["u"].model.save(OUT)  # vocab.txt
    with open(os.path.join(OUT, "tokenizer_config.json"), "w") as f:
        json.dump({"do_lower_case": True, "strip_accents": None, "tokenize_chinese_chars": True,
                   "model_max_length": 512, "unk_token": "[UNK]", "sep_token": "[SEP]",
                   "pad_token": "[PAD]", "cls_token": "[CLS]", "mask_token": "[MASK]",
                   "tokenizer_class": "BertTokenizer"}, f, indent=2)
        f.write("\n")
    # Reloaded from the files written, as the test will read them.
    toks = {k: Tokenizer.from_file(os.path.join(OUT, n)) for k, n in names.items()}

    lines = corpus_lines(rng)
    records = []

    def encode_all(text, pair=None, m=0, keys="ucns"):
        rec = {"t": text}
        if pair is not None:
            rec["p"] = pair
        rec["m"] = m
        for key in keys:
            tok = toks[key]
            if m:
                tok.enable_truncation(max_length=m)
            elif key != "c":
                tok.no_truncation()
            else:
                tok.enable_truncation(max_length=48)
            rec[key] = enc_record(tok.encode(text, pair))
        toks["c"].enable_truncation(max_length=48)
        return rec

    # Multi30k's plain sentences through the BERT pipelines, the generated
    # lines through all four.
    for i, text in enumerate(lines):
        records.append(encode_all(text, keys="uc" if i < 1000 else "ucns"))
    # Truncated singles and pairs, with and without truncation.
    for i in range(500):
        a, b = rng.choice(lines), rng.choice(lines)
        if i % 5 == 0:
            records.append(encode_all(a, None, rng.choice([16, 32])))
        else:
            records.append(encode_all(a, b, [0, 16, 32, 5][i % 4]))
    # Pairs of very different lengths (longest_first takes from the longer).
    for i in range(60):
        a = rng.choice(lines[:1000])
        b = " ".join(rng.choice(lines[:1000]) for _ in range(4))
        records.append(encode_all(*((a, b) if i % 2 else (b, a)), [16, 32, 64][i % 3]))
    # Decoding: the ids of some lines, and lists with out-of-range ids.
    for i, text in enumerate(lines[::20]):
        for key in ["u", "c", "n", "s"]:
            ids = toks[key].encode(text).ids
            if i % 7 == 0:
                ids = ids + [99999, 3]
            records.append({"d": ids, key: [toks[key].decode(ids, skip_special_tokens=True),
                                            toks[key].decode(ids, skip_special_tokens=False)]})

    path = os.path.join(OUT, "golden.jsonl.gz")
    write_golden(path, records)
    n_dec = sum(1 for r in records if "d" in r)
    print(f"tokenizers {tokenizers.__version__}: {len(records) - n_dec} encode records "
          f"({len(lines)} corpus lines), {n_dec} decode records -> {path} "
          f"({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
