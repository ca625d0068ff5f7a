#include "elements/flow/flow_table.hh"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "dsl/literals.hh"
#include "engine/base/clock.hh"
#include "engine/runtime/run_context.hh"
#include "engine/runtime/thread_placement.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &flow_table_spec() {
  static const ElementSpec spec =
      ElementSpec("FlowTable")
          .in_group("flow")
          .with_flags(kStateful | kNeedsTime)
          .keeps_record_fields(kept_flow_fields)
          .brief("Per-lane flow cache: packets in, flow records out")
          .describe(
              "Keeps one entry per flow. A flow is identified by the fields of `key` (by default the "
              "5-tuple and the VLAN id), compared in full, never by hash alone. Each entry holds packet and "
              "octet counts (octets at IP level: the total length), the first and last packet times, the "
              "TCP flags seen, and the smallest and largest packet.\n\n"
              "With `direction bi` the two directions of a conversation share one entry and become one "
              "biflow record (RFC 5103) with forward and reverse counters; with `uni` each direction is a "
              "flow of its own.\n\n"
              "A TCP FIN or RST ends a flow (end reason \"end of flow\"): the rest of the close still counts "
              "in it, and a SYN after the end starts a new flow. Records leave on `flows` when a packet ends "
              "a flow here: a SYN after the end, a packet that finds its flow past a timeout, a flow evicted "
              "because the table is full (reason \"lack of resources\", counted). The idle and active "
              "timeouts of flows that see no more packets are applied by a GCSlicer that names this table "
              "(`GCSlicer(table ft)`), and those records come out of it, so a FlowTable is normally followed "
              "by its GCSlicer: `ft :: FlowTable -> GCSlicer(table ft) -> exporter`.\n\n"
              "Octets are the IP length field's when the frame holds that many bytes. A field of 0 (a capture "
              "of TCP segmentation offload or generic receive offload: an IPv4 total length or IPv6 payload "
              "length of 0, unless the IPv6 next header is \"no next header\") or one that claims more bytes "
              "than the frame holds (a bogus field) is replaced by what the frame holds from the IP header "
              "on (its wire length, not the snap length), as tshark counts such packets; the transport "
              "header is read as usual. An IPv4 total length shorter than the IPv4 header is malformed.\n\n"
              "Packets without a valid IP header are not metered: they are dropped and counted by reason: "
              "\"not ip\" (ARP, LLDP, a link layer that carries no IP), \"unsupported link type\", "
              "\"malformed link: ...\" (truncated header, too many vlan tags, too many mpls labels, bad "
              "header) and \"malformed ip: ...\" (truncated header, bad version, bad header length, bad "
              "total length). With `on_full drop`, a packet that would start a flow in a full table "
              "is dropped and counted as \"flow table full\", and one whose place in the index (16 buckets from "
              "its hash, keyed at random per table so that senders cannot aim at one) is full, as \"flow probe "
              "limit\"; with `on_full evict` a flow from that place makes room instead.\n\n"
              "All times are packet times: the capture times of a trace or of TrafficGen, or the time a "
              "Timestamp gives; a FlowTable that packets from live input reach without a Timestamp is an "
              "error. The table meters on a clock of its own that follows packet time but never goes back "
              "and never leaps on one packet's word: a packet dated before the clock (by up to a day: "
              "reordered packets, a trace whose time steps back) is dated at the clock; a packet more than "
              "a day away from the clock is dated at the clock too (a corrupt timestamp), unless the packet "
              "after it is as far: then the input really jumped (a gap of days, the next file, a clock "
              "reset) and the clock follows it, forward to its time, backward by shifting every later time "
              "so that the clock goes on from where it was. A packet without a time is dated at the clock. "
              "Capture gaps of hours are time passing as usual. Packets dated at the clock are counted by "
              "reason (summary, `clock` handler, metrics); they never start flows of their own.\n\n"
              "There is one table per lane, allocated when the probe starts on the lane's NUMA node; at the "
              "end of input every remaining flow is exported with reason \"forced end\" (\"end of flow\" "
              "for those that saw their FIN or RST, the timeout's reason for those already past one).")
          .arg(ArgSpec::count("capacity")
                   .def("1M")
                   .range(1 * kK, 1 * kG)
                   .describe("Flows the table holds, per lane. Its memory is mapped up front and brought in "
                             "on a thread beside the lane (`populate_cpu_s` in `--stats-json`)."))
          .arg(ArgSpec::duration("idle")
                   .live()
                   .def("15s")
                   .range(1 * kMs, 1 * kDay)
                   .describe("Idle timeout: a flow with no packet for this long ends (reason \"idle timeout\")."))
          .arg(ArgSpec::duration("active")
                   .live()
                   .def("30min")
                   .range(1 * kS, 7 * kDay)
                   .describe("Active timeout: a flow that has lasted this long is exported (reason \"active "
                             "timeout\") and counting starts again in a new record, so long flows are reported "
                             "while they last."))
          .arg(ArgSpec::symbol("direction", {"uni", "bi"})
                   .def("bi")
                   .describe("`bi`: both directions of a conversation in one biflow record (RFC 5103); "
                             "`uni`: one record per direction."))
          .arg(ArgSpec::symbol("key", {"src", "dst", "proto", "sport", "dport", "vlan"})
                   .lists()
                   .def("[src, dst, proto, sport, dport, vlan]")
                   .describe("The fields that identify a flow: `src` and `dst` (IP addresses), `proto` (IP "
                             "protocol), `sport` and `dport` (TCP or UDP ports), `vlan` (VLAN id). Packets "
                             "that differ only in fields left out are counted in the same flow."))
          .arg(ArgSpec::symbol("fields", {"all", "none", "in_if", "out_if", "direction", "src_mac", "dst_mac", "tos",
                                          "ttl", "inner_vlan", "icmp", "mpls"})
                   .lists()
                   .def("all")
                   .describe("Optional fields to keep in each record, besides the key, counters, times, TCP "
                             "flags, IP lengths and end reason every record has: `in_if` (the `ifindex` of the "
                             "source the flow's first packet came from: ingressInterface), `out_if` (that of "
                             "the reverse direction's first packet, 0 when it had none: egressInterface), "
                             "`direction` (the source's `direction`: flowDirection), `src_mac` and `dst_mac` "
                             "(of the first packet, Ethernet frames only), `tos` (IPv4 TOS or IPv6 traffic "
                             "class of the first packet: ipClassOfService), `ttl` (smallest and largest TTL or "
                             "hop limit: minimumTTL, maximumTTL), `inner_vlan` (the second VLAN tag of QinQ: "
                             "dot1qCustomerVlanId), `icmp` (ICMP type and code: icmpTypeCodeIPv4/IPv6), "
                             "`mpls` (the top label: mplsTopLabelStackSection). Per direction in a biflow: "
                             "`in_if`, `src_mac`, `dst_mac`, `tos`, `ttl`, taken from each direction's first "
                             "packet. `all` (the default) keeps every one, `none` none. The exporters' "
                             "templates and FlowLog's columns carry the fields the graph's tables keep. All but "
                             "`icmp` take 64 more bytes per flow of capacity and one more cache line per "
                             "packet."))
          .arg(ArgSpec::symbol("on_full", {"evict", "drop"})
                   .live()
                   .def("evict")
                   .describe("When a packet starts a new flow and the table is full: `evict` an existing flow "
                             "(exported with reason \"lack of resources\") to make room, or `drop` the packet "
                             "(counted as \"flow table full\") and keep the table as it is."))
          .handler("size", "Flows the table holds: its capacity.", &FlowTableRuntime::size)
          .handler("active", "Flows in the table now.", &FlowTableRuntime::active)
          .handler("load", "Active flows as a fraction of size.", &FlowTableRuntime::load)
          .handler("peak", "Most flows in the table at once.", &FlowTableRuntime::peak)
          .handler("created", "Flows started.", &FlowTableRuntime::created)
          .handler("evicted", "Flows evicted to make room (on_full evict).", &FlowTableRuntime::evicted)
          .handler("ended", "Flow records by end reason, one line per reason.", &FlowTableRuntime::ended)
          .handler("clock",
                   "The table's clock (UNIX ns) and the packets it dated at the clock instead of their own time, "
                   "by reason, one line each.",
                   &FlowTableRuntime::clock)
          .writable_handler("idle_timeout",
                            "The idle timeout, e.g. `30s`; a new value applies from the next check of each flow.",
                            &FlowTableRuntime::idle_timeout, &FlowTableRuntime::prepare_idle_timeout)
          .writable_handler("active_timeout", "The active timeout, e.g. `10min`; as idle_timeout.",
                            &FlowTableRuntime::active_timeout, &FlowTableRuntime::prepare_active_timeout)
          .metric(MetricSpec::gauge("flow_table_active_flows", "Flows in the table."))
          .metric(MetricSpec::gauge("flow_table_capacity_flows", "Flows the table holds."))
          .metric(MetricSpec::counter("flow_table_created_flows_total", "Flows started."))
          .metric(MetricSpec::counter("flow_table_evicted_flows_total", "Flows evicted from a full table to make room."))
          .metric(MetricSpec::counter("flow_table_probe_limit_flows_total",
                                      "New flows whose place in the index (the buckets a lookup may visit) was full."))
          .metric(MetricSpec::gauge("flow_table_longest_probe_buckets", "Most index buckets a new flow's insert visited."))
          .metric(MetricSpec::counter("flow_table_ended_flows_total",
                                      "Flow records by end reason (expirations, ends, evictions).", {"reason"}))
          .metric(MetricSpec::counter("flow_table_packets_dated_at_clock_total",
                                      "Packets the table dated at its clock instead of their own time, by reason.",
                                      {"reason"}))
          .metric(MetricSpec::counter("flow_table_time_jumps_followed_total",
                                      "Jumps in packet time the table's clock followed."))
          .metric(MetricSpec::gauge("flow_table_time_shift_seconds",
                                    "Time added to packet times since the clock followed jumps back."))
          .metric(MetricSpec::gauge("flow_table_clock_seconds", "The table's clock: packet time, UNIX seconds (whole)."))
          .metric(MetricSpec::gauge("flow_table_idle_timeout_seconds", "Idle timeout."))
          .metric(MetricSpec::gauge("flow_table_active_timeout_seconds", "Active timeout."))
          .input(PortSpec::packets("in").describe("Timestamped packets."))
          .output(PortSpec::flows("flows").many().describe(
              "Records of the flows that ended here: TCP FIN or RST, and evictions. Flows that time out "
              "come out of the GCSlicer instead; connect this output to it."))
          .output(PortSpec::packets("packets").optional().describe(
              "Every packet, after it has been accounted to its flow."));
  return spec;
}

