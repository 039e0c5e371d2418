// Tests for runtime/host/HfTokenizer.h against Hugging Face's `tokenizers`.
// WordPiece: the golden data of tests/tokenizers/wordpiece (made by
// tests/tokenizers/make_wordpiece_golden.py; no Python here) holds what
// `tokenizers` made of every line of a corpus (Multi30k sentences and lines
// of accents, combining marks, CJK, emoji, punctuation runs, numbers, words
// over 100 characters, controls, odd whitespace, special tokens in the text)
// with four tokenizer.json files: BERT uncased, BERT cased (BertProcessing,
// truncation and padding in the file), Sequence normalizers and
// pre-tokenizers without post-processor or decoder, and added tokens with
// lstrip/rstrip/single_word/normalized. Every id, type id, mask and
// truncation flag must match, as must decode; the vocab.txt loader must give
// the tokenizer.json's ids. Then the errors: bad files, invalid UTF-8, a
// sequence over the maximum length.
// Byte-level BPE: the golden data of tests/tokenizers/bpe (made by
// tests/tokenizers/make_bpe_golden.py) holds what `tokenizers` made of 3000
// lines (Multi30k, accents, CJK, emoji, code, whitespace runs, long
// numbers, special tokens in the text) with tokenizers in the layouts of
// GPT-2, Llama 3 and Qwen2, and decodes of cut and arbitrary id lists:
// every id and every decoded text must match.
#include "runtime/host/HfTokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "runtime/Json.h"
#include "runtime/host/Corpus.h"
#include "tests/unit/runtime/TestUtil.h"

