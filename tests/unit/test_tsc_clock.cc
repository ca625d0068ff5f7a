// TscWallClock: packet times from the time-stamp counter, resynced to the
// system clock once per interval (Timestamp clock tsc, and clock auto on a
// live port), driven here by a made-up counter and system clock.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>

#include "engine/runtime/tsc_clock.hh"

using sluice::TscWallClock;

namespace {

constexpr uint64_t kMs = 1'000'000, kS = 1'000'000'000;

// A counter ticking at 1 GHz (1 tick = 1 ns of real time) and a system clock
// that is real time plus `offset` (NTP steps change it). The clock under
// test believes each tick is `believed_ns` ns. Batches of 8 packets every
// millisecond; `on_batch(real_ns, packet_times...)`.
struct Sim {
  double believed_ns;
  uint64_t resync_ticks;
  int64_t offset = 0;
  uint64_t real = 1'700'000'000 * kS;
  uint64_t tsc = 12345;
  TscWallClock clock;
  uint64_t last_time = 0;
  bool went_back = false;
  int64_t worst = 0;  // largest |packet time - system clock| seen, ns

  uint64_t wall() const { return uint64_t(int64_t(real) + offset); }
  void start() {
    clock.start(believed_ns, resync_ticks, tsc, wall());
    last_time = clock.last();
  }
  void run(uint64_t duration_ns, bool measure = true) {
    for (uint64_t t = 0; t < duration_ns; t += kMs) {
      real += kMs;
      tsc += kMs;
      if (clock.due(tsc)) clock.resync(tsc, wall());
      TscWallClock::Spread s = clock.stamp(tsc, 8);
      for (unsigned i = 0; i < 8; ++i) {
        uint64_t p = s.first + s.step * (i + 1);
        went_back |= p < last_time;
        last_time = p;
      }
      if (measure) worst = std::max(worst, std::abs(int64_t(last_time) - int64_t(wall())));
    }
  }
};

}  // namespace

TEST_CASE("tsc clock: a rate estimate 1% off stays within an interval's error of the system clock", "[tsc]") {
  Sim resynced{1.01, kS};  // once a second, as Timestamp does
  resynced.start();
  resynced.run(10 * kS);
  CHECK_FALSE(resynced.went_back);
  CHECK(resynced.worst <= int64_t(11 * kMs));  // 1% of a second, and a batch
  // Without the resync the same error grows with time: 1% of 10 s.
  Sim never{1.01, UINT64_MAX};
  never.start();
  never.run(10 * kS);
  CHECK(never.worst >= int64_t(90 * kMs));
}

TEST_CASE("tsc clock: NTP steps the system clock back: times never go back, then follow it again", "[tsc]") {
  Sim s{1.0, kS};
  s.start();
  s.run(5 * kS);
  CHECK(s.worst <= int64_t(kMs));
  s.offset -= int64_t(2 * kS);  // the clock steps back 2 s
  s.run(3 * kS, false);         // held until the clock catches up
  CHECK_FALSE(s.went_back);
  s.worst = 0;
  s.run(5 * kS);
  CHECK_FALSE(s.went_back);
  CHECK(s.worst <= int64_t(kMs));
}

TEST_CASE("tsc clock: a step forward is followed at the next resync", "[tsc]") {
  Sim s{1.0, kS};
  s.start();
  s.run(2 * kS);
  s.offset += int64_t(30 * kS);
  s.run(kS + kMs, false);  // at most one interval behind
  s.worst = 0;
  s.run(3 * kS);
  CHECK_FALSE(s.went_back);
  CHECK(s.worst <= int64_t(kMs));
}