FlowFieldSet kept_flow_fields(const Node &n) {
  const Value &v = n.arg("fields")->value;
  FlowFieldSet set = 0;
  for (const Value &item : v.is_list ? v.items : std::vector<Value>{v}) {
    if (item.text == "all") set |= kAllFlowFields;
    for (int f = 0; f < kFlowFieldCount; ++f)
      if (item.text == flow_field_name(FlowField(f))) set |= flow_field_bit(FlowField(f));
  }
  return set;
}

namespace {
// The drop reason of a packet without a valid IP header (!is_ip()), by its
// parse status. The statuses a packet with a valid IP header can have
// (truncated or bad L4, too many IPv6 extension headers) never come here;
// nor does Ok, but a packet nobody parsed (all zero) would, and it is not IP.
const char *no_ip_header_reason(ParseStatus s) {
  switch (s) {
    case ParseStatus::TruncatedL2: return "malformed link: truncated header";
    case ParseStatus::TooManyVlanTags: return "malformed link: too many vlan tags";
    case ParseStatus::TooManyMplsLabels: return "malformed link: too many mpls labels";
    case ParseStatus::BadLinkHeader: return "malformed link: bad header";
    case ParseStatus::UnsupportedLinkType: return "unsupported link type";
    case ParseStatus::TruncatedL3: return "malformed ip: truncated header";
    case ParseStatus::BadIpVersion: return "malformed ip: bad version";
    case ParseStatus::BadIpv4HeaderLength: return "malformed ip: bad header length";
    case ParseStatus::BadIpTotalLength: return "malformed ip: bad total length";
    default: return "not ip";
  }
}
}  // namespace

