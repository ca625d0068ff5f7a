#include "dsl/source.hh"

#include <algorithm>

namespace sluice {

SourceFile::SourceFile(std::string n, std::string t) : name(std::move(n)), text(std::move(t)) {
  line_starts.push_back(0);
  for (uint32_t i = 0; i < text.size(); ++i)
    if (text[i] == '\n') line_starts.push_back(i + 1);
}

uint32_t SourceFile::line_of(uint32_t off) const {
  auto it = std::upper_bound(line_starts.begin(), line_starts.end(), off);
  return static_cast<uint32_t>(it - line_starts.begin());
}

std::string_view SourceFile::line_text(uint32_t line) const {
  if (line == 0 || line > line_starts.size()) return {};
  uint32_t b = line_starts[line - 1];
  uint32_t e = line < line_starts.size() ? line_starts[line] : static_cast<uint32_t>(text.size());
  while (e > b && (text[e - 1] == '\n' || text[e - 1] == '\r')) --e;
  return std::string_view(text).substr(b, e - b);
}

int SourceManager::add(std::string name, std::string text) {
  files_.push_back(std::make_unique<SourceFile>(std::move(name), std::move(text)));
  return count() - 1;
}

SourceManager::LineCol SourceManager::line_col(SourcePos pos) const {
  if (pos.file < 0 || pos.file >= count()) return {0, 0};
  const SourceFile &f = file(pos.file);
  uint32_t line = f.line_of(pos.offset);
  return {line, pos.offset - f.line_starts[line - 1] + 1};
}

std::string SourceManager::describe(SourcePos pos) const {
  if (pos.file < 0 || pos.file >= count()) return "<unknown>";
  auto lc = line_col(pos);
  return file(pos.file).name + ":" + std::to_string(lc.line) + ":" + std::to_string(lc.column);
}

}  // namespace sluice
