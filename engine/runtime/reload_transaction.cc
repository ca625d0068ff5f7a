#include "engine/runtime/reload_transaction.hh"

#include <algorithm>
#include <chrono>
#include <set>
#include <sstream>
#include <tuple>

#include "engine/base/clock.hh"

namespace sluice {

namespace {

constexpr uint64_t kStopTimeoutNs = 2'000'000'000;  // a segment stuck longer fails the reload

// Segments by depth: the first level is fed by no segment (acquisition),
// every later one only by segments of earlier levels. A level stops at once.
std::vector<std::vector<int>> upstream_first(const LaneGraph &lg) {
  std::vector<int> fed_by(lg.segments.size(), 0), depth(lg.segments.size(), 0), order;
  for (const Segment &s : lg.segments)
    for (int f : s.feeds) ++fed_by[f];
  for (size_t i = 0; i < lg.segments.size(); ++i)
    if (fed_by[i] == 0) order.push_back(int(i));
  for (size_t k = 0; k < order.size(); ++k)
    for (int f : lg.segments[order[k]].feeds) {
      depth[f] = std::max(depth[f], depth[order[k]] + 1);
      if (--fed_by[f] == 0) order.push_back(f);
    }
  std::vector<std::vector<int>> levels;
  for (int i : order) {
    if (size_t(depth[i]) >= levels.size()) levels.resize(size_t(depth[i]) + 1);
    levels[size_t(depth[i])].push_back(i);
  }
  return levels;
}

}  // namespace

ReloadOutcome Runtime::reload(std::shared_ptr<const CompiledPipe> next, bool dry_run) {
  std::lock_guard one_at_a_time(reload_mutex_);
  if (!dry_run) {
    // Segments that have not started cannot be stopped: wait for run().
    std::unique_lock lock(started_mutex_);
    if (!started_cv_.wait_for(lock, std::chrono::seconds(60), [this] { return started_; })) {
      ReloadOutcome refused;
      refused.error = "reload refused: the running graph has not started (run() was not called)";
      record_reload(false, {});
      return refused;
    }
  }
  if (dry_run) {
    programs_.wait();
    ReloadTransaction tx(*this, std::move(next));
    tx.plan(true);
    return tx.outcome();
  }
  // A background compilation holds segments this reload may retire: it is
  // cancelled, not waited for (the loops of a graph that goes are of no use,
  // and an operator's reload would wait seconds for them). What it left on
  // the interpreter is compiled again after the reload, applied or not.
  programs_.cancel();
  ReloadOutcome out;
  {
    ReloadTransaction tx(*this, std::move(next));
    if (tx.plan(false) && tx.make_instances() && tx.allocate() && tx.stop() && tx.prepare()) {
      tx.switch_over();
      tx.measure_pauses();  // compiles the new segments' loops
    }
    out = tx.outcome();
  }
  if (!out.applied) recompile();  // the old graph's segments, as they were
  return out;
}

ReloadTransaction::ReloadTransaction(Runtime &rt, std::shared_ptr<const CompiledPipe> next)
    : rt_(rt), old_pipe_(rt.running_.pipe), next_(std::move(next)), old_lg_(rt.ctx_.graph()), new_lg_(next_->lanes) {}

ReloadTransaction::~ReloadTransaction() {
  if (switched_) return;
  resume_old_graph();
  // What was made for the new graph goes: gated threads end without
  // running (set_'s runners), new channels and instances are freed. Kept
  // channels were only borrowed.
  set_ = {};
  made_.clear();
}

bool ReloadTransaction::fail(std::string why) {
  out_.error = std::move(why);
  if (!dry_run_) rt_.record_reload(false, out_.lane_pause_ns);
  return false;
}

void ReloadTransaction::release(Verdict v) {
  {
    std::lock_guard lock(stop_.m);
    stop_.verdict = v;
  }
  stop_.cv.notify_all();
  for (std::thread &t : callers_) t.join();
  callers_.clear();
}

void ReloadTransaction::resume_old_graph() {
  if (context_changed_) {
    RunContext &ctx = rt_.ctx_;
    ctx.lanes = old_lanes_;
    ctx.instances = old_instances_;
    ctx.options.placement = old_placement_;
    ctx.output_files = old_files_;
    context_changed_ = false;
  }
  for (size_t i = 0; i < inst_.size(); ++i)
    if (kept_from_.size() > i && kept_from_[i] != SIZE_MAX) inst_[i]->drop_staged_wiring();
  if (structure_.owns_lock()) structure_.unlock();
  if (!callers_.empty()) release(Verdict::Resume);
}

size_t ReloadTransaction::old_instance(int old_element, int lane) const {
  for (size_t i = 0; i < old_lg_.nodes.size(); ++i)
    if (old_lg_.nodes[i].element == old_element && (old_lg_.nodes[i].lane == lane || old_lg_.nodes[i].lane < 0))
      return i;
  return SIZE_MAX;
}

// The plan, or why the new graph cannot replace the running one (located
// in the new file).
bool ReloadTransaction::plan(bool dry_run) {
  dry_run_ = dry_run;
  Diagnostics diags(next_->sources);
  if (!plan_reload(old_lg_, new_lg_, diags, out_.plan)) {
    std::ostringstream os;
    diags.print(os);
    return fail(os.str());
  }
  if (dry_run) return true;
  for (const auto &s : rt_.running_.segments)
    if (s->done()) return fail("the run is ending (its input is over): nothing to reload");
  return true;
}

bool ReloadTransaction::make_instances() {
  const auto &running = rt_.running_.elements;
  step_of_.assign(new_lg_.graph->elements.size(), nullptr);
  retiring_element_.assign(old_lg_.graph->elements.size(), false);
  for (const ReloadStep &st : out_.plan.steps) {
    if (st.new_element >= 0) step_of_[size_t(st.new_element)] = &st;
    if (st.action == ReloadAction::Remove || st.action == ReloadAction::Migrate)
      retiring_element_[size_t(st.old_element)] = true;
  }
  const size_t n_new = new_lg_.nodes.size();
  inst_.assign(n_new, nullptr);
  kept_from_.assign(n_new, SIZE_MAX);
  predecessor_.assign(n_new, nullptr);
  made_.resize(n_new);
  try {
    for (size_t i = 0; i < n_new; ++i) {
      const Node &n = new_lg_.nodes[i];
      const ReloadStep &st = *step_of_[size_t(n.element)];
      if (st.action == ReloadAction::Keep || st.action == ReloadAction::Reconfigure) {
        kept_from_[i] = old_instance(st.old_element, n.lane);
        if (kept_from_[i] == SIZE_MAX) throw std::logic_error("no running instance of '" + n.name + "'");
        inst_[i] = running[kept_from_[i]].get();
        continue;
      }
      made_[i] = make_instance(n, rt_.ctx_);
      inst_[i] = made_[i].get();
      if (st.action == ReloadAction::Migrate)
        if (size_t o = old_instance(st.old_element, n.lane); o != SIZE_MAX && running[o]->lane() == n.lane)
          predecessor_[i] = running[o].get();
    }
  } catch (const std::exception &e) {
    return fail(std::string("cannot make the new graph's instances: ") + e.what());
  }
  // Old instances that go: flushed at the switch, unless their state moves.
  std::vector<bool> adopted(running.size(), false);
  for (size_t i = 0; i < n_new; ++i)
    if (predecessor_[i] && (new_lg_.nodes[i].spec->flags & kStateful))
      for (size_t o = 0; o < running.size(); ++o)
        if (running[o].get() == predecessor_[i]) adopted[o] = true;
  for (size_t o = 0; o < running.size(); ++o)
    if (retiring_element_[size_t(old_lg_.nodes[o].element)] && !adopted[o]) flush_at_switch_.push_back(running[o].get());
  // Channels that move to the new graph with what they hold (a kept Ring's
  // packets, a kept table's records on their way to a shared exporter): from
  // a kept instance's port to an element of the same name, which the new
  // graph still feeds through a channel. The others are drained.
  std::set<ChannelKey> fed_again;
  for (const Edge &ed : new_lg_.edges)
    if (ed.crosses_segments && kept_from_[size_t(ed.from)] != SIZE_MAX)
      fed_again.insert({inst_[size_t(ed.from)], ed.from_port, new_lg_.graph->elements[new_lg_.nodes[ed.to].element].name});
  for (const auto &ch : rt_.running_.channels) {
    ChannelKey key{ch->source(), ch->source_port(), old_lg_.graph->elements[ch->target().element->node().element].name};
    if (fed_again.count(key)) kept_channels_[key] = ch.get(), keep_channels_.push_back(ch.get());
  }
  return true;
}

// Memory and threads while the old graph still runs: nothing waits for it.
bool ReloadTransaction::allocate() {
  try {
    set_ = make_segments(new_lg_, inst_, next_->placement.get(), &kept_channels_);
    for (auto &s : set_.segments) s->launch();
  } catch (const std::exception &e) {
    return fail(std::string("reload abandoned, the running graph goes on: ") + e.what());
  }
  return true;
}

// Every segment stops between two batches, upstream first, each in a job on
// its own thread (SegmentRunner::call). Walkers of elements() and segments()
// (stats, metrics) wait until the switch is over.
bool ReloadTransaction::stop() {
  structure_ = std::unique_lock(rt_.structure_mutex_);
  auto &segments = rt_.running_.segments;
  const size_t n = segments.size();
  stop_.stopped.assign(n, 0);
  stop_.flushed.assign(n, 0);
  stop_.failed.assign(n, 0);
  stop_.stopped_at_ns.assign(n, 0);
  std::vector<std::vector<int>> fed_by(n);
  for (const Segment &s : old_lg_.segments)
    for (int f : s.feeds) fed_by[size_t(f)].push_back(s.id);

  auto job_for = [this, &segments, fed_by](int k) {
    return [this, &segments, fed_by, k] {
      SegmentRunner &seg = *segments[size_t(k)];
      seg.drain_inputs(keep_channels_);  // upstream has stopped: this empties the other rings into the old graph
      std::unique_lock lock(stop_.m);
      stop_.stopped[size_t(k)] = 1;
      stop_.stopped_at_ns[size_t(k)] = mono_ns();
      stop_.cv.notify_all();
      stop_.cv.wait(lock, [&] { return stop_.verdict != Verdict::Wait; });
      if (stop_.verdict == Verdict::Resume) return;
      // The switch: what removed elements hold goes downstream through the
      // old wiring, after everything upstream has handed on its own.
      for (;;) {
        bool upstream_done = true;
        for (int u : fed_by[size_t(k)]) upstream_done = upstream_done && stop_.flushed[size_t(u)];
        if (upstream_done) break;
        lock.unlock();
        if (!seg.drain_inputs(keep_channels_)) std::this_thread::yield();
        lock.lock();
      }
      lock.unlock();
      seg.drain_inputs(keep_channels_);
      seg.outputs_wait();
      for (RuntimeElement *e : seg.elements())
        if (std::find(flush_at_switch_.begin(), flush_at_switch_.end(), e) != flush_at_switch_.end()) e->flush();
      lock.lock();
      stop_.flushed[size_t(k)] = 1;
      stop_.cv.notify_all();
      seg.retire();
    };
  };
  std::string stop_error;
  for (const std::vector<int> &level : upstream_first(old_lg_)) {
    for (int k : level)
      callers_.emplace_back([this, k, job = job_for(k)] {
        bool taken = false;
        try {
          taken = rt_.running_.segments[size_t(k)]->call(job, kStopTimeoutNs);
        } catch (...) {
        }
        if (!taken) {
          std::lock_guard lock(stop_.m);
          stop_.failed[size_t(k)] = 1;
          stop_.cv.notify_all();
        }
      });
    std::unique_lock lock(stop_.m);
    for (int k : level) {
      stop_.cv.wait(lock, [&] { return stop_.stopped[size_t(k)] || stop_.failed[size_t(k)]; });
      if (stop_.failed[size_t(k)] && stop_error.empty())
        stop_error = segments[size_t(k)]->label() + " did not stop within 2 s";
    }
    if (!stop_error.empty()) break;
  }
  if (!stop_error.empty()) return fail("reload abandoned, the running graph goes on: " + stop_error);
  return true;
}

// With every segment stopped, everything that can still fail: the new
// instances against the new graph (files, filters), the wiring, the changes
// kept instances will take.
bool ReloadTransaction::prepare() {
  RunContext &ctx = rt_.ctx_;
  old_lanes_ = ctx.lanes;
  old_instances_ = ctx.instances;
  old_placement_ = ctx.options.placement;
  old_files_ = ctx.output_files;
  context_changed_ = true;
  ctx.lanes = &new_lg_;
  ctx.instances = inst_;
  ctx.options.placement = next_->placement;
  const auto &running = rt_.running_.elements;
  std::erase_if(ctx.output_files, [&](const auto &claim) {  // files of instances that go are free again
    for (size_t o = 0; o < running.size(); ++o)
      if (retiring_element_[size_t(old_lg_.nodes[o].element)] && running[o]->name() == claim.second) return true;
    return false;
  });
  try {
    std::vector<bool> kept(inst_.size());
    for (size_t i = 0; i < inst_.size(); ++i) kept[i] = kept_from_[i] != SIZE_MAX;
    at_switch_ = wire_segments(set_, new_lg_, inst_, kept, ctx);
    for (auto &m : made_)
      if (m) m->prepare();
    for (size_t i = 0; i < inst_.size(); ++i) {
      if (!kept[i]) continue;
      const Node &n = new_lg_.nodes[i];
      if (step_of_[size_t(n.element)]->action == ReloadAction::Reconfigure)
        if (auto change = inst_[i]->prepare_reconfigure(n)) at_switch_.push_back(std::move(change));
      if (auto change = inst_[i]->prepare_relink()) at_switch_.push_back(std::move(change));
    }
  } catch (const std::exception &e) {
    return fail(std::string("reload abandoned, the running graph goes on: ") + e.what());
  }
  return true;
}

// Nothing below allocates or throws: the old threads end after handing on
// what removed elements hold, the new graph takes their place.
void ReloadTransaction::switch_over() {
  auto &running = rt_.running_;
  release(Verdict::Switch);
  for (auto &s : running.segments) s->join();
  for (size_t i = 0; i < inst_.size(); ++i)
    if (kept_from_[i] != SIZE_MAX) {
      inst_[i]->rebind(new_lg_.nodes[i]);
      inst_[i]->commit_wiring();
    }
  for (auto &change : at_switch_) change();

  // Channels taken over move to the new graph with what they hold.
  for (auto &ch : running.channels)
    if (ch && std::find(set_.taken_over.begin(), set_.taken_over.end(), ch.get()) != set_.taken_over.end())
      set_.channels.push_back(std::move(ch));
  // State moves on the thread that will own it, before its loop: in
  // parallel over the lanes, and behind a Ring the lane's acquisition is
  // already running meanwhile (its packets wait in the ring). The old
  // instance stays until then.
  std::vector<std::shared_ptr<std::atomic<bool>>> taken_over(running.elements.size());
  for (size_t i = 0; i < inst_.size(); ++i) {
    if (!predecessor_[i] || !(new_lg_.nodes[i].spec->flags & kStateful)) continue;
    auto flag = std::make_shared<std::atomic<bool>>(false);
    for (size_t o = 0; o < running.elements.size(); ++o)
      if (running.elements[o].get() == predecessor_[i]) taken_over[o] = flag;
    set_.segments[size_t(new_lg_.nodes[i].segment)]->add_start_job([e = inst_[i], from = predecessor_[i], flag] {
      e->adopt_state(*from);
      flag->store(true, std::memory_order_release);
    });
  }
  std::vector<std::unique_ptr<RuntimeElement>> elements(inst_.size());
  for (size_t i = 0; i < inst_.size(); ++i)
    elements[i] = made_[i] ? std::move(made_[i]) : std::move(running.elements[kept_from_[i]]);
  uint64_t now = mono_ns();
  for (size_t o = 0; o < running.elements.size(); ++o)
    if (running.elements[o]) rt_.retired_.add(std::move(running.elements[o]), running.pipe, taken_over[o], now);

  // The old threads have ended and their rings are empty: both go (DPDK
  // memory for rings is what EAL reserved at the start, reloads must not
  // eat it up), and with them the loops compiled for them.
  running.elements = std::move(elements);
  running.segments = std::move(set_.segments);
  running.channels = std::move(set_.channels);
  running.pipe = next_;
  rt_.programs_.forget_all_but(running.segments);
  for (auto &s : running.segments) s->open_gate(rt_.programs_.interpreter());
  context_changed_ = false;
  switched_ = true;
  structure_.unlock();
}

void ReloadTransaction::measure_pauses() {
  const auto &segments = rt_.running_.segments;
  for (const Lane &l : new_lg_.lanes) {
    const SegmentRunner &acquisition = *segments[size_t(l.segments.front())];
    while (!acquisition.loop_started_ns() && !acquisition.done()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    uint64_t stopped = stop_.stopped_at_ns[size_t(old_lg_.lanes[size_t(l.id)].segments.front())];
    out_.lane_pause_ns.push_back(acquisition.loop_started_ns() ? acquisition.loop_started_ns() - stopped : 0);
  }
  out_.applied = true;
  rt_.record_reload(true, out_.lane_pause_ns);
  rt_.recompile();  // the new segments run the interpreter until their loops are ready
}

}  // namespace sluice