FlowTableRuntime::FlowTableRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
  FlowCacheConfig cfg;
  cfg.capacity = uint64_t(arg("capacity").integer);
  cfg.idle_ns = uint64_t(arg("idle").integer);
  cfg.active_ns = uint64_t(arg("active").integer);
  cfg.bidirectional = arg("direction").text == "bi";
  const Value &key = arg("key");
  auto in_key = [&](const char *f) {
    if (!key.is_list) return key.text == f;
    for (const Value &v : key.items)
      if (v.text == f) return true;
    return false;
  };
  cfg.key_src = in_key("src"), cfg.key_dst = in_key("dst"), cfg.key_proto = in_key("proto");
  cfg.key_sport = in_key("sport"), cfg.key_dport = in_key("dport"), cfg.key_vlan = in_key("vlan");
  cfg.evict_when_full = arg("on_full").text == "evict";
  cfg.fields = kept_flow_fields(n);
  cfg.lane = uint16_t(lane() < 0 ? 0 : lane());
  // The table's memory brought in beside the lane (PagePopulator), from the
  // lane's node (where the lane's own faults would have put it), below the
  // priority of the threads it shares a cpu with: it takes the time they
  // leave (while the probe starts, the lanes' cpus are idle).
  cfg.populate_on_thread = true;
  int node = -1;
  if (const Placement *p = ctx_.options.placement.get(); p && lane() >= 0 && size_t(lane()) < p->lanes.size())
    node = p->lanes[size_t(lane())].node;
  cfg.populate_setup = [node] {
    settle_current_thread({.cpu = -1, .node = node});
    setpriority(PRIO_PROCESS, pid_t(gettid()), 10);
  };
  cache_ = std::make_unique<FlowCache>(cfg);
  // Registered in this order (the summary's and the JSON's), then mapped.
  for (ParseStatus st : {ParseStatus::NonIp, ParseStatus::UnsupportedLinkType, ParseStatus::TruncatedL2,
                         ParseStatus::TooManyVlanTags, ParseStatus::TooManyMplsLabels, ParseStatus::BadLinkHeader,
                         ParseStatus::TruncatedL3, ParseStatus::BadIpVersion, ParseStatus::BadIpv4HeaderLength,
                         ParseStatus::BadIpTotalLength})
    counters.reason(no_ip_header_reason(st));
  for (int st = 0; st < kParseStatusCount; ++st) no_ip_header_[st] = counters.reason(no_ip_header_reason(ParseStatus(st)));
  full_ = counters.reason("flow table full");
  probe_limit_ = counters.reason("flow probe limit");
}

