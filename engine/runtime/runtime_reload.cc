// Hot reload: the running graph replaced by another, state kept
// (Runtime::reload, declared in runtime.hh; the plan is engine/reload).
//
// 1. Off the data path: the plan, and the instances of the new graph: kept
//    instances are reused, migrated and added elements get new ones.
// 2. Every segment stops between two batches, a level at a time, upstream
//    first, each in a job on its own thread (SegmentRunner::call). Channels
//    the new graph still has (from a kept instance to an element of the same
//    name) move to it with what they hold; the job takes what the others
//    hold through the old graph, and as upstream is stopped they end empty.
// 3. With every segment stopped, the new instances are prepared (files,
//    filters). A failure up to here lets every segment go on with the old
//    graph, untouched.
// 4. The switch: the stopped jobs end their threads, upstream segments
//    first, each after handing on what its removed elements hold (a removed
//    flow table exports its flows as "forced end") through the old wiring,
//    while downstream segments still take it in. Kept instances are rebound
//    to the new graph (reconfigured when their live arguments changed), the
//    new segments start, and migrated instances adopt their predecessor's
//    state on their own thread before its first batch.
//
// A lane's pause runs from the moment its acquisition stopped to the moment
// its new acquisition thread started.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <tuple>
#include <sstream>
#include <thread>

#include "engine/runtime/clock.hh"
#include "engine/runtime/runtime.hh"

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

