#include "engine/runtime/runtime.hh"

#include <rte_errno.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "engine/json_text.hh"
#include "engine/runtime/dpdk_env.hh"

namespace sluice {

namespace {

// Packets a lane can hold besides its rings: receive descriptors, the
// software-RSS queue, bursts in flight in each element, mempool caches.
constexpr unsigned kLaneMbufSlack = 8192;
// The merge of a lane into a shared element.
constexpr unsigned kMergeCapacity = 4096;

bool is_pci_address(const std::string &s) {
  static const std::regex pci("^([0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$");
  return std::regex_match(s, pci);
}

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) v /= 1000, ++i;
  char buf[64];
  snprintf(buf, sizeof buf, i == 0 ? "%.0f %s%s" : "%.2f %s%s", v, prefix[i], unit);
  return buf;
}

}  // namespace

rte_mempool *RunContext::pool_for_source(int element, unsigned data_room) {
  for (auto &[e, p] : pools)
    if (e == element) return p;
  unsigned n = 0;
  int segment = -1;  // the source's lanes share its node: the pool lives there
  for (const Lane &l : lanes->lanes)
    if (l.source == element) n += lane_mbufs[l.id], segment = l.segments.front();
  static std::atomic<unsigned> next{0};  // names are process-wide in DPDK
  std::string name = "pool" + std::to_string(next++);
  rte_mempool *p = rte_pktmbuf_pool_create(name.c_str(), n, 256, kMbufPrivSize,
                                           uint16_t(RTE_PKTMBUF_HEADROOM + data_room), memory_socket(segment));
  if (!p)
    throw std::runtime_error("cannot allocate " + std::to_string(n) + " packet buffers for '" +
                             lanes->graph->elements[element].name + "': " + rte_strerror(rte_errno) +
                             " (give DPDK more memory in the host profile, or use smaller rings)");
  pools.emplace_back(element, p);
  return p;
}

