// Source files and locations. Every token, AST node and diagnostic carries a
// SourceRange so that errors can be printed as file:line:column with a caret.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice {

struct SourceFile {
  std::string name;  // as the user named it (printed in diagnostics)
  std::string text;
  std::vector<uint32_t> line_starts;  // byte offset of each line

  SourceFile(std::string n, std::string t);
  // The 1-based line containing byte offset `off`, and that line's text.
  uint32_t line_of(uint32_t off) const;
  std::string_view line_text(uint32_t line) const;
};

// A position is a file index plus a byte offset; line/column are derived on demand.
struct SourcePos {
  int32_t file = -1;  // -1: no location (e.g. built-in)
  uint32_t offset = 0;
};

struct SourceRange {
  SourcePos begin, end;  // end is exclusive
  bool valid() const { return begin.file >= 0; }
};

// Owns every file read in one compilation (the main file, `require`d files,
// and the pseudo-file holding --define values).
class SourceManager {
public:
  int add(std::string name, std::string text);
  const SourceFile &file(int index) const { return *files_[index]; }
  int count() const { return static_cast<int>(files_.size()); }

  struct LineCol { uint32_t line, column; };
  LineCol line_col(SourcePos pos) const;
  // "file:line:column"
  std::string describe(SourcePos pos) const;

private:
  std::vector<std::unique_ptr<SourceFile>> files_;
};

}  // namespace sluice