namespace transfuse::rt {
namespace {

std::string dataDir(const std::string& which = "wordpiece") {
  return std::string(TRANSFUSE_SOURCE_DIR) + "/tests/tokenizers/" + which;
}

std::string readFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The tokenizer.json files of the golden data, each loaded once; nullptr
// (and a failure) when one does not load.
const HfTokenizer* load(const std::string& name, const std::string& which = "wordpiece") {
  static std::map<std::string, HfTokenizer>* cache =
      new std::map<std::string, HfTokenizer>();
  auto it = cache->find(which + "/" + name);
  if (it == cache->end()) {
    auto t = HfTokenizer::fromTokenizerJson(dataDir(which) + "/" + name);
    if (!t.isOk()) {
      ADD_FAILURE() << t.status().message();
      return nullptr;
    }
    it = cache->emplace(which + "/" + name, std::move(*t)).first;
  }
  return &it->second;
}

#define LOAD(var, name)                            \
  const HfTokenizer* var##Ptr = load(name); \
  ASSERT_NE(var##Ptr, nullptr) << name;            \
  const HfTokenizer& var = *var##Ptr

const char* const kConfigs[] = {"u", "c", "n", "s"};
const char* fileOf(const std::string& key) {
  return key == "u"   ? "tokenizer.json"
         : key == "c" ? "tokenizer-cased.json"
         : key == "n" ? "tokenizer-nfkc.json"
                      : "tokenizer-strip.json";
}

struct Golden {
  std::vector<std::pair<int, JsonValue>> records;  // (line number, record)
};

const Golden& golden(const std::string& which = "wordpiece") {
  static std::map<std::string, Golden>* cache = new std::map<std::string, Golden>();
  if (auto it = cache->find(which); it != cache->end()) return it->second;
  Golden* out = &(*cache)[which];
  {
    auto lines = readTextLines(dataDir(which) + "/golden.jsonl.gz");
    if (!lines.isOk()) {
      ADD_FAILURE() << lines.status().message();
      return *out;
    }
    for (size_t i = 0; i < lines->size(); ++i) {
      auto v = JsonValue::parse((*lines)[i]);
      if (!v.isOk()) {
        ADD_FAILURE() << "golden line " << i + 1 << ": " << v.status().message();
        continue;
      }
      out->records.emplace_back(static_cast<int>(i + 1), std::move(*v));
    }
  }
  return *out;
}

std::vector<int32_t> intsOf(const JsonValue& v) {
  std::vector<int32_t> out;
  for (const JsonValue& x : v.asArray()) out.push_back(static_cast<int32_t>(x.asInt64()));
  return out;
}

std::string show(const std::vector<int32_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? " " : "") + std::to_string(ids[i]);
  return s + "]";
}

std::string asJson(const std::string& s) {
  std::string out;
  jsonQuote(out, s);
  return out;
}

// Encodes a golden record's input with `tok`; compares with `expected`
// ([ids, type ids or null, mask sum, truncated]); "" when equal, else what
// differed.
std::string compareEncoding(const HfTokenizer& tok, const JsonValue& rec,
                            const JsonValue& expected) {
  std::string text = rec.find("t")->asString();
  std::string pairText;
  const JsonValue* p = rec.find("p");
  std::string_view pairView;
  if (p) {
    pairText = p->asString();
    pairView = pairText;
  }
  int64_t maxLength = rec.find("m")->asInt64();
  auto enc = tok.encode(text, p ? &pairView : nullptr, maxLength);
  if (!enc.isOk()) return "error: " + enc.status().message();
  const auto& arr = expected.asArray();
  std::vector<int32_t> ids = intsOf(arr[0]);
  std::vector<int32_t> types =
      arr[1].isNull() ? std::vector<int32_t>(ids.size(), 0) : intsOf(arr[1]);
  int64_t maskSum = arr[2].asInt64();
  bool truncated = arr[3].asBool();
  std::string why;
  if (enc->ids != ids) why += "ids ours " + show(enc->ids) + " hf " + show(ids) + "; ";
  if (enc->typeIds != types)
    why += "type ids ours " + show(enc->typeIds) + " hf " + show(types) + "; ";
  int64_t ourMask = 0;
  for (int32_t m : enc->attentionMask) ourMask += m;
  if (ourMask != maskSum || enc->attentionMask.size() != enc->ids.size())
    why += "mask sum ours " + std::to_string(ourMask) + " hf " + std::to_string(maskSum) + "; ";
  if (enc->truncated != truncated)
    why += std::string("truncated ours ") + (enc->truncated ? "yes" : "no") + "; ";
  return why;
}

// Decodes every decode record ({"d": ids, KEY: [skip specials, keep them]})
// of the golden data `which` with the tokenizer of each key; expects
// tokenizers' texts and more than 500 of them.
void expectDecodesMatch(const std::string& which, const std::vector<const char*>& keys,
                        const char* (*file)(const std::string&)) {
  int checked = 0, failed = 0;
  std::string report;
  for (const auto& [line, rec] : golden(which).records) {
    const JsonValue* ids = rec.find("d");
    if (!ids) continue;
    for (const char* key : keys) {
      const JsonValue* expected = rec.find(key);
      if (!expected) continue;
      const HfTokenizer* tok = load(file(key), which);
      ASSERT_NE(tok, nullptr) << file(key);
      for (int keep = 0; keep < 2; ++keep) {
        ++checked;
        std::string ours = tok->decode(intsOf(*ids), /*skipSpecial=*/keep == 0);
        const std::string& hf = expected->asArray()[keep].asString();
        if (ours != hf && failed++ < 10)
          report += "golden line " + std::to_string(line) + " (" + file(key) +
                    (keep ? ", specials kept" : "") + "): ours " + asJson(ours) + " hf " +
                    asJson(hf) + "\n";
      }
    }
  }
  EXPECT_GT(checked, 500);
  EXPECT_EQ(failed, 0) << report;
}

TEST(WordPieceGolden, EveryRecordMatchesTokenizers) {
  const Golden& g = golden();
  ASSERT_GT(g.records.size(), 2000u);
  std::map<std::string, int> checked, failed;
  std::string report;
  int reported = 0;
  for (const auto& [line, rec] : g.records) {
    if (!rec.find("t")) continue;
    for (const char* key : kConfigs) {
      const JsonValue* expected = rec.find(key);
      if (!expected) continue;
      ++checked[key];
      const HfTokenizer* tok = load(fileOf(key));
      ASSERT_NE(tok, nullptr) << fileOf(key);
      std::string why = compareEncoding(*tok, rec, *expected);
      if (why.empty()) continue;
      ++failed[key];
      if (reported++ < 12) {
        report += "golden line " + std::to_string(line) + " (" + fileOf(key) + ", text " +
                  asJson(rec.find("t")->asString());
        if (rec.find("p")) report += ", pair " + asJson(rec.find("p")->asString());
        report += ", max " + std::to_string(rec.find("m")->asInt64()) + "): " + why + "\n";
      }
    }
  }
  std::string summary;
  for (const char* key : kConfigs)
    summary += std::string(fileOf(key)) + ": " + std::to_string(checked[key] - failed[key]) + "/" +
               std::to_string(checked[key]) + " match; ";
  std::cout << "[ golden   ] " << summary << "\n";
  EXPECT_EQ(reported, 0) << summary << "\n" << report;
  for (const char* key : kConfigs) EXPECT_GT(checked[key], 1000) << key;
}

TEST(WordPieceGolden, VocabTxtGivesTheTokenizerJsonIds) {
  auto options = readTokenizerConfig(dataDir() + "/tokenizer_config.json");
  ASSERT_TRUE(options.isOk()) << options.status().message();
  EXPECT_TRUE(options->lowercase);
  EXPECT_FALSE(options->stripAccents.has_value());
  EXPECT_EQ(options->modelMaxLength, 512);
  auto tok = HfTokenizer::fromVocabTxt(dataDir() + "/vocab.txt", *options);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  LOAD(json, "tokenizer.json");
  EXPECT_EQ(tok->vocabSize(), json.vocabSize());
  EXPECT_EQ(tok->modelMaxLength(), 512);
  EXPECT_EQ(tok->specials().cls, json.specials().cls);
  EXPECT_EQ(tok->specials().sep, json.specials().sep);
  EXPECT_EQ(tok->specials().pad, json.specials().pad);
  EXPECT_EQ(tok->specials().unk, json.specials().unk);
  EXPECT_EQ(tok->specials().mask, json.specials().mask);
  int checked = 0, failed = 0;
  std::string report;
  for (const auto& [line, rec] : golden().records) {
    const JsonValue* expected = rec.find("u");
    if (!rec.find("t") || !expected) continue;
    ++checked;
    std::string why = compareEncoding(*tok, rec, *expected);
    if (!why.empty() && failed++ < 10)
      report += "golden line " + std::to_string(line) + ": " + why + "\n";
  }
  EXPECT_GT(checked, 2000);
  EXPECT_EQ(failed, 0) << report;
}

TEST(WordPieceGolden, DecodeMatchesTokenizers) {
  expectDecodesMatch("wordpiece", {std::begin(kConfigs), std::end(kConfigs)}, fileOf);
}

// --------------------------------------------------------- the pipeline

TEST(WordPiece, NormalizerAndPreTokenizerAsBert) {
  LOAD(tok, "tokenizer.json");
  // clean_text drops the soft hyphen (Cf) and turns the tab into a space;
  // each CJK ideograph gets spaces around it; accents go; lowercase.
  auto n = tok.normalize(
      "H\xc3\xa9llo\tW\xc3\x96RLD \xe4\xb8\xad\xe6\x96\x87 a\xc2\xad"
      "b, na\xc3\xafve!");
  ASSERT_TRUE(n.isOk()) << n.status().message();
  EXPECT_EQ(*n, "hello world  \xe4\xb8\xad  \xe6\x96\x87  ab, naive!");
  auto words = tok.preTokenize(*n);
  ASSERT_TRUE(words.isOk());
  std::vector<std::string> want = {"hello", "world", "\xe4\xb8\xad", "\xe6\x96\x87",
                                   "ab",    ",",     "naive",        "!"};
  EXPECT_EQ(*words, want);
  // The cased tokenizer keeps case and accents.
  LOAD(casedTok, "tokenizer-cased.json");
  auto cased = casedTok.normalize("Gr\xc3\xbc\xc3\x9f Gott");
  ASSERT_TRUE(cased.isOk());
  EXPECT_EQ(*cased, "Gr\xc3\xbc\xc3\x9f Gott");
}

TEST(WordPiece, SpecialTokensAreMatchedBeforeNormalization) {
  LOAD(tok, "tokenizer.json");
  const WordPieceSpecials& sp = tok.specials();
  ASSERT_GE(sp.mask, 0);
  auto enc = tok.encode("a [MASK] b");
  ASSERT_TRUE(enc.isOk());
  ASSERT_EQ(enc->ids.size(), 5u);
  EXPECT_EQ(enc->ids[0], sp.cls);
  EXPECT_EQ(enc->ids[2], sp.mask);
  EXPECT_EQ(enc->ids[4], sp.sep);
  // Lowercased, it is ordinary text: "[", "mask", "]".
  auto lower = tok.encode("a [mask] b");
  ASSERT_TRUE(lower.isOk());
  EXPECT_EQ(std::count(lower->ids.begin(), lower->ids.end(), sp.mask), 0);
  auto words = tok.preTokenize(*tok.normalize("a [mask] b"));
  ASSERT_TRUE(words.isOk());
  EXPECT_EQ(*words, (std::vector<std::string>{"a", "[", "mask", "]", "b"}));
  EXPECT_EQ(tok.idOf("[MASK]"), sp.mask);
  EXPECT_EQ(tok.idOf("no such token"), -1);
  EXPECT_EQ(tok.tokenOf(sp.cls), "[CLS]");
  EXPECT_EQ(tok.tokenOf(-5), "");
  EXPECT_EQ(sp.pad, 0);
  EXPECT_EQ(tok.vocabSize(), 3000);
}

TEST(WordPiece, LongWordsAndUncoveredWordsAreOneUnknown) {
  LOAD(tok, "tokenizer.json");
  int32_t unk = tok.specials().unk;
  ASSERT_GE(unk, 0);
  auto at100 = tok.encode(std::string(100, 'a'));
  auto at101 = tok.encode(std::string(101, 'a'));
  ASSERT_TRUE(at100.isOk() && at101.isOk());
  EXPECT_GT(at100->ids.size(), 3u);
  EXPECT_EQ(at101->ids, (std::vector<int32_t>{tok.specials().cls, unk, tok.specials().sep}));
  // A word the vocabulary cannot cover is one [UNK], not pieces and [UNK].
  auto odd = tok.encode(std::string("a") + "\xe2\x98\x83" + "b");  // a snowman between letters
  ASSERT_TRUE(odd.isOk());
  EXPECT_EQ(odd->ids, (std::vector<int32_t>{tok.specials().cls, unk, tok.specials().sep}));
}

TEST(WordPiece, TruncationKeepsTheSpecials) {
  LOAD(tok, "tokenizer.json");
  const WordPieceSpecials& sp = tok.specials();
  std::string a = "a man in a blue shirt is standing on a ladder cleaning windows";
  std::string b = "two dogs";
  std::string_view bv = b;
  auto full = tok.encode(a, &bv);
  ASSERT_TRUE(full.isOk());
  EXPECT_FALSE(full->truncated);
  ASSERT_GT(full->ids.size(), 12u);
  auto cut = tok.encode(a, &bv, 12);
  ASSERT_TRUE(cut.isOk()) << cut.status().message();
  EXPECT_TRUE(cut->truncated);
  ASSERT_EQ(cut->ids.size(), 12u);
  EXPECT_EQ(cut->ids.front(), sp.cls);
  EXPECT_EQ(cut->ids.back(), sp.sep);
  EXPECT_EQ(std::count(cut->ids.begin(), cut->ids.end(), sp.sep), 2);
  // longest_first takes from the longer side: "two dogs" stays whole.
  auto bOnly = tok.encode(b);
  ASSERT_TRUE(bOnly.isOk());
  size_t nb = bOnly->ids.size() - 2;
  std::vector<int32_t> tail(cut->ids.end() - 1 - static_cast<std::ptrdiff_t>(nb),
                            cut->ids.end() - 1);
  EXPECT_EQ(tail, std::vector<int32_t>(bOnly->ids.begin() + 1, bOnly->ids.end() - 1));
  std::vector<int32_t> types(12 - nb - 1, 0);
  types.insert(types.end(), nb + 1, 1);
  EXPECT_EQ(cut->typeIds, types);
  EXPECT_EQ(cut->attentionMask, std::vector<int32_t>(12, 1));

  auto refused = tok.encode(a, &bv, 12, /*truncate=*/false);
  ASSERT_FALSE(refused.isOk());
  EXPECT_EQ(refused.status().message(), "the input is " + std::to_string(full->ids.size()) +
                                            " tokens long, more than the maximum of 12");
  auto fits = tok.encode(a, &bv, static_cast<int64_t>(full->ids.size()), false);
  ASSERT_TRUE(fits.isOk());
  EXPECT_EQ(fits->ids, full->ids);

  auto tooSmall = tok.encode(a, &bv, 2);
  ASSERT_FALSE(tooSmall.isOk());
  EXPECT_NE(tooSmall.status().message().find("3 special tokens"), std::string::npos)
      << tooSmall.status().message();
  EXPECT_FALSE(tok.encode(a, nullptr, -1).isOk());
}

TEST(WordPiece, PaddingFromTheFile) {
  // tokenizer-cased.json pads to a multiple of 8 and truncates to 48.
  LOAD(tok, "tokenizer-cased.json");
  auto enc = tok.encode("Two dogs");
  ASSERT_TRUE(enc.isOk());
  ASSERT_EQ(enc->ids.size(), 8u);
  EXPECT_EQ(enc->ids.back(), tok.specials().pad);
  EXPECT_EQ(enc->attentionMask.back(), 0);
  EXPECT_EQ(enc->attentionMask.front(), 1);
  EXPECT_EQ(tok.modelMaxLength(), 48);
  std::string longText;
  for (int i = 0; i < 40; ++i) longText += "dogs and cats ";
  auto cut = tok.encode(longText);
  ASSERT_TRUE(cut.isOk());
  EXPECT_TRUE(cut->truncated);
  EXPECT_EQ(cut->ids.size(), 48u);
  EXPECT_FALSE(tok.encode(longText, nullptr, 0, /*truncate=*/false).isOk());
}

TEST(WordPiece, DecodeJoinsPiecesAndCleansUp) {
  LOAD(tok, "tokenizer.json");
  auto enc = tok.encode("A man , with a hat . Is it ?");
  ASSERT_TRUE(enc.isOk());
  EXPECT_EQ(tok.decode(enc->ids), "a man, with a hat. is it?");
  std::string kept = tok.decode(enc->ids, /*skipSpecial=*/false);
  EXPECT_EQ(kept, "[CLS] a man, with a hat. is it? [SEP]");
  EXPECT_EQ(tok.decode({}), "");
  EXPECT_EQ(tok.decode({-1, 1 << 30}), "");
}

// --------------------------------------------------------------- errors

TEST(WordPiece, InvalidUtf8NamesTheByteOffset) {
  LOAD(tok, "tokenizer.json");
  struct Case {
    std::string text;
    size_t offset;
  } cases[] = {{"ab\xff", 2},           {"\xc0\xaf", 0}, {"ok \xed\xa0\x80", 3}, {"x\xe4\xb8", 1},
               {"\xf4\x90\x80\x80", 0}, {"a\x80", 1},    {"\xe2\x82\xac\xc3", 3}};
  for (const Case& c : cases) {
    auto enc = tok.encode(c.text);
    ASSERT_FALSE(enc.isOk()) << c.offset;
    EXPECT_EQ(enc.status().message(),
              "text: invalid UTF-8 at byte offset " + std::to_string(c.offset));
  }
  std::string_view bad = "fine \xc3";
  auto pair = tok.encode("fine", &bad);
  ASSERT_FALSE(pair.isOk());
  EXPECT_EQ(pair.status().message(), "pair text: invalid UTF-8 at byte offset 5");
  EXPECT_FALSE(tok.normalize("\xff").isOk());
}

class WordPieceFiles : public ::testing::Test {
 protected:
  // `source` (default: the uncased tokenizer.json) with `edit` applied,
  // written to the temp dir.
  std::string variant(const std::string& name, void (*edit)(JsonValue&),
                      const std::string& source = dataDir() + "/tokenizer.json") {
    auto json = JsonValue::parse(readFile(source));
    EXPECT_TRUE(json.isOk());
    edit(*json);
    std::string path = dir_.file(name);
    testing::writeBytes(path, json->dump());
    return path;
  }
  std::string loadError(const std::string& path) {
    auto t = HfTokenizer::fromTokenizerJson(path);
    return t.isOk() ? std::string("loaded") : t.status().message();
  }
  testing::TempDir dir_;
};

TEST_F(WordPieceFiles, ErrorsNameTheFileAndTheKey) {
  std::string unigram = variant("unigram.json", [](JsonValue& j) {
    JsonValue model = *j.find("model");
    model.set("type", "Unigram");
    j.set("model", model);
  });
  EXPECT_EQ(loadError(unigram),
            unigram + ": model.type: \"Unigram\" is not supported (WordPiece and BPE are)");

  std::string noVocab = variant("novocab.json", [](JsonValue& j) {
    JsonValue model = JsonValue::object();
    for (const auto& [k, v] : j.find("model")->members())
      if (k != "vocab") model.set(k, v);
    j.set("model", model);
  });
  EXPECT_EQ(loadError(noVocab), noVocab + ": model.vocab: missing");

  std::string noModel = variant("nomodel.json", [](JsonValue& j) { j.set("model", nullptr); });
  EXPECT_EQ(loadError(noModel), noModel + ": model: missing");

  std::string norm = variant("norm.json", [](JsonValue& j) {
    JsonValue n = JsonValue::object();
    n.set("type", "Precompiled");
    j.set("normalizer", n);
  });
  std::string e = loadError(norm);
  EXPECT_EQ(e.rfind(norm + ": normalizer.type: normalizer \"Precompiled\" is not supported", 0), 0u)
      << e;

  std::string seq = variant("seq.json", [](JsonValue& j) {
    JsonValue inner = JsonValue::object();
    inner.set("type", "Replace");
    JsonValue n = JsonValue::object();
    n.set("type", "Sequence");
    n.set("normalizers", JsonValue::array({inner}));
    j.set("normalizer", n);
  });
  e = loadError(seq);
  EXPECT_NE(e.find(seq + ": normalizer.normalizers[0].type: normalizer \"Replace\""),
            std::string::npos)
      << e;

  std::string pre = variant("pre.json", [](JsonValue& j) {
    JsonValue p = JsonValue::object();
    p.set("type", "Metaspace");
    j.set("pre_tokenizer", p);
  });
  e = loadError(pre);
  EXPECT_EQ(e.rfind(pre + ": pre_tokenizer.type: pre-tokenizer \"Metaspace\" is not supported", 0),
            0u)
      << e;

  std::string post = variant("post.json", [](JsonValue& j) {
    JsonValue p = JsonValue::object();
    p.set("type", "RobertaProcessing");
    j.set("post_processor", p);
  });
  e = loadError(post);
  EXPECT_EQ(e.rfind(post + ": post_processor.type: \"RobertaProcessing\"", 0), 0u) << e;

  std::string badId = variant("badid.json", [](JsonValue& j) {
    JsonValue model = *j.find("model");
    JsonValue vocab = *model.find("vocab");
    vocab.set("[CLS]", "two");
    model.set("vocab", vocab);
    j.set("model", model);
  });
  e = loadError(badId);
  EXPECT_EQ(e, badId + ": model.vocab: the id of \"[CLS]\" is not an id in [0, 16777215]");

  // The id → token tables are dense: an id of 2^31 - 2 would be 64 GiB of them.
  std::string hugeId = variant("hugeid.json", [](JsonValue& j) {
    JsonValue model = *j.find("model");
    JsonValue vocab = *model.find("vocab");
    vocab.set("[CLS]", JsonValue(int64_t{2147483646}));
    model.set("vocab", vocab);
    j.set("model", model);
  });
  e = loadError(hugeId);
  EXPECT_EQ(e, hugeId + ": model.vocab: the id of \"[CLS]\" is not an id in [0, 16777215]");

  std::string notJson = dir_.file("broken.json");
  testing::writeBytes(notJson, "{\"model\": {\"type\": \"WordPiece\",}");
  e = loadError(notJson);
  EXPECT_EQ(e.rfind(notJson + ": not valid JSON: ", 0), 0u) << e;

  std::string missing = dir_.file("absent.json");
  e = loadError(missing);
  EXPECT_NE(e.find(missing), std::string::npos) << e;
}

TEST_F(WordPieceFiles, VocabTxtAndConfigErrors) {
  std::string vocab = dir_.file("vocab.txt");
  testing::writeBytes(vocab, "[PAD]\n[UNK]\n[SEP]\nhello\n");
  auto noCls = HfTokenizer::fromVocabTxt(vocab);
  ASSERT_FALSE(noCls.isOk());
  EXPECT_EQ(noCls.status().message(), vocab + ": the vocabulary has no [CLS] token");

  // CRLF lines and trailing spaces are dropped from tokens; a custom [CLS].
  testing::writeBytes(vocab, "[PAD]\r\n[UNK]  \n<s>\n</s>\nhello\n##s\n");
  WordPieceOptions o;
  o.clsToken = "<s>";
  o.sepToken = "</s>";
  auto tok = HfTokenizer::fromVocabTxt(vocab, o);
  ASSERT_TRUE(tok.isOk()) << tok.status().message();
  EXPECT_EQ(tok->idOf("[UNK]"), 1);
  EXPECT_EQ(tok->specials().mask, -1);
  auto enc = tok->encode("Hellos <s> hello!");
  ASSERT_TRUE(enc.isOk());
  EXPECT_EQ(enc->ids, (std::vector<int32_t>{2, 4, 5, 2, 4, 1, 3}));

  // No [UNK]: fine until a word needs it.
  testing::writeBytes(vocab, "[CLS]\n[SEP]\nhello\n");
  auto noUnk = HfTokenizer::fromVocabTxt(vocab);
  ASSERT_TRUE(noUnk.isOk()) << noUnk.status().message();
  EXPECT_EQ(noUnk->specials().unk, -1);
  EXPECT_TRUE(noUnk->encode("Hello").isOk());
  auto needsUnk = noUnk->encode("hello xyz");
  ASSERT_FALSE(needsUnk.isOk());
  EXPECT_EQ(needsUnk.status().message(),
            "a word needs the unknown token \"[UNK]\", which the vocabulary does not have");

  testing::writeBytes(vocab, "[CLS]\n\xff\xfe\n");
  auto bad = HfTokenizer::fromVocabTxt(vocab);
  ASSERT_FALSE(bad.isOk());
  EXPECT_EQ(bad.status().message().rfind(vocab + ": line 2: ", 0), 0u) << bad.status().message();

  std::string config = dir_.file("tokenizer_config.json");
  testing::writeBytes(
      config,
      "{\"do_lower_case\": false, \"model_max_length\": 1000000000000000019884624838656,"
      " \"strip_accents\": true, \"unk_token\": {\"content\": \"<unk>\", \"__type\": "
      "\"AddedToken\"}, \"tokenize_chinese_chars\": false}");
  auto opts = readTokenizerConfig(config);
  ASSERT_TRUE(opts.isOk()) << opts.status().message();
  EXPECT_FALSE(opts->lowercase);
  EXPECT_EQ(opts->stripAccents, std::optional<bool>(true));
  EXPECT_FALSE(opts->handleChineseChars);
  EXPECT_EQ(opts->modelMaxLength, 0);
  EXPECT_EQ(opts->unkToken, "<unk>");
  testing::writeBytes(config, "{\"do_lower_case\": \"yes\"}");
  auto wrong = readTokenizerConfig(config);
  ASSERT_FALSE(wrong.isOk());
  EXPECT_EQ(wrong.status().message(), config + ": do_lower_case: expected true or false");
}

// Four threads encode `text` 200 times each with one tokenizer: every
// encoding equals the first.
void expectConcurrentEncodesAgree(const HfTokenizer& tok, const std::string& text) {
  auto want = tok.encode(text);
  ASSERT_TRUE(want.isOk());
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        auto e = tok.encode(text);
        if (!e.isOk() || e->ids != want->ids) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

TEST(WordPiece, ConcurrentEncodesAgree) {
  LOAD(tok, "tokenizer.json");
  expectConcurrentEncodesAgree(
      tok, "Zwei junge M\xc3\xa4nner sind im Freien [MASK] \xe4\xb8\xad\xe6\x96\x87.");
}

// ------------------------------------------------------- byte-level BPE

const char* const kBpeConfigs[] = {"g", "l", "q"};
const char* bpeFileOf(const std::string& key) {
  return key == "g" ? "tokenizer-gpt2.json" : key == "l" ? "tokenizer-llama3.json"
                                                         : "tokenizer-qwen2.json";
}

#define LOAD_BPE(var, key)                                      \
  const HfTokenizer* var##Ptr = load(bpeFileOf(key), "bpe");    \
  ASSERT_NE(var##Ptr, nullptr) << bpeFileOf(key);               \
  const HfTokenizer& var = *var##Ptr

TEST(BpeGolden, EveryLineMatchesTokenizers) {
  const Golden& g = golden("bpe");
  std::map<std::string, int> checked, failed;
  std::string report;
  for (const auto& [line, rec] : g.records) {
    const JsonValue* text = rec.find("t");
    if (!text) continue;
    for (const char* key : kBpeConfigs) {
      LOAD_BPE(tok, key);
      const auto& expected = rec.find(key)->asArray();
      ++checked[key];
      auto enc = tok.encode(text->asString());
      std::string why;
      if (!enc.isOk()) {
        why = "error: " + enc.status().message();
      } else {
        std::vector<int32_t> ids = intsOf(expected[0]);
        if (enc->ids != ids) why += "ids ours " + show(enc->ids) + " hf " + show(ids) + "; ";
        std::string decoded = tok.decode(ids);
        if (decoded != expected[1].asString())
          why += "decode ours " + asJson(decoded) + " hf " + asJson(expected[1].asString());
        // Byte-level BPE without a normalizer loses nothing: the text comes
        // back, special tokens' text included.
        std::string back = tok.decode(enc->ids, /*skipSpecial=*/false);
        if (std::string(key) == "g" && back != text->asString())
          why += "round trip gives " + asJson(back);
      }
      if (why.empty()) continue;
      if (failed[key]++ < 4)
        report += "golden line " + std::to_string(line) + " (" + bpeFileOf(key) + ", text " +
                  asJson(text->asString()) + "): " + why + "\n";
    }
  }
  std::string summary;
  for (const char* key : kBpeConfigs) {
    summary += std::string(bpeFileOf(key)) + ": " + std::to_string(checked[key] - failed[key]) +
               "/" + std::to_string(checked[key]) + " match; ";
    EXPECT_GE(checked[key], 3000) << key;
  }
  std::cout << "[ golden   ] " << summary << "\n";
  for (const char* key : kBpeConfigs) EXPECT_EQ(failed[key], 0) << summary << "\n" << report;
}

TEST(BpeGolden, DecodeMatchesTokenizers) {
  expectDecodesMatch("bpe", {std::begin(kBpeConfigs), std::end(kBpeConfigs)}, bpeFileOf);
}

TEST(Bpe, TemplateAddsBosAndSpecialsAreWholeTokens) {
  LOAD_BPE(llama, "l");
  const int32_t bos = llama.idOf("<|begin_of_text|>"), eot = llama.idOf("<|eot_id|>");
  ASSERT_GE(bos, 0);
  ASSERT_GE(eot, 0);
  auto with = llama.encode("Hi<|eot_id|>");
  auto without = llama.encode("Hi<|eot_id|>", nullptr, 0, true, /*addSpecialTokens=*/false);
  ASSERT_TRUE(with.isOk() && without.isOk());
  ASSERT_FALSE(with->ids.empty());
  EXPECT_EQ(with->ids.front(), bos);
  EXPECT_EQ(with->ids.back(), eot);
  EXPECT_EQ(std::vector<int32_t>(with->ids.begin() + 1, with->ids.end()), without->ids);
  EXPECT_EQ(llama.decode(with->ids, /*skipSpecial=*/true), "Hi");
  EXPECT_EQ(llama.decode(with->ids, /*skipSpecial=*/false), "<|begin_of_text|>Hi<|eot_id|>");
}

TEST(Bpe, ConcurrentEncodesAgree) {
  LOAD_BPE(tok, "q");
  expectConcurrentEncodesAgree(
      tok, "def f(x):\n    return x ** 2  # \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x98\x80 12345");
}

class BpeFiles : public WordPieceFiles {
 protected:
  // The GPT-2 layout's tokenizer.json with `edit` applied.
  std::string bpeVariant(const std::string& name, void (*edit)(JsonValue&)) {
    return variant(name, edit, dataDir("bpe") + "/tokenizer-gpt2.json");
  }
  static void setModel(JsonValue& j, const char* key, JsonValue value) {
    JsonValue model = *j.find("model");
    model.set(key, std::move(value));
    j.set("model", model);
  }
};

// The model's options on hand-made vocabularies, the expected ids those of
// `tokenizers` 0.23 on the same files.
TEST_F(BpeFiles, ModelOptionsAsTokenizers) {
  auto make = [&](const std::string& name, const std::string& vocab, const std::string& merges,
                  const std::string& options) {
    std::string path = dir_.file(name);
    testing::writeBytes(
        path, "{\"pre_tokenizer\": {\"type\": \"WhitespaceSplit\"}, \"model\": {\"type\": \"BPE\", "
              "\"vocab\": " + vocab + ", \"merges\": " + merges + options + "}}");
    return HfTokenizer::fromTokenizerJson(path);
  };
  // The ids of `text`; {-99} (and a failure) when the file did not load.
  auto ids = [](const StatusOr<HfTokenizer>& t, const std::string& text) {
    if (!t.isOk()) {
      ADD_FAILURE() << t.status().message();
      return std::vector<int32_t>{-99};
    }
    auto e = t->encode(text);
    return e.isOk() ? e->ids : std::vector<int32_t>{-99};
  };
  const std::string vocab =
      R"({"a": 0, "b": 1, "c": 2, "ab": 3, "bc": 4, "abc": 5, "<unk>": 6, "<0x78>": 7, "<0x79>": 8})";
  const std::string merges = R"([["b", "c"], ["a", "b"]])";
  // A character the vocabulary lacks, without an unknown token, is dropped.
  EXPECT_EQ(ids(make("plain.json", vocab, merges, ""), "abc abx"), (std::vector<int32_t>{0, 4, 3}));
  EXPECT_EQ(ids(make("ignore.json", vocab, merges, ", \"ignore_merges\": true"), "abc ab"),
            (std::vector<int32_t>{5, 3}));
  EXPECT_EQ(ids(make("unk.json", vocab, merges, ", \"unk_token\": \"<unk>\""), "axxb zzz"),
            (std::vector<int32_t>{0, 6, 6, 1, 6, 6, 6}));
  EXPECT_EQ(ids(make("fuse.json", vocab, merges, ", \"unk_token\": \"<unk>\", \"fuse_unk\": true"),
                "axxb zzz"),
            (std::vector<int32_t>{0, 6, 1, 6}));
  EXPECT_EQ(ids(make("bytes.json", vocab, merges,
                     ", \"unk_token\": \"<unk>\", \"byte_fallback\": true"),
                "axyb zq"),
            (std::vector<int32_t>{0, 7, 8, 1, 6, 6}));
  EXPECT_EQ(ids(make("prefix.json",
                     R"({"a": 0, "##b": 1, "##c": 2, "a##b": 3, "ab": 4, "##bc": 5, "abc": 6})",
                     R"([["##b", "##c"], ["a", "##bc"]])", ", \"continuing_subword_prefix\": \"##\""),
                "abc"),
            (std::vector<int32_t>{6}));
  EXPECT_EQ(ids(make("suffix.json", R"({"a": 0, "b": 1, "c</w>": 2, "bc</w>": 3, "abc</w>": 4, "b</w>": 5})",
                     R"([["b", "c</w>"], ["a", "bc</w>"]])", ", \"end_of_word_suffix\": \"</w>\""),
                "abc b"),
            (std::vector<int32_t>{4, 5}));
}

TEST_F(BpeFiles, MergesAsStringsGiveTheSameIds) {
  std::string path = bpeVariant("strings.json", [](JsonValue& j) {
    JsonValue merges = JsonValue::array({});
    for (const JsonValue& m : j.find("model")->find("merges")->asArray())
      merges.push(JsonValue(m.asArray()[0].asString() + " " + m.asArray()[1].asString()));
    setModel(j, "merges", merges);
  });
  auto strings = HfTokenizer::fromTokenizerJson(path);
  ASSERT_TRUE(strings.isOk()) << strings.status().message();
  LOAD_BPE(pairs, "g");
  int compared = 0;
  for (const auto& [line, rec] : golden("bpe").records) {
    if (!rec.find("t") || compared++ > 300) continue;
    auto a = strings->encode(rec.find("t")->asString());
    auto b = pairs.encode(rec.find("t")->asString());
    ASSERT_TRUE(a.isOk() && b.isOk());
    EXPECT_EQ(a->ids, b->ids) << "golden line " << line;
  }
}

TEST_F(BpeFiles, ErrorsNameTheFileAndTheKey) {
  std::string unknown = bpeVariant("unknown.json", [](JsonValue& j) {
    JsonValue merges = *j.find("model")->find("merges");
    merges.push(JsonValue::array({JsonValue("Ġ"), JsonValue("zzzz")}));
    setModel(j, "merges", merges);
  });
  std::string e = loadError(unknown);
  EXPECT_NE(e.find(unknown + ": model.merges["), std::string::npos) << e;
  EXPECT_NE(e.find("token \"zzzz\" is not in the vocabulary"), std::string::npos) << e;

  std::string shape = bpeVariant("shape.json", [](JsonValue& j) {
    setModel(j, "merges", JsonValue::array({JsonValue("a b c")}));
  });
  EXPECT_EQ(loadError(shape),
            shape + ": model.merges[0]: expected \"a b\" (two tokens and one space)");

  std::string dropout = bpeVariant("dropout.json",
                                   [](JsonValue& j) { setModel(j, "dropout", JsonValue(0.1)); });
  EXPECT_EQ(loadError(dropout),
            dropout + ": model.dropout: must be null (dropout samples merges at random)");

  std::string regex = bpeVariant("regex.json", [](JsonValue& j) {
    JsonValue pattern = JsonValue::object();
    pattern.set("Regex", "(unclosed");
    JsonValue split = JsonValue::object();
    split.set("type", "Split");
    split.set("pattern", pattern);
    split.set("behavior", "Isolated");
    j.set("pre_tokenizer", split);
  });
  e = loadError(regex);
  EXPECT_EQ(e.rfind(regex + ": pre_tokenizer.pattern.Regex: not a valid regular expression: ", 0),
            0u)
      << e;

  std::string decoder = bpeVariant("decoder.json", [](JsonValue& j) {
    JsonValue d = JsonValue::object();
    d.set("type", "Metaspace");
    j.set("decoder", d);
  });
  EXPECT_EQ(loadError(decoder),
            decoder + ": decoder.type: \"Metaspace\" is not supported (WordPiece and ByteLevel are)");
}

}  // namespace
}  // namespace transfuse::rt
