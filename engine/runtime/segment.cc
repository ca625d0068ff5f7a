#include "engine/runtime/segment.hh"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "engine/base/clock.hh"
#include "engine/runtime/dpdk_env.hh"
#include "engine/runtime/run_context.hh"

namespace sluice {

bool InterpretedProgram::step(SegmentRunner &seg) {
  bool work = false;
  PacketBatch batch;
  for (SegmentRunner::Source &s : seg.sources()) {
    if (s.ended) continue;
    switch (s.element->poll(batch)) {
      case PollStatus::Packets:
        work = true;
        s.element->send(0, batch);
        break;
      case PollStatus::Idle: break;
      case PollStatus::End: s.ended = true; break;
    }
  }
  for (Channel *ch : seg.inputs()) {
    if (ch->type() == StreamType::Packets) {
      if (ch->receive(batch, seg.burst()) == 0) continue;
      work = true;
      ch->target().element->receive(ch->target().port, batch);
    } else {
      FlowBatch flows;
      if (ch->receive(flows, kMaxFlowBatch) == 0) continue;
      work = true;
      ch->target().element->receive_flows(ch->target().port, flows);
    }
  }
  for (RuntimeElement *e : seg.tickers()) e->tick();
  return work;
}

SegmentRunner::~SegmentRunner() { cancel(); }

std::string SegmentRunner::label() const {
  std::string s = seg_->lane < 0 ? "shared" : "lane " + std::to_string(seg_->lane);
  return s + " segment " + std::to_string(seg_->id) + " (" + segment_role_name(seg_->role) + ")";
}

namespace {
std::mutex g_ends_mutex;
std::condition_variable g_ended;
uint64_t g_ends = 0;
}  // namespace

uint64_t SegmentRunner::ends_so_far() {
  std::lock_guard lock(g_ends_mutex);
  return g_ends;
}

void SegmentRunner::wait_for_an_end(uint64_t seen, std::chrono::nanoseconds timeout) {
  std::unique_lock lock(g_ends_mutex);
  g_ended.wait_for(lock, timeout, [&] { return g_ends != seen; });
}

void SegmentRunner::mark_done() {
  done_.store(true, std::memory_order_release);
  {
    std::lock_guard lock(g_ends_mutex);
    ++g_ends;
  }
  g_ended.notify_all();
}

void SegmentRunner::add_element(RuntimeElement *e) {
  elements_.push_back(e);
  if (e->wants_tick()) tickers_.push_back(e);
}

void SegmentRunner::start(SegmentProgram *program) {
  program_.store(program, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
}

void SegmentRunner::launch() {
  gate_ = Gate::Closed;
  thread_ = std::thread([this] {
    {
      std::unique_lock lock(gate_mutex_);
      gate_cv_.wait(lock, [this] { return gate_ != Gate::Closed; });
      if (gate_ == Gate::Cancelled) {
        mark_done();
        return;
      }
    }
    run();
  });
}

void SegmentRunner::open_gate(SegmentProgram *program) {
  program_.store(program, std::memory_order_release);
  std::lock_guard lock(gate_mutex_);
  gate_ = Gate::Open;
  gate_cv_.notify_all();
}

void SegmentRunner::cancel() {
  {
    std::lock_guard lock(gate_mutex_);
    if (gate_ == Gate::Closed) gate_ = Gate::Cancelled;
    gate_cv_.notify_all();
  }
  join();
}

void SegmentRunner::join() {
  if (thread_.joinable()) thread_.join();
}

bool SegmentRunner::inputs_done() const {
  for (const Source &s : sources_)
    if (!s.ended) return false;
  for (const Channel *c : inputs_)
    if (!c->finished()) return false;
  return true;
}

bool SegmentRunner::polls_sources() const {
  for (const Source &s : sources_)
    if (!s.ended) return true;
  return false;
}

bool SegmentRunner::inputs_ready() const {
  for (const Channel *c : inputs_)
    if (!c->empty()) return true;
  return inputs_done();
}

void SegmentRunner::note_cpu() {
  int cpu = sched_getcpu();
  if (cpu >= 0 && std::find(cpus_seen_.begin(), cpus_seen_.end(), cpu) == cpus_seen_.end()) cpus_seen_.push_back(cpu);
}

bool SegmentRunner::call(const std::function<void()> &job, uint64_t timeout_ns) {
  std::unique_lock lock(mail_mutex_);
  if (mail_closed_) {  // the thread is gone: nothing else touches the elements
    job();
    return true;
  }
  MailJob mail{&job};
  mail_.push_back(&mail);
  has_mail_.store(true, std::memory_order_relaxed);
  lock.unlock();
  doorbell_.ring();  // a segment fed by channels may be asleep
  lock.lock();
  if (!mail_done_.wait_for(lock, std::chrono::nanoseconds(timeout_ns), [&] { return mail.taken; })) {
    mail_.erase(std::find(mail_.begin(), mail_.end(), &mail));
    return false;
  }
  mail_done_.wait(lock, [&] { return mail.done; });  // jobs are short: no timeout once it runs
  if (mail.error) std::rethrow_exception(mail.error);
  return true;
}

void SegmentRunner::run_mail() {
  std::unique_lock lock(mail_mutex_);
  while (!mail_.empty()) {
    MailJob *mail = mail_.front();
    mail_.pop_front();
    mail->taken = true;
    lock.unlock();
    try {
      (*mail->job)();
    } catch (...) {
      mail->error = std::current_exception();
    }
    lock.lock();
    mail->done = true;
    mail_done_.notify_all();
  }
  has_mail_.store(false, std::memory_order_relaxed);
}

void SegmentRunner::close_mailbox() {
  for (;;) {
    run_mail();
    std::lock_guard lock(mail_mutex_);
    if (mail_.empty()) {  // jobs posted from now on run on their caller's thread
      mail_closed_ = true;
      return;
    }
  }
}

bool SegmentRunner::drain_inputs(const std::vector<const Channel *> &keep) {
  bool any = false;
  for (Channel *ch : inputs_) {
    if (std::find(keep.begin(), keep.end(), ch) != keep.end() && ch->occupancy() < ch->capacity()) continue;
    if (ch->type() == StreamType::Packets) {
      PacketBatch batch;
      while (ch->receive(batch, burst_)) ch->target().element->receive(ch->target().port, batch), any = true;
    } else {
      FlowBatch flows;
      while (ch->receive(flows, kMaxFlowBatch)) ch->target().element->receive_flows(ch->target().port, flows), any = true;
    }
  }
  return any;
}

void SegmentRunner::rest_for(auto &&rest) {
  const uint64_t t = mono_ns();
  rest();
  rested_ns_.fetch_add(mono_ns() - t, std::memory_order_relaxed);
}

uint64_t SegmentRunner::own_time_ns() const {
  if (!loop_started_ns_.load(std::memory_order_acquire) || !has_cpu_clock_) return 0;
  // An ended thread's clock is gone (it ends after done() says so): then
  // what it used to its end.
  std::optional<uint64_t> now = done() ? std::nullopt : read_clock_ns(cpu_clock_);
  uint64_t cpu = now ? *now - cpu_at_start_ : done() ? cpu_ns_ : 0;
  return cpu + rested_ns_.load(std::memory_order_relaxed);
}

void SegmentRunner::run() {
  settlement_ = settle_current_thread(site_);
  note_cpu();
  // An EAL lcore id gives this thread its own mempool caches.
  rte_thread_register();
  std::string name = "sl-" + std::to_string(seg_->id);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());

  for (auto &job : start_jobs_) job();  // a reload's state moves, on the thread that owns it
  start_jobs_.clear();
  has_cpu_clock_ = pthread_getcpuclockid(pthread_self(), &cpu_clock_) == 0;
  const uint64_t cpu_at_start = cpu_at_start_ = thread_cpu_ns();
  loop_started_ns_.store(mono_ns(), std::memory_order_release);
  unsigned idle = 0, passes = 0;
  for (;;) {
    if ((++passes & 1023) == 0) note_cpu();  // where the thread really runs, for the summary
    if (has_mail_.load(std::memory_order_relaxed)) {
      run_mail();
      if (retired_) break;  // replaced by a hot reload; its elements carry on in new segments
    }
    SegmentProgram *p = program_.load(std::memory_order_acquire);
    if (p->step(*this)) {
      idle = 0;
      continue;
    }
    if (inputs_done()) break;
    // SCHED_DEADLINE: give the rest of this period back; the kernel wakes
    // the thread at the next one.
    if (settlement_.deadline) {
      rest_for([] { sched_yield(); });
      continue;
    }
    // Nothing to do: back off so that idle threads leave the cores to busy
    // ones (there are often more segments than cores). Fed by channels only,
    // sleep until one rings; a device cannot ring, so poll it less often.
    ++idle;
    if (idle < 32)
      rte_pause();
    else if (!polls_sources())
      rest_for([&] {
        doorbell_.wait([this] { return inputs_ready() || has_mail_.load(std::memory_order_relaxed); },
                       tickers_.empty() ? 10'000'000 : 1'000'000);
      });
    else if (idle < 256)
      rest_for([] { sched_yield(); });
    else
      rest_for([&] { usleep(idle < 4096 ? 20 : 200); });
  }
  // End of input: elements hand on what they hold, upstream first, then the
  // segments downstream learn that nothing more will come.
  if (!retired_) {
    for (Channel *c : outputs_) c->wait_from_now();
    for (RuntimeElement *e : elements_) e->flush();
    // What elements still hold (an exporter's paced queue) goes out now, a
    // little at each call. Each element bounds its own time (and gives up at
    // a second Ctrl-C); kMaxEndDrainNs only guards against one that would
    // not. What is left is counted lost.
    constexpr uint64_t kMaxEndDrainNs = 600'000'000'000ull;
    for (uint64_t give_up = mono_ns() + kMaxEndDrainNs;;) {
      bool done = true;
      for (RuntimeElement *e : elements_) done = e->drain_pending(mono_ns()) && done;
      if (done || mono_ns() >= give_up) break;
      usleep(1000);
    }
    for (RuntimeElement *e : elements_) e->abandon_pending("not sent before the end");
    for (Channel *c : outputs_) c->close();
  }
  note_cpu();
  cpu_ns_ = thread_cpu_ns() - cpu_at_start;
  close_mailbox();
  rte_thread_unregister();
  mark_done();
}

}  // namespace sluice