// The table's configuration and where its arrays are; which drop reasons;
// whether the lane is live.
void FlowTableRuntime::jit_constants(std::vector<ConstantBytes> &out) const {
  out.push_back({&cache_, sizeof cache_});
  auto [begin, size] = cache_->constant_bytes();
  out.push_back({begin, size});
  out.push_back({&live_, sizeof live_});
  out.push_back({no_ip_header_, sizeof no_ip_header_});
  out.push_back({&full_, sizeof full_});
  out.push_back({&probe_limit_, sizeof probe_limit_});
}

void FlowTableRuntime::prepare() {
  SourceElement *src = ctx_.lane_source(lane());
  live_ = src && src->live();
  last_wall_ns_ = mono_ns();
  // `sluice check` judged the sources by their arguments; the opened source
  // has the last word (a plugin's source, a device without timestamps).
  const ElementGraph &g = *ctx_.graph().graph;
  int untimed = untimed_source(g, node().element, [&](int e) {
    if (!g.elements[e].spec->is_source()) return bool(g.elements[e].spec->flags & kGivesTime);
    for (SourceElement *s : ctx_.lane_sources)
      if (s->node().element == e && (s->lane() == lane() || lane() < 0) && !s->has_capture_time()) return false;
    return true;
  });
  if (untimed >= 0)
    throw std::runtime_error("'" + name() + "' meters packets by their time, but packets from '" +
                             g.elements[untimed].name + "' reach it without one (that source gives no capture "
                             "times); put a Timestamp right after the source");
}

