#include "engine/base/diagnostics.hh"

#include <algorithm>
#include <set>
#include <sstream>

namespace sluice {

Diagnostic &Diagnostics::add(Severity s, SourceRange r, std::string msg, std::string hint) {
  diags_.push_back(Diagnostic{s, r, std::move(msg), std::move(hint), context_});
  // innermost expansion first, like a compiler's "in instantiation of" chain
  std::reverse(diags_.back().notes.begin(), diags_.back().notes.end());
  return diags_.back();
}

Diagnostic &Diagnostics::error(SourceRange r, std::string msg, std::string hint) {
  ++errors_;
  return add(Severity::Error, r, std::move(msg), std::move(hint));
}

Diagnostic &Diagnostics::warning(SourceRange r, std::string msg, std::string hint) {
  ++warnings_;
  return add(Severity::Warning, r, std::move(msg), std::move(hint));
}

static const char *severity_name(Severity s) {
  switch (s) {
    case Severity::Error: return "error";
    case Severity::Warning: return "warning";
    case Severity::Note: return "note";
  }
  return "?";
}

std::string Diagnostics::brief(const Diagnostic &d) const {
  std::string where = d.range.valid() ? sm_.describe(d.range.begin) : std::string("sluice");
  return where + ": " + severity_name(d.severity) + ": " + d.message;
}

std::string Diagnostics::format(const Diagnostic &d, bool color) const {
  const char *bold = color ? "\033[1m" : "", *reset = color ? "\033[0m" : "";
  const char *sev_color = !color ? ""
                          : d.severity == Severity::Error ? "\033[1;31m"
                          : d.severity == Severity::Warning ? "\033[1;35m"
                                                            : "\033[1;36m";
  std::ostringstream os;
  std::string where = d.range.valid() ? sm_.describe(d.range.begin) : std::string("sluice");
  os << bold << where << ": " << reset << sev_color << severity_name(d.severity) << ":" << reset
     << bold << " " << d.message << reset << "\n";
  if (d.range.valid()) {
    const SourceFile &f = sm_.file(d.range.begin.file);
    auto lc = sm_.line_col(d.range.begin);
    std::string_view line = f.line_text(lc.line);
    os << "  " << line << "\n  ";
    // caret under the token; tabs are kept so the caret lines up in a terminal
    for (uint32_t i = 1; i < lc.column && i - 1 < line.size(); ++i) os << (line[i - 1] == '\t' ? '\t' : ' ');
    uint32_t len = 1;
    if (d.range.end.file == d.range.begin.file && d.range.end.offset > d.range.begin.offset) {
      uint32_t line_end = static_cast<uint32_t>(line.size()) - (lc.column - 1);
      len = std::min(d.range.end.offset - d.range.begin.offset, std::max<uint32_t>(line_end, 1));
    }
    os << (color ? "\033[1;32m" : "") << '^' << std::string(len > 1 ? len - 1 : 0, '~') << reset << "\n";
  }
  if (!d.hint.empty()) os << "  hint: " << d.hint << "\n";
  for (const Diagnostic &n : d.notes) os << format(n, color);
  return os.str();
}

void Diagnostics::print(std::ostream &os, bool color) const {
  std::vector<const Diagnostic *> sorted;
  for (const auto &d : diags_) sorted.push_back(&d);
  std::stable_sort(sorted.begin(), sorted.end(), [](const Diagnostic *a, const Diagnostic *b) {
    if (a->range.begin.file != b->range.begin.file) return a->range.begin.file < b->range.begin.file;
    return a->range.begin.offset < b->range.begin.offset;
  });
  std::set<std::string> seen;  // lane replication can report the same problem per lane
  for (const Diagnostic *d : sorted) {
    std::string text = format(*d, color);
    if (seen.insert(text).second) os << text;
  }
}

static size_t edit_distance(const std::string &a, const std::string &b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t sub = prev[j - 1] + (std::tolower(a[i - 1]) == std::tolower(b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string closest_match(const std::string &word, const std::vector<std::string> &candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const auto &c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_d) best_d = d, best = c;
  }
  // a typo changes a few letters; more than a third of the word is another word
  size_t limit = std::max<size_t>(1, (word.size() + 2) / 3);
  return best_d <= limit ? best : std::string();
}

}  // namespace sluice
