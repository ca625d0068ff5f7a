// MappedFile: a regular file's bytes mapped read-only, for reading in place
// (PcapFileReader walks a trace's records in its mapping and RSSSource
// copies each one into a packet buffer: one copy, where read() made two, the
// kernel's into a buffer and ours out of it).
//
// A file can shrink while it is mapped (a trace rewritten or truncated by
// whoever wrote it): touching its pages past the new end raises SIGBUS,
// which would end the process. A SIGBUS handler, installed with the first
// mapping, catches the faults that fall in a live MappedFile: it maps zeros
// over the mapping from the faulting page on (so the access that faulted,
// and any after it, read zeros) and notes where the file's bytes now stop
// (intact_below: the file's size, fstat being safe in a handler). Faults
// elsewhere go to the handler that was there before (or end the process,
// as without one). The page the new end falls in does not fault: the
// kernel zeroes it past the end. A reader that finds zeros where it
// expected data asks (check_size). The reader checks intact_below after
// reading what it reads, and discards what lay past it.
//
// Mapping a 1 GB trace page by page cost more cpu than metering it on one
// lane: 262,144 page table entries made and taken down again, a third of
// the process's cpu in the kernel, on the thread that brings pages in
// (TraceMapping) and on the cpus the lanes share with it. Where the page
// cache holds the file in 2 MiB folios (Linux 6.16 on, ext4 and xfs: a file
// read from the disk with enough read-ahead, or through a huge-page vma as
// this one is), the kernel maps each folio with one PMD entry, but only
// where the mapping's address is 2 MiB-aligned as the file offset is: so
// the file is mapped at such an address (kHugeAlign): 500-650 faults for
// 1 GB instead of 12,000-16,000 (measured in docs/performance.md). Where it holds the
// file in small folios (a file just written by another program), each
// fault maps its fault-around window (64 KiB by default) of cached pages,
// so bring_in() reads one byte in each window rather than asking for every
// page (MADV_POPULATE_READ, which walks the page tables page by page after
// faulting them).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

namespace sluice {

class MappedFile {
 public:
  // Maps the regular file open at `fd`, as long as it is now; size() is 0
  // where it cannot be (not a regular file, empty, mmap fails, too many
  // mappings at once for the SIGBUS guard).
  explicit MappedFile(int fd);
  // data() is aligned to this (a PMD's span on x86-64 and arm64 with 4 KiB pages).
  static constexpr size_t kHugeAlign = size_t(2) << 20;
  // bring_in() reads a byte every kFaultAround bytes: the kernel's
  // fault_around_bytes default (debugfs; where it is set lower, the
  // reader takes the faults of the pages in between itself).
  static constexpr size_t kFaultAround = size_t(64) << 10;
  ~MappedFile();
  MappedFile(const MappedFile &) = delete;
  MappedFile &operator=(const MappedFile &) = delete;

  const uint8_t *data() const { return data_; }
  size_t size() const { return size_; }
  // The bytes [0, intact_below()) are the file's; past it, zeros where the
  // file shrank under the mapping (size() while it has not).
  size_t intact_below() const { return intact_below_.load(std::memory_order_acquire); }
  // Lowers intact_below to the file's size now, if it shrank.
  void check_size();

  // Brings the pages of [begin, end) in (from the page cache or the disk),
  // so that reading them does not fault: false once that fails (the file
  // shrank), after which reading past the fault raises the SIGBUS handled
  // above. Cheap to call on pages already in.
  bool bring_in(size_t begin, size_t end) const;
  // Takes [begin, end)'s pages out of this process's page tables (the page
  // cache keeps them; reading them again maps them again): the pages behind
  // a reader, so that a long trace does not map all of itself.
  void let_go(size_t begin, size_t end) const;

 private:
  const uint8_t *data_ = nullptr;
  size_t size_ = 0, mapped_size_ = 0;  // mapped_size_: size_ rounded up to pages
  int fd_ = -1;  // the caller's: open for as long as the mapping
  int guard_slot_ = -1;
  std::atomic<size_t> intact_below_;
};

}  // namespace sluice