namespace {
const char *dating_reason(FlowClock::Dating how) {
  switch (how) {
    case FlowClock::Dating::Behind: return "behind the clock";
    case FlowClock::Dating::Far: return "more than a day off";
    case FlowClock::Dating::NoTime: return "without a time";
    default: return "";
  }
}
std::string seconds_text(uint64_t ns) {
  char buf[32];
  snprintf(buf, sizeof buf, "%.3f s", double(ns) * 1e-9);
  return buf;
}
constexpr FlowClock::Dating kAtClock[] = {FlowClock::Dating::Behind, FlowClock::Dating::Far, FlowClock::Dating::NoTime};
}  // namespace

void FlowTableRuntime::event_counts(std::vector<std::pair<std::string, uint64_t>> &out) const {
  for (FlowClock::Dating how : kAtClock)
    out.emplace_back(std::string("dated at the clock, ") + dating_reason(how), dated_[int(how)].get());
  out.emplace_back("time jumps followed", dated_[int(FlowClock::Dating::Followed)].get());
}

std::string FlowTableRuntime::dating_text() const {
  std::string parts;
  for (FlowClock::Dating how : kAtClock)
    if (uint64_t n = dated_[int(how)].get())
      parts += std::string(parts.empty() ? "" : ", ") + std::to_string(n) + " " + dating_reason(how);
  uint64_t followed = dated_[int(FlowClock::Dating::Followed)].get();
  if (parts.empty() && !followed) return "";
  std::string text = "packet time: ";
  if (!parts.empty()) text += "dated at the table's clock: " + parts;
  if (followed)
    text += std::string(parts.empty() ? "" : "; ") + "jumps followed " + std::to_string(followed) +
            (clock_.shift() ? ", later times shifted by " + seconds_text(clock_.shift()) : "");
  return text;
}

// The whole batch goes to the cache at once: it hashes and prefetches ahead
// (two cache misses per packet otherwise). Records of flows the batch ended
// leave in chunks that fit a FlowBatch.
void FlowTableRuntime::push(int, PacketBatch &batch) {
  if (live_) last_wall_ns_ = mono_ns();  // GCSlicer's stand-in for packet time on a live lane only
  if (!adopted_evictions_.empty()) [[unlikely]] emit_adopted_evictions();
  constexpr unsigned kChunk = kMaxFlowBatch / FlowCache::kMaxRecordsPerPacket;
  PacketBatch pass;
  for (int start = 0; start < batch.count; start += kChunk) {
    unsigned n = std::min<unsigned>(kChunk, unsigned(batch.count - start));
    const PacketMeta *metas[kChunk];
    const PacketLabels *labels[kChunk];
    FlowPacketSource sources[kChunk];
    uint64_t times[kChunk];
    FlowPacketOutcome outcomes[kChunk];
    const bool fields = cache_->config().fields != 0;
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf *m = batch.pkts[start + i];
      const PacketAnno &a = anno(m);
      metas[i] = &a.meta;
      labels[i] = &a.labels;
      if (fields) sources[i] = {rte_pktmbuf_mtod(m, const uint8_t *), a.if_index, a.flow_direction};
      FlowClock::Dating how;
      times[i] = clock_.date(a.time_ns, &how);
      if (how != FlowClock::Dating::OnTime) [[unlikely]] count_dating(how);
    }
    unsigned records = 0;
    cache_->account_batch(metas, times, n, outcomes, out_.recs, &records, labels, fields ? sources : nullptr);
    out_.count = uint16_t(records);
    emit_made_flows(0, out_);
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf *m = batch.pkts[start + i];
      switch (outcomes[i]) {
        case FlowPacketOutcome::Counted: pass.push(m); break;
        case FlowPacketOutcome::NotIp: drop(m, no_ip_header_[int(metas[i]->status)]); break;
        case FlowPacketOutcome::TableFull: drop(m, full_); break;
        case FlowPacketOutcome::ProbeLimit: drop(m, probe_limit_); break;
      }
    }
  }
  peak_active_ = std::max(peak_active_, cache_->active());
  // Metered packets go on if the packets output is connected; else they end here.
  if (!targets(1).empty()) emit(1, pass);
  else absorb_all(pass);
}

