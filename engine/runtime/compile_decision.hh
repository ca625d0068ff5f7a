// CompileDecision: whether a run whose end can be told (trace files,
// generated traffic, a --duration) compiles its fused loops
// (Runtime::compile_when_running). A compilation takes 0.3-0.45 s of a cpu,
// which a run that ends within 2 s cannot win back (docs/jit.md), so the
// run looks, every 0.1 s, at how long it is to go on, each look at the
// rate its inputs were read since the one before; two looks that say 2 s
// or more compile the loops, one that says less declines. A lane's rate is
// taken over its own time (SegmentRunner::own_time_ns: running, or resting
// with nothing to do), not the wall's: on a machine busy with other work a
// 0.6 s trace run whose lane got a third of a cpu at the first looks
// looked like one of 2 s, compiled, and then took that cpu from the lane.
// A look at which a lane has read nothing since the last one (a lane not
// started yet) waits for the next, for up to 1 s. One look from the start,
// where nothing read meant "compile", made 0.5 s trace runs whose start was
// held up (a lane started late) look long now and then, and compile.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

namespace sluice {

class CompileDecision {
 public:
  enum class Verdict { Wait, Compile, Decline };
  static constexpr double kLookEveryS = 0.1, kRepaysAfterS = 2.0;
  static constexpr int kLongLooks = 2, kMaxLooks = 10;

  // When to look next, in seconds into the run.
  double next_look() const { return kLookEveryS * (looks_ + 1); }
  // A look, `elapsed` seconds into the run: each lane's input read so far
  // of its whole (nullopt where the lane cannot tell), what --duration
  // leaves of the run (nullopt without one), and each lane's own time so
  // far in seconds (where `own` has none for a lane, or it did not grow
  // since the last look, as an unknown one, 0 or less, does not: the
  // wall's time since then). Compile at once
  // where nothing tells how long the run is (a live input), or where an
  // input has still read nothing since the last look at the kMaxLooks-th.
  Verdict look(double elapsed, const std::vector<std::optional<std::pair<double, double>>> &lanes,
               std::optional<double> duration_left, const std::vector<double> &own = {}) {
    const double wall = elapsed - last_;
    last_ = elapsed;
    read_.resize(lanes.size(), 0.0);
    own_.resize(lanes.size(), 0.0);
    std::optional<double> rest = duration_left;
    double longest = 0;  // the run ends with its slowest lane
    bool told = !lanes.empty();
    for (size_t l = 0; l < lanes.size(); ++l) {
      if (!lanes[l] || lanes[l]->second <= 0) {
        told = false;
        continue;
      }
      auto [read, whole] = *lanes[l];
      double got = read - read_[l];
      double window = wall;
      if (l < own.size()) {
        if (own[l] > own_[l]) window = own[l] - own_[l];
        own_[l] = own[l];
      }
      longest = std::max(longest, got > 0 ? window * std::max(0.0, whole - read) / got
                                          : std::numeric_limits<double>::infinity());
      read_[l] = read;
    }
    ++looks_;
    if (told && !std::isinf(longest)) rest = rest ? std::min(*rest, longest) : longest;
    else if (told && !rest && looks_ < kMaxLooks) return Verdict::Wait;  // a lane read nothing: look again
    if (!rest) return Verdict::Compile;
    if (*rest < kRepaysAfterS) {
      expected_end_ = elapsed + *rest;
      return Verdict::Decline;
    }
    return ++long_looks_ == kLongLooks ? Verdict::Compile : Verdict::Wait;
  }
  // Declined: when the look that declined expected the run to end.
  double expected_end() const { return expected_end_; }

 private:
  int looks_ = 0, long_looks_ = 0;
  double last_ = 0;            // the last look's time
  std::vector<double> read_;   // each lane's input read at the last look
  std::vector<double> own_;    // and its own time then
  double expected_end_ = 0;
};

}  // namespace sluice
