// Running a lane graph: one instance per node, a channel per edge between
// segments, a thread per segment, a status line while it runs and a summary
// of every packet's fate at the end.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"
#include "engine/runtime/segment.hh"

namespace sluice {

// Final counts of a run, for the summary and for tests.
struct RunTotals {
  uint64_t received = 0;  // packets the sources took in (device drops included)
  uint64_t copies = 0;    // extra packets made by fan-out
  uint64_t absorbed = 0;  // packets that ended in a sink
  uint64_t dropped = 0;   // packets dropped, all reasons
  bool balanced() const { return received + copies == absorbed + dropped; }
};

class Runtime {
 public:
  Runtime(const LaneGraph &lg, RunOptions options);
  ~Runtime();

  // Builds instances, channels and segments, initializes DPDK and starts the
  // sources. Returns false with *error (naming the element) on failure.
  bool setup(std::string *error);
  // Runs until every segment has drained. Prints the status line.
  void run();
  // Asks sources to stop (Ctrl-C, --duration): the run then drains.
  void request_stop() { ctx_.stop_sources.store(true); }
  void request_abort() { ctx_.stop_sources.store(true); ctx_.stop_now.store(true); }

  // The summary: per lane and per element.
  std::string summary() const;
  // The same as JSON, for tools and tests: lanes, elements with counters and
  // drops by reason, totals.
  std::string summary_json() const;
  RunTotals totals() const;
  const std::vector<std::unique_ptr<RuntimeElement>> &elements() const { return elements_; }
  RuntimeElement *find(const std::string &name) const;
  // The segment threads (for swapping their programs: JIT, reload).
  const std::vector<std::unique_ptr<SegmentRunner>> &segments() const { return segments_; }
  // Called by run() once the threads have started (tests, control plane).
  void on_started(std::function<void()> f) { on_started_ = std::move(f); }
  double elapsed_s() const { return elapsed_s_; }

 private:
  std::string status_line(double t, std::vector<uint64_t> &last_pkts, std::vector<uint64_t> &last_bytes,
                          double dt) const;
  std::vector<const RuntimeElement *> lane_elements(int lane) const;

  RunContext ctx_;
  std::vector<std::unique_ptr<RuntimeElement>> elements_;  // by node index
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<SegmentRunner>> segments_;
  std::vector<SourceElement *> lane_source_;  // by lane
  InterpretedProgram interpreter_;
  double elapsed_s_ = 0;
  std::function<void()> on_started_;
};

}  // namespace sluice
