// FlowClock: the time a FlowTable meters its lane's flows on. Packet times
// come from capture files, NIC clocks and the CPU's; they can go backwards
// (reordered packets, traces whose time steps back) or leap (a corrupt
// record dated years ahead). A flow table that followed them would expire
// every flow at a leap and make a one-packet flow of every packet that
// comes after it. The clock follows packet time but never goes back and
// never leaps on one packet's word:
//
// * A packet dated at or after the clock, by up to kFar (a day), moves the
//   clock to its time: capture gaps of hours are ordinary time passing.
// * A packet dated before the clock, by up to kFar, is dated at the clock
//   (Behind).
// * A packet dated more than kFar away from the clock, either way, is dated
//   at the clock (Far), unless the packet before it was just as far and
//   within kFar of it: then the input really jumped (a gap of days, the next
//   file of a list, a clock reset) and the clock follows (Followed).
//   Forward, to the packet's time; backward it cannot, so from then on every
//   time is shifted by what puts the first far packet at the clock: the
//   packets keep their spacing and the clock goes on from where it was.
// * A packet without a time (0) is dated at the clock (NoTime).
//
// So a single far packet changes nothing but its own time, and a packet
// that is not dated at its own time (plus the shift) is said so by the
// Dating, for the table to count. Header only: the fused loops inline it.
#pragma once
#include <cstdint>

namespace sluice {

class FlowClock {
 public:
  static constexpr uint64_t kFar = 24ull * 3600 * 1'000'000'000;  // a day, in ns

  enum class Dating : uint8_t {
    OnTime,    // at its own time (plus the shift)
    Behind,    // before the clock, by up to kFar: dated at the clock
    Far,       // more than kFar from the clock, alone: dated at the clock
    Followed,  // far like the packet before it: the clock followed the jump
    NoTime,    // no time at all: dated at the clock
  };
  static constexpr int kDatings = 5;

  // The time (UNIX ns) to meter a packet stamped `t` at, and how it was
  // dated; moves the clock.
  uint64_t date(uint64_t t, Dating *how) {
    if (t == 0) return *how = Dating::NoTime, now_;
    uint64_t x = t + shift_ < t ? UINT64_MAX : t + shift_;
    if (now_ == 0) return *how = Dating::OnTime, now_ = x;
    if (distance(x, now_) <= kFar) {
      suspect_ = 0;
      if (x < now_) return *how = Dating::Behind, now_;
      return *how = Dating::OnTime, now_ = x;
    }
    if (suspect_ == 0 || distance(x, suspect_) > kFar) return *how = Dating::Far, suspect_ = x, now_;
    // The packet before was as far: the input jumped. Backward, the shift
    // puts that packet at the clock and this one as far after it as it was.
    if (x < now_) {
      shift_ += now_ - suspect_;
      x += now_ - suspect_;
    }
    suspect_ = 0;
    *how = Dating::Followed;
    if (x > now_) now_ = x;
    return now_;
  }

  uint64_t now() const { return now_; }      // 0 before the first packet with a time
  uint64_t shift() const { return shift_; }  // ns added to packet times since jumps back were followed

 private:
  static uint64_t distance(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

  uint64_t now_ = 0;
  uint64_t shift_ = 0;
  uint64_t suspect_ = 0;  // the last packet's time (shifted) when it was far; 0: it was not
};

}  // namespace sluice