ReloadOutcome Runtime::reload(std::shared_ptr<CompiledGraph> next, bool dry_run) {
  std::lock_guard one_at_a_time(reload_mutex_);
  // A background compilation holds segments this reload may retire.
  if (jit_thread_.joinable()) jit_thread_.join();
  ReloadOutcome out;
  auto refuse = [&](std::string why) {
    out.error = std::move(why);
    if (!dry_run) record_reload(false, out.lane_pause_ns);
    return out;
  };
  const LaneGraph &old_lg = ctx_.graph();
  const LaneGraph &new_lg = next->lanes;
  {
    Diagnostics diags(next->sources);
    bool ok = plan_reload(old_lg, new_lg, diags, out.plan);
    if (!ok) {
      std::ostringstream os;
      diags.print(os);
      return refuse(os.str());
    }
  }
  if (dry_run) return out;
  for (const auto &s : segments_)
    if (s->done()) return refuse("the run is ending (its input is over): nothing to reload");

  // 1. The new graph's instances.
  std::vector<const ReloadStep *> step_of(new_lg.graph->elements.size(), nullptr);
  std::vector<bool> retiring_element(old_lg.graph->elements.size(), false);
  for (const ReloadStep &st : out.plan.steps) {
    if (st.new_element >= 0) step_of[st.new_element] = &st;
    if (st.action == ReloadAction::Remove || st.action == ReloadAction::Migrate) retiring_element[st.old_element] = true;
  }
  auto old_instance = [&](int old_element, int lane) -> size_t {
    for (size_t i = 0; i < old_lg.nodes.size(); ++i)
      if (old_lg.nodes[i].element == old_element && (old_lg.nodes[i].lane == lane || old_lg.nodes[i].lane < 0))
        return i;
    return SIZE_MAX;
  };
  const size_t n_new = new_lg.nodes.size();
  std::vector<RuntimeElement *> inst(n_new, nullptr);
  std::vector<size_t> kept_from(n_new, SIZE_MAX);      // kept: its index in elements_
  std::vector<RuntimeElement *> predecessor(n_new, nullptr);  // migrated: the instance it takes over from
  std::vector<std::unique_ptr<RuntimeElement>> made(n_new);
  try {
    for (size_t i = 0; i < n_new; ++i) {
      const Node &n = new_lg.nodes[i];
      const ReloadStep &st = *step_of[n.element];
      if (st.action == ReloadAction::Keep || st.action == ReloadAction::Reconfigure) {
        kept_from[i] = old_instance(st.old_element, n.lane);
        if (kept_from[i] == SIZE_MAX) throw std::logic_error("no running instance of '" + n.name + "'");
        inst[i] = elements_[kept_from[i]].get();
        continue;
      }
      auto make = RuntimeRegistry::global().find(n.spec->name);
      if (!make) throw std::runtime_error("element '" + n.name + "' (" + n.spec->name + ") has no run-time implementation");
      made[i] = (*make)(n, ctx_);
      inst[i] = made[i].get();
      if (st.action == ReloadAction::Migrate)
        if (size_t o = old_instance(st.old_element, n.lane); o != SIZE_MAX && elements_[o]->lane() == n.lane)
          predecessor[i] = elements_[o].get();
    }
  } catch (const std::exception &e) {
    return refuse(std::string("cannot make the new graph's instances: ") + e.what());
  }
  // Old instances that go: flushed at the switch, unless their state moves.
  std::vector<bool> adopted(elements_.size(), false);
  for (size_t i = 0; i < n_new; ++i)
    if (predecessor[i] && (new_lg.nodes[i].spec->flags & kStateful))
      for (size_t o = 0; o < elements_.size(); ++o)
        if (elements_[o].get() == predecessor[i]) adopted[o] = true;
  // Channels that move to the new graph with what they hold (a kept Ring's
  // packets, a kept table's records on their way to a shared exporter): from
  // a kept instance's port to an element of the same name, which the new
  // graph still feeds through a channel. The others are drained.
  std::vector<const Channel *> keep_channels;
  std::vector<std::string> keep_channel_to;  // the element each leads to
  {
    std::set<std::tuple<RuntimeElement *, int, std::string>> fed_again;
    for (const Edge &ed : new_lg.edges)
      if (ed.crosses_segments && kept_from[size_t(ed.from)] != SIZE_MAX)
        fed_again.insert({inst[size_t(ed.from)], ed.from_port, new_lg.graph->elements[new_lg.nodes[ed.to].element].name});
    for (const auto &ch : channels_) {
      const std::string &to = old_lg.graph->elements[ch->target().element->node().element].name;
      if (fed_again.count({ch->source(), ch->source_port(), to}))
        keep_channels.push_back(ch.get()), keep_channel_to.push_back(to);
    }
  }
  std::vector<RuntimeElement *> flush_at_switch;
  for (size_t o = 0; o < elements_.size(); ++o)
    if (retiring_element[old_lg.nodes[o].element] && !adopted[o]) flush_at_switch.push_back(elements_[o].get());

  // 2. Stop every segment between two batches, upstream first. Walkers of
  // elements() and segments() (stats, metrics) wait until the end, so that
  // none of them waits on a stopped segment meanwhile.
  std::unique_lock structure(structure_mutex_);
  enum class Verdict { Wait, Resume, Switch };
  struct Stop {
    std::mutex m;
    std::condition_variable cv;
    Verdict verdict = Verdict::Wait;
    std::vector<char> stopped, flushed, failed;
    std::vector<uint64_t> stopped_at_ns;
  } stop;
  const size_t n_old_segs = segments_.size();
  stop.stopped.assign(n_old_segs, 0);
  stop.flushed.assign(n_old_segs, 0);
  stop.failed.assign(n_old_segs, 0);
  stop.stopped_at_ns.assign(n_old_segs, 0);
  std::vector<std::vector<int>> fed_by(n_old_segs);
  for (const Segment &s : old_lg.segments)
    for (int f : s.feeds) fed_by[f].push_back(s.id);

  auto job_for = [&](int k) {
    return [&, k] {
      SegmentRunner &seg = *segments_[k];
      seg.drain_inputs(keep_channels);  // upstream has stopped: this empties the other rings into the old graph
      std::unique_lock lock(stop.m);
      stop.stopped[k] = 1;
      stop.stopped_at_ns[k] = mono_ns();
      stop.cv.notify_all();
      stop.cv.wait(lock, [&] { return stop.verdict != Verdict::Wait; });
      if (stop.verdict == Verdict::Resume) return;
      // The switch: what removed elements hold goes downstream through the
      // old wiring, after everything upstream has handed on its own.
      for (;;) {
        bool upstream_done = true;
        for (int u : fed_by[k]) upstream_done = upstream_done && stop.flushed[u];
        if (upstream_done) break;
        lock.unlock();
        if (!seg.drain_inputs(keep_channels)) std::this_thread::yield();
        lock.lock();
      }
      lock.unlock();
      seg.drain_inputs(keep_channels);
      seg.outputs_wait();
      for (RuntimeElement *e : seg.elements())
        if (std::find(flush_at_switch.begin(), flush_at_switch.end(), e) != flush_at_switch.end()) e->flush();
      lock.lock();
      stop.flushed[k] = 1;
      stop.cv.notify_all();
      seg.retire();
    };
  };
  std::vector<std::thread> callers;
  auto release = [&](Verdict v) {
    {
      std::lock_guard lock(stop.m);
      stop.verdict = v;
    }
    stop.cv.notify_all();
    for (std::thread &t : callers) t.join();
  };
  std::string stop_error;
  for (const std::vector<int> &level : upstream_first(old_lg)) {
    for (int k : level)
      callers.emplace_back([&, k] {
        bool taken = false;
        try {
          taken = segments_[k]->call(job_for(k), kStopTimeoutNs);
        } catch (...) {
        }
        if (!taken) {
          std::lock_guard lock(stop.m);
          stop.failed[k] = 1;
          stop.cv.notify_all();
        }
      });
    std::unique_lock lock(stop.m);
    for (int k : level) {
      stop.cv.wait(lock, [&] { return stop.stopped[k] || stop.failed[k]; });
      if (stop.failed[k] && stop_error.empty()) stop_error = segments_[k]->label() + " did not stop within 2 s";
    }
    if (!stop_error.empty()) break;
  }
  if (!stop_error.empty()) {
    structure.unlock();
    release(Verdict::Resume);
    return refuse("reload abandoned, the running graph goes on: " + stop_error);
  }

  // 3. Everything is stopped: prepare the new instances against the new graph.
  const LaneGraph *old_lanes = ctx_.lanes;
  std::vector<RuntimeElement *> old_instances = ctx_.instances;
  std::shared_ptr<const Placement> old_placement = ctx_.options.placement;
  auto old_files = ctx_.output_files;
  ctx_.lanes = &new_lg;
  ctx_.instances = inst;
  ctx_.options.placement = next->placement;
  std::erase_if(ctx_.output_files, [&](const auto &claim) {  // files of instances that go are free again
    for (size_t o = 0; o < elements_.size(); ++o)
      if (retiring_element[old_lg.nodes[o].element] && elements_[o]->name() == claim.second) return true;
    return false;
  });
  try {
    for (auto &m : made)
      if (m) m->prepare();
  } catch (const std::exception &e) {
    ctx_.lanes = old_lanes;
    ctx_.instances = old_instances;
    ctx_.options.placement = old_placement;
    ctx_.output_files = old_files;
    structure.unlock();
    release(Verdict::Resume);
    return refuse(std::string("reload abandoned, the running graph goes on: ") + e.what());
  }

  // 4. The switch. The old threads hand on what removed elements hold, then end.
  release(Verdict::Switch);
  for (auto &s : segments_) s->join();
  for (size_t i = 0; i < n_new; ++i) {
    RuntimeElement *e = inst[i];
    e->disconnect_all();
    if (kept_from[i] == SIZE_MAX) continue;
    e->rebind(new_lg.nodes[i]);
    if (step_of[new_lg.nodes[i].element]->action == ReloadAction::Reconfigure) e->reconfigure();
  }
  for (RuntimeElement *e : inst) e->relink();

  KeptChannels kept_channels;
  for (auto &ch : channels_)
    if (auto k = std::find(keep_channels.begin(), keep_channels.end(), ch.get()); k != keep_channels.end()) {
      auto key = std::make_tuple(ch->source(), ch->source_port(), keep_channel_to[size_t(k - keep_channels.begin())]);
      kept_channels.emplace(key, std::move(ch));
    }
  std::vector<std::unique_ptr<SegmentRunner>> new_segments;
  std::vector<std::unique_ptr<Channel>> new_channels;
  build_segments(new_lg, inst, new_segments, new_channels, &kept_channels);
  // State moves on the thread that will own it, before its loop: in
  // parallel over the lanes, and behind a Ring the lane's acquisition is
  // already running meanwhile (its packets wait in the ring).
  for (size_t i = 0; i < n_new; ++i)
    if (predecessor[i] && (new_lg.nodes[i].spec->flags & kStateful))
      new_segments[size_t(new_lg.nodes[i].segment)]->add_start_job(
          [e = inst[i], from = predecessor[i]] { e->adopt_state(*from); });
  std::vector<std::unique_ptr<RuntimeElement>> new_elements(n_new);
  for (size_t i = 0; i < n_new; ++i)
    new_elements[i] = made[i] ? std::move(made[i]) : std::move(elements_[kept_from[i]]);
  for (auto &e : elements_)
    if (e) retired_elements_.push_back(std::move(e));
  elements_ = std::move(new_elements);
  // The old threads have ended and their rings are empty: both can go (DPDK
  // memory for rings is what EAL reserved at the start, reloads must not
  // eat it up).
  segments_ = std::move(new_segments);
  forget_retired_segments();  // their threads have ended: their loops can go
  channels_ = std::move(new_channels);
  generations_.push_back(next);

  for (auto &s : segments_) s->start(&interpreter_);
  structure.unlock();
  // A lane's pause: from its acquisition's stop to its new acquisition's loop.
  for (const Lane &l : new_lg.lanes) {
    const SegmentRunner &acquisition = *segments_[size_t(l.segments.front())];
    while (!acquisition.loop_started_ns() && !acquisition.done()) std::this_thread::sleep_for(std::chrono::microseconds(50));
    uint64_t stopped = stop.stopped_at_ns[size_t(old_lg.lanes[size_t(l.id)].segments.front())];
    out.lane_pause_ns.push_back(acquisition.loop_started_ns() ? acquisition.loop_started_ns() - stopped : 0);
  }
  out.applied = true;
  record_reload(true, out.lane_pause_ns);
  compile_in_background();  // the new segments run the interpreter until their loops are ready
  return out;
}

}  // namespace sluice
