#include "engine/runtime/program_cache.hh"

#include "engine/base/clock.hh"
#include "engine/runtime/log.hh"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

namespace sluice {

namespace {

// The compiling thread goes where the plan puts housekeeping, off the
// data-plane cores.
void compile_here(int cpu) {
  pthread_setname_np(pthread_self(), "sl-jit");
  if (cpu < 0) return;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  sched_setaffinity(0, sizeof one, &one);
}

std::string ms_text(double ms) {
  char b[32];
  snprintf(b, sizeof b, "%.1f ms", ms);
  return b;
}

}  // namespace

SegmentProgram *ProgramCache::program_for(const SegmentRunner &seg) {
  std::lock_guard lock(mutex_);
  auto it = compiled_.find(&seg);
  return it != compiled_.end() && it->second.program ? it->second.program : &interpreter_;
}

bool ProgramCache::compile_all(const std::vector<std::unique_ptr<SegmentRunner>> &segments, std::string *error,
                               std::vector<std::string> *ir) {
  if (!compiler_) return true;
  // Each compilation has its own LLVM context: they run side by side, each
  // thread taking the next segment; the results are kept in segment order.
  std::vector<ProgramCompiler::Result> results(segments.size());
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  auto work = [&](int cpu) {
    compile_here(cpu);
    for (size_t i; !failed && (i = next.fetch_add(1)) < segments.size();) {
      results[i] = compiler_->compile(*segments[i], ir != nullptr);
      if (!results[i].program) failed = true;
    }
  };
  size_t threads = std::min<size_t>(segments.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(work, t == 0 ? compiler_cpu_ : -1);
  for (std::thread &t : pool) t.join();

  std::lock_guard lock(mutex_);
  for (size_t i = 0; i < segments.size(); ++i) {
    ProgramCompiler::Result &r = results[i];
    if (!r.program) {
      if (r.error.empty()) continue;  // not reached: another segment failed first
      *error = segments[i]->label() + ": " + r.error;
      return false;
    }
    SegmentRunner *s = segments[i].get();
    compiled_[s] = {r.program.get(), r.compile_ms, "", 1};
    programs_.emplace_back(s, std::move(r.program));
    if (ir) ir->push_back("; " + s->label() + ", compiled in " + ms_text(r.compile_ms) + "\n" + r.ir);
  }
  return true;
}

void ProgramCache::drop_compiled(const std::vector<std::unique_ptr<SegmentRunner>> &segments, const RuntimeElement *e) {
  std::lock_guard lock(mutex_);
  for (auto &s : segments)
    for (const RuntimeElement *x : s->elements())
      if (x == e) {
        ++config_epoch_[s.get()];  // a compilation under way read the old value
        if (s->program() == &interpreter_) continue;
        // On this segment's thread, between two batches: nothing runs the
        // old program any more.
        const SegmentProgram *old = s->program();
        s->replace_program(&interpreter_);
        compiled_[s.get()].program = nullptr;
        std::erase_if(programs_, [&](const auto &p) { return p.second.get() == old; });
      }
}

void ProgramCache::forget_all_but(const std::vector<std::unique_ptr<SegmentRunner>> &running) {
  std::lock_guard lock(mutex_);
  auto runs = [&](const SegmentRunner *r) {
    return std::any_of(running.begin(), running.end(), [r](const auto &s) { return s.get() == r; });
  };
  std::erase_if(programs_, [&](const auto &p) { return !runs(p.first); });
  std::erase_if(compiled_, [&](const auto &c) { return !runs(c.first); });
  std::erase_if(config_epoch_, [&](const auto &c) { return !runs(c.first); });
}

void ProgramCache::compile_in_background(std::vector<SegmentRunner *> todo) {
  if (!compiler_) return;
  std::lock_guard lock(thread_mutex_);
  if (thread_.joinable()) thread_.join();
  if (todo.empty()) return;
  thread_ = std::thread([this, todo] {
    // The segments are already running on the interpreter: this thread
    // takes what cpu they leave (nice 19 by default, this thread only). At
    // the default priority it took half of the cpu a segment shared with it
    // for the second or so of a compilation: a two-segment probe on two
    // cpus took 1.9x as long on a 3M-packet trace as without the JIT, 1.2x
    // at nice 19 (docs/performance.md). Where housekeeping has a cpu of its
    // own, nothing changes; where the segments keep every cpu busy, the
    // fused loops wait for them to leave some.
    // Set before the thread takes its name, so that it is never seen as
    // "sl-jit" at the priority of its parent.
    if (background_nice_ != 0) setpriority(PRIO_PROCESS, 0, background_nice_);
    compile_here(compiler_cpu_);
    {
      std::lock_guard lock(tid_mutex_);
      tid_ = gettid();
    }
    for (SegmentRunner *s : todo) {
      if (s->done()) continue;  // nothing would run the loop
      if (stopping_) {
        cancelled_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      // A handler write during the compilation changed constants it read:
      // compile again.
      for (int attempt = 0; attempt < 3; ++attempt) {
        uint64_t epoch;
        {
          std::lock_guard lock(mutex_);
          epoch = config_epoch_[s];
        }
        ProgramCompiler::Result r = compiler_->compile(*s, false, &stopping_);
        std::lock_guard lock(mutex_);
        if (!r.program && stopping_) {  // cancelled: the run ended, or a reload retires segments
          cancelled_.fetch_add(1, std::memory_order_relaxed);
          break;
        }
        unsigned n = compiled_[s].compilations + 1;
        if (!r.program) {
          compiled_[s] = {nullptr, r.compile_ms, r.error, n};
          log::warning(s->label() + ": " + r.error + "; it runs the interpreter");
          break;
        }
        SegmentProgram *p = r.program.get();
        compiled_[s].compilations = n;
        if (config_epoch_[s] != epoch) continue;  // stale already: dropped here
        programs_.emplace_back(s, std::move(r.program));
        compiled_[s] = {p, r.compile_ms, "", n, mono_ns()};
        s->replace_program(p);
        break;
      }
    }
    std::lock_guard lock(tid_mutex_);
    tid_ = 0;
  });
}

void ProgramCache::cancel() {
  std::lock_guard lock(thread_mutex_);
  {
    // The caller's nice value (getpriority's -1 is a value too: errno says).
    // Set before the thread is told to stop, so that what it does once
    // told runs at that priority (a test saw it read 19 in between).
    std::lock_guard tid_lock(tid_mutex_);
    errno = 0;
    int nice = getpriority(PRIO_PROCESS, 0);
    // Lowering a nice value takes CAP_SYS_NICE (or RLIMIT_NICE): without
    // it the thread keeps its own, and the wait is as before.
    if (tid_ && errno == 0) setpriority(PRIO_PROCESS, id_t(tid_), nice);
  }
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
  stopping_ = false;
}

ProgramCache::CompiledLoop ProgramCache::compiled_loop(const SegmentRunner &seg) const {
  std::lock_guard lock(mutex_);
  auto it = compiled_.find(&seg);
  return it == compiled_.end() ? CompiledLoop{} : it->second;
}

std::string ProgramCache::describe(const SegmentRunner &seg) const {
  std::lock_guard lock(mutex_);
  auto c = compiled_.find(&seg);
  bool jit = seg.program() && seg.program() != &interpreter_;
  if (jit && c != compiled_.end()) {
    std::string s = "loop fused by the JIT (" + compiler_->describe() + "), compiled in " + ms_text(c->second.ms);
    uint64_t started = seg.loop_started_ns();
    if (c->second.switched_ns > started && started)
      s += ", running from " + ms_text(double(c->second.switched_ns - started) / 1e6) + " (the interpreter before)";
    return s;
  }
  if (c != compiled_.end() && !c->second.error.empty()) {
    const std::string &e = c->second.error;
    return "interpreter (JIT: " + (e.starts_with("JIT: ") ? e.substr(5) : e) + ")";
  }
  if (compiler_ && !declined_.empty()) return "interpreter (" + declined_ + ")";
  if (compiler_) return "interpreter (no fused loop was ready before it ended)";
  return "interpreter";
}

}  // namespace sluice
