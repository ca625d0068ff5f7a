#include "engine/packet/trace_mapping.hh"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "engine/base/clock.hh"

namespace sluice {

namespace {

// The file as it is now: readers share a mapping only of the same bytes.
using FileKey = std::tuple<dev_t, ino_t, off_t, int64_t>;

std::mutex registry_mutex;
std::map<FileKey, std::weak_ptr<TraceMapping>> &registry() {
  static auto *r = new std::map<FileKey, std::weak_ptr<TraceMapping>>;  // never destroyed: readers may outlive statics
  return *r;
}

}  // namespace

std::shared_ptr<TraceMapping> TraceMapping::open(int fd, std::function<void()> on_thread) {
  struct stat st;
  if (fstat(fd, &st) != 0) return nullptr;
  FileKey key{st.st_dev, st.st_ino, st.st_size, int64_t(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec};
  std::lock_guard lock(registry_mutex);
  auto &reg = registry();
  if (auto it = reg.find(key); it != reg.end())
    if (std::shared_ptr<TraceMapping> m = it->second.lock()) return m;
  std::erase_if(reg, [](const auto &entry) { return entry.second.expired(); });  // files no reader walks now
  int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (own < 0) return nullptr;
  auto file = std::make_unique<MappedFile>(own);
  if (!file->size()) {
    close(own);
    return nullptr;
  }
  std::shared_ptr<TraceMapping> m(new TraceMapping(own, std::move(file)));
  m->thread_ = std::thread(&TraceMapping::bring_in_ahead, m.get(), std::move(on_thread));
  reg[key] = m;
  return m;
}

TraceMapping::TraceMapping(int fd, std::unique_ptr<MappedFile> file) : fd_(fd), file_(std::move(file)) {
  for (std::atomic<size_t> &w : walkers_) w.store(kNoWalker, std::memory_order_relaxed);
  for (std::atomic<size_t> &h : holds_) h.store(kNoWalker, std::memory_order_relaxed);
}

TraceMapping::~TraceMapping() {
  stop_.store(true, std::memory_order_release);
  moved_.fetch_add(1, std::memory_order_release);
  moved_.notify_all();
  if (thread_.joinable()) thread_.join();
  file_.reset();  // unmapped before its descriptor closes
  close(fd_);
}

int TraceMapping::join(size_t pos) {
  for (int w = 0; w < kMaxWalkers; ++w) {
    size_t none = kNoWalker;
    if (walkers_[size_t(w)].compare_exchange_strong(none, pos, std::memory_order_acq_rel)) {
      threads_[size_t(w)].store(0, std::memory_order_relaxed);
      walked(w, pos, pos);
      return w;
    }
  }
  return -1;
}

void TraceMapping::walked(int w, size_t pos, size_t hold) {
  holds_[size_t(w)].store(std::min(hold, pos), std::memory_order_release);
  walkers_[size_t(w)].store(pos, std::memory_order_release);
  moved_.fetch_add(1, std::memory_order_release);
  moved_.notify_one();
}

void TraceMapping::leave(int w) { walked(w, kNoWalker, kNoWalker); }

void TraceMapping::keep_pace(int w, size_t pos, uint64_t stalled_ns) {
  static thread_local const pid_t self = gettid();
  threads_[size_t(w)].store(self, std::memory_order_relaxed);
  walkers_[size_t(w)].store(pos, std::memory_order_release);
  size_t last_back = kNoWalker;
  uint64_t moved_at = 0;
  for (;;) {
    size_t back = kNoWalker;
    for (size_t o = 0; o < walkers_.size(); ++o)
      if (o != size_t(w) && threads_[o].load(std::memory_order_relaxed) != self)
        back = std::min(back, walkers_[o].load(std::memory_order_acquire));
    if (back == kNoWalker || pos <= back + kPaceLead) return;
    const uint64_t now = mono_ns();
    if (back != last_back) last_back = back, moved_at = now;
    else if (now - moved_at >= stalled_ns) return;
    // The one behind covers a MiB in about half a millisecond.
    usleep(50);
  }
}

// Keeps the pages of the next few MiB past the walker furthest on brought
// in (the walks take no page faults, and the disk is read ahead where the
// file is not in the page cache) and lets go of those a few MiB behind the
// furthest back of the walkers' holds.
void TraceMapping::bring_in_ahead(std::function<void()> on_thread) {
  pthread_setname_np(pthread_self(), "sl-pcap-read");
  if (on_thread) on_thread();
  constexpr size_t kStep = size_t(1) << 20, kAhead = size_t(8) << 20, kBehind = size_t(2) << 20;
  size_t brought = 0, let_go = 0;
  bool more = true;
  for (;;) {
    uint64_t seen = moved_.load(std::memory_order_acquire);
    if (stop_.load(std::memory_order_acquire)) return;
    size_t back = kNoWalker, front = 0;
    for (size_t w = 0; w < walkers_.size(); ++w) {
      size_t pos = walkers_[w].load(std::memory_order_acquire);
      if (pos == kNoWalker) continue;
      back = std::min(back, holds_[w].load(std::memory_order_acquire)), front = std::max(front, pos);
    }
    if (back != kNoWalker) {
      if (back > let_go + kBehind + kStep) {
        file_->let_go(let_go, back - kBehind);
        let_go = back - kBehind;
      }
      if (more && brought < front + kAhead && brought < file_->size()) {
        size_t from = std::max(brought, back);
        brought = std::min(file_->size(), from + kStep);
        more = file_->bring_in(from, brought);  // false: the file shrank; the walks find out
        continue;
      }
    }
    moved_.wait(seen, std::memory_order_acquire);
  }
}

}  // namespace sluice
