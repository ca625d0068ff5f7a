// Setting a graph up (memory, DPDK, instances, segments) and running it.
#include "engine/runtime/runtime.hh"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <regex>
#include <stdexcept>
#include <thread>

#include "engine/base/clock.hh"
#include "engine/flow/page_populator.hh"
#include "engine/runtime/compile_decision.hh"
#include "engine/runtime/dpdk_env.hh"
#include "engine/runtime/graph_builder.hh"
#include "engine/runtime/run_report.hh"

namespace sluice {

namespace {

// Packets a lane can hold besides its rings: receive descriptors, the
// software-RSS queue, bursts in flight in each element, mempool caches.
// A live source that finds its pool empty drops packets: it gets room to
// spare. An offline one (a trace, TrafficGen in memory) only waits for
// buffers to come back, and every buffer of its pool is written when the
// pool is made, a page fault each 4 KiB without hugepages: it gets what its
// lanes use (bursts in flight and the mempool caches, 384 buffers at most
// per thread). 8192 made a fifth of the start of a short trace's run.
constexpr unsigned kLaneMbufSlack = 8192;
constexpr unsigned kOfflineLaneMbufSlack = 2048;

bool is_pci_address(const std::string &s) {
  static const std::regex pci("^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  return std::regex_match(s, pci);
}

}  // namespace

namespace {
// The pool of a source element's lanes, made once into `made`: per_lane(l)
// buffers for each lane l of the source, on the lanes' node (they share it).
rte_mempool *source_pool(RunContext &ctx, std::vector<std::pair<int, rte_mempool *>> &made, int element,
                         const std::function<unsigned(const Lane &)> &per_lane, unsigned data_room, bool lifo,
                         unsigned cache, const char *what) {
  for (auto &[e, p] : made)
    if (e == element) return p;
  unsigned n = 0;
  int segment = -1;
  for (const Lane &l : ctx.lanes->lanes)
    if (l.source == element) n += per_lane(l), segment = l.segments.front();
  static std::atomic<unsigned> next{0};  // names are process-wide in DPDK
  std::string name = "pool" + std::to_string(next++);
  rte_mempool *p = create_packet_pool(name, n, uint16_t(data_room), ctx.memory_socket(segment), lifo, cache);
  if (!p)
    throw std::runtime_error("cannot allocate " + std::to_string(n) + " packet buffers for " + what + "'" +
                             ctx.lanes->graph->elements[element].name + "': " + rte_strerror(rte_errno) +
                             " (give DPDK more memory in the host profile, or use smaller rings)");
  made.emplace_back(element, p);
  return p;
}
}  // namespace

rte_mempool *RunContext::pool_for_source(int element, unsigned data_room, bool live, bool lifo) {
  const std::vector<unsigned> &mbufs = live ? lane_mbufs : lane_mbufs_offline;
  return source_pool(*this, pools, element, [&](const Lane &l) { return mbufs[l.id]; }, data_room, lifo, 256, "");
}

rte_mempool *RunContext::copy_pool_for_source(int element, unsigned data_room) {
  return source_pool(*this, copy_pools, element, [](const Lane &) { return kCopyBuffers; }, data_room, true, 0,
                     "copies of ");
}

int RunContext::memory_socket(int segment) const {
  if (!options.placement || segment < 0) return SOCKET_ID_ANY;
  return dpdk_socket_for_node(options.placement->segments[size_t(segment)].node);
}

std::vector<const FlowExtField *> RunContext::flow_fields() const {
  std::vector<const FlowExtField *> out;
  for (const Node &n : lanes->nodes)
    for (const std::string &name : n.spec->flow_fields) {
      const FlowExtField *f = find_flow_ext_field(name);
      if (!f)
        throw std::runtime_error("element class " + n.spec->name + " sets flow record field " + name +
                                 ", which no element file registered (SLUICE_FLOW_FIELD)");
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
  std::sort(out.begin(), out.end(), [](auto *a, auto *b) { return a->slot.offset < b->slot.offset; });
  return out;
}

FlowFieldSet RunContext::record_fields() const {
  FlowFieldSet set = 0;
  for (const Node &n : lanes->nodes)
    if (n.spec->record_fields) set |= n.spec->record_fields(n);
  return set;
}

bool RunContext::claim_output_file(const std::string &path, const std::string &element) {
  if (path == "-" || path == "/dev/null") return false;
  std::error_code ec;
  std::string canonical = std::filesystem::weakly_canonical(path, ec).string();
  for (const auto &[p, e] : output_files)
    if (p == canonical)
      throw std::runtime_error("'" + element + "' and '" + e + "' would both write '" + path +
                               "': give each lane its own file with $queue in the name, or declare the element shared");
  output_files.emplace_back(canonical, element);
  if (std::find(files_written.begin(), files_written.end(), canonical) != files_written.end()) return true;
  files_written.push_back(canonical);
  return false;
}

Runtime::Runtime(std::shared_ptr<const CompiledPipe> pipe, RunOptions options)
    : ctx_(pipe->lanes, std::move(options)), populate_cpu_ns_at_start_(PagePopulator::cpu_ns_all()) {
  if (!ctx_.options.placement) ctx_.options.placement = pipe->placement;
  running_.pipe = std::move(pipe);
}

double Runtime::populate_cpu_s() const {
  return double(PagePopulator::cpu_ns_all() - populate_cpu_ns_at_start_) / 1e9;
}

Runtime::~Runtime() {
  programs_.wait();
  request_abort();
  for (auto &s : running_.segments) s->join();
  running_.segments.clear();
  running_.elements.clear();  // sources close their devices
  running_.channels.clear();
}

RuntimeElement *Runtime::find(const std::string &name) const {
  for (const auto &e : running_.elements)
    if (e && e->name() == name) return e.get();
  return nullptr;
}

namespace {

// Every class must be able to run.
void check_runnable(const LaneGraph &lg) {
  for (const Node &n : lg.nodes)
    if (!RuntimeRegistry::global().find(n.spec->name))
      throw std::runtime_error("element '" + n.name + "' (" + n.spec->name +
                               ") has no run-time implementation yet; it can be checked and planned, not run");
}

// Packet buffers per lane: its rings (at most `ring_fill` packets in each)
// and some slack (less for an offline source's lanes). A channel of flow
// records holds records by value, no packet buffer.
std::vector<unsigned> lane_mbufs_needed(const LaneGraph &lg, unsigned ring_fill, bool offline) {
  std::vector<unsigned> mbufs(lg.lanes.size(), offline ? kOfflineLaneMbufSlack : kLaneMbufSlack);
  for (const Edge &ed : lg.edges) {
    const Node &from = lg.nodes[ed.from];
    if (!ed.crosses_segments || from.lane < 0) continue;
    const PortSpec *port = from.spec->output_port(ed.from_port);
    if (port && port->type == StreamType::Flows) continue;
    unsigned cap = kMergeCapacity;
    if (from.spec->is_thread_boundary() && from.spec->needs.channel_capacity)
      cap = from.spec->needs.channel_capacity(from);
    mbufs[from.lane] += std::min(cap, ring_fill);
  }
  for (const Node &n : lg.nodes)
    if (n.spec->needs.lane_mbufs && n.lane >= 0) mbufs[n.lane] += n.spec->needs.lane_mbufs(n);
  return mbufs;
}

// A plan made for another machine, or for cpus this process may not use
// (taskset, cgroups), cannot be applied here.
void check_plan_cpus(const Placement *plan) {
  if (!plan) return;
  for (const SegmentPlacement &sp : plan->segments)
    if (std::find(process_cpus().begin(), process_cpus().end(), sp.cpu) == process_cpus().end())
      throw std::runtime_error("the plan puts segment " + std::to_string(sp.segment) + " on cpu " +
                               std::to_string(sp.cpu) + ", which this process cannot use (cpus " +
                               format_cpu_list(process_cpus()) + ")" +
                               (plan->this_machine ? "" : ": host profile '" + plan->host +
                                                              "' describes another machine; `sluice plan` "
                                                              "shows its plan"));
}

// What EAL is started with: memory for every lane's buffers (by NUMA node
// with hugepages and a plan), the PCI devices the graph opens.
EalRequest eal_request_for(const LaneGraph &lg, const std::vector<unsigned> &lane_mbufs, const Placement *plan,
                           const std::vector<std::string> &eal_args) {
  EalRequest eal;
  eal.args = eal_args;
  double bytes = 0;
  std::vector<double> node_bytes;  // with a plan: by NUMA node
  for (const Lane &l : lg.lanes) {
    // Buffers hold 2 KiB frames, or TrafficGen's largest size; those of a
    // source whose packets point at bytes it keeps hold none, but for its
    // copies. (Sized for rooms never used, the heap's free part grew
    // resident under reloads, 240 MiB over 200 of them: tests/unit/test_soak.cc.)
    double room = RTE_MBUF_DEFAULT_DATAROOM;
    bool in_place = false;
    for (const Node &n : lg.nodes) {
      if (n.lane != l.id || !n.spec->is_source()) continue;
      if (n.spec->needs.frame_room) room = std::max(room, double(n.spec->needs.frame_room(n)));
      in_place = n.spec->needs.buffers_in_place && n.spec->needs.buffers_in_place(n);
    }
    constexpr double kBuffer = sizeof(rte_mbuf) + kMbufPrivSize + RTE_PKTMBUF_HEADROOM;
    double lane_bytes = in_place ? double(lane_mbufs[l.id]) * kBuffer + RunContext::kCopyBuffers * (kBuffer + room)
                                 : double(lane_mbufs[l.id]) * (kBuffer + room);
    bytes += lane_bytes;
    if (plan) {
      size_t node = size_t(plan->lanes[size_t(l.id)].node);
      node_bytes.resize(std::max(node_bytes.size(), node + 1));
      node_bytes[node] += lane_bytes;
    }
  }
  // mempool object headers and page alignment (objects do not straddle
  // 4 KiB pages without hugepages), rings, EAL's own needs
  eal.memory_mb = unsigned(bytes * 2 / (1 << 20)) + 128;
  // With hugepages, each node reserves what its lanes need; EAL's own
  // needs go to node 0.
  if (plan && plan->hugepages)
    for (size_t n = 0; n < node_bytes.size(); ++n)
      eal.node_memory_mb.push_back(unsigned(node_bytes[n] * 2 / (1 << 20)) + (n == 0 ? 128 : node_bytes[n] ? 64 : 0));
  for (const Node &n : lg.nodes) {
    if (!n.spec->needs.device) continue;
    std::string dev = n.spec->needs.device(n);
    if (is_pci_address(dev)) {
      eal.pci = true;
      if (std::find(eal.allow.begin(), eal.allow.end(), dev) == eal.allow.end()) eal.allow.push_back(dev);
    }
  }
  return eal;
}

}  // namespace

unsigned eal_memory_mb_for(const LaneGraph &lg) {
  return eal_request_for(lg, lane_mbufs_needed(lg, ~0u, false), nullptr, {}).memory_mb;
}

bool Runtime::setup(std::string *error) {
  const LaneGraph &lg = ctx_.graph();
  try {
    check_runnable(lg);
    ctx_.lane_mbufs = lane_mbufs_needed(lg, ~0u, false);
    ctx_.lane_mbufs_offline = lane_mbufs_needed(lg, Channel::kOfflineWindow, true);
    const Placement *plan = ctx_.options.placement.get();
    check_plan_cpus(plan);
    if (!init_eal(eal_request_for(lg, ctx_.lane_mbufs, plan, ctx_.options.eal_args), error)) return false;
    make_running_graph(lg);
  } catch (const std::exception &ex) {
    *error = ex.what();
    return false;
  }
  return true;
}

// One instance per node, the segments and channels between them; then the
// sources open their devices or generate their traffic.
void Runtime::make_running_graph(const LaneGraph &lg) {
  std::vector<RuntimeElement *> instances;
  for (const Node &n : lg.nodes) {
    running_.elements.push_back(make_instance(n, ctx_));
    instances.push_back(running_.elements.back().get());
  }
  lane_source_.assign(lg.lanes.size(), nullptr);
  for (size_t i = 0; i < lg.nodes.size(); ++i)
    if (auto *s = dynamic_cast<SourceElement *>(instances[i])) lane_source_[lg.nodes[i].lane] = s;
  for (const Lane &l : lg.lanes)
    if (!lane_source_[l.id]) throw std::logic_error("lane " + std::to_string(l.id) + " has no source instance");
  ctx_.lane_sources = lane_source_;
  ctx_.instances = instances;

  SegmentSet set = make_segments(lg, instances, ctx_.options.placement.get());
  wire_segments(set, lg, instances, std::vector<bool>(instances.size(), false), ctx_);
  running_.segments = std::move(set.segments);
  running_.channels = std::move(set.channels);
  for (RuntimeElement *e : instances)
    if (auto *s = dynamic_cast<SourceElement *>(e)) s->start();
  for (RuntimeElement *e : instances) e->prepare();
}

void Runtime::recompile() {
  std::vector<SegmentRunner *> todo;
  {
    std::shared_lock structure(structure_mutex_);
    for (auto &s : running_.segments)
      if (s->program() == programs_.interpreter() && !s->done()) todo.push_back(s.get());
  }
  programs_.compile_in_background(std::move(todo));
}

void Runtime::run() {
  auto t0 = std::chrono::steady_clock::now();
  {
    std::unique_lock structure(structure_mutex_);
    for (auto &s : running_.segments) s->start(programs_.program_for(*s));
  }
  // Where the run's end can be told, whether to compile is decided at the
  // looks (below); else the compilation starts now, before a reload can
  // start (below): it compiles in the background too.
  bool jit_deciding = false;
  CompileDecision decision;
  if (compile_when_running_) {
    jit_deciding = ctx_.options.duration_ns != 0 ||
                   std::all_of(lane_source_.begin(), lane_source_.end(),
                               [](const SourceElement *s) { return s && s->input_progress(); });
    if (!jit_deciding) recompile();
  }
  {
    // A reload that came at once (another thread) waits for this: it can
    // stop only segments that run.
    std::lock_guard lock(started_mutex_);
    started_ = true;
  }
  started_cv_.notify_all();
  if (on_started_) on_started_();

  StatusLine status(*this);
  auto all_done = [&] {
    std::shared_lock structure(structure_mutex_);  // a reload may be swapping the segments
    return std::all_of(running_.segments.begin(), running_.segments.end(), [](const auto &s) { return s->done(); });
  };
  auto last = t0;
  for (;;) {
    uint64_t ends = SegmentRunner::ends_so_far();  // before the check: an end after it wakes the wait
    if (all_done()) break;
    SegmentRunner::wait_for_an_end(ends, std::chrono::milliseconds(10));
    if (on_tick_) on_tick_();
    retired_.service(mono_ns());
    auto now = std::chrono::steady_clock::now();
    double t = std::chrono::duration<double>(now - t0).count();
    if (ctx_.options.duration_ns && t * 1e9 >= double(ctx_.options.duration_ns)) request_stop();
    if (jit_deciding && t >= decision.next_look()) {
      std::vector<std::optional<std::pair<double, double>>> lanes;
      for (const SourceElement *s : lane_source_) lanes.push_back(s ? s->input_progress() : std::nullopt);
      std::optional<double> duration_left;
      if (ctx_.options.duration_ns) duration_left = std::max(0.0, double(ctx_.options.duration_ns) * 1e-9 - t);
      std::vector<double> own;  // each lane's own time, by the segment that polls its source
      {
        std::shared_lock structure(structure_mutex_);
        for (const SourceElement *src : lane_source_) {
          double s = -1;
          for (auto &seg : running_.segments)
            for (const auto &polled : seg->sources())
              if (polled.element == src) s = double(seg->own_time_ns()) * 1e-9;
          own.push_back(s);
        }
      }
      CompileDecision::Verdict v = decision.look(t, lanes, duration_left, own);
      if (v == CompileDecision::Verdict::Compile) {
        jit_deciding = false;
        recompile();
      } else if (v == CompileDecision::Verdict::Decline) {
        jit_deciding = false;
        char text[160];
        std::snprintf(text, sizeof text,
                      "the run was to end %.2f s after it began: too soon for a fused loop to repay its compilation; "
                      "--jit-wait fuses anyway",
                      decision.expected_end());
        programs_.decline(text);
      }
    }
    double dt = std::chrono::duration<double>(now - last).count();
    if (dt >= 1.0) {
      if (ctx_.options.status_line) {
        std::shared_lock structure(structure_mutex_);
        std::string line = status.line(t, dt) + "\n";
        (void)!write(ctx_.options.status_fd, line.data(), line.size());
      }
      last = now;
    }
  }
  for (auto &s : running_.segments) s->join();
  programs_.cancel();
  retired_.finish();  // what replaced instances still hold goes out, or is counted lost
  elapsed_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace sluice
