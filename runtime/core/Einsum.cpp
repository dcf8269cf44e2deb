// Einsum-12 equation parsing (runtime/Einsum.h).
#include "runtime/Einsum.h"

#include <algorithm>

namespace tandem {
namespace {

constexpr int kEllipsisBase = 52;

int letterLabel(char ch) {
  if (ch >= 'a' && ch <= 'z') return ch - 'a';
  if (ch >= 'A' && ch <= 'Z') return 26 + (ch - 'A');
  return -1;
}

// One term's letters with -2 standing for the ellipsis; "" or an error.
std::string parseTerm(const std::string& term, std::vector<int>* out) {
  out->clear();
  bool ellipsis = false;
  for (size_t i = 0; i < term.size();) {
    if (term.compare(i, 3, "...") == 0) {
      if (ellipsis) return "term '" + term + "' has more than one ellipsis";
      ellipsis = true;
      out->push_back(-2);
      i += 3;
      continue;
    }
    int l = letterLabel(term[i]);
    if (l < 0) return "term '" + term + "' has the character '" + term.substr(i, 1) + "'";
    out->push_back(l);
    ++i;
  }
  return "";
}

}  // namespace

std::string parseEinsum(const std::string& equation, const std::vector<std::vector<int64_t>>& shapes,
                        EinsumSpec* spec) {
  std::string eq;
  for (char ch : equation)
    if (ch != ' ') eq += ch;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms(1);
  for (char ch : lhs) {
    if (ch == ',')
      terms.emplace_back();
    else
      terms.back() += ch;
  }
  if (terms.size() != shapes.size())
    return "equation '" + equation + "' has " + std::to_string(terms.size()) + " terms but there are " +
           std::to_string(shapes.size()) + " operands";
  std::vector<std::vector<int>> parsed(terms.size());
  int ellipsisRank = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (auto e = parseTerm(terms[i], &parsed[i]); !e.empty()) return e;
    const int letters = (int)std::count_if(parsed[i].begin(), parsed[i].end(), [](int l) { return l >= 0; });
    const bool hasEllipsis = letters != (int)parsed[i].size();
    const int rank = (int)shapes[i].size();
    if (hasEllipsis ? rank < letters : rank != letters)
      return "term '" + terms[i] + "' does not fit operand " + std::to_string(i) + " of rank " +
             std::to_string(rank);
    if (hasEllipsis) ellipsisRank = std::max(ellipsisRank, rank - letters);
  }
  const int numLabels = kEllipsisBase + ellipsisRank;
  spec->extent.assign(numLabels, 0);
  spec->used.assign(numLabels, false);
  spec->inputLabels.assign(shapes.size(), {});
  std::vector<int> uses(numLabels, 0);
  for (size_t i = 0; i < parsed.size(); ++i) {
    const int rank = (int)shapes[i].size();
    const int letters = (int)std::count_if(parsed[i].begin(), parsed[i].end(), [](int l) { return l >= 0; });
    std::vector<int>& labels = spec->inputLabels[i];
    for (int l : parsed[i]) {
      if (l >= 0) {
        labels.push_back(l);
        continue;
      }
      const int e = rank - letters;
      for (int k = 0; k < e; ++k) labels.push_back(kEllipsisBase + ellipsisRank - e + k);
    }
    for (int d = 0; d < rank; ++d) {
      const int l = labels[d];
      const int64_t n = shapes[i][d];
      ++uses[l];
      int64_t& x = spec->extent[l];
      if (!spec->used[l] || x == 1 || x == -1) {
        if (!(spec->used[l] && x == -1 && n == 1)) x = n;
      } else if (n != x && n != 1 && n != -1) {
        return "label " + std::to_string(l) + " of term '" + terms[i] + "' has extent " +
               std::to_string(n) + " but another operand gives it " + std::to_string(x);
      }
      spec->used[l] = true;
    }
  }
  spec->outputLabels.clear();
  if (arrow != std::string::npos) {
    std::vector<int> out;
    if (auto e = parseTerm(eq.substr(arrow + 2), &out); !e.empty()) return e;
    for (int l : out) {
      if (l == -2) {
        for (int k = 0; k < ellipsisRank; ++k) spec->outputLabels.push_back(kEllipsisBase + k);
        continue;
      }
      if (!spec->used[l])
        return "result term '" + eq.substr(arrow + 2) + "' has a label no operand term has";
      if (std::count(spec->outputLabels.begin(), spec->outputLabels.end(), l))
        return "the result term repeats a label";
      spec->outputLabels.push_back(l);
    }
  } else {
    for (int k = 0; k < ellipsisRank; ++k) spec->outputLabels.push_back(kEllipsisBase + k);
    // Character order, as numpy's: 'A'..'Z' (labels 26..51) before 'a'..'z' (0..25).
    for (int k = 0; k < kEllipsisBase; ++k) {
      const int l = (k + 26) % kEllipsisBase;
      if (uses[l] == 1) spec->outputLabels.push_back(l);
    }
  }
  return "";
}

}  // namespace tandem
