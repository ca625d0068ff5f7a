#include "engine/runtime/retired_elements.hh"

#include <chrono>
#include <thread>

#include "engine/driver/compile_pipe.hh"
#include "engine/base/clock.hh"

namespace sluice {

RetiredElements::~RetiredElements() {
  std::lock_guard lock(mutex_);
  held_.clear();
}

void RetiredElements::add(std::unique_ptr<RuntimeElement> e, std::shared_ptr<const CompiledPipe> pipe,
                          std::shared_ptr<std::atomic<bool>> taken_over, uint64_t now_ns) {
  std::lock_guard lock(mutex_);
  held_.push_back({std::move(e), std::move(pipe), std::move(taken_over), now_ns + kDrainTimeoutNs});
}

RetiredTotal &RetiredElements::total_for(const RuntimeElement &e) {
  for (RetiredTotal &t : released_)
    if (t.name == e.name() && t.lane == e.lane()) return t;
  released_.push_back({e.name(), e.class_name(), e.lane(), 0, {}, {}});
  return released_.back();
}

void RetiredElements::release(Held &h) {
  RetiredTotal &t = total_for(*h.element);
  ++t.instances;
  t.counters.add(h.element->counters);
  t.report.clear();
  h.element->report(t.report);
  h.element.reset();  // memory, sockets, files
  h.pipe.reset();     // the old graph, once nothing points into it
}

void RetiredElements::service(uint64_t now_ns, bool segments_done) {
  // Drained outside the lock (it may take a few ms); only this thread
  // changes held_, others only read it under the lock.
  std::vector<RuntimeElement *> ready;
  {
    std::lock_guard lock(mutex_);
    for (Held &h : held_)
      if (segments_done || !h.taken_over || h.taken_over->load(std::memory_order_acquire))
        ready.push_back(h.element.get());
  }
  std::vector<RuntimeElement *> done;
  for (RuntimeElement *e : ready) {
    bool drained = e->drain_pending(now_ns);
    std::lock_guard lock(mutex_);
    for (Held &h : held_)
      if (h.element.get() == e && (drained || now_ns >= h.deadline_ns)) {
        // What it still holds (an exporter that gave up on its collector)
        // is counted lost; nothing when it is empty.
        e->abandon_pending("not sent before removal");
        done.push_back(e);
      }
  }
  if (done.empty()) return;
  std::lock_guard lock(mutex_);
  std::erase_if(held_, [&](Held &h) {
    if (std::find(done.begin(), done.end(), h.element.get()) == done.end()) return false;
    release(h);
    return true;
  });
}

void RetiredElements::finish() {
  while (held()) {
    service(mono_ns(), true);
    if (held()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

size_t RetiredElements::held() const {
  std::lock_guard lock(mutex_);
  return held_.size();
}

std::vector<RetiredTotal> RetiredElements::totals() const {
  std::lock_guard lock(mutex_);
  std::vector<RetiredTotal> out = released_;
  for (const Held &h : held_) {
    const RuntimeElement &e = *h.element;
    RetiredTotal *t = nullptr;
    for (RetiredTotal &x : out)
      if (x.name == e.name() && x.lane == e.lane()) t = &x;
    if (!t) t = &out.emplace_back(RetiredTotal{e.name(), e.class_name(), e.lane(), 0, {}, {}});
    ++t->instances;
    t->counters.add(e.counters);
  }
  return out;
}

}  // namespace sluice
