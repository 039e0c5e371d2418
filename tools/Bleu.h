//===- Bleu.h - corpus BLEU for validation ---------------------------------===//
//
// Corpus BLEU as sacreBLEU computes it by default (4-grams, the brevity
// penalty, the "13a" tokenizer, cased, 'exp' smoothing), for the training
// driver's --valid-bleu. Reported results come from sacreBLEU itself
// (scripts/train-multi30k.sh); tests compare this with it.
//
//===----------------------------------------------------------------------===//
#ifndef TRANSFUSE_TOOLS_BLEU_H
#define TRANSFUSE_TOOLS_BLEU_H

#include <string>
#include <vector>

namespace mlir::transfuse::tools {

/// sacreBLEU's 13a tokenization of one line (mteval-v13a's rules).
std::vector<std::string> tokenize13a(const std::string &line);

/// BLEU (0-100) of `hypotheses` against one reference each.
double corpusBleu(const std::vector<std::string> &hypotheses,
                  const std::vector<std::string> &references);

} // namespace mlir::transfuse::tools

#endif // TRANSFUSE_TOOLS_BLEU_H
