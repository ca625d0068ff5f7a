// A segment runs on its own thread: a loop that takes batches from the
// segment's sources or incoming channels and pushes them through its
// elements. The loop body is a SegmentProgram behind an atomic pointer, so it
// can be swapped (for a JIT-compiled one, or a reloaded graph) between two
// batches; the elements, and their state, are not touched by the swap.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/channel.hh"
#include "engine/runtime/doorbell.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/thread_placement.hh"

namespace sluice {

class SegmentRunner;

class SegmentProgram {
 public:
  virtual ~SegmentProgram() = default;
  // One pass: at most one batch from each source and input channel.
  // Returns false when there was nothing to do.
  virtual bool step(SegmentRunner &segment) = 0;
  virtual const char *kind() const = 0;
};

// The interpreter: every element called through the graph.
class InterpretedProgram : public SegmentProgram {
 public:
  bool step(SegmentRunner &segment) override;
  const char *kind() const override { return "interpreter"; }
};

// Compiles a segment's loop into a program of its own (the JIT,
// engine/jit/segment_jit.hh); the runtime sees only this.
class ProgramCompiler {
 public:
  virtual ~ProgramCompiler() = default;
  struct Result {
    std::unique_ptr<SegmentProgram> program;  // null: could not, see error
    std::string error;
    std::string ir;     // the optimized IR, when asked for
    double compile_ms;  // wall time it took
  };
  // Reads the segment's wiring and its elements' constant bytes; may run on
  // any thread while the segment runs another program. Thread-safe.
  // `cancel` (may be null): once it reads true the compilation gives up at
  // its next step (no program, error "cancelled"); LLVM's optimizations are
  // skipped from then on, but a step under way (reading the bitcode, code
  // generation) finishes first.
  virtual Result compile(SegmentRunner &segment, bool want_ir, const std::atomic<bool> *cancel = nullptr) = 0;
  // What it compiles for, for the summary (e.g. "LLVM ORC, x86-64-v3").
  virtual std::string describe() const = 0;
};

class SegmentRunner {
 public:
  explicit SegmentRunner(const Segment &seg) : seg_(&seg) {}
  ~SegmentRunner();

  const Segment &segment() const { return *seg_; }
  std::string label() const;

  // Wiring, at setup.
  void add_source(SourceElement *s) { sources_.push_back({s, false}); }
  // bind_doorbell false: the channel is still another segment's (a reload
  // takes it over at the switch, bind_input_doorbell() then).
  void add_input(Channel *c, bool bind_doorbell = true) {
    inputs_.push_back(c);
    if (bind_doorbell) c->set_consumer_doorbell(&doorbell_);
  }
  void bind_input_doorbell(Channel *c) { c->set_consumer_doorbell(&doorbell_); }
  void add_output(Channel *c) { outputs_.push_back(c); }
  void add_element(RuntimeElement *e);
  void set_burst(unsigned b) { burst_ = b; }
  // Where the plan puts the thread (before start).
  void set_site(const ThreadSite &site) { site_ = site; }

  void start(SegmentProgram *program);
  // A reload's segments: the thread is made before the switch (making it
  // can fail) and waits; open_gate() lets it run `program`, cancel() ends it
  // without running anything.
  void launch();
  void open_gate(SegmentProgram *program);
  void cancel();
  void join();
  bool done() const { return done_.load(std::memory_order_acquire); }
  // How many segment threads (of any runtime in the process) have ended so
  // far; and a wait, up to `timeout`, until that is no longer `seen`: the
  // runtime wakes when its last segment ends, not at its next poll.
  static uint64_t ends_so_far();
  static void wait_for_an_end(uint64_t seen, std::chrono::nanoseconds timeout);
  // Swaps the loop body at the next batch boundary.
  void replace_program(SegmentProgram *p) { program_.store(p, std::memory_order_release); }
  const SegmentProgram *program() const { return program_.load(std::memory_order_acquire); }
  // Runs `job` on this segment's thread between two batches, so that it may
  // read and change the state of the segment's elements (control handlers,
  // metrics), and waits for it; an exception it throws is rethrown here.
  // Once the thread has finished, runs it on the caller's thread (one job at
  // a time). Returns false, the job not run, when the thread did not take it
  // within timeout_ns (stuck in a batch: an offline producer waiting for
  // room). Any thread but the segment's own.
  bool call(const std::function<void()> &job, uint64_t timeout_ns);
  // After join: the cpus the thread was seen running on (sampled), and what
  // of its site could not be applied.
  const std::vector<int> &cpus_seen() const { return cpus_seen_; }
  // After join: the cpu time the thread used from its loop's start to its
  // end (the end-of-input flush and drain included): Mpps per core.
  uint64_t cpu_ns() const { return cpu_ns_; }
  // While it runs, from any thread: the time since its loop began that the
  // thread ran or rested of its own accord (asleep or yielding with nothing
  // to do), not the time it waited for a cpu that others had (0 before the
  // loop began, or where the thread's cpu clock cannot be read). What the
  // compile decision reads a lane's pace by: on a busy machine, wall time
  // makes a short run look long.
  uint64_t own_time_ns() const;

