// The clocks the runtime reads outside the data path's packet time: wall
// time (UNIX ns: Timestamp(clock tsc)'s base), monotonic time (pacing,
// timers, back-off, how long a lane has been idle) and the calling thread's
// cpu time (what a segment cost, in the run's report).
#pragma once
#include <time.h>

#include <cstdint>
#include <optional>

namespace sluice {

// nullopt where the clock cannot be read (another thread's cpu clock once
// that thread has ended).
inline std::optional<uint64_t> read_clock_ns(clockid_t clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return std::nullopt;
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}
inline uint64_t clock_ns(clockid_t clock) { return read_clock_ns(clock).value_or(0); }
inline uint64_t wall_ns() { return clock_ns(CLOCK_REALTIME); }
inline uint64_t mono_ns() { return clock_ns(CLOCK_MONOTONIC); }
inline uint64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

}  // namespace sluice
