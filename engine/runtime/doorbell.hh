// A doorbell lets a thread with nothing to do sleep in the kernel (a futex)
// instead of spinning, and lets the thread that makes work for it wake it.
// There are usually more segment threads than cores on small machines, and a
// spinning or yielding thread takes the core from the one that would fill
// its ring.
//
// The waiter announces that it sleeps, then checks its condition once more;
// the ringer publishes its work, then looks for a sleeper. A full fence on
// both sides orders the two (Dekker's pattern): either the ringer sees the
// sleeper or the sleeper sees the work. Ringing costs a fence and a load when
// nobody sleeps.
#pragma once
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

namespace sluice {

class Doorbell {
 public:
  // Sleeps until a ring or timeout_ns, unless ready() holds once announced.
  template <typename Ready>
  void wait(Ready ready, uint64_t timeout_ns) {
    uint32_t seen = rings_.load(std::memory_order_acquire);
    sleeping_.store(true, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!ready()) {
      timespec ts{time_t(timeout_ns / 1000000000u), long(timeout_ns % 1000000000u)};
      syscall(SYS_futex, reinterpret_cast<uint32_t *>(&rings_), FUTEX_WAIT_PRIVATE, seen, &ts, nullptr, 0);
    }
    sleeping_.store(false, std::memory_order_relaxed);
  }

  // After publishing work (an enqueue, a close): wakes the sleeper, if any.
  void ring() {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (!sleeping_.load(std::memory_order_relaxed)) return;
    rings_.fetch_add(1, std::memory_order_release);
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(&rings_), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));
  std::atomic<uint32_t> rings_{0};
  std::atomic<bool> sleeping_{false};
};

}  // namespace sluice
