#include "engine/runtime/record_file.hh"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/base/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/log.hh"

namespace sluice {

RecordFile::~RecordFile() {
  // Only when the element was not flushed (a run that failed to start):
  // what is buffered cannot be counted any more, it is written if it can be.
  if (fd_ < 0) return;
  if (!buf_.empty()) write_buffer();
  close();
}

void RecordFile::open(const std::string &path, Open how, std::string header) {
  path_ = path;
  buf_.reserve(block_ + (64 << 10));
  header_text_ = std::move(header);
  open_fd(how == Open::Replace);
  if (fd_ < 0) throw std::runtime_error("'" + who_ + "': cannot write '" + path + "': " + strerror(errno));
}

// fd_ on path_ (-1 with errno when it cannot be opened), its header pending.
void RecordFile::open_fd(bool truncate) {
  if (path_ == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0);
    fd_ = ::open(path_.c_str(), flags, 0666);
    if (fd_ < 0) return;
  }
  // Standard output is never cut or looked at: whatever it is, others (the
  // shell, the summary) write to it too.
  struct stat st {};
  regular_ = path_ != "-" && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  file_bytes_ = regular_ ? uint64_t(st.st_size) : 0;
  header_ = header_text_;
  write_pending_header();
}

// The header goes only into an empty file: a predecessor may have written
// one since (a reload), and a device or pipe counts as empty.
bool RecordFile::write_pending_header() {
  if (header_.empty()) return true;
  struct stat st {};
  if (regular_ && fstat(fd_, &st) == 0 && st.st_size > 0) {
    header_.clear();
    return true;
  }
  size_t done = write_all(reinterpret_cast<const uint8_t *>(header_.data()), header_.size());
  if (done == header_.size()) {
    bytes_written_ += done;
    file_bytes_ += done;
    header_.clear();
    return true;
  }
  int err = errno;
  if (done && regular_ && ftruncate(fd_, 0) != 0) {
    // the cut header stays; the next attempt sees a file that is not empty
  }
  failed(err);
  return false;
}

size_t RecordFile::write_all(const uint8_t *p, size_t n) {
  size_t done = 0;
  while (done < n) {
    ssize_t w = ::write(fd_, p + done, n - done);
    if (w > 0) {
      done += size_t(w);
    } else if (w < 0 && errno == EINTR) {
      continue;
    } else {
      if (w == 0) errno = EIO;
      break;
    }
  }
  return done;
}

RecordFile::Written RecordFile::write_buffer() {
  Written w;
  if (fd_ >= 0 && regular_) follow_path();
  rotate_if_due();
  size_t k = 0;
  while (k < ends_.size()) {
    size_t last = ends_.size();
    if (rotation_.max_bytes && regular_ && fd_ >= 0) {
      // the records that fit into the file in use
      uint32_t start = k ? ends_[k - 1].offset : 0;
      last = k;
      while (last < ends_.size() && file_bytes_ + (ends_[last].offset - start) <= rotation_.max_bytes) ++last;
      if (last == k) {
        if (file_bytes_ > header_text_.size()) {  // full: the next file takes them
          rotate();
          continue;
        }
        last = k + 1;  // a record larger than a file: a file of its own
      }
    }
    Written part = write_records(k, last);
    w.records += part.records, w.weight += part.weight, w.lost += part.lost;
    if (part.lost) {  // a failed write: the rest of the block goes with it
      w.lost += ends_.size() - last;
      break;
    }
    k = last;
  }
  buf_.clear();
  ends_.clear();
  return w;
}

RecordFile::Written RecordFile::write_records(size_t first, size_t last) {
  Written w;
  size_t count = last - first;
  if (fd_ < 0) {  // closed, or a new file could not be opened: nothing can be written
    w.lost = count;
    if (count) failed(EBADF);
    return w;
  }
  if (!write_pending_header()) {
    w.lost = count;  // no header, no records: they would not be readable
    return w;
  }
  uint32_t start = first ? ends_[first - 1].offset : 0;
  size_t n = ends_[last - 1].offset - start;
  size_t done = write_all(buf_.data() + start, n);
  int err = errno;
  size_t whole = 0, k = first;  // bytes and number of the records written whole
  for (; k < last && ends_[k].offset - start <= done; ++k) whole = ends_[k].offset - start, w.weight += ends_[k].weight;
  w.records = k - first;
  w.lost = last - k;
  bytes_written_ += whole;
  file_bytes_ += whole;
  if (done < n) {
    // A record cut by the error comes off the file again, so that what
    // follows it (the next write, a successor's) starts on a whole record.
    struct stat st {};
    if (done > whole && regular_ && fstat(fd_, &st) == 0 && st.st_size >= off_t(done - whole) &&
        ftruncate(fd_, st.st_size - off_t(done - whole)) != 0) {
      // left as it is: the record was lost all the same, and counted
    }
    failed(err);
  }
  return w;
}

