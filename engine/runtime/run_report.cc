#include "engine/runtime/run_report.hh"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "engine/base/json_text.hh"
#include "engine/runtime/dpdk_env.hh"
#include "engine/runtime/runtime.hh"

namespace sluice {

namespace {

std::string human(double v, const char *unit) {
  const char *prefix[] = {"", "K", "M", "G", "T"};
  int i = 0;
  while (v >= 1000 && i < 4) v /= 1000, ++i;
  char buf[64];
  snprintf(buf, sizeof buf, i == 0 ? "%.0f %s%s" : "%.2f %s%s", v, prefix[i], unit);
  return buf;
}

std::vector<std::pair<std::string, uint64_t>> device_drops(const SourceElement *s) {
  std::vector<std::pair<std::string, uint64_t>> dd;
  if (s) s->device_drops(dd);
  return dd;
}

}  // namespace

RunReport::RunReport(const Runtime &rt, bool with_lines) : rt_(rt) {
  for (const auto &e : rt.elements()) {
    ReportRow r{e->name(), e->class_name(), e->lane(), false, CounterValues(e->counters), {}, nullptr, {}};
    if (with_lines) e->report(r.lines);
    e->event_counts(r.events);
    r.source = dynamic_cast<const SourceElement *>(e.get());
    rows_.push_back(std::move(r));
  }
  for (RetiredTotal &t : rt.replaced()) {
    ReportRow r{t.name, t.class_name, t.lane, true, std::move(t.counters), std::move(t.report), nullptr, {}};
    if (t.instances > 1) r.lines.insert(r.lines.begin(), std::to_string(t.instances) + " instances replaced");
    rows_.push_back(std::move(r));
  }
}

std::vector<const ReportRow *> RunReport::lane_rows(int lane) const {
  std::vector<const ReportRow *> out;
  for (const ReportRow &r : rows_)
    if (r.lane == lane) out.push_back(&r);
  return out;
}

RunTotals RunReport::totals() const {
  RunTotals t;
  for (const ReportRow &r : rows_) {
    if (r.source) {
      t.received += r.counters.in;
      for (auto &[reason, n] : device_drops(r.source)) t.received += n, t.dropped += n;
    }
    t.copies += r.counters.copies;
    t.absorbed += r.counters.absorbed;
    t.dropped += r.counters.dropped();
  }
  return t;
}

RecordTotals RunReport::record_totals() const {
  RecordTotals t;
  for (const ReportRow &row : rows_) {
    const CounterValues &c = row.counters;
    t.made += c.records_made;
    t.copies += c.records_copies;
    t.absorbed += c.records_absorbed;
    t.write_errors += c.write_errors;
    for (const CounterValues::Drop &d : c.drops) {
      if (!d.of_records && d.reason == "write error") t.packets_unwritten += d.count;
      if (!d.of_records || !d.count) continue;
      t.lost += d.count;
      auto same = [&](const auto &l) { return l.first == d.reason; };
      auto it = std::find_if(t.lost_by_reason.begin(), t.lost_by_reason.end(), same);
      if (it == t.lost_by_reason.end()) t.lost_by_reason.emplace_back(d.reason, 0), it = t.lost_by_reason.end() - 1;
      it->second += d.count;
    }
  }
  return t;
}

namespace {

// "records: made N + copies C = written or exported X + lost Y (by reason)",
// and what the run lost, for the end of the summary.
std::string record_lines(const RecordTotals &r) {
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

}  // namespace

std::string RunReport::where_it_ran(size_t segment) const {
  const SegmentRunner &seg = *rt_.segments()[segment];
  const SegmentPlacement &sp = rt_.context().options.placement->segments[size_t(seg.segment().id)];
  std::vector<int> seen = seg.cpus_seen();
  std::sort(seen.begin(), seen.end());
  std::string out = "planned " + segment_cpus_text(sp) + (sp.floats_over.empty() ? "" : " (not pinned)") +
                    ", ran on cpu" + (seen.size() == 1 ? " " : "s ") + format_cpu_list(seen);
  out += dpdk_socket_for_node(sp.node) == sp.node
             ? "; memory on node " + std::to_string(sp.node)
             : "; memory anywhere (DPDK has none on node " + std::to_string(sp.node) + ")";
  if (!seg.settlement().note.empty()) out += "; " + seg.settlement().note;
  else if (seg.settlement().deadline) out += "; SCHED_DEADLINE";
  return out + "; " + rt_.programs_.describe(seg);
}

std::string RunReport::text() const {
  std::ostringstream o;
  const LaneGraph &lg = rt_.context().graph();
  char buf[256];
  auto element_rows = [&](int lane) {
    snprintf(buf, sizeof buf, "  %-32s %12s %12s %12s %12s\n", "element", "in", "out", "absorbed", "dropped");
    o << buf;
    for (const ReportRow *r : lane_rows(lane)) {
      const CounterValues &c = r->counters;
      std::string name = r->replaced ? r->name + " (replaced)" : r->name;
      snprintf(buf, sizeof buf, "  %-32s %12llu %12llu %12llu %12llu\n", name.c_str(), (unsigned long long)c.in,
               (unsigned long long)c.out, (unsigned long long)c.absorbed, (unsigned long long)c.dropped());
      o << buf;
      for (const CounterValues::Drop &d : c.drops)
        if (d.count) o << "      " << (d.of_records ? "records lost, " : "dropped, ") << d.reason << ": " << d.count << "\n";
      if (c.records_in || c.records_out || c.records_absorbed || c.records_made)
        o << "      flow records: " << (c.records_made ? "made " + std::to_string(c.records_made) + ", " : "")
          << "in " << c.records_in << ", out " << c.records_out
          << (c.records_absorbed ? ", written or exported " + std::to_string(c.records_absorbed) : "") << "\n";
      for (auto &[reason, n] : device_drops(r->source))
        if (n) o << "      lost at the device, " << reason << ": " << n << "\n";
      for (const std::string &l : r->lines) o << "      " << l << "\n";
    }
  };
  double elapsed = rt_.elapsed_s();
  snprintf(buf, sizeof buf, "== run summary: %.2f s\n", elapsed);
  o << buf;
  for (const Lane &l : lg.lanes) {
    const SourceElement *s = rt_.lane_sources()[size_t(l.id)];
    uint64_t pkts = s->counters.in.get(), bytes = s->received_bytes();
    o << "lane " << l.id << ": received " << pkts << " packets, " << bytes << " bytes ("
      << human(elapsed > 0 ? double(pkts) / elapsed : 0, "pps") << ")\n";
    element_rows(l.id);
  }
  if (std::any_of(rows_.begin(), rows_.end(), [](const ReportRow &r) { return r.lane < 0; })) {
    o << "shared:\n";
    element_rows(-1);
  }
  if (const Placement *plan = rt_.context().options.placement.get()) {
    o << "placement (host " << plan->host << "):\n";
    for (size_t i = 0; i < rt_.segments().size(); ++i)
      o << "  " << rt_.segments()[i]->label() << ": " << where_it_ran(i) << "\n";
  }
  RunTotals t = totals();
  o << "accounting: received " << t.received << " + copies " << t.copies << " = absorbed " << t.absorbed
    << " + dropped " << t.dropped << (t.balanced() ? ": every packet accounted for\n" : ": MISMATCH\n");
  o << record_lines(record_totals());
  return o.str();
}

// Every instance, replaced ones marked, with its counters and drops by
// reason: the "elements" of --stats-json and `sluice ctl stats --json`.
std::string RunReport::elements_json() const {
  std::ostringstream o;
  o << "[";
  bool first = true;
  for (const ReportRow &r : rows_) {
    const CounterValues &c = r.counters;
    o << (first ? "\n  " : ",\n  ") << "{\"name\": " << json_string(r.name) << ", \"class\": "
      << json_string(r.class_name) << ", \"lane\": " << r.lane << (r.replaced ? ", \"replaced\": true" : "")
      << ", \"in\": " << c.in << ", \"out\": " << c.out << ", \"absorbed\": " << c.absorbed
      << ", \"copies\": " << c.copies << ", \"bytes\": " << c.in_bytes << ", \"records_in\": " << c.records_in
      << ", \"records_out\": " << c.records_out << ", \"records_absorbed\": " << c.records_absorbed
      << ", \"records_made\": " << c.records_made << ", \"records_copies\": " << c.records_copies
      << ", \"write_errors\": " << c.write_errors << ", \"drops\": {";
    bool fr = true;
    for (const CounterValues::Drop &d : c.drops) {
      o << (fr ? "" : ", ") << json_string(d.reason) << ": " << d.count;
      fr = false;
    }
    for (auto &[reason, n] : device_drops(r.source)) {
      o << (fr ? "" : ", ") << json_string(reason) << ": " << n;
      fr = false;
    }
    o << "}";
    if (!r.events.empty()) {
      o << ", \"events\": {";
      for (size_t i = 0; i < r.events.size(); ++i)
        o << (i ? ", " : "") << json_string(r.events[i].first) << ": " << r.events[i].second;
      o << "}";
    }
    o << "}";
    first = false;
  }
  o << "\n]";
  return o.str();
}

std::string RunReport::json() const {
  std::ostringstream o;
  RunTotals t = totals();
  o << "{\"elapsed_s\": " << rt_.elapsed_s() << ", \"received\": " << t.received << ", \"copies\": " << t.copies
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
  const auto &sources = rt_.lane_sources();
  for (size_t l = 0; l < sources.size(); ++l)
    o << (l ? ", " : "") << "{\"lane\": " << l << ", \"received\": " << sources[l]->counters.in.get()
      << ", \"bytes\": " << sources[l]->received_bytes() << "}";
  o << "],\n \"populate_cpu_s\": " << rt_.populate_cpu_s();
  o << ",\n \"elements\": " << elements_json();
  o << ",\n \"segments\": [";
  const Placement *plan = rt_.context().options.placement.get();
  for (size_t i = 0; i < rt_.segments().size(); ++i) {
    const SegmentRunner &seg = *rt_.segments()[i];
    const Segment &s = seg.segment();
    const SegmentPlacement *sp = plan ? &plan->segments[size_t(s.id)] : nullptr;
    o << (i ? ",\n  " : "\n  ") << "{\"segment\": " << s.id << ", \"lane\": " << s.lane << ", \"role\": \""
      << segment_role_name(s.role) << "\", \"planned_cpu\": " << (sp ? sp->cpu : -1)
      << ", \"node\": " << (sp ? sp->node : -1) << ", \"ran_on\": [";
    for (size_t k = 0; k < seg.cpus_seen().size(); ++k) o << (k ? ", " : "") << seg.cpus_seen()[k];
    o << "], \"pinned\": " << (seg.settlement().pinned ? "true" : "false")
      << ", \"deadline\": " << (seg.settlement().deadline ? "true" : "false")
      << ", \"note\": " << json_string(seg.settlement().note) << ", \"cpu_s\": " << double(seg.cpu_ns()) / 1e9;
    // the loop it ended on, and how long the JIT took to compile it
    ProgramCache::CompiledLoop c = rt_.compiled_loop(seg);
    o << ", \"program\": \"" << (seg.program() ? seg.program()->kind() : "none") << "\", \"compile_ms\": "
      << (c.program ? c.ms : -1) << ", \"compilations\": " << c.compilations << "}";
  }
  o << "\n]}\n";
  return o.str();
}

StatusLine::StatusLine(const Runtime &rt)
    : rt_(rt), last_pkts_(rt.lane_sources().size()), last_bytes_(rt.lane_sources().size()) {}

std::string StatusLine::line(double t, double dt) {
  char head[32];
  snprintf(head, sizeof head, "[%6.1fs]", t);
  std::string line = head;
  std::vector<uint64_t> drops(last_pkts_.size());
  for (const auto &e : rt_.elements())
    if (e->lane() >= 0) drops[size_t(e->lane())] += e->counters.dropped();
  for (const RetiredTotal &r : rt_.replaced())
    if (r.lane >= 0) drops[size_t(r.lane)] += r.counters.dropped();
  for (size_t l = 0; l < last_pkts_.size(); ++l) {
    const SourceElement *s = rt_.lane_sources()[l];
    uint64_t pkts = s->counters.in.get(), bytes = s->received_bytes();
    double pps = double(pkts - last_pkts_[l]) / dt, bps = double(bytes - last_bytes_[l]) * 8 / dt;
    last_pkts_[l] = pkts, last_bytes_[l] = bytes;
    line += (l ? " | lane " : " lane ") + std::to_string(l) + ": " + human(pps, "pps") + " " + human(bps, "bit/s") +
            " drops " + std::to_string(drops[l]);
  }
  return line;
}

// The runtime's report entry points: any thread but a segment's, while a
// reload may be swapping the graph (they wait for its switch).
std::string Runtime::summary() const {
  auto lock = structure_lock();
  return RunReport(*this, true).text();
}
std::string Runtime::summary_json() const {
  auto lock = structure_lock();
  return RunReport(*this).json();
}
std::string Runtime::elements_json() const {
  auto lock = structure_lock();
  return RunReport(*this).elements_json();
}
std::string Runtime::segment_programs_json() const {
  auto lock = structure_lock();
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < running_.segments.size(); ++i) {
    const SegmentRunner &seg = *running_.segments[i];
    o << (i ? ", " : "") << "{\"segment\": " << seg.segment().id << ", \"lane\": " << seg.segment().lane
      << ", \"role\": \"" << segment_role_name(seg.segment().role) << "\", \"program\": \""
      << (seg.program() ? seg.program()->kind() : "none") << "\"}";
  }
  o << "]";
  return o.str();
}
RunTotals Runtime::totals() const {
  auto lock = structure_lock();
  return RunReport(*this).totals();
}
RecordTotals Runtime::record_totals() const {
  auto lock = structure_lock();
  return RunReport(*this).record_totals();
}

}  // namespace sluice