  // Hot reload, from a job running on this thread (call()): takes what the
  // input channels hold through the elements until they are empty; and,
  // once the job returns, ends the thread without flushing anything (the
  // elements live on in the new graph's segments).
  // Channels in `keep` move to the new graph with their items: they are left
  // alone unless full (a flush upstream must not wait forever).
  bool drain_inputs(const std::vector<const Channel *> &keep = {});
  void retire() { retired_ = true; }
  // Runs on the thread before its loop (set before start()), e.g. a new flow
  // table taking over its predecessor's flows; and when the loop began
  // (CLOCK_MONOTONIC ns, 0 before).
  void add_start_job(std::function<void()> job) { start_jobs_.push_back(std::move(job)); }
  uint64_t loop_started_ns() const { return loop_started_ns_.load(std::memory_order_acquire); }
  void outputs_wait() {
    for (Channel *c : outputs_) c->wait_from_now();
  }
  const std::vector<RuntimeElement *> &elements() const { return elements_; }
  const ThreadSettlement &settlement() const { return settlement_; }

  // For programs.
  struct Source {
    SourceElement *element;
    bool ended;
  };
  std::vector<Source> &sources() { return sources_; }
  const std::vector<Channel *> &inputs() const { return inputs_; }
  const std::vector<RuntimeElement *> &tickers() const { return tickers_; }
  unsigned burst() const { return burst_; }

 private:
  void run();
  bool inputs_done() const;
  bool polls_sources() const;  // some source has not ended
  bool inputs_ready() const;   // some input channel has items, or all have finished
  void note_cpu();             // samples sched_getcpu() into cpus_seen_
  void run_mail();             // runs the jobs call() posted
  void close_mailbox();        // at the end: later jobs run on their caller's thread

  const Segment *seg_;
  std::vector<Source> sources_;
  std::vector<Channel *> inputs_, outputs_;
  std::vector<RuntimeElement *> elements_, tickers_;
  unsigned burst_ = 32;
  std::atomic<SegmentProgram *> program_{nullptr};
  std::atomic<bool> done_{false};
  void mark_done();  // done_, and wakes wait_for_an_end
  Doorbell doorbell_;  // rung by the input channels, and by call()
  // call()'s mailbox: the loop checks has_mail_ once per pass (one relaxed
  // load); the rest is under mail_mutex_.
  struct MailJob {
    const std::function<void()> *job = nullptr;
    bool taken = false, done = false;
    std::exception_ptr error{};
  };
  std::atomic<bool> has_mail_{false};
  std::mutex mail_mutex_;
  std::condition_variable mail_done_;
  std::deque<MailJob *> mail_;
  bool mail_closed_ = false;
  ThreadSite site_;
  ThreadSettlement settlement_;
  std::vector<int> cpus_seen_;  // written by the thread, read after join
  uint64_t cpu_ns_ = 0;         // likewise
  // own_time_ns(): the thread's cpu clock and its cpu time when the loop
  // began (set before loop_started_ns_), and the time it rested since.
  clockid_t cpu_clock_{};
  bool has_cpu_clock_ = false;
  uint64_t cpu_at_start_ = 0;
  std::atomic<uint64_t> rested_ns_{0};
  void rest_for(auto &&rest);  // runs rest(), its time added to rested_ns_
  bool retired_ = false;        // set and read on the thread
  std::vector<std::function<void()>> start_jobs_;
  std::atomic<uint64_t> loop_started_ns_{0};
  enum class Gate { Closed, Open, Cancelled };
  std::mutex gate_mutex_;
  std::condition_variable gate_cv_;
  Gate gate_ = Gate::Open;
  std::thread thread_;
};

}  // namespace sluice
