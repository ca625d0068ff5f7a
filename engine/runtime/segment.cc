#include "engine/runtime/segment.hh"

#include <pthread.h>
#include <rte_lcore.h>
#include <rte_pause.h>
#include <sched.h>
#include <unistd.h>

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

SegmentRunner::~SegmentRunner() { join(); }

std::string SegmentRunner::label() const {
  std::string s = seg_->lane < 0 ? "shared" : "lane " + std::to_string(seg_->lane);
  return s + " segment " + std::to_string(seg_->id) + " (" + segment_role_name(seg_->role) + ")";
}

void SegmentRunner::add_element(RuntimeElement *e) {
  elements_.push_back(e);
  if (e->wants_tick()) tickers_.push_back(e);
}

void SegmentRunner::start(SegmentProgram *program) {
  program_.store(program, std::memory_order_release);
  thread_ = std::thread([this] { run(); });
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

void SegmentRunner::run() {
  unpin_current_thread();
  // An EAL lcore id gives this thread its own mempool caches.
  rte_thread_register();
  std::string name = "sl-" + std::to_string(seg_->id);
  pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());

  unsigned idle = 0;
  for (;;) {
    SegmentProgram *p = program_.load(std::memory_order_acquire);
    if (p->step(*this)) {
      idle = 0;
      continue;
    }
    if (inputs_done()) break;
    // Nothing to do: back off so that idle threads leave the cores to busy
    // ones (there are often more segments than cores).
    ++idle;
    if (idle < 32) rte_pause();
    else if (idle < 256) sched_yield();
    else usleep(idle < 4096 ? 20 : 200);
  }
  // End of input: elements hand on what they hold, upstream first, then the
  // segments downstream learn that nothing more will come.
  for (RuntimeElement *e : elements_) e->flush();
  for (Channel *c : outputs_) c->close();
  rte_thread_unregister();
  done_.store(true, std::memory_order_release);
}

}  // namespace sluice
