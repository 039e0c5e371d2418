//===- Bleu.cpp - corpus BLEU for validation -------------------------------===//

#include "tools/Bleu.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace mlir::transfuse;

namespace {

bool isDigit(char c) { return c >= '0' && c <= '9'; }

// The ASCII punctuation and symbols 13a splits off everywhere: {-~ [-` !-& (-+ :-@ /.
bool isSplitSymbol(unsigned char c) {
  return (c >= '{' && c <= '~') || (c >= '[' && c <= '`') || (c >= '!' && c <= '&') ||
         (c >= '(' && c <= '+') || (c >= ':' && c <= '@') || c == '/';
}

void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

} // namespace

std::vector<std::string> tools::tokenize13a(const std::string &line) {
  std::string s = line;
  replaceAll(s, "<skipped>", "");
  replaceAll(s, "-\n", "");
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.find('&') != std::string::npos) {
    replaceAll(s, "&quot;", "\"");
    replaceAll(s, "&amp;", "&");
    replaceAll(s, "&lt;", "<");
    replaceAll(s, "&gt;", ">");
  }
  // " " + s + " " with the symbols spaced; periods and commas spaced unless
  // between digits on both sides; a dash after a digit spaced.
  std::string out = " ";
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    char prev = i > 0 ? s[i - 1] : ' ', next = i + 1 < s.size() ? s[i + 1] : ' ';
    if (isSplitSymbol((unsigned char)c)) {
      out += ' ';
      out += c;
      out += ' ';
    } else if ((c == '.' || c == ',') && !(isDigit(prev) && isDigit(next))) {
      out += ' ';
      out += c;
      out += ' ';
    } else if (c == '-' && isDigit(prev)) {
      out += ' ';
      out += c;
      out += ' ';
    } else {
      out += c;
    }
  }
  std::vector<std::string> tokens;
  std::string word;
  for (char c : out) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
      if (!word.empty())
        tokens.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty())
    tokens.push_back(word);
  return tokens;
}

double tools::corpusBleu(const std::vector<std::string> &hypotheses,
                         const std::vector<std::string> &references) {
  double matches[4] = {0, 0, 0, 0}, totals[4] = {0, 0, 0, 0};
  double hypLen = 0, refLen = 0;
  for (size_t i = 0; i < hypotheses.size() && i < references.size(); ++i) {
    std::vector<std::string> h = tokenize13a(hypotheses[i]), r = tokenize13a(references[i]);
    hypLen += (double)h.size();
    refLen += (double)r.size();
    for (size_t n = 1; n <= 4; ++n) {
      std::map<std::vector<std::string>, int> ref;
      for (size_t k = 0; k + n <= r.size(); ++k)
        ++ref[std::vector<std::string>(r.begin() + k, r.begin() + k + n)];
      for (size_t k = 0; k + n <= h.size(); ++k) {
        auto it = ref.find(std::vector<std::string>(h.begin() + k, h.begin() + k + n));
        if (it != ref.end() && it->second > 0) {
          --it->second;
          matches[n - 1] += 1;
        }
      }
      totals[n - 1] += (double)(h.size() >= n ? h.size() - n + 1 : 0);
    }
  }
  if (hypLen == 0)
    return 0;
  // sacreBLEU's 'exp' smoothing: the k-th n-gram order with no match counts
  // 1 / 2^k matches.
  double logSum = 0, smooth = 1;
  for (int n = 0; n < 4; ++n) {
    if (totals[n] == 0)
      return 0;
    double m = matches[n];
    if (m == 0) {
      smooth *= 2;
      m = 1 / smooth;
    }
    logSum += std::log(m / totals[n]);
  }
  double bp = hypLen < refLen ? std::exp(1 - refLen / hypLen) : 1.0;
  return 100 * bp * std::exp(logSum / 4);
}
