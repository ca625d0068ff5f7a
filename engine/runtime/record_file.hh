// An output file written in whole records (FlowLog's lines, PcapSink's
// packets) through a buffer of its own rather than stdio's, so that a failed
// write tells exactly which records it lost: the caller counts them, the file
// keeps whole records only, and the next write is tried again (a disk may
// free up). Every write appends (O_APPEND), so that an instance a hot reload
// made writes after what its predecessor flushed at the switch, whatever the
// order in which the two opened the file.
//
// A file can also rotate (by size, by time, keeping the newest N) and
// follows its path: when the path no longer names the file being written
// (logrotate, mv), the next write opens it anew.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "engine/core/element_spec.hh"
#include "engine/runtime/counters.hh"

namespace sluice {

class ElementMetrics;

class RecordFile {
 public:
  // Replace: a fresh start (the file is emptied). Append: the path was
  // written earlier in this run (a sink a reload replaced or removed).
  enum class Open { Replace, Append };

  // who: the element's name, unit: "records" or "packets" (for the
  // message); failed writes are counted in `failed_writes` (the element's
  // counters.write_errors). `block`: the bytes buffered before a write, and
  // so what one failed write loses at most, and how far the file lags.
  RecordFile(std::string who, std::string unit, Counter &failed_writes, size_t block)
      : who_(std::move(who)), unit_(std::move(unit)), failed_writes_(failed_writes), block_(block) {}
  ~RecordFile();
  RecordFile(const RecordFile &) = delete;
  RecordFile &operator=(const RecordFile &) = delete;

  // Rotation: the file in use is renamed PATH.YYYYMMDDTHHMMSSZ (its closing
  // time, UTC; -N added when taken) and a new one started, before a write
  // would take it past max_bytes (whole records: a record larger than that
  // gets a file of its own), and at every multiple of every_ns of the wall
  // clock (a file holding no record is not rotated). keep: the rotated files
  // kept, the oldest removed beyond it (0: all). 0 turns each off.
  struct Rotation {
    uint64_t max_bytes = 0, every_ns = 0;
    unsigned keep = 0;
  };
  void set_rotation(const Rotation &r) { rotation_ = r; }
  uint64_t rotations() const { return rotations_; }

  // Opens `path` ("-": standard output). `header` goes first into an empty
  // file: written now, or, when that fails, before the next records while
  // the file is still empty. Throws std::runtime_error when the file cannot
  // be opened.
  void open(const std::string &path, Open how, std::string header);

  // A record: its bytes, then end_record(weight) (weight: FlowLog's lines).
  void append(const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    buf_.insert(buf_.end(), b, b + n);
  }
  // Room for n bytes at the end of the buffer, filled by the caller.
  uint8_t *extend(size_t n) {
    buf_.resize(buf_.size() + n);
    return buf_.data() + buf_.size() - n;
  }
  void end_record(uint32_t weight = 1) { ends_.push_back({uint32_t(buf_.size()), weight}); }
  // The buffer is worth a write (call write_buffer()).
  bool full() const { return buf_.size() >= block_; }
  bool empty() const { return ends_.empty(); }
  // A time rotation that is due, done now (at most one clock read per call).
  void rotate_if_due();

  // What a write of the buffer did: records (and their weight) now in the
  // file, and records lost to a failed write.
  struct Written {
    uint64_t records = 0, weight = 0, lost = 0;
  };
  Written write_buffer();
  // Closes the file (standard output stays open); a failure counts as a
  // failed write. Write the buffer first.
  void close();

  uint64_t failed_writes() const { return failed_writes_.get(); }
  uint64_t bytes_written() const { return bytes_written_; }
  // strerror of the last failed write ("" when none failed).
  const std::string &last_error() const { return last_error_; }
  // sluice_file_written_bytes_total, sluice_file_write_errors_total, which
  // the spec of an element with a RecordFile declares with metric_specs().
  void report_metrics(ElementMetrics &out) const;
  static const std::vector<MetricSpec> &metric_specs();

 private:
  struct End {
    uint32_t offset, weight;  // where a record ends in buf_, its weight
  };
  // Writes [p, p + n); returns the bytes written before an error (errno set).
  size_t write_all(const uint8_t *p, size_t n);
  bool write_pending_header();
  void failed(int err);
  void open_fd(bool truncate);
  // Records [first, last) of the buffer into the file.
  Written write_records(size_t first, size_t last);
  // A new file when the path names another one now (or none).
  void follow_path();
  void rotate();
  void remove_old_rotations();
  uint64_t next_rotation_after(uint64_t wall) const;

  std::string who_, unit_, path_;
  int fd_ = -1;
  bool regular_ = false;  // a regular file (not standard output): a cut record can be cut off again
  std::string header_;    // still to be written (only while the file is empty)
  std::string header_text_;  // what every new file starts with
  Rotation rotation_;
  uint64_t file_bytes_ = 0;     // the size of the file in use
  uint64_t next_rotation_ = 0;  // wall ns of the next time rotation (0: none planned yet)
  uint64_t rotations_ = 0;
  std::vector<uint8_t> buf_;
  std::vector<End> ends_;
  Counter &failed_writes_;
  size_t block_;
  uint64_t bytes_written_ = 0;
  std::string last_error_;
  std::vector<int> reported_;  // errno values already printed: each once
};

}  // namespace sluice
