// Running a compiled graph: one instance per node, a channel per edge
// between segments, a thread per segment, a status line while it runs and a
// summary of every packet's fate at the end.
//
// The runtime is made of named parts, each in its own files:
//   graph_builder     instances, segments and channels for a lane graph (setup, reload)
//   runtime.cc        setup, the run loop and its status line
//   program_cache     the JIT's fused loops: compiled, swapped in, let go
//   reload_transaction  a hot reload, one method per phase
//   retired_elements  instances a reload replaced: drained, then released,
//                     their counters kept
//   run_report        the summary, its JSON, the accounting
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

#include "engine/driver/compile_pipe.hh"
#include "engine/reload/reload_plan.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/program_cache.hh"
#include "engine/runtime/reload_stats.hh"
#include "engine/runtime/retired_elements.hh"
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

// The memory EAL is given for a graph's packet pools without hugepages (MiB):
// every lane's buffers (a live source's whole rings), each with its data
// room (none for a source whose packets point at bytes it keeps, but its
// copies'), twice over, and 128 MiB for EAL's own needs.
unsigned eal_memory_mb_for(const LaneGraph &lg);

// What a hot reload did. When !applied the old graph runs on, untouched.
struct ReloadOutcome {
  bool applied = false;
  std::string error;  // why not (diagnostics with locations, or what failed)
  ReloadPlan plan;
  std::vector<uint64_t> lane_pause_ns;  // per lane: no new batch between these two instants
};

// What runs: the compiled graph its instances point into, the instances (by
// node index), the channels between segments and the segment threads. A
// reload replaces the whole of it at once.
struct RunningGraph {
  std::shared_ptr<const CompiledPipe> pipe;
  std::vector<std::unique_ptr<RuntimeElement>> elements;
  std::vector<std::unique_ptr<Channel>> channels;
  std::vector<std::unique_ptr<SegmentRunner>> segments;
};

class Runtime {
 public:
  Runtime(std::shared_ptr<const CompiledPipe> pipe, RunOptions options);
  ~Runtime();

  // Builds instances, channels and segments, initializes DPDK and starts the
  // sources. Returns false with *error (naming the element) on failure.
  bool setup(std::string *error);
  // Runs until every segment has drained, then lets replaced instances
  // finish. Prints the status line.
  void run();
  // Asks sources to stop (Ctrl-C, --duration): the run then drains.
  void request_stop() { ctx_.stop_sources.store(true); }
  void request_abort() { ctx_.stop_sources.store(true); ctx_.stop_now.store(true); }

  // The summary, its JSON and the totals (run_report.cc).
  std::string summary() const;
  std::string summary_json() const;
  // Its "elements" array, also for `sluice ctl stats --json`.
  std::string elements_json() const;
  // Each running segment and the loop it runs ("jit" or "interpreter"), as JSON.
  std::string segment_programs_json() const;
  RunTotals totals() const;
  RecordTotals record_totals() const;

  const std::vector<std::unique_ptr<RuntimeElement>> &elements() const { return running_.elements; }
  const std::vector<std::unique_ptr<SegmentRunner>> &segments() const { return running_.segments; }
  const std::vector<SourceElement *> &lane_sources() const { return lane_source_; }
  RuntimeElement *find(const std::string &name) const;
  // Instances reloads replaced, by element name and lane: counters summed,
  // so that totals and metrics never go back.
  std::vector<RetiredTotal> replaced() const { return retired_.totals(); }
  // Replaced instances still held (draining what they hold), for tests.
  size_t replaced_held() const { return retired_.held(); }
  // Called by run() once the threads have started (tests, control plane).
  void on_started(std::function<void()> f) { on_started_ = std::move(f); }
  // Called by run() every 10 ms on its thread (a SIGHUP reload).
  void on_tick(std::function<void()> f) { on_tick_ = std::move(f); }
  double elapsed_s() const { return elapsed_s_; }
  // The cpu time the flow tables' populator threads took since this runtime
  // was made (PagePopulator: their memory brought in beside the lanes).
  double populate_cpu_s() const;
  // The lane graph, options and lane sources (control plane: plan, stats).
  const RunContext &context() const { return ctx_; }
  void record_reload(bool applied, const std::vector<uint64_t> &lane_pause_ns) {
    reload_stats_.record(applied, lane_pause_ns);
  }
  const ReloadStats &reload_stats() const { return reload_stats_; }

