#include "engine/runtime/record_file.hh"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "engine/runtime/element_runtime.hh"

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
  if (path == "-") {
    fd_ = STDOUT_FILENO;
  } else {
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (how == Open::Replace ? O_TRUNC : 0);
    fd_ = ::open(path.c_str(), flags, 0666);
    if (fd_ < 0) throw std::runtime_error("'" + who_ + "': cannot write '" + path + "': " + strerror(errno));
  }
  // Standard output is never cut or looked at: whatever it is, others (the
  // shell, the summary) write to it too.
  struct stat st {};
  regular_ = path != "-" && fstat(fd_, &st) == 0 && S_ISREG(st.st_mode);
  buf_.reserve(block_ + (64 << 10));
  header_ = std::move(header);
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
  if (fd_ < 0) {  // closed: nothing can be written
    w.lost = ends_.size();
    if (!ends_.empty()) failed(EBADF);
  } else if (write_pending_header()) {
    size_t done = write_all(buf_.data(), buf_.size());
    int err = errno;
    size_t whole = 0, k = 0;  // bytes and number of the records written whole
    for (; k < ends_.size() && ends_[k].offset <= done; ++k) whole = ends_[k].offset, w.weight += ends_[k].weight;
    w.records = k;
    w.lost = ends_.size() - k;
    bytes_written_ += whole;
    if (done < buf_.size()) {
      // A record cut by the error comes off the file again, so that what
      // follows it (the next write, a successor's) starts on a whole record.
      struct stat st {};
      if (done > whole && regular_ && fstat(fd_, &st) == 0 && st.st_size >= off_t(done - whole) &&
          ftruncate(fd_, st.st_size - off_t(done - whole)) != 0) {
        // left as it is: the record was lost all the same, and counted
      }
      failed(err);
    }
  } else {
    w.lost = ends_.size();  // no header, no records: they would not be readable
  }
  buf_.clear();
  ends_.clear();
  return w;
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
  fprintf(stderr,
          "sluice: '%s': cannot write '%s': %s; %s that cannot be written are counted lost (\"write error\"), "
          "later writes are tried again\n",
          who_.c_str(), path_ == "-" ? "standard output" : path_.c_str(), last_error_.c_str(), unit_.c_str());
}

void RecordFile::report_metrics(MetricSink &out) const {
  out.counter("file_written_bytes_total", "Bytes a FlowLog or PcapSink wrote to its file.", double(bytes_written_));
  out.counter("file_write_errors_total",
              "Failed writes of a FlowLog or PcapSink; what they lost is in the dropped counters, reason \"write error\".",
              double(failed_writes_.get()));
}

}  // namespace sluice
