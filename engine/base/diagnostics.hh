// Compiler-style diagnostics: "file:line:column: error: message", the source
// line, a caret under the offending token, and an optional hint. Every error in
// a file is collected; nothing stops at the first one.
#pragma once
#include <ostream>
#include <string>
#include <vector>

#include "engine/base/source.hh"

namespace sluice {

enum class Severity { Error, Warning, Note };

struct Diagnostic {
  Severity severity;
  SourceRange range;
  std::string message;
  std::string hint;  // printed after the caret line as "hint: ..."; may be empty
  std::vector<Diagnostic> notes;  // e.g. "in instantiation of 'Meter' here"
};

class Diagnostics {
public:
  explicit Diagnostics(const SourceManager &sm) : sm_(sm) {}

  Diagnostic &error(SourceRange r, std::string msg, std::string hint = {});
  Diagnostic &warning(SourceRange r, std::string msg, std::string hint = {});

  int error_count() const { return errors_; }
  int warning_count() const { return warnings_; }
  bool has_errors() const { return errors_ > 0; }
  const std::vector<Diagnostic> &all() const { return diags_; }

  // Notes added to every diagnostic reported while the context is active:
  // compound expansion pushes "in instantiation of 'X' here".
  void push_context(Diagnostic note) { context_.push_back(std::move(note)); }
  void pop_context() { context_.pop_back(); }

  // Diagnostics sorted by location (file order, then offset), deduplicated.
  void print(std::ostream &os, bool color = false) const;
  std::string format(const Diagnostic &d, bool color = false) const;
  // "file:line:column: error: message" only (no source line); for tests.
  std::string brief(const Diagnostic &d) const;

private:
  Diagnostic &add(Severity s, SourceRange r, std::string msg, std::string hint);
  const SourceManager &sm_;
  std::vector<Diagnostic> diags_;
  std::vector<Diagnostic> context_;
  int errors_ = 0, warnings_ = 0;
};

// Closest candidate by edit distance, for "did you mean ...?" hints; empty when
// nothing is close enough to be a plausible typo.
std::string closest_match(const std::string &word, const std::vector<std::string> &candidates);

}  // namespace sluice
