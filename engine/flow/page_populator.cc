#include "engine/flow/page_populator.hh"

#include <pthread.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

namespace sluice {

namespace {
constexpr size_t kStep = size_t(2) << 20;  // a huge page: one fault of the lane's, the stop looked at between
std::atomic<uint64_t> g_cpu_ns{0};

uint64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

// Adds the thread's cpu time since the last call to g_cpu_ns.
struct CpuMeter {
  uint64_t last = thread_cpu_ns();
  void add() {
    uint64_t now = thread_cpu_ns();
    g_cpu_ns.fetch_add(now - last, std::memory_order_relaxed);
    last = now;
  }
  ~CpuMeter() { add(); }
};
}  // namespace

uint64_t PagePopulator::cpu_ns_all() { return g_cpu_ns.load(std::memory_order_relaxed); }

PagePopulator::PagePopulator(std::vector<Range> at_once, std::vector<SlotArray> ahead, size_t lead_slots,
                             std::function<void()> on_thread)
    : at_once_(std::move(at_once)), ahead_(std::move(ahead)), lead_(lead_slots), wanted_(lead_slots) {
  thread_ = std::thread(&PagePopulator::run, this, std::move(on_thread));
}

PagePopulator::~PagePopulator() {
  wanted_.store(kStop, std::memory_order_relaxed);
  wanted_.notify_one();
  thread_.join();
}

void PagePopulator::advance(size_t frontier) {
  size_t want = frontier + lead_, had = wanted_.load(std::memory_order_relaxed);
  if (want <= had || had == kStop) return;
  wanted_.store(want, std::memory_order_relaxed);
  wanted_.notify_one();
}

bool PagePopulator::bring_in(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
  auto *at = static_cast<char *>(p);
  for (size_t off = 0; off < n; off += kStep) {
    if (wanted_.load(std::memory_order_relaxed) == kStop) return false;
    size_t len = std::min(kStep, n - off);
    int rc;
    do {
      rc = madvise(at + off, len, MADV_POPULATE_WRITE);
    } while (rc != 0 && errno == EINTR);
    if (rc != 0) {  // EINVAL: a kernel without it; ENOMEM, EFAULT: nothing more to do here
      supported_.store(false, std::memory_order_release);
      return false;
    }
    brought_in_.fetch_add(len, std::memory_order_release);
  }
  return true;
#else
  (void)p, (void)n;
  supported_.store(false, std::memory_order_release);
  return false;
#endif
}

void PagePopulator::run(std::function<void()> on_thread) {
  pthread_setname_np(pthread_self(), "sl-populate");
  CpuMeter cpu;
  if (on_thread) on_thread();
  for (const Range &r : at_once_)
    if (!bring_in(r.p, r.n)) return;
  at_once_done_.store(true, std::memory_order_release);
  cpu.add();
  size_t done = 0, all = 0;  // slots brought in; slots of the largest array
  for (const SlotArray &a : ahead_) all = std::max(all, a.slots);
  while (done < all) {
    size_t want = wanted_.load(std::memory_order_relaxed);
    if (want == kStop) return;
    if (want <= done) {
      wanted_.wait(want, std::memory_order_relaxed);
      continue;
    }
    want = std::min(want, all);
    for (const SlotArray &a : ahead_) {
      // Whole pages only past what is done: a page the lane shares with
      // the range before was brought in with it.
      size_t begin = std::min(done, a.slots) * a.slot_bytes, end = std::min(want, a.slots) * a.slot_bytes;
      begin = begin / 4096 * 4096;
      if (end > begin && !bring_in(static_cast<char *>(a.p) + begin, end - begin)) return;
    }
    done = want;
    ahead_done_.store(done, std::memory_order_release);
    cpu.add();
  }
}

}  // namespace sluice
