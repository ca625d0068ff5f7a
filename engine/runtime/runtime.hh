// Running a lane graph: one instance per node, a channel per edge between
// segments, a thread per segment, a status line while it runs and a summary
// of every packet's fate at the end.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "dsl/source.hh"
#include "engine/reload/reload_plan.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/reload_stats.hh"
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

// The flow records of a run, over every instance (replaced ones too): each
// record a flow table or its GCSlicer made, and each extra copy fan-out made
// for a second consumer, was written or exported, or lost by reason. None
// can be waiting at the end of a run: tables flush, channels drain.
struct RecordTotals {
  uint64_t made = 0, copies = 0, absorbed = 0, lost = 0;
  std::vector<std::pair<std::string, uint64_t>> lost_by_reason;  // over the elements
  uint64_t write_errors = 0;       // failed writes of any element (FlowLog, PcapSink)
  uint64_t packets_unwritten = 0;  // packets those writes lost (reason "write error")
  bool balanced() const { return made + copies == absorbed + lost; }
  // The run lost data: flow records (for any reason), or what a failed write carried.
  bool data_lost() const { return lost > 0 || write_errors > 0; }
};

// A graph compiled for a hot reload. It lives as long as the run: instances
// point into it.
struct CompiledGraph {
  SourceManager sources;
  ElementGraph graph;
  LaneGraph lanes;
  std::shared_ptr<const Placement> placement;  // null: threads anywhere
};

// What a hot reload did. When !applied the old graph runs on, untouched.
struct ReloadOutcome {
  bool applied = false;
  std::string error;  // why not (diagnostics with locations, or what failed)
  ReloadPlan plan;
  std::vector<uint64_t> lane_pause_ns;  // per lane: no new batch between these two instants
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
  // Its "elements" array, also for `sluice ctl stats --json`.
  std::string elements_json() const;
  RunTotals totals() const;
  RecordTotals record_totals() const;
  const std::vector<std::unique_ptr<RuntimeElement>> &elements() const { return elements_; }
  // Instances reloads replaced: their counters still count (metrics add them
  // to their successor's, so that counters never go back).
  std::vector<const RuntimeElement *> replaced_instances() const {
    std::vector<const RuntimeElement *> out;
    for (const auto &e : retired_elements_) out.push_back(e.get());
    return out;
  }
  RuntimeElement *find(const std::string &name) const;
  // The segment threads (for swapping their programs: JIT, reload).
  const std::vector<std::unique_ptr<SegmentRunner>> &segments() const { return segments_; }
  // Called by run() once the threads have started (tests, control plane).
  void on_started(std::function<void()> f) { on_started_ = std::move(f); }
  // Called by run() every 10 ms on its thread (a SIGHUP reload).
  void on_tick(std::function<void()> f) { on_tick_ = std::move(f); }
  double elapsed_s() const { return elapsed_s_; }
  // The lane graph, options and lane sources (control plane: plan, stats).
  const RunContext &context() const { return ctx_; }
  // Hot reload calls this once per attempt, applied or not, with each lane's
  // pause; the metrics endpoint reads reload_stats().
  void record_reload(bool applied, const std::vector<uint64_t> &lane_pause_ns) {
    reload_stats_.record(applied, lane_pause_ns);
  }
  const ReloadStats &reload_stats() const { return reload_stats_; }

  // The JIT (DESIGN §8). With a compiler set, compile_programs() compiles
  // every segment's loop before run() (which starts the segments on them),
  // on a thread of its own on `cpu` (the housekeeping cpu; -1: any), and
  // fails on the first segment that cannot be compiled. After a hot reload,
  // and after a handler write changed an element's configuration (its
  // segment runs the interpreter meanwhile), the segments are compiled
  // again in the background and switch over between two batches.
  void set_compiler(std::shared_ptr<ProgramCompiler> compiler, int cpu) {
    compiler_ = std::move(compiler);
    compiler_cpu_ = cpu;
  }
  bool compile_programs(std::string *error, std::vector<std::string> *ir = nullptr);
  // From a job on the segment thread that holds `e` (a handler write): its
  // segment goes back to the interpreter; then, from any other thread,
  // recompile() compiles what runs the interpreter again.
  void drop_compiled(const RuntimeElement *e);
  void recompile();
  // Per segment, for the summary: how long its loop took to compile (ms, <0:
  // not compiled).
  struct CompiledLoop {
    SegmentProgram *program = nullptr;
    double ms = -1;
    std::string error;
    unsigned compilations = 0;  // loops compiled for the segment so far
  };
  // Fused loops held (tests: old ones are let go).
  size_t programs_held() const {
    std::lock_guard lock(jit_mutex_);
    return programs_.size();
  }
  CompiledLoop compiled_loop(const SegmentRunner &seg) const {
    std::lock_guard lock(jit_mutex_);
    auto it = compiled_.find(&seg);
    return it == compiled_.end() ? CompiledLoop{} : it->second;
  }