// logrotate (without copytruncate) or an operator moved or removed the
// file: write on into a new one at the path, as its readers expect.
void RecordFile::follow_path() {
  struct stat at_path {}, ours {};
  if (fstat(fd_, &ours) != 0) return;
  if (stat(path_.c_str(), &at_path) == 0 && at_path.st_ino == ours.st_ino && at_path.st_dev == ours.st_dev) return;
  ::close(fd_);
  open_fd(false);
  if (fd_ < 0) failed(errno);
}

uint64_t RecordFile::next_rotation_after(uint64_t wall) const {
  return (wall / rotation_.every_ns + 1) * rotation_.every_ns;
}

void RecordFile::rotate_if_due() {
  if (!rotation_.every_ns || !regular_ || fd_ < 0) return;
  uint64_t now = wall_ns();
  if (!next_rotation_) next_rotation_ = next_rotation_after(now);
  if (now < next_rotation_) return;
  next_rotation_ = next_rotation_after(now);
  if (file_bytes_ > header_text_.size()) rotate();
}

void RecordFile::rotate() {
  time_t now = time_t(wall_ns() / 1000000000ull);
  tm t {};
  gmtime_r(&now, &t);
  char stamp[32];
  strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &t);
  std::string to = path_ + "." + stamp;
  struct stat st {};
  for (int n = 1; lstat(to.c_str(), &st) == 0; ++n) to = path_ + "." + stamp + "-" + std::to_string(n);
  if (rename(path_.c_str(), to.c_str()) != 0) {
    failed(errno);  // writing on into the file in use loses nothing
    return;
  }
  ::close(fd_);
  ++rotations_;
  open_fd(false);
  if (fd_ < 0) failed(errno);
  remove_old_rotations();
}

// The rotated files are PATH.YYYYMMDDTHHMMSSZ[-N]: by name is by age.
void RecordFile::remove_old_rotations() {
  if (!rotation_.keep) return;
  namespace fs = std::filesystem;
  fs::path p(path_);
  fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  std::string prefix = p.filename().string() + ".";
  std::vector<fs::path> rotated;
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() >= prefix.size() + 16 && name.compare(0, prefix.size(), prefix) == 0 &&
        name[prefix.size() + 8] == 'T' && name[prefix.size() + 15] == 'Z')
      rotated.push_back(e.path());
  }
  if (rotated.size() <= rotation_.keep) return;
  // oldest first: by stamp, then by the -N added to a stamp already taken
  auto age = [&](const fs::path &f) {
    std::string name = f.filename().string();
    size_t dash = name.find('-', prefix.size());
    return std::make_pair(name.substr(0, prefix.size() + 16),
                          dash == std::string::npos ? 0ul : strtoul(name.c_str() + dash + 1, nullptr, 10));
  };
  std::sort(rotated.begin(), rotated.end(), [&](const fs::path &a, const fs::path &b) { return age(a) < age(b); });
  for (size_t i = 0; i + rotation_.keep < rotated.size(); ++i) fs::remove(rotated[i], ec);
}

void RecordFile::close() {
  if (fd_ < 0) return;
  if (fd_ != STDOUT_FILENO && ::close(fd_) != 0) {
    int err = errno;
    fd_ = -1;
    failed(err);
  }
  fd_ = -1;
}

// Counted every time, printed once per kind of error: a full disk fails
// every write until it frees up.
void RecordFile::failed(int err) {
  failed_writes_.add();
  last_error_ = strerror(err);
  if (std::find(reported_.begin(), reported_.end(), err) != reported_.end()) return;
  reported_.push_back(err);
  log::error("'" + who_ + "': cannot write '" + (path_ == "-" ? "standard output" : path_) + "': " + last_error_ + "; " +
             unit_ + " that cannot be written are counted lost (\"write error\"), later writes are tried again");
}

const std::vector<MetricSpec> &RecordFile::metric_specs() {
  static const std::vector<MetricSpec> specs = {
      MetricSpec::counter("file_written_bytes_total", "Bytes a FlowLog or PcapSink wrote to its file."),
      MetricSpec::counter("file_write_errors_total", "Failed writes of a FlowLog or PcapSink; what they lost is in the "
                                                     "dropped counters, reason \"write error\"."),
  };
  return specs;
}

void RecordFile::report_metrics(ElementMetrics &out) const {
  out.counter("file_written_bytes_total", double(bytes_written_));
  out.counter("file_write_errors_total", double(failed_writes_.get()));
}

}  // namespace sluice