  // The JIT (DESIGN §8, program_cache.hh). With a compiler set,
  // compile_programs() compiles every segment's loop before run() (which
  // starts the segments on them) and fails on the first segment that cannot
  // be compiled. After a hot reload, and after a handler write changed an
  // element's configuration, segments are compiled again in the background.
  void set_compiler(std::shared_ptr<ProgramCompiler> compiler, int cpu, int background_nice = 19) {
    programs_.set_compiler(std::move(compiler), cpu, background_nice);
  }
  bool compile_programs(std::string *error, std::vector<std::string> *ir = nullptr) {
    return programs_.compile_all(running_.segments, error, ir);
  }
  // Instead of compile_programs(): run() starts the segments on the
  // interpreter at once and compiles their loops in the background; each
  // segment switches to its loop between two batches when it is ready (a
  // short run never waits for the compiler). A loop that cannot be compiled
  // leaves its segment on the interpreter, with a warning.
  // A run whose end can be told (trace files, generated traffic, a
  // --duration) compiles only if it is to go on for 2 s more, at looks
  // every 0.1 s (CompileDecision); --jit-wait compiles every time.
  void compile_when_running() { compile_when_running_ = true; }
  // From a job on the segment thread that holds `e` (a handler write): its
  // segment goes back to the interpreter; then, from any other thread,
  // recompile() compiles what runs the interpreter again.
  void drop_compiled(const RuntimeElement *e) { programs_.drop_compiled(running_.segments, e); }
  void recompile();
  // Before a handler write changes what a compilation reads (a Filter's
  // program, a table's timeouts): a background compilation is given up,
  // and recompile() afterwards compiles what runs the interpreter.
  void cancel_compilation() { programs_.cancel(); }
  using CompiledLoop = ProgramCache::CompiledLoop;
  size_t programs_held() const { return programs_.held(); }
  uint64_t compilations_cancelled() const { return programs_.cancelled(); }
  CompiledLoop compiled_loop(const SegmentRunner &seg) const { return programs_.compiled_loop(seg); }

  // Hot reload (reload_transaction.cc): replaces the running graph by
  // `next` following plan_reload(). Everything that can fail happens before
  // the switch, and a failure leaves the old graph running, untouched; the
  // switch itself cannot fail. With dry_run only the plan is made. One
  // reload at a time; any thread but a segment's.
  ReloadOutcome reload(std::shared_ptr<const CompiledPipe> next, bool dry_run);
  // Held (shared) by whoever walks elements() or segments() from another
  // thread (control, metrics); a reload holds it exclusively while it swaps
  // them.
  std::shared_lock<std::shared_mutex> structure_lock() const { return std::shared_lock(structure_mutex_); }

 private:
  friend class ReloadTransaction;
  friend class RunReport;

  void make_running_graph(const LaneGraph &lg);  // setup's last step

  RunContext ctx_;
  RunningGraph running_;
  std::vector<SourceElement *> lane_source_;  // by lane; sources outlive reloads
  ProgramCache programs_;
  RetiredElements retired_;
  double elapsed_s_ = 0;
  uint64_t populate_cpu_ns_at_start_;
  bool compile_when_running_ = false;
  std::function<void()> on_started_, on_tick_;
  ReloadStats reload_stats_;
  std::mutex reload_mutex_;
  mutable std::shared_mutex structure_mutex_;
  // Set by run() once the segments have started: a reload that comes
  // before (a thread calling reload() right after starting run()) waits
  // for it, since it can only stop segments that run.
  std::mutex started_mutex_;
  std::condition_variable started_cv_;
  bool started_ = false;
};

}  // namespace sluice