  // Hot reload (runtime_reload.cc): replaces the running graph by `next`
  // following plan_reload(): kept instances stay with their state, migrated
  // ones hand it to their new instance, removed ones flush. Every segment
  // stops at a batch boundary (upstream first, so rings drain through the
  // old graph), the new segments start, the pause of each lane is measured.
  // Anything that fails before the switch leaves the old graph running. With
  // dry_run only the plan is made. One reload at a time; any thread but a
  // segment's.
  ReloadOutcome reload(std::shared_ptr<CompiledGraph> next, bool dry_run);
  // Held (shared) by whoever walks elements() or segments() from another
  // thread (control, metrics); a reload holds it exclusively while it swaps
  // them.
  std::shared_lock<std::shared_mutex> structure_lock() const { return std::shared_lock(structure_mutex_); }

 private:
  std::string status_line(double t, std::vector<uint64_t> &last_pkts, std::vector<uint64_t> &last_bytes,
                          double dt) const;
  std::vector<const RuntimeElement *> lane_elements(int lane) const;
  // The running instances, then those reloads replaced (counted in the totals).
  std::vector<const RuntimeElement *> all_instances() const;
  bool retired(const RuntimeElement *e) const {
    for (const auto &r : retired_elements_)
      if (r.get() == e) return true;
    return false;
  }
  // For the summary: planned and actual cpus, memory node, scheduling.
  std::string where_it_ran(const SegmentRunner &seg) const;
  // Channels a reload keeps, with what they hold: by producer instance, its
  // port, and the name of the element they lead to.
  using KeptChannels = std::map<std::tuple<RuntimeElement *, int, std::string>, std::unique_ptr<Channel>>;
  void build_segments(const LaneGraph &lg, const std::vector<RuntimeElement *> &inst,
                      std::vector<std::unique_ptr<SegmentRunner>> &segs, std::vector<std::unique_ptr<Channel>> &chans,
                      KeptChannels *kept = nullptr);

  RunContext ctx_;
  std::vector<std::unique_ptr<RuntimeElement>> elements_;  // by node index
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<std::unique_ptr<SegmentRunner>> segments_;
  std::vector<SourceElement *> lane_source_;  // by lane
  InterpretedProgram interpreter_;
  // The JIT's programs, by the segment they were compiled for, and what each
  // segment got. A program goes when nothing can run it any more: its
  // segment switched away from it on its own thread, or ended in a reload.
  std::shared_ptr<ProgramCompiler> compiler_;
  int compiler_cpu_ = -1;
  mutable std::mutex jit_mutex_;
  std::vector<std::pair<const SegmentRunner *, std::unique_ptr<SegmentProgram>>> programs_;  // under jit_mutex_
  void forget_retired_segments();  // after a reload replaced segments_
  std::map<const SegmentRunner *, CompiledLoop> compiled_;  // under jit_mutex_
  std::map<const SegmentRunner *, uint64_t> config_epoch_;  // under jit_mutex_: bumped by drop_compiled
  std::thread jit_thread_;
  void compile_in_background();
  std::string program_summary(const SegmentRunner &seg) const;
  double elapsed_s_ = 0;
  std::function<void()> on_started_, on_tick_;
  ReloadStats reload_stats_;
  std::mutex reload_mutex_;
  mutable std::shared_mutex structure_mutex_;
  // What reloads replaced, kept to the end: the graphs instances point into,
  // and the instances (their counters are part of the run's accounting).
  std::vector<std::shared_ptr<CompiledGraph>> generations_;
  std::vector<std::unique_ptr<RuntimeElement>> retired_elements_;
};

}  // namespace sluice
