// Fuzz target: a tokenizer.json (WordPiece or byte-level BPE seeds) through
// HfTokenizer::fromTokenizerJson:
// refused with an error naming the file, or loaded; a loaded tokenizer
// encodes fixed texts (and the input's own bytes as text) to ids inside its
// vocabulary, and decodes them, without crashing.
#include "runtime/host/HfTokenizer.h"
#include "tests/fuzz/FuzzUtil.h"

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  transfuse::fuzz::MemFile file(data, size);
  auto tokenizer = transfuse::rt::HfTokenizer::fromTokenizerJson(file.path());
  if (!tokenizer.isOk()) {
    FUZZ_CHECK(tokenizer.status().message().find(file.path()) != std::string::npos, "%s",
               tokenizer.status().message().c_str());
    return 0;
  }
  const std::string_view texts[] = {
      "Hello, world! [CLS] naïve café 東京 🙂 ##ing", "",
      std::string_view(reinterpret_cast<const char*>(data), std::min<size_t>(size, 256))};
  for (std::string_view text : texts) {
    for (bool truncate : {true, false}) {
      auto encoded = tokenizer->encode(text, &texts[0], 16, truncate);
      if (!encoded.isOk()) continue;  // invalid UTF-8, or too long without truncation
      FUZZ_CHECK(encoded->ids.size() == encoded->typeIds.size() &&
                     encoded->ids.size() == encoded->attentionMask.size(),
                 "encoding's parts differ in length");
      for (int32_t id : encoded->ids)
        FUZZ_CHECK(id >= 0 && id < tokenizer->vocabSize(), "id %d outside [0, %d)", id,
                   tokenizer->vocabSize());
      (void)tokenizer->decode(encoded->ids);
    }
  }
  return 0;
}
