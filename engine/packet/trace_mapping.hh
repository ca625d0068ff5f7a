// TraceMapping: one mapping of a trace file, and one thread that brings its
// pages in ahead of the readers walking it and lets go of those behind
// them, shared by every PcapFileReader walking the file at the same time.
//
// The lanes of a trace each walk it whole (EthDevice::keep_lane_share). With
// a mapping and a thread each, a two-lane run mapped and unmapped every page
// of the file twice: 0.12-0.14 s of cpu per lane on a 1 GB trace, on the
// cpus the lanes run on. Shared, the pages are brought in once, ahead of the
// walker furthest on, and let go of once, behind the one furthest back.
//
// The walk reads the file from memory (a line at a time, each prefetched
// 4 KiB ahead: PcapFileReader::next_mapped), and the cpus share their last
// cache level: a line one cpu has read another reads from that cache, about
// 3.5x faster than from memory (docs/performance.md). So the walkers are
// kept together (keep_pace): two lanes left alone drifted up to 100 MiB
// apart on a 1 GB trace, and each read the whole file from memory; a walker
// more than kPaceLead ahead of the one furthest back waits for it (while
// that one moves), and the one behind reads what the first just brought
// into the cache.
#pragma once
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "engine/packet/mapped_file.hh"

namespace sluice {

class TraceMapping {
 public:
  // The mapping of the regular file open at `fd`: the one readers of the
  // same file (same device, inode, size and modification time) have now,
  // else a new one whose thread runs `on_thread` first. Null where the file
  // cannot be mapped (MappedFile's reasons).
  static std::shared_ptr<TraceMapping> open(int fd, std::function<void()> on_thread);
  ~TraceMapping();
  TraceMapping(const TraceMapping &) = delete;
  TraceMapping &operator=(const TraceMapping &) = delete;

  MappedFile &file() { return *file_; }

  // A walker at `pos` (its next record): a handle for walked() and leave(),
  // or -1 when kMaxWalkers walk already (the caller maps the file itself).
  int join(size_t pos);
  // The walker `w` is at `pos`, and still needs the pages from `hold`
  // (<= pos: records it handed on in place, InPlaceRecords) on: pages
  // behind every walker's hold may go, pages ahead of the furthest walker
  // come in. Cheap: two stores and a wake-up.
  void walked(int w, size_t pos, size_t hold);
  // The walker no longer walks the mapping (it reads on with read(), or is
  // gone): it holds no page back.
  void leave(int w);
  static constexpr size_t kPaceLead = size_t(4) << 20;
  static constexpr uint64_t kPaceStalledNs = 2'000'000;
  // The walker `w` is at `pos` (published for the others, no wake-up; call
  // every MiB or so): where it is more than kPaceLead ahead of the walker
  // furthest back, it waits for that one to come within kPaceLead, as long
  // as that one moves (one that has not moved for `stalled_ns` is not
  // waited for: a lane held up elsewhere does not hold the others), and
  // not where that one is walked by this thread too (lanes of one thread).
  void keep_pace(int w, size_t pos, uint64_t stalled_ns = kPaceStalledNs);

  static constexpr int kMaxWalkers = 128;  // RSSSource's most queues

 private:
  TraceMapping(int fd, std::unique_ptr<MappedFile> file);
  void bring_in_ahead(std::function<void()> on_thread);  // the thread

  int fd_;  // a descriptor of its own, open for as long as the mapping
  std::unique_ptr<MappedFile> file_;
  static constexpr size_t kNoWalker = ~size_t(0);
  std::array<std::atomic<size_t>, kMaxWalkers> walkers_, holds_;
  std::array<std::atomic<pid_t>, kMaxWalkers> threads_{};  // who walked each last (keep_pace); 0: not known
  std::atomic<uint64_t> moved_{0};  // bumped by each walked(), leave(), and the end
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace sluice
