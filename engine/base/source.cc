#include "engine/base/source.hh"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace sluice {

namespace {

std::string size_text(size_t bytes) {
  return bytes % (1u << 20) == 0 ? std::to_string(bytes >> 20) + " MiB" : std::to_string(bytes) + " bytes";
}

}  // namespace

bool read_user_file(const std::string &path, size_t max_bytes, std::string &text, std::string *error) {
  text.clear();
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return *error = "cannot open '" + path + "': " + std::strerror(errno), false;
  struct stat st;
  std::string why;
  if (fstat(fd, &st) != 0)
    why = std::strerror(errno);
  else if (S_ISDIR(st.st_mode))
    why = "it is a directory";
  else if (!S_ISREG(st.st_mode))
    why = "it is not a regular file (a device, a pipe or a socket)";
  else if (size_t(st.st_size) > max_bytes)
    why = "it is larger than " + size_text(max_bytes) + ", the most that is read";
  // a file that grows while it is read (or that stat says is empty, as /proc
  // files do) is read up to one byte past the bound
  while (why.empty()) {
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = std::strerror(errno);
    if (n <= 0) break;
    text.append(buf, size_t(n));
    if (text.size() > max_bytes) why = "it is larger than " + size_text(max_bytes) + ", the most that is read";
  }
  close(fd);
  if (why.empty()) return true;
  text.clear();
  *error = "cannot read '" + path + "': " + why;
  return false;
}

std::string untrusted_as_root(const std::string &resolved) {
  if (geteuid() != 0) return "";
  namespace fs = std::filesystem;
  for (fs::path at = resolved;; at = at.parent_path()) {
    struct stat st;
    if (lstat(at.c_str(), &st) != 0) return "cannot check '" + at.string() + "': " + std::strerror(errno);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", unsigned(st.st_mode & 07777));
    if (st.st_uid != 0)
      return "'" + at.string() + "' belongs to uid " + std::to_string(st.st_uid) + ", not root";
    bool sticky_dir = S_ISDIR(st.st_mode) && (st.st_mode & S_ISVTX);
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !sticky_dir)
      return "'" + at.string() + "' is writable by " + ((st.st_mode & S_IWOTH) ? "others" : "its group") +
             " (mode " + mode + ")";
    if (at == at.parent_path()) return "";
  }
}

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