void FlowTableRuntime::emit_adopted_evictions() {
  for (size_t i = 0; i < adopted_evictions_.size(); i += kMaxFlowBatch) {
    out_.count = uint16_t(std::min<size_t>(kMaxFlowBatch, adopted_evictions_.size() - i));
    std::copy_n(adopted_evictions_.begin() + long(i), out_.count, out_.recs);
    emit_made_flows(0, out_);
  }
  adopted_evictions_.clear();
}

// A reload changed live arguments: timeouts are checked against packet time
// whenever a flow is looked at, so the new values need nothing but the store.
RuntimeElement::Change FlowTableRuntime::prepare_reconfigure(const Node &next) {
  uint64_t idle = uint64_t(next.arg("idle")->value.integer), active = uint64_t(next.arg("active")->value.integer);
  bool evict = next.arg("on_full")->value.text == "evict";
  return [this, idle, active, evict] {
    cache_->set_timeouts(idle, active);
    cache_->set_evict_when_full(evict);
  };
}

// A reload replaced the table (capacity, key, direction): its flows move in.
void FlowTableRuntime::adopt_state(RuntimeElement &old) {
  auto &from = dynamic_cast<FlowTableRuntime &>(old);
  cache_->adopt(*from.cache_, [this](const FlowRecord &r) { adopted_evictions_.push_back(r); });
  adopted_evictions_.insert(adopted_evictions_.end(), from.adopted_evictions_.begin(), from.adopted_evictions_.end());
  if (from.clock_.now() > clock_.now()) clock_ = from.clock_;
  peak_active_ = std::max(peak_active_, cache_->active());
}

void FlowTableRuntime::flush() {
  emit_adopted_evictions();
  // End of input: every remaining flow leaves ("forced end"; "end of flow"
  // for those that saw their FIN or RST).
  for (size_t left = 1; left > 0;) {
    size_t n = 0;
    left = cache_->flush(out_.recs, kMaxFlowBatch, &n);
    out_.count = uint16_t(n);
    emit_made_flows(0, out_);
  }
}

size_t FlowTableRuntime::size() const { return cache_->capacity(); }
size_t FlowTableRuntime::active() const { return cache_->active(); }
double FlowTableRuntime::load() const { return double(cache_->active()) / double(cache_->capacity()); }
size_t FlowTableRuntime::peak() const { return std::max(peak_active_, cache_->active()); }
uint64_t FlowTableRuntime::created() const { return cache_->stats().created; }
uint64_t FlowTableRuntime::evicted() const { return cache_->stats().evicted; }
std::string FlowTableRuntime::idle_timeout() const { return format_duration_ns(int64_t(cache_->config().idle_ns)); }
std::string FlowTableRuntime::active_timeout() const {
  return format_duration_ns(int64_t(cache_->config().active_ns));
}

std::string FlowTableRuntime::clock() const {
  std::string lines = "now: " + std::to_string(clock_.now()) + " ns";
  for (FlowClock::Dating how : kAtClock)
    lines += std::string("\n") + dating_reason(how) + ": " + std::to_string(dated_[int(how)].get());
  lines += "\njumps followed: " + std::to_string(dated_[int(FlowClock::Dating::Followed)].get()) +
           "\nshift: " + std::to_string(clock_.shift()) + " ns";
  return lines;
}

