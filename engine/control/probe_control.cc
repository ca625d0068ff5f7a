#include "engine/control/probe_control.hh"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "engine/base/diagnostics.hh"
#include "engine/control/control_socket.hh"
#include "engine/flow/flow_record.hh"
#include "engine/placement/plan_format.hh"

namespace sluice {

namespace {

// Slots of a flow table peeked at per visit to its segment: a bounded pause
// (a few hundred microseconds) rather than one scan of the whole table.
constexpr size_t kPeekSlots = 32768;
// The most flows `flows --top N` lists: an answer of 16 MB at most.
constexpr size_t kMaxTopFlows = 100000;

const ElementSpec &spec_of(const Runtime &rt, const RuntimeElement &e) {
  return *rt.context().graph().graph->elements[e.node().element].spec;
}

std::string number(double v, const char *format = "%.2f") {
  char buf[64];
  snprintf(buf, sizeof buf, format, v);
  return buf;
}

// ELEMENT.HANDLER at its last dot: element names may hold dots, handler names never do.
std::pair<std::string, std::string> split_target(const std::string &target) {
  size_t dot = target.rfind('.');
  if (dot == std::string::npos || dot == 0 || dot + 1 == target.size())
    throw HandlerError("expected ELEMENT.HANDLER (e.g. ft.active), not '" + target + "'");
  return {target.substr(0, dot), target.substr(dot + 1)};
}

std::string handler_names(const ElementSpec &spec) {
  std::string names;
  for (const HandlerSpec &h : spec.handlers) names += (names.empty() ? "" : ", ") + h.name;
  for (const HandlerSpec &h : common_handlers()) names += (names.empty() ? "" : ", ") + h.name;
  return names;
}

std::string address_text(const uint8_t *a, bool v6, uint16_t port) {
  std::string addr = flow_address_text(a, v6);
  return (v6 ? "[" + addr + "]" : addr) + ":" + std::to_string(port);
}

std::string proto_text(uint8_t p) {
  switch (p) {
    case 1: return "icmp";
    case 6: return "tcp";
    case 17: return "udp";
    case 58: return "icmpv6";
    case 132: return "sctp";
  }
  return std::to_string(p);
}

}  // namespace

bool run_on_segment(const Runtime &rt, int segment, const std::function<void()> &fn) {
  return rt.segments().at(size_t(segment))->call(fn, kSegmentCallTimeoutNs);
}

std::string element_base_name(const Runtime &rt, const RuntimeElement &e) {
  return rt.context().graph().graph->elements[e.node().element].name;
}

std::string lane_label(int lane) { return lane < 0 ? "shared" : std::to_string(lane); }

ProbeControl::ProbeControl(Runtime &rt, std::string config)
    : rt_(rt), config_(std::move(config)), started_(std::chrono::steady_clock::now()) {}

void ProbeControl::add_commands(ControlServer &server) {
  server.add_command("stats", "stats [--json]", "live counters per lane and element, drops by reason",
                     ControlServer::Access::Read, [this](const ControlArgs &a) {
                       if (a.size() > 1 || (a.size() == 1 && a[0] != "--json"))
                         return ControlServer::Reply::error("usage: stats [--json]");
                       return ControlServer::Reply::done(a.empty() ? stats_text() : stats_json());
                     });
  server.add_command("read", "read ELEMENT.HANDLER", "print a handler's value (every lane's for `ft`, one for `ft#1`)",
                     ControlServer::Access::Read, [this](const ControlArgs &a) {
                       if (a.size() != 1) return ControlServer::Reply::error("usage: read ELEMENT.HANDLER");
                       return ControlServer::Reply::done(read(a[0]));
                     });
  server.add_command("write", "write ELEMENT.HANDLER VALUE", "change a writable handler, between two batches",
                     ControlServer::Access::Change, [this](const ControlArgs &a) {
                       if (a.size() != 2) return ControlServer::Reply::error("usage: write ELEMENT.HANDLER VALUE");
                       write(a[0], a[1]);
                       return ControlServer::Reply::done("");
                     });
  server.add_command("handlers", "handlers [ELEMENT]", "list the handlers of the elements, or of one",
                     ControlServer::Access::Read, [this](const ControlArgs &a) {
                       if (a.size() > 1) return ControlServer::Reply::error("usage: handlers [ELEMENT]");
                       return ControlServer::Reply::done(handlers(a.empty() ? "" : a[0]));
                     });
  server.add_command("flows", "flows [--top N]", "the N largest active flows by bytes, all lanes (default 10)",
                     ControlServer::Access::Read, [this](const ControlArgs &a) {
                       std::string count = a.empty()                                      ? "10"
                                           : a.size() == 2 && a[0] == "--top"             ? a[1]
                                           : a.size() == 1 && a[0].rfind("--top=", 0) == 0 ? a[0].substr(6)
                                                                                          : "";
                       size_t n = 0;
                       auto [end, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
                       if (ec != std::errc() || end != count.data() + count.size() || n < 1 || n > kMaxTopFlows)
                         return ControlServer::Reply::error("usage: flows [--top N] (1 <= N <= " +
                                                            std::to_string(kMaxTopFlows) + ")");
                       return ControlServer::Reply::done(top_flows(n));
                     });
  server.add_command("plan", "plan", "the running graph: lanes, segments and where they run",
                     ControlServer::Access::Read, [this](const ControlArgs &a) {
                       if (!a.empty()) return ControlServer::Reply::error("usage: plan");
                       return ControlServer::Reply::done(plan());
                     });
}

std::vector<RuntimeElement *> ProbeControl::instances(const std::string &element) const {
  std::vector<RuntimeElement *> out;
  for (const auto &e : rt_.elements())
    if (e->name() == element) return {e.get()};
  std::vector<std::string> names;
  for (const auto &e : rt_.elements()) {
    std::string base = element_base_name(rt_, *e);
    if (base == element) out.push_back(e.get());
    names.push_back(base);
  }
  if (out.empty()) {
    std::string m = closest_match(element, names);
    throw HandlerError("no element '" + element + "' in the running graph" + (m.empty() ? "" : "; did you mean '" + m + "'?"));
  }
  return out;
}

std::string ProbeControl::read(const std::string &target) const {
  auto [element, handler] = split_target(target);
  std::vector<RuntimeElement *> found = instances(element);
  const ElementSpec &spec = spec_of(rt_, *found[0]);
  if (!spec.find_handler(handler))
    throw HandlerError("'" + element + "' (" + spec.name + ") has no handler '" + handler + "'; it has " + handler_names(spec));
  std::string out;
  for (RuntimeElement *e : found) {
    std::optional<std::string> value;
    if (!run_on_segment(rt_, e->node().segment, [&] { value = e->read_handler(handler); }))
      throw HandlerError("'" + e->name() + "' is busy: its segment did not reach a batch boundary in time; try again");
    if (!value) throw HandlerError("'" + e->name() + "' declares handler '" + handler + "' but does not answer it");
    if (found.size() == 1) {
      out = *value + "\n";
    } else if (value->find('\n') == std::string::npos) {
      out += e->name() + ": " + *value + "\n";
    } else {
      out += e->name() + ":\n";
      std::istringstream lines(*value);
      for (std::string l; std::getline(lines, l);) out += "  " + l + "\n";
    }
  }
  return out;
}

void ProbeControl::write(const std::string &target, const std::string &value) {
  auto [element, handler] = split_target(target);
  std::vector<RuntimeElement *> found = instances(element);
  const ElementSpec &spec = spec_of(rt_, *found[0]);
  const HandlerSpec *h = spec.find_handler(handler);
  if (!h)
    throw HandlerError("'" + element + "' (" + spec.name + ") has no handler '" + handler + "'; it has " + handler_names(spec));
  if (!h->writable) throw HandlerError("'" + element + "." + handler + "' is read-only");
  // Every lane's value is prepared before any is applied: one bad lane changes none.
  std::vector<RuntimeElement::HandlerChange> changes;
  for (RuntimeElement *e : found) {
    std::optional<RuntimeElement::HandlerChange> c;
    try {
      c = e->prepare_write(handler, value);
    } catch (const HandlerError &err) {
      throw HandlerError("cannot write '" + value + "' to " + e->name() + "." + handler + ": " + err.what() +
                         "; nothing was changed");
    }
    if (!c) throw HandlerError("'" + e->name() + "' declares handler '" + handler + "' writable but does not take it");
    // A fused loop holds the old value as a constant: the segment runs the
    // interpreter from the change on, until its loop is compiled again.
    changes.push_back([change = std::move(*c), this, e] {
      change();
      rt_.drop_compiled(e);
    });
  }
  // A compilation under way reads the values about to change (from its own
  // thread: a data race, ThreadSanitizer saw it): given up, done again below.
  rt_.cancel_compilation();
  for (size_t i = 0; i < found.size(); ++i)
    if (!run_on_segment(rt_, found[i]->node().segment, changes[i])) {
      rt_.recompile();
      throw HandlerError("'" + found[i]->name() + "' is busy: its segment did not reach a batch boundary in time, the "
                         "value was not written there" + (i ? " (it was in the lanes before it)" : ""));
    }
  rt_.recompile();
}

std::string ProbeControl::handlers(const std::string &element) const {
  std::vector<const RuntimeElement *> shown;
  if (!element.empty()) {
    shown.push_back(instances(element)[0]);
  } else {
    std::vector<std::string> seen;
    for (const auto &e : rt_.elements()) {
      std::string base = element_base_name(rt_, *e);
      if (std::find(seen.begin(), seen.end(), base) != seen.end()) continue;
      seen.push_back(base);
      shown.push_back(e.get());
    }
  }
  std::string out;
  for (const RuntimeElement *e : shown) {
    const ElementSpec &spec = spec_of(rt_, *e);
    out += (element.empty() ? element_base_name(rt_, *e) : element) + " (" + spec.name + ")\n";
    size_t w = 0;
    for (const HandlerSpec &h : spec.handlers) w = std::max(w, h.name.size());
    for (const HandlerSpec &h : spec.handlers)
      out += "  " + h.name + std::string(w + 2 - h.name.size(), ' ') + (h.writable ? "read, write  " : "read         ") +
             h.doc + "\n";
  }
  std::string common;
  for (const HandlerSpec &h : common_handlers()) common += (common.empty() ? "" : ", ") + h.name;
  return out + "Every element also has the counters " + common + ".\n";
}

std::string ProbeControl::top_flows(size_t n) const {
  struct Found {
    FlowRecord rec;
    const RuntimeElement *table;
  };
  // A min-heap on bytes holds the n largest seen so far.
  auto smaller = [](const Found &a, const Found &b) { return a.rec.octets() > b.rec.octets(); };
  std::vector<Found> best;
  bool any_table = false;
  for (const auto &e : rt_.elements()) {
    size_t slots = e->flow_slots();
    if (!slots) continue;
    any_table = true;
    for (size_t begin = 0; begin < slots; begin += kPeekSlots) {
      bool ok = run_on_segment(rt_, e->node().segment, [&] {
        e->peek_flows(begin, std::min(slots, begin + kPeekSlots), [&](const FlowRecord &r) {
          if (best.size() == n && r.octets() <= best.front().rec.octets()) return;
          best.push_back({r, e.get()});
          std::push_heap(best.begin(), best.end(), smaller);
          if (best.size() > n) {
            std::pop_heap(best.begin(), best.end(), smaller);
            best.pop_back();
          }
        });
      });
      if (!ok) throw HandlerError("'" + e->name() + "' is busy: its segment did not reach a batch boundary in time; try again");
    }
  }
  if (!any_table) throw HandlerError("the running graph has no FlowTable");
  std::sort_heap(best.begin(), best.end(), smaller);
  char line[512];
  snprintf(line, sizeof line, "%-6s %-16s %-7s %-42s %-42s %10s %14s %10s\n", "lane", "table", "proto", "source",
           "destination", "packets", "bytes", "seconds");
  std::string out = line;
  for (const Found &f : best) {
    const FlowKey &k = f.rec.key;
    snprintf(line, sizeof line, "%-6s %-16s %-7s %-42s %-42s %10llu %14llu %10.3f\n", lane_label(f.table->lane()).c_str(),
             element_base_name(rt_, *f.table).c_str(), proto_text(k.proto).c_str(),
             address_text(k.src_addr, k.is_ipv6, k.src_port).c_str(), address_text(k.dst_addr, k.is_ipv6, k.dst_port).c_str(),
             (unsigned long long)f.rec.packets(), (unsigned long long)f.rec.octets(),
             double(f.rec.last_ns() - f.rec.first_ns()) * 1e-9);
    out += line;
  }
  return out;
}

std::string ProbeControl::plan() const {
  std::ostringstream os;
  print_plan_text(os, config_, rt_.context().graph(), rt_.context().options.placement.get());
  return os.str();
}

std::vector<std::vector<std::string>> ProbeControl::report_lines() const {
  const auto &elements = rt_.elements();
  std::vector<std::vector<std::string>> lines(elements.size());
  for (size_t s = 0; s < rt_.segments().size(); ++s) {
    bool ok = run_on_segment(rt_, int(s), [&] {
      for (size_t i = 0; i < elements.size(); ++i)
        if (elements[i]->node().segment == int(s)) elements[i]->report(lines[i]);
    });
    if (!ok)
      for (size_t i = 0; i < elements.size(); ++i)
        if (elements[i]->node().segment == int(s)) lines[i] = {"(busy in a batch: not read this time)"};
  }
  return lines;
}

std::string ProbeControl::stats_text() const {
  const auto &elements = rt_.elements();
  std::vector<std::vector<std::string>> reports = report_lines();
  double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  std::string o = "== live statistics after " + number(up) + " s\n";
  auto element_rows = [&](int lane) {
    char buf[256];
    snprintf(buf, sizeof buf, "  %-32s %12s %12s %12s %12s\n", "element", "in", "out", "absorbed", "dropped");
    o += buf;
    for (size_t i = 0; i < elements.size(); ++i) {
      const RuntimeElement &e = *elements[i];
      if (e.lane() != lane) continue;
      const ElementCounters &c = e.counters;
      snprintf(buf, sizeof buf, "  %-32s %12llu %12llu %12llu %12llu\n", e.name().c_str(), (unsigned long long)c.in.get(),
               (unsigned long long)c.out.get(), (unsigned long long)c.absorbed.get(), (unsigned long long)c.dropped());
      o += buf;
      for (size_t r = 0; r < c.reasons.size(); ++r)
        if (c.drops[r].get())
          o += std::string("      ") + (c.of_records[r] ? "records lost, " : "dropped, ") + c.reasons[r] + ": " +
               std::to_string(c.drops[r].get()) + "\n";
      if (c.records_in.get() || c.records_out.get() || c.records_absorbed.get())
        o += "      flow records: in " + std::to_string(c.records_in.get()) + ", out " + std::to_string(c.records_out.get()) +
             (c.records_absorbed.get() ? ", written or exported " + std::to_string(c.records_absorbed.get()) : "") + "\n";
      if (const auto *s = dynamic_cast<const SourceElement *>(&e)) {
        std::vector<std::pair<std::string, uint64_t>> dd;
        s->device_drops(dd);
        for (auto &[r, n] : dd)
          if (n) o += "      lost at the device, " + r + ": " + std::to_string(n) + "\n";
      }
      for (const std::string &l : reports[i]) o += "      " + l + "\n";
    }
  };
  const RunContext &ctx = rt_.context();
  for (const Lane &l : ctx.graph().lanes) {
    const SourceElement *s = ctx.lane_source(l.id);
    uint64_t pkts = s->counters.in.get();
    o += "lane " + std::to_string(l.id) + ": received " + std::to_string(pkts) + " packets, " +
         std::to_string(s->received_bytes()) + " bytes (" + number(up > 0 ? double(pkts) / up : 0, "%.0f") + " pps on average)\n";
    element_rows(l.id);
  }
  if (std::any_of(elements.begin(), elements.end(), [](const auto &e) { return e->lane() < 0; })) {
    o += "shared:\n";
    element_rows(-1);
  }
  RunTotals t = rt_.totals();
  o += "accounting: received " + std::to_string(t.received) + " + copies " + std::to_string(t.copies) + " = absorbed " +
       std::to_string(t.absorbed) + " + dropped " + std::to_string(t.dropped) + " + in flight " +
       std::to_string(int64_t(t.received + t.copies) - int64_t(t.absorbed + t.dropped)) + "\n";
  return o;
}

std::string ProbeControl::stats_json() const {
  double up = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  RunTotals t = rt_.totals();
  std::ostringstream o;
  o << "{\"uptime_s\": " << up << ", \"received\": " << t.received << ", \"copies\": " << t.copies
    << ", \"absorbed\": " << t.absorbed << ", \"dropped\": " << t.dropped
    << ", \"in_flight\": " << int64_t(t.received + t.copies) - int64_t(t.absorbed + t.dropped) << ",\n \"lanes\": [";
  const RunContext &ctx = rt_.context();
  for (const Lane &l : ctx.graph().lanes)
    o << (l.id ? ", " : "") << "{\"lane\": " << l.id << ", \"received\": " << ctx.lane_source(l.id)->counters.in.get()
      << ", \"bytes\": " << ctx.lane_source(l.id)->received_bytes() << "}";
  o << "],\n \"elements\": " << rt_.elements_json() << ",\n \"segments\": " << rt_.segment_programs_json() << "}\n";
  return o.str();
}

}  // namespace sluice
