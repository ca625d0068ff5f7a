// Source files and locations. Every token, AST node and diagnostic carries a
// SourceRange so that errors can be printed as file:line:column with a caret.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace sluice {

// Files named by the user are read whole into memory: these bounds are far
// above any real configuration and low enough that a wrong name (/dev/zero,
// a trace) is refused at once instead of filling memory. A .pipe file, and
// each file it requires:
inline constexpr size_t kMaxPipeFileBytes = 4u << 20;

// Reads the regular file `path` into `text`. False with *error ("cannot read
// 'PATH': why") when it cannot be opened, is not a regular file (a
// directory, a device, a pipe, a socket) or holds more than max_bytes.
bool read_user_file(const std::string &path, size_t max_bytes, std::string &text, std::string *error);

// A file whose contents run as code in this process (a plugin, a host
// profile's EAL options) must, when the process runs as root, be one that no
// other user could have written or swapped, as sshd's StrictModes asks of
// its files: it and every directory above it belong to root and are
// writable by no group or others (a sticky directory such as /tmp excepted,
// since others cannot replace root's files there). `resolved` is an absolute
// path without symbolic links (std::filesystem::canonical): what is checked
// is then exactly what is opened. Returns "" when the file may be used (or
// the process is not root), else why not.
std::string untrusted_as_root(const std::string &resolved);

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
