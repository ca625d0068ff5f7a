// Hot reloads of a running probe, counted for the metrics endpoint
// (sluice_reloads_total, sluice_reload_pause_seconds): Runtime::record_reload
// counts each attempt; the metrics thread reads at any time. Reloads are
// rare, so plain atomic adds, from whichever thread reloads.
#pragma once
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

namespace sluice {

struct ReloadStats {
  // Upper bounds of the pause histogram's buckets, in seconds: a lane's
  // pause is its switch between two batches, microseconds to milliseconds.
  static constexpr std::array<double, 10> kPauseBounds = {10e-6, 50e-6, 100e-6, 500e-6, 1e-3,
                                                           5e-3,  10e-3, 50e-3,  100e-3, 1};

  std::atomic<uint64_t> applied{0};  // the new graph runs
  std::atomic<uint64_t> failed{0};   // refused or rolled back: the old graph kept running
  // Lane pauses: observations <= kPauseBounds[i] (cumulative), all of them, their sum.
  std::array<std::atomic<uint64_t>, kPauseBounds.size()> pause_le{};
  std::atomic<uint64_t> pauses{0}, pause_sum_ns{0};

  // One reload attempt and the pause of each lane that switched (or tried to).
  void record(bool ok, const std::vector<uint64_t> &lane_pause_ns) {
    (ok ? applied : failed).fetch_add(1, std::memory_order_relaxed);
    for (uint64_t ns : lane_pause_ns) {
      for (size_t i = 0; i < kPauseBounds.size(); ++i)
        if (double(ns) * 1e-9 <= kPauseBounds[i]) pause_le[i].fetch_add(1, std::memory_order_relaxed);
      pause_sum_ns.fetch_add(ns, std::memory_order_relaxed);
      pauses.fetch_add(1, std::memory_order_relaxed);
    }
  }
};

}  // namespace sluice
