// Packet times from the CPU's time-stamp counter, kept on the system clock:
// Timestamp(clock tsc), and clock auto on a live port without timestamps.
// No system call per batch: the counter is read once per batch and turned
// into UNIX ns from a base (a system clock reading and the counter at that
// moment) that is set again once `resync_ticks` counter ticks have passed
// (a second's worth), so the times follow NTP's corrections and never drift
// from the system clock by more than one interval's worth of the rate
// estimate's error. Times never go back: after a resync that set the clock
// back (NTP stepped it, or the rate was overestimated), packets keep the
// last time given until the system clock catches up. Plain arithmetic, so
// tests drive it with a made-up counter and clock.
#pragma once
#include <cstdint>

namespace sluice {

class TscWallClock {
 public:
  // ns_per_tick: the counter's period (1e9 / its rate in Hz); resync_ticks:
  // how often the base is set again; tsc and wall_ns: now.
  void start(double ns_per_tick, uint64_t resync_ticks, uint64_t tsc, uint64_t wall_ns) {
    ns_per_tick_ = ns_per_tick;
    resync_ticks_ = resync_ticks ? resync_ticks : 1;
    resync(tsc, wall_ns);
    last_ = wall0_;
  }
  // Whether the base is due to be set again at counter value tsc: then call
  // resync() with the system clock before stamp().
  bool due(uint64_t tsc) const { return tsc - tsc0_ >= resync_ticks_; }
  void resync(uint64_t tsc, uint64_t wall_ns) {
    wall0_ = wall_ns;
    tsc0_ = tsc;
  }
  // Times for a batch of n packets that arrived since the last batch, spread
  // evenly up to counter value tsc: the i-th (from 0) is first + (i + 1) * step.
  struct Spread {
    uint64_t first, step;
  };
  Spread stamp(uint64_t tsc, unsigned n) {
    uint64_t now = wall0_ + uint64_t(double(tsc - tsc0_) * ns_per_tick_);
    uint64_t step = now > last_ && n ? (now - last_) / n : 0;
    Spread s{last_, step};
    last_ += step * n;
    return s;
  }
  uint64_t last() const { return last_; }

 private:
  double ns_per_tick_ = 1;
  uint64_t resync_ticks_ = 1, wall0_ = 0, tsc0_ = 0, last_ = 0;
};

}  // namespace sluice