std::string FlowTableRuntime::ended() const {
  const FlowCache::Stats &st = cache_->stats();
  std::string lines;
  for (int r = 1; r <= 5; ++r)
    lines += std::string(r > 1 ? "\n" : "") + flow_end_reason_name(FlowEndReason(r)) + ": " + std::to_string(st.ended[r]);
  return lines;
}

// Timeouts are checked against packet time whenever a flow is looked at, so
// a new value needs nothing but the store, made between two batches.
RuntimeElement::HandlerChange FlowTableRuntime::prepare_timeout(bool idle, const std::string &value) {
  std::string err;
  std::optional<Value> v = parse_value_text(value, *flow_table_spec().find_arg(idle ? "idle" : "active"), &err);
  if (!v) throw HandlerError(err);
  uint64_t ns = uint64_t(v->integer);
  return [this, idle, ns] {
    const FlowCacheConfig &c = cache_->config();
    cache_->set_timeouts(idle ? ns : c.idle_ns, idle ? c.active_ns : ns);
  };
}

void FlowTableRuntime::report_metrics(ElementMetrics &out) const {
  const FlowCache::Stats &st = cache_->stats();
  out.gauge("flow_table_active_flows", double(cache_->active()));
  out.gauge("flow_table_capacity_flows", double(cache_->capacity()));
  out.counter("flow_table_created_flows_total", double(st.created));
  out.counter("flow_table_evicted_flows_total", double(st.evicted));
  out.counter("flow_table_probe_limit_flows_total", double(st.probe_limit));
  out.gauge("flow_table_longest_probe_buckets", double(st.longest_probe));
  for (int r = 1; r <= 5; ++r)
    out.counter("flow_table_ended_flows_total", double(st.ended[r]), {{"reason", flow_end_reason_name(FlowEndReason(r))}});
  for (FlowClock::Dating how : kAtClock)
    out.counter("flow_table_packets_dated_at_clock_total", double(dated_[int(how)].get()), {{"reason", dating_reason(how)}});
  out.counter("flow_table_time_jumps_followed_total", double(dated_[int(FlowClock::Dating::Followed)].get()));
  out.gauge("flow_table_time_shift_seconds", double(clock_.shift()) * 1e-9);
  out.gauge("flow_table_clock_seconds", double(clock_.now() / 1000000000ull));
  out.gauge("flow_table_idle_timeout_seconds", double(cache_->config().idle_ns) * 1e-9);
  out.gauge("flow_table_active_timeout_seconds", double(cache_->config().active_ns) * 1e-9);
}

void FlowTableRuntime::report(std::vector<std::string> &lines) const {
  const FlowCache::Stats &st = cache_->stats();
  std::string ends;
  for (int r = 1; r <= 5; ++r)
    if (st.ended[r]) ends += std::string(ends.empty() ? "" : ", ") + flow_end_reason_name(FlowEndReason(r)) + " " + std::to_string(st.ended[r]);
  lines.push_back("flows: created " + std::to_string(st.created) + ", at most " + std::to_string(peak_active_) +
                  " at once, active " + std::to_string(cache_->active()) +
                  " of " + std::to_string(cache_->capacity()) + " (" + std::to_string(cache_->bytes() >> 20) +
                  " MiB), evicted " + std::to_string(st.evicted) + (ends.empty() ? "" : "; ended: " + ends) +
                  "; index: longest probe " + std::to_string(st.longest_probe) + " of " +
                  std::to_string(FlowCache::kMaxProbe) + " buckets" +
                  (st.probe_limit ? ", probe limit reached " + std::to_string(st.probe_limit) + " times" : ""));
  if (std::string t = dating_text(); !t.empty()) lines.push_back(t);
}

SLUICE_ELEMENT(FlowTableRuntime, flow_table_spec);

}  // namespace sluice::elements
