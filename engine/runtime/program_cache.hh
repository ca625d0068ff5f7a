// The runtime's side of the JIT (engine/jit/segment_jit.hh): the fused
// loops of the running segments, compiled off the data path, swapped in
// between two batches, swapped out (back to the interpreter) when an
// element's configuration changes, and let go when nothing can run them.
#pragma once
#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/runtime/segment.hh"

namespace sluice {

class ProgramCache {
 public:
  ~ProgramCache() { wait(); }

  // The compiler, the cpu its thread runs on (the housekeeping cpu; -1:
  // any), and the nice value of a compilation in the background (19: only
  // the cpu the running segments leave; program_cache.cc).
  void set_compiler(std::shared_ptr<ProgramCompiler> compiler, int cpu, int background_nice = 19) {
    compiler_ = std::move(compiler);
    compiler_cpu_ = cpu;
    background_nice_ = background_nice;
  }
  bool enabled() const { return compiler_ != nullptr; }
  // The loop every segment runs until its own is compiled.
  SegmentProgram *interpreter() { return &interpreter_; }
  // What a segment starts on: its fused loop, or the interpreter.
  SegmentProgram *program_for(const SegmentRunner &seg);

  // Before the run: every segment's loop, on as many threads as there are
  // segments and cpus for them (nothing runs on the data-plane cpus yet; the
  // first thread is on the housekeeping cpu); false (with *error) when one
  // cannot be compiled.
  bool compile_all(const std::vector<std::unique_ptr<SegmentRunner>> &segments, std::string *error,
                   std::vector<std::string> *ir);
  // In the background: the segments of `todo` (running the interpreter)
  // get their loops and switch to them between two batches. A segment that
  // has ended by its turn is left out.
  void compile_in_background(std::vector<SegmentRunner *> todo);
  // Waits for a background compilation.
  void wait() {
    std::lock_guard lock(thread_mutex_);
    if (thread_.joinable()) thread_.join();
  }
  // A background compilation is cancelled (the segment under way gives up
  // at its compiler's next step, ProgramCompiler::compile) and compiles no
  // further segment: the run is over, or a reload is about to retire
  // segments (it compiles what then runs the interpreter again, the
  // survivors of the cancelled work included, instead of waiting for loops
  // of a graph that goes). The compiling thread gets the caller's priority
  // back for its last steps: at nice 19 on a busy machine it took hundreds
  // of milliseconds to reach them, and the caller waits.
  void cancel();
  // Segment compilations given up so, begun or not (they count in no
  // segment's compilations).
  uint64_t cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // The run compiles nothing in the background (Runtime::run: it is to end
  // too soon to repay a compilation); `why` ends up in describe().
  void decline(std::string why) {
    std::lock_guard lock(mutex_);
    declined_ = std::move(why);
  }
  // From a job on the segment thread that holds `e` (a handler write): its
  // segment goes back to the interpreter, and a compilation under way for it
  // is stale.
  void drop_compiled(const std::vector<std::unique_ptr<SegmentRunner>> &segments, const RuntimeElement *e);
  // After a reload: loops of segments that no longer run are let go.
  void forget_all_but(const std::vector<std::unique_ptr<SegmentRunner>> &running);

  struct CompiledLoop {
    SegmentProgram *program = nullptr;
    double ms = -1;  // how long its loop took to compile (<0: not compiled)
    std::string error;
    unsigned compilations = 0;  // loops compiled for the segment so far
    uint64_t switched_ns = 0;   // when the running segment switched to it (mono_ns; 0: it started on it)
  };
  CompiledLoop compiled_loop(const SegmentRunner &seg) const;
  size_t held() const {
    std::lock_guard lock(mutex_);
    return programs_.size();
  }
  // For the summary: "loop fused by the JIT (...), compiled in 12.3 ms", or
  // "interpreter".
  std::string describe(const SegmentRunner &seg) const;

 private:
  InterpretedProgram interpreter_;
  std::shared_ptr<ProgramCompiler> compiler_;
  int compiler_cpu_ = -1;
  int background_nice_ = 19;
  mutable std::mutex mutex_;
  std::string declined_;  // decline()
  // Programs by the segment they were compiled for. One goes when nothing
  // can run it any more: its segment switched away from it on its own
  // thread, or ended in a reload.
  std::vector<std::pair<const SegmentRunner *, std::unique_ptr<SegmentProgram>>> programs_;
  std::map<const SegmentRunner *, CompiledLoop> compiled_;
  std::map<const SegmentRunner *, uint64_t> config_epoch_;  // bumped by drop_compiled
  // The compiling thread; started, joined and cancelled by any thread (the
  // run's at its start and end, a reload's, a control handler's).
  std::mutex thread_mutex_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> cancelled_{0};
  // The compiling thread's id while it runs (0 otherwise), for cancel()'s
  // change of its priority; the mutex keeps a thread that has ended (whose
  // id may be reused) from being changed.
  std::mutex tid_mutex_;
  pid_t tid_ = 0;
};

}  // namespace sluice
