// Instances a hot reload replaced (migrated or removed elements). Each is
// held until it has nothing more to do, then released with its memory,
// sockets and files: a migrated one once its successor has taken over its
// state; one with output still queued (an exporter whose collector is slow)
// once that is out, or its time is up and the rest is counted lost. Nothing
// here runs on a data-plane thread, and no lane waits for it. What stays of
// an instance is its counters, summed per element and lane, so that the
// run's accounting and the metrics never go back.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/runtime/counters.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice {

struct CompiledPipe;

// The replaced instances of one element in one lane (-1: shared).
struct RetiredTotal {
  std::string name, class_name;
  int lane = -1;
  unsigned instances = 0;  // how many were replaced
  CounterValues counters;
  std::vector<std::string> report;  // the last released one's summary lines
};

class RetiredElements {
 public:
  // How long a replaced instance may take to send what it still holds.
  static constexpr uint64_t kDrainTimeoutNs = 10'000'000'000;

  ~RetiredElements();
  // Takes `e` (it no longer runs on any segment). `pipe` is the graph its
  // node points into, kept until it goes. `taken_over`, when given, is set
  // once its successor has taken its state (until then it is not touched).
  void add(std::unique_ptr<RuntimeElement> e, std::shared_ptr<const CompiledPipe> pipe,
           std::shared_ptr<std::atomic<bool>> taken_over, uint64_t now_ns);
  // From one housekeeping thread (the run loop's), often: drains what can
  // go, releases what is done or out of time. With segments_done (no
  // segment runs any more) no successor can still be taking over a state.
  void service(uint64_t now_ns, bool segments_done = false);
  // At the end of a run, once every segment is done: services until every
  // instance is released (each within its drain time).
  void finish();
  size_t held() const;
  // Replaced instances so far, released or still held, by element and lane.
  std::vector<RetiredTotal> totals() const;

 private:
  struct Held {
    std::unique_ptr<RuntimeElement> element;
    std::shared_ptr<const CompiledPipe> pipe;
    std::shared_ptr<std::atomic<bool>> taken_over;
    uint64_t deadline_ns;
  };
  void release(Held &h);  // under mutex_
  RetiredTotal &total_for(const RuntimeElement &e);

  mutable std::mutex mutex_;
  std::vector<Held> held_;
  std::vector<RetiredTotal> released_;
};

}  // namespace sluice