int RunContext::memory_socket(int segment) const {
  if (!options.placement || segment < 0) return SOCKET_ID_ANY;
  return dpdk_socket_for_node(options.placement->segments[size_t(segment)].node);
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

Runtime::Runtime(const LaneGraph &lg, RunOptions options) : ctx_(lg, std::move(options)) {}

Runtime::~Runtime() {
  if (jit_thread_.joinable()) jit_thread_.join();
  request_abort();
  for (auto &s : segments_) s->join();
  segments_.clear();
  elements_.clear();  // sources close their devices
  channels_.clear();
}

RuntimeElement *Runtime::find(const std::string &name) const {
  for (const auto &e : elements_)
    if (e && e->name() == name) return e.get();
  return nullptr;
}

bool Runtime::setup(std::string *error) {
  const LaneGraph &lg = ctx_.graph();
  const ElementGraph &g = *lg.graph;
  try {
    // Every class must be able to run.
    for (const Node &n : lg.nodes) {
      const Element &e = g.elements[n.element];
      if (!RuntimeRegistry::global().find(e.spec->name))
        throw std::runtime_error("element '" + e.name + "' (" + e.spec->name +
                                 ") has no run-time implementation yet; it can be checked and planned, not run");
    }

    // Packet memory per lane: its rings and some slack.
    ctx_.lane_mbufs.assign(lg.lanes.size(), kLaneMbufSlack);
    for (const Edge &ed : lg.edges) {
      const Node &from = lg.nodes[ed.from];
      if (!ed.crosses_segments || from.lane < 0) continue;
      unsigned cap = kMergeCapacity;
      if (const ResolvedArg *a = from.arg("capacity"); a && g.elements[from.element].spec->is_thread_boundary())
        cap = unsigned(a->value.integer);
      ctx_.lane_mbufs[from.lane] += cap;
    }
    for (const Node &n : lg.nodes)
      if (const ResolvedArg *a = n.arg("rx_desc"); a && n.lane >= 0) ctx_.lane_mbufs[n.lane] += unsigned(a->value.integer);

    // A plan made for another machine, or for cpus this process may not
    // use (taskset, cgroups), cannot be applied here.
    const Placement *plan = ctx_.options.placement.get();
    if (plan)
      for (const SegmentPlacement &sp : plan->segments)
        if (std::find(process_cpus().begin(), process_cpus().end(), sp.cpu) == process_cpus().end())
          throw std::runtime_error("the plan puts segment " + std::to_string(sp.segment) + " on cpu " +
                                   std::to_string(sp.cpu) + ", which this process cannot use (cpus " +
                                   format_cpu_list(process_cpus()) + ")" +
                                   (plan->this_machine ? "" : ": host profile '" + plan->host +
                                                                  "' describes another machine; `sluice plan` "
                                                                  "shows its plan"));

    EalRequest eal;
    eal.args = ctx_.options.eal_args;
    double bytes = 0;
    std::vector<double> node_bytes;  // with a plan: by NUMA node
    for (const Lane &l : lg.lanes) {
      // Buffers hold 2 KiB frames, or TrafficGen's largest size.
      double room = RTE_MBUF_DEFAULT_DATAROOM;
      for (const Node &n : lg.nodes)
        if (n.lane == l.id && g.elements[n.element].spec->is_source())
          if (const ResolvedArg *sz = n.arg("sizes")) {
            for (const Value &v : sz->value.is_list ? sz->value.items : std::vector<Value>{sz->value})
              if (!v.is_symbol) room = std::max(room, double(v.integer));
          }
      double lane_bytes = double(ctx_.lane_mbufs[l.id]) * (sizeof(rte_mbuf) + kMbufPrivSize + RTE_PKTMBUF_HEADROOM + room);
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
      if (g.elements[n.element].spec->name != "RSSSource") continue;
      const ResolvedArg *dev = n.arg("device");
      if (dev && is_pci_address(dev->value.text)) {
        eal.pci = true;
        if (std::find(eal.allow.begin(), eal.allow.end(), dev->value.text) == eal.allow.end())
          eal.allow.push_back(dev->value.text);
      }
    }
    if (!init_eal(eal, error)) return false;

    // One instance per node.
    elements_.resize(lg.nodes.size());
    for (size_t i = 0; i < lg.nodes.size(); ++i) {
      const Node &n = lg.nodes[i];
      elements_[i] = (*RuntimeRegistry::global().find(g.elements[n.element].spec->name))(n, ctx_);
    }
    lane_source_.assign(lg.lanes.size(), nullptr);
    for (size_t i = 0; i < lg.nodes.size(); ++i)
      if (auto *s = dynamic_cast<SourceElement *>(elements_[i].get())) lane_source_[lg.nodes[i].lane] = s;

    ctx_.lane_sources = lane_source_;
    for (auto &e : elements_) ctx_.instances.push_back(e.get());
    for (const Lane &l : lg.lanes)
      if (!lane_source_[l.id]) throw std::logic_error("lane " + std::to_string(l.id) + " has no source instance");
    std::vector<RuntimeElement *> instances;
    for (auto &e : elements_) instances.push_back(e.get());
    build_segments(lg, instances, segments_, channels_);
    // Sources open their devices or generate their traffic.
    for (auto &e : elements_)
      if (auto *s = dynamic_cast<SourceElement *>(e.get())) s->start();
    for (auto &e : elements_) e->prepare();
  } catch (const std::exception &ex) {
    *error = ex.what();
    return false;
  }
  return true;
}

// One runner per segment of `lg`, on its planned site; within a segment an
// edge is a direct call, between segments a channel (at setup, and for the
// next graph of a hot reload).
void Runtime::build_segments(const LaneGraph &lg, const std::vector<RuntimeElement *> &inst,
                             std::vector<std::unique_ptr<SegmentRunner>> &segs,
                             std::vector<std::unique_ptr<Channel>> &chans, KeptChannels *kept) {
  const ElementGraph &g = *lg.graph;
  const Placement *plan = ctx_.options.placement.get();
  for (const Segment &s : lg.segments) {
    segs.push_back(std::make_unique<SegmentRunner>(s));
    if (!plan) continue;
    const SegmentPlacement &sp = plan->segments[size_t(s.id)];
    ThreadSite site{sp.cpu, sp.node, 0, 0};
    if (s.role == Segment::Role::Acquisition && plan->acquisition.mode == AcquisitionPolicy::Mode::Periodic)
      site.deadline_runtime_ns = plan->acquisition.runtime_ns, site.deadline_period_ns = plan->acquisition.period_ns;
    segs.back()->set_site(site);
  }

  // Edges: within a segment a direct call, between segments a channel.
  for (const Edge &ed : lg.edges) {
    RuntimeElement *from = inst[ed.from];
    RuntimeElement *to = inst[ed.to];
    if (!ed.crosses_segments) {
      from->connect(ed.from_port, {to, ed.to_port, nullptr});
      continue;
    }
    const Node &fn = lg.nodes[ed.from];
    const ElementSpec &fspec = *g.elements[fn.element].spec;
    bool ring = fspec.is_thread_boundary();
    StreamType type = fspec.output_port(ed.from_port)->type;
    unsigned cap = kMergeCapacity;
    if (const ResolvedArg *a = fn.arg("capacity"); ring && a) cap = unsigned(a->value.integer);
    std::unique_ptr<Channel> ch;
    if (kept)  // a reload keeps this channel, and what it holds
      if (auto k = kept->find({from, ed.from_port, g.elements[lg.nodes[ed.to].element].name}); k != kept->end())
        ch = std::move(k->second), kept->erase(k);
    if (!ch) ch = std::make_unique<Channel>(from->name(), type, cap, ctx_.memory_socket(fn.segment));
    ch->set_source_port(ed.from_port);
    bool live = fn.lane >= 0 && lane_source_[fn.lane] && lane_source_[fn.lane]->live();
    const char *full = ring ? "ring full" : type == StreamType::Flows ? "export queue full" : "shared input full";
    ch->set_overflow(from, from->counters.reason(full, type == StreamType::Flows), !live);
    ch->set_target({to, ed.to_port, nullptr});
    from->connect(ed.from_port, {nullptr, 0, ch.get()});
    segs[fn.segment]->add_output(ch.get());
    segs[lg.nodes[ed.to].segment]->add_input(ch.get());
    chans.push_back(std::move(ch));
  }
  for (const Segment &s : lg.segments) {
    SegmentRunner &r = *segs[s.id];
    for (int v : s.nodes) {
      RuntimeElement *e = inst[v];
      r.add_element(e);
      if (auto *src = dynamic_cast<SourceElement *>(e)) {
        r.add_source(src);
        if (const ResolvedArg *b = lg.nodes[v].arg("burst")) r.set_burst(unsigned(b->value.integer));
      }
    }
  }
}

std::string Runtime::where_it_ran(const SegmentRunner &seg) const {
  const SegmentPlacement &sp = ctx_.options.placement->segments[size_t(seg.segment().id)];
  std::vector<int> seen = seg.cpus_seen();
  std::sort(seen.begin(), seen.end());
  std::string out = "planned cpu " + std::to_string(sp.cpu) + ", ran on cpu" + (seen.size() == 1 ? " " : "s ") +
                    format_cpu_list(seen);
  out += dpdk_socket_for_node(sp.node) == sp.node
             ? "; memory on node " + std::to_string(sp.node)
             : "; memory anywhere (DPDK has none on node " + std::to_string(sp.node) + ")";
  if (!seg.settlement().note.empty()) out += "; " + seg.settlement().note;
  else if (seg.settlement().deadline) out += "; SCHED_DEADLINE";
  return out + "; " + program_summary(seg);
}

std::vector<const RuntimeElement *> Runtime::lane_elements(int lane) const {
  std::vector<const RuntimeElement *> out;
  for (const RuntimeElement *e : all_instances())
    if (e->lane() == lane) out.push_back(e);
  return out;
}

std::string Runtime::status_line(double t, std::vector<uint64_t> &last_pkts, std::vector<uint64_t> &last_bytes,
                                 double dt) const {
  std::string line;
  char head[32];
  snprintf(head, sizeof head, "[%6.1fs]", t);
  line = head;
  for (size_t l = 0; l < lane_source_.size(); ++l) {
    uint64_t pkts = lane_source_[l]->counters.in.get(), bytes = lane_source_[l]->received_bytes();
    uint64_t drops = 0;
    for (const RuntimeElement *e : lane_elements(int(l))) drops += e->counters.dropped();
    double pps = double(pkts - last_pkts[l]) / dt, bps = double(bytes - last_bytes[l]) * 8 / dt;
    last_pkts[l] = pkts, last_bytes[l] = bytes;
    line += (l ? " | lane " : " lane ") + std::to_string(l) + ": " + human(pps, "pps") + " " + human(bps, "bit/s") +
            " drops " + std::to_string(drops);
  }
  return line;
}

void Runtime::run() {
  auto t0 = std::chrono::steady_clock::now();
  for (auto &s : segments_) {
    auto it = compiled_.find(s.get());
    s->start(it != compiled_.end() && it->second.program ? it->second.program : &interpreter_);
  }
  if (on_started_) on_started_();

  std::vector<uint64_t> last_pkts(lane_source_.size()), last_bytes(lane_source_.size());
  auto last = t0;
  auto all_done = [&] {
    std::shared_lock structure(structure_mutex_);  // a reload may be swapping the segments
    return std::all_of(segments_.begin(), segments_.end(), [](const auto &s) { return s->done(); });
  };
  while (!all_done()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (on_tick_) on_tick_();
    auto now = std::chrono::steady_clock::now();
    double t = std::chrono::duration<double>(now - t0).count();
    if (ctx_.options.duration_ns && t * 1e9 >= double(ctx_.options.duration_ns)) request_stop();
    double dt = std::chrono::duration<double>(now - last).count();
    if (dt >= 1.0) {
      if (ctx_.options.status_line) {
        std::shared_lock structure(structure_mutex_);
        std::string line = status_line(t, last_pkts, last_bytes, dt) + "\n";
        (void)!write(ctx_.options.status_fd, line.data(), line.size());
      }
      last = now;
    }
  }
  for (auto &s : segments_) s->join();
  if (jit_thread_.joinable()) jit_thread_.join();
  elapsed_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::vector<const RuntimeElement *> Runtime::all_instances() const {
  std::vector<const RuntimeElement *> out;
  for (const auto &e : elements_) out.push_back(e.get());
  for (const auto &e : retired_elements_) out.push_back(e.get());
  return out;
}

RunTotals Runtime::totals() const {
  RunTotals t;
  for (const RuntimeElement *e : all_instances()) {
    if (auto *s = dynamic_cast<const SourceElement *>(e)) {
      t.received += s->counters.in.get();
      std::vector<std::pair<std::string, uint64_t>> dd;
      s->device_drops(dd);
      for (auto &[r, n] : dd) t.received += n, t.dropped += n;
    }
    t.copies += e->counters.copies.get();
    t.absorbed += e->counters.absorbed.get();
    t.dropped += e->counters.dropped();
  }
  return t;
}

RecordTotals Runtime::record_totals() const {
  RecordTotals t;
  for (const RuntimeElement *e : all_instances()) {
    const ElementCounters &c = e->counters;
    t.made += c.records_made.get();
    t.copies += c.records_copies.get();
    t.absorbed += c.records_absorbed.get();
    t.write_errors += c.write_errors.get();
    for (size_t r = 0; r < c.reasons.size(); ++r) {
      if (!c.of_records[r] && c.reasons[r] == "write error") t.packets_unwritten += c.drops[r].get();
      if (!c.of_records[r] || !c.drops[r].get()) continue;
      t.lost += c.drops[r].get();
      auto same = [&](const auto &l) { return l.first == c.reasons[r]; };
      auto it = std::find_if(t.lost_by_reason.begin(), t.lost_by_reason.end(), same);
      if (it == t.lost_by_reason.end()) t.lost_by_reason.emplace_back(c.reasons[r], 0), it = t.lost_by_reason.end() - 1;
      it->second += c.drops[r].get();
    }
  }
  return t;
}

// "records: made N + copies C = written or exported X + lost Y (by reason)",
// and what the run lost, for the end of the summary.
static std::string record_lines(const RecordTotals &r) {
  std::ostringstream o;
  if (r.made || r.copies || r.absorbed || r.lost) {
    o << "records: made " << r.made << " + copies " << r.copies << " = written or exported " << r.absorbed
      << " + lost " << r.lost;
    for (size_t i = 0; i < r.lost_by_reason.size(); ++i)
      o << (i ? ", " : " (") << r.lost_by_reason[i].first << " " << r.lost_by_reason[i].second
        << (i + 1 == r.lost_by_reason.size() ? ")" : "");
    o << (r.balanced() ? ": every record accounted for\n" : ": MISMATCH\n");
  }
  if (r.data_lost())
    o << "data lost: " << r.lost << " flow records, " << r.packets_unwritten << " packets not written, "
      << r.write_errors << " failed writes\n";
  return o.str();
}

std::string Runtime::summary() const {
  std::ostringstream o;
  const LaneGraph &lg = ctx_.graph();
  char buf[256];
  auto element_rows = [&](int lane) {
    snprintf(buf, sizeof buf, "  %-32s %12s %12s %12s %12s\n", "element", "in", "out", "absorbed", "dropped");
    o << buf;
    for (const RuntimeElement *e : lane_elements(lane)) {
      const ElementCounters &c = e->counters;
      std::string name = retired(e) ? e->name() + " (replaced)" : e->name();
      snprintf(buf, sizeof buf, "  %-32s %12llu %12llu %12llu %12llu\n", name.c_str(),
               (unsigned long long)c.in.get(), (unsigned long long)c.out.get(),
               (unsigned long long)c.absorbed.get(), (unsigned long long)c.dropped());
      o << buf;
      for (size_t r = 0; r < c.reasons.size(); ++r)
        if (c.drops[r].get())
          o << "      " << (c.of_records[r] ? "records lost, " : "dropped, ") << c.reasons[r] << ": " << c.drops[r].get() << "\n";
      if (c.records_in.get() || c.records_out.get() || c.records_absorbed.get() || c.records_made.get())
        o << "      flow records: " << (c.records_made.get() ? "made " + std::to_string(c.records_made.get()) + ", " : "")
          << "in " << c.records_in.get() << ", out " << c.records_out.get()
          << (c.records_absorbed.get() ? ", written or exported " + std::to_string(c.records_absorbed.get()) : "") << "\n";
      if (const auto *s = dynamic_cast<const SourceElement *>(e)) {
        std::vector<std::pair<std::string, uint64_t>> dd;
        s->device_drops(dd);
        for (auto &[r, n] : dd)
          if (n) o << "      lost at the device, " << r << ": " << n << "\n";
      }
      std::vector<std::string> lines;
      e->report(lines);
      for (const std::string &l : lines) o << "      " << l << "\n";
    }
  };
  snprintf(buf, sizeof buf, "== run summary: %.2f s\n", elapsed_s_);
  o << buf;
  for (const Lane &l : lg.lanes) {
    const SourceElement *s = lane_source_[l.id];
    uint64_t pkts = s->counters.in.get(), bytes = s->received_bytes();
    o << "lane " << l.id << ": received " << pkts << " packets, " << bytes << " bytes ("
      << human(elapsed_s_ > 0 ? double(pkts) / elapsed_s_ : 0, "pps") << ")\n";
    element_rows(l.id);
  }
  if (std::any_of(elements_.begin(), elements_.end(), [](const auto &e) { return e->lane() < 0; })) {
    o << "shared:\n";
    element_rows(-1);
  }
  if (const Placement *plan = ctx_.options.placement.get()) {
    o << "placement (host " << plan->host << "):\n";
    for (const auto &seg : segments_) o << "  " << seg->label() << ": " << where_it_ran(*seg) << "\n";
  }
  RunTotals t = totals();
  o << "accounting: received " << t.received << " + copies " << t.copies << " = absorbed " << t.absorbed
    << " + dropped " << t.dropped << (t.balanced() ? ": every packet accounted for\n" : ": MISMATCH\n");
  o << record_lines(record_totals());
  return o.str();
}


// Every instance, replaced ones marked, with its counters and drops by
// reason: the "elements" of --stats-json and `sluice ctl stats --json`.
std::string Runtime::elements_json() const {
  std::ostringstream o;
  o << "[";
  bool first = true;
  for (const RuntimeElement *e : all_instances()) {
    const ElementCounters &c = e->counters;
    o << (first ? "\n  " : ",\n  ") << "{\"name\": " << json_string(e->name()) << ", \"class\": "
      << json_string(e->class_name()) << ", \"lane\": " << e->lane()
      << (retired(e) ? ", \"replaced\": true" : "") << ", \"in\": " << c.in.get()
      << ", \"out\": " << c.out.get() << ", \"absorbed\": " << c.absorbed.get() << ", \"copies\": " << c.copies.get()
      << ", \"bytes\": " << c.in_bytes.get() << ", \"records_in\": " << c.records_in.get()
      << ", \"records_out\": " << c.records_out.get() << ", \"records_absorbed\": " << c.records_absorbed.get()
      << ", \"records_made\": " << c.records_made.get() << ", \"records_copies\": " << c.records_copies.get()
      << ", \"write_errors\": " << c.write_errors.get() << ", \"drops\": {";
    bool fr = true;
    for (size_t r = 0; r < c.reasons.size(); ++r) {
      o << (fr ? "" : ", ") << json_string(c.reasons[r]) << ": " << c.drops[r].get();
      fr = false;
    }
    if (const auto *s = dynamic_cast<const SourceElement *>(e)) {
      std::vector<std::pair<std::string, uint64_t>> dd;
      s->device_drops(dd);
      for (auto &[r, n] : dd) {
        o << (fr ? "" : ", ") << json_string(r) << ": " << n;
        fr = false;
      }
    }
    o << "}}";
    first = false;
  }
  o << "\n]";
  return o.str();
}

std::string Runtime::summary_json() const {
  std::ostringstream o;
  RunTotals t = totals();
  o << "{\"elapsed_s\": " << elapsed_s_ << ", \"received\": " << t.received << ", \"copies\": " << t.copies
    << ", \"absorbed\": " << t.absorbed << ", \"dropped\": " << t.dropped
    << ", \"balanced\": " << (t.balanced() ? "true" : "false");
  RecordTotals r = record_totals();
  o << ",\n \"records\": {\"made\": " << r.made << ", \"copies\": " << r.copies << ", \"absorbed\": " << r.absorbed
    << ", \"lost\": " << r.lost << ", \"lost_by_reason\": {";
  for (size_t i = 0; i < r.lost_by_reason.size(); ++i)
    o << (i ? ", " : "") << json_string(r.lost_by_reason[i].first) << ": " << r.lost_by_reason[i].second;
  o << "}, \"balanced\": " << (r.balanced() ? "true" : "false") << "}, \"write_errors\": " << r.write_errors
    << ", \"packets_unwritten\": " << r.packets_unwritten << ", \"data_lost\": " << (r.data_lost() ? "true" : "false")
    << ",\n \"lanes\": [";
  for (size_t l = 0; l < lane_source_.size(); ++l)
    o << (l ? ", " : "") << "{\"lane\": " << l << ", \"received\": " << lane_source_[l]->counters.in.get()
      << ", \"bytes\": " << lane_source_[l]->received_bytes() << "}";
  o << "],\n \"elements\": " << elements_json();
  o << ",\n \"segments\": [";
  const Placement *plan = ctx_.options.placement.get();
  for (size_t i = 0; i < segments_.size(); ++i) {
    const SegmentRunner &seg = *segments_[i];
    const Segment &s = seg.segment();
    const SegmentPlacement *sp = plan ? &plan->segments[size_t(s.id)] : nullptr;
    o << (i ? ",\n  " : "\n  ") << "{\"segment\": " << s.id << ", \"lane\": " << s.lane << ", \"role\": \""
      << segment_role_name(s.role) << "\", \"planned_cpu\": " << (sp ? sp->cpu : -1)
      << ", \"node\": " << (sp ? sp->node : -1) << ", \"ran_on\": [";
    for (size_t k = 0; k < seg.cpus_seen().size(); ++k) o << (k ? ", " : "") << seg.cpus_seen()[k];
    o << "], \"pinned\": " << (seg.settlement().pinned ? "true" : "false")
      << ", \"deadline\": " << (seg.settlement().deadline ? "true" : "false")
      << ", \"note\": " << json_string(seg.settlement().note);
    // the loop it ended on, and how long the JIT took to compile it
    std::lock_guard lock(jit_mutex_);
    auto c = compiled_.find(&seg);
    o << ", \"program\": \"" << (seg.program() ? seg.program()->kind() : "none") << "\", \"compile_ms\": "
      << (c != compiled_.end() && c->second.program ? c->second.ms : -1)
      << ", \"compilations\": " << (c != compiled_.end() ? c->second.compilations : 0) << "}";
  }
  o << "\n]}\n";
  return o.str();
}

}  // namespace sluice
