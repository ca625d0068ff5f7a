// CompileDecision: whether a run whose end can be told (trace files,
// generated traffic, a --duration) compiles its fused loops
// (Runtime::compile_when_running). A compilation takes 0.3-0.45 s of a cpu,
// which a run that ends within 2 s cannot win back (docs/jit.md), so the
// run looks twice, 0.1 s and 0.2 s in, at how long it is to go on; each
// look takes the rate its inputs were read since the one before, and the
// loops are compiled only if both say 2 s or more. One look from the start
// read a start held up (the page cache, a VM's other work) as a long run: a
// 0.5 s trace run compiled, and took 0.7 s.
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
  static constexpr int kLooks = 2;

  // When to look next, in seconds into the run.
  double next_look() const { return kLookEveryS * (looks_ + 1); }
  // A look, `elapsed` seconds into the run: each lane's input read so far
  // of its whole (nullopt where the lane cannot tell), and what --duration
  // leaves of the run (nullopt without one). Compile at once where nothing
  // tells how long the run is (or nothing was read since the last look).
  Verdict look(double elapsed, const std::vector<std::optional<std::pair<double, double>>> &lanes,
               std::optional<double> duration_left) {
    const double window = elapsed - last_;
    last_ = elapsed;
    read_.resize(lanes.size(), 0.0);
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
      longest = std::max(longest, got > 0 ? window * std::max(0.0, whole - read) / got
                                          : std::numeric_limits<double>::infinity());
      read_[l] = read;
    }
    if (told && !std::isinf(longest)) rest = rest ? std::min(*rest, longest) : longest;
    if (!rest) return Verdict::Compile;
    if (*rest < kRepaysAfterS) {
      expected_end_ = elapsed + *rest;
      return Verdict::Decline;
    }
    return ++looks_ == kLooks ? Verdict::Compile : Verdict::Wait;
  }
  // Declined: when the look that declined expected the run to end.
  double expected_end() const { return expected_end_; }

 private:
  int looks_ = 0;
  double last_ = 0;            // the last look's time
  std::vector<double> read_;   // each lane's input read at the last look
  double expected_end_ = 0;
};

}  // namespace sluice
