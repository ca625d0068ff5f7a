#include "elements/export/exporter_base.hh"

#include <time.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "elements/units.hh"
#include "engine/base/clock.hh"
#include "engine/export/options_records.hh"
#include "engine/runtime/run_context.hh"

namespace sluice::elements {

using namespace sluice::units;

namespace {

// The default pace: a quarter of the lowest rate at which nfdump's nfcapd,
// reading with the default socket buffer (net.core.rmem_default, 208 KB) on
// a loaded 2-core machine, lost datagrams of an end-of-run burst (80 Mbps;
// tests/unit/test_flows.cc, docs/architecture.md).
constexpr const char *kDefaultRate = "20Mbps";

// The protocol's domain arguments: `name` (the base id) and `name`_per.
std::vector<ArgSpec> domain_args(const std::string &name, const std::string &what) {
  return {ArgSpec::count(name).def("1").range(0, 4294967295.0).describe(
              "The " + what + " in every message header (with `" + name +
              "_per lane`, the first of the lanes' ids); collectors keep sequence numbers and templates per " +
              what + "."),
          ArgSpec::symbol(name + "_per", {"auto", "lane", "exporter"})
              .def("auto")
              .describe("`lane`: lane l's records go in messages of " + what + " `" + name +
                        "` + l, each with its own sequence numbers, also from a `shared` exporter; "
                        "`exporter`: one " + what + " for the instance (exporters replicated per lane then "
                        "share it: only for lanes sending to different collectors); `auto`: `lane` for an "
                        "exporter replicated per lane, so that its lanes do not disturb each other's "
                        "sequence numbers at the collector, `exporter` for a `shared` one.")};
}

}  // namespace

ElementSpec exporter_spec(ElementSpec spec, std::string collector_doc, std::vector<ArgSpec> protocol_args,
                          const std::string &domain_arg, const std::string &domain_what) {
  spec.args.push_back(ArgSpec::host_port("collector").needed().pos().describe(std::move(collector_doc)));
  for (ArgSpec &a : protocol_args) spec.args.push_back(std::move(a));
  for (ArgSpec &a : domain_args(domain_arg, domain_what)) spec.args.push_back(std::move(a));
  return std::move(spec)
      .with_flags(kExportsSampling)
      .arg(ArgSpec::duration("template_refresh")
               .def("1min")
               .range(1 * kS, 1 * kDay)
               .describe("How often templates are resent over UDP, with the options records (statistics, "
                         "sampling). Over TCP templates go once per connection and the options records every "
                         "`template_refresh`. A collector that starts or restarts after the exporter can decode "
                         "nothing until the next refresh, and UDP may lose a template: collectors expect about "
                         "a minute."))
      .arg(ArgSpec::bytes("mtu")
               .def("1500")
               .range(576, 9000)
               .describe("Largest packet an export message may fill, IP and transport headers included; "
                         "records are packed into messages up to this size. Records wait until 512 have come, "
                         "or for 20 ms at most, so that messages leave full rather than one per batch of "
                         "records."))
      .arg(ArgSpec::rate("rate", RateUnit::Bits)
               .def(kDefaultRate)
               .range(64e3, 100e9)
               .describe("UDP: the most the exporter sends, IP packets included, all lanes together (an "
                         "exporter replicated per lane gives each lane an equal share). Messages wait in the "
                         "queue and leave at this pace, in bursts of 5 ms of it at most, so that a burst of "
                         "records (a full table expiring, the end of a run) does not overflow the collector's "
                         "socket buffer: what overflows it is dropped without a word to anyone. The default "
                         "suits a collector reading with the default buffer (Linux: 208 KB); raise it for a "
                         "collector with a larger one. Not used over TCP, which paces itself. Messages that leave "
                         "together go to the kernel in one call, up to 64 of one size in a row, each still a "
                         "datagram of its own (UDP_SEGMENT; one call each where the kernel refuses)."))
      .arg(ArgSpec::bytes("queue")
               .def("8MB")
               .range(64 * kKB, 1 * kG)
               .describe("Octets of messages that may wait to be sent (UDP: for the pace; TCP: while the "
                         "connection is made or the collector is slow). On live input a message that does "
                         "not fit is lost, its records counted as `export queue full`; on offline input "
                         "(trace files, unpaced TrafficGen) the exporter waits for room instead, and so do "
                         "the lanes behind it, unless nothing has gone out for 2 s. At the end of a run, and when a "
                         "reload removes the exporter, the queue still goes out at the pace (TCP: for up to "
                         "2 s); what is left is counted as `not sent before the end` (or `before removal`)."))
      .handler("collector", "The collector: transport, address and port.", &ExporterBase::collector)
      .handler("messages", "Messages sent.", &ExporterBase::messages)
      .handler("sent_bytes", "Bytes of messages sent.", &ExporterBase::sent_bytes)
      .handler("errors", "Send errors.", &ExporterBase::errors)
      .handler("connections", "Connections made (TCP; 1 for UDP).", &ExporterBase::connections)
      .handler("queued", "Flow records waiting to be encoded or, in messages, to be sent.", &ExporterBase::queued)
      .handler("sampling_interval",
               "The sampling interval N (1 packet in N) sent in the sampling options record; 0 when the "
               "flows are not sampled.",
               &ExporterBase::sampling_interval)
      .metric(MetricSpec::counter("exporter_records_total", "Flow records sent to the collector."))
      .metric(MetricSpec::counter("exporter_messages_total", "Messages sent to the collector."))
      .metric(MetricSpec::counter("exporter_bytes_total", "Bytes of messages sent to the collector."))
      .metric(MetricSpec::counter("exporter_send_errors_total", "Messages the socket refused."))
      .metric(MetricSpec::counter("exporter_connections_total", "Connections to the collector (TCP; 1 for UDP)."))
      .metric(MetricSpec::gauge("exporter_queued_records", "Flow records waiting to be encoded or, in messages, to be sent."))
      .metric(MetricSpec::gauge("exporter_queued_bytes", "Bytes of messages waiting to be sent."))
      .input(PortSpec::flows("in").many().describe("Flow records to export; takes any number of connections."));
}

namespace {
uint32_t export_time() { return uint32_t(time(nullptr)); }
constexpr uint64_t kTcpDrainNs = 2'000'000'000ull;
// Records held before they are encoded: enough for many full messages (a
// 1500-octet message holds 12 to 25 records), which then leave in batches
// (CollectorLink: 128 records made batches of 6 to 9 datagrams, 512 of
// 20, and the exporter's thread 18% less cpu at a million flows), for at
// most 20 ms.
constexpr size_t kHoldRecords = 512;
constexpr uint64_t kHoldNs = 20'000'000ull;
}  // namespace

ExporterBase::ExporterBase(const Node &n, RunContext &c, bool tcp, std::string domain_arg)
    : RuntimeElement(n, c), tcp_(tcp), domain_arg_(std::move(domain_arg)) {
  refresh_ns_ = uint64_t(arg("template_refresh").integer);
  unreachable_ = counters.reason("collector unreachable", true);
  lost_ = counters.reason("connection lost", true);
  queue_full_ = counters.reason("export queue full", true);
  // The reasons abandon_pending() is given (the end of a run, a reload).
  counters.reason("not sent before the end", true);
  counters.reason("not sent before removal", true);
}

void ExporterBase::prepare() {
  const Value &c = arg("collector");
  try {
    CollectorLink::Options options;
    rate_bps_ = uint64_t(arg("rate").real);
    size_t lanes = ctx_.graph().lanes.size();
    options.rate_bps = tcp_ ? 0 : (lane() >= 0 ? rate_bps_ / std::max<size_t>(lanes, 1) : rate_bps_);
    options.max_queued_bytes = size_t(arg("queue").integer);
    link_ = std::make_unique<CollectorLink>(c.text, uint16_t(c.integer),
                                            tcp_ ? CollectorLink::Transport::Tcp : CollectorLink::Transport::Udp,
                                            options);
    // Offline input waits for room rather than losing records, as its
    // rings do: a replay gives the same records whatever the pace.
    offline_ = true;
    for (const Lane &l : ctx_.graph().lanes)
      if ((lane() < 0 || l.id == lane()) && ctx_.lane_source(l.id) && ctx_.lane_source(l.id)->live()) offline_ = false;
    find_sampling();
    bool v6 = c.text.find(':') != std::string::npos;
    make_encoders(size_t(arg("mtu").integer) - (v6 ? 40 : 20) - (tcp_ ? 32 : 8));
  } catch (const std::exception &e) {
    throw std::runtime_error("'" + name() + "': " + e.what());
  }
}

void ExporterBase::make_encoders(size_t max_message) {
  uint64_t base = uint64_t(arg(domain_arg_).integer);
  const std::string &per = arg(domain_arg_ + "_per").text;
  bool per_lane = per == "lane" || (per == "auto" && lane() >= 0);
  size_t lanes = ctx_.graph().lanes.size();
  uint64_t first = per_lane && lane() >= 0 ? base + uint64_t(lane()) : base;
  size_t count = per_lane && lane() < 0 ? std::max<size_t>(lanes, 1) : 1;
  uint64_t last = per_lane ? base + std::max<size_t>(lanes, 1) - 1 : base;
  if (last > 4294967295ull)
    throw std::runtime_error(domain_arg_ + " " + std::to_string(base) + " + lane " + std::to_string(lanes - 1) +
                             " is beyond 4294967295; lower `" + domain_arg_ + "` or give `" + domain_arg_ +
                             "_per exporter`");
  for (size_t i = 0; i < count; ++i) encoders_.push_back(make_encoder(uint32_t(first + i), max_message));
  by_lane_.resize(count);
}

// The sampling of the flows reaching this exporter: `sluice check` has
// made sure that every path to it is sampled alike.
void ExporterBase::find_sampling() {
  const LaneGraph &lg = ctx_.graph();
  auto passes = [&](int e, int port) {
    if (!(lg.graph->elements[e].spec->flags & kSamples)) return 1.0;
    for (const Node &n : lg.nodes)
      if (n.element == e) {
        double rate = n.arg("rate")->value.real;
        return port == 0 ? rate : 1.0 - rate;
      }
    return 1.0;
  };
  std::vector<double> shares = upstream_sampling(*lg.graph, node().element, passes);
  if (shares.size() > 1)
    throw std::runtime_error("flows of packets sampled at different rates reach it; give each rate its own exporter");
  sampling_rate_ = shares.empty() ? 1.0 : shares[0];
  sampling_interval_ = flow_export::sampling_interval(sampling_rate_);
}

void ExporterBase::tick() {
  uint64_t now = mono_ns();
  if (!held_.empty() && now - held_since_ns_ >= kHoldNs) encode_held();
  link_->poll(now);
  if (link_->take_new_connection()) {
    // A new TCP connection (or the first UDP use) gets the templates first,
    // the options records before any data.
    for (auto &e : encoders_) e->reset_templates();
    send_options(true);
    next_refresh_ = now + refresh_ns_;
  } else if (now >= next_refresh_ && link_->connected()) {
    if (!tcp_)
      for (auto &e : encoders_) {
        flow_export::Messages msgs;
        e->templates(export_time(), msgs);
        send_all(msgs, std::vector<uint32_t>(msgs.size(), 0));
      }
    send_options(!tcp_);
    next_refresh_ = now + refresh_ns_;
  }
  settle();
}

void ExporterBase::send_options(bool templates) {
  flow_export::Protocol protocol = options_protocol();
  for (auto &e : encoders_) {
    std::vector<flow_export::OptionsRecord> recs;
    if (templates) recs = flow_export::options_templates(protocol, sampling_interval_ != 0);
    flow_export::ExporterStats stats{encoders_[0]->domain(), accepted_messages_, accepted_octets_, accepted_records_,
                                     counters.records_dropped()};
    for (auto &r : flow_export::options_data(protocol, e->domain(), stats, sampling_rate_))
      recs.push_back(std::move(r));
    flow_export::Messages msgs;
    e->encode_options(recs, export_time(), msgs);
    send_all(msgs, std::vector<uint32_t>(msgs.size(), 0));
  }
}

// What the link did with the records of the messages it took.
void ExporterBase::settle() {
  CollectorLink::Outcome o = link_->take_outcome();
  counters.records_absorbed.add(o.sent);
  if (o.refused) counters.drops[unreachable_].add(o.refused);
  if (o.dropped) counters.drops[lost_].add(o.dropped);
}

void ExporterBase::send_all(flow_export::Messages &msgs, const std::vector<uint32_t> &records) {
  for (size_t i = 0; i < msgs.size(); ++i) {
    if (offline_) wait_for_room(msgs[i].size());
    size_t octets = msgs[i].size();
    switch (link_->send(std::move(msgs[i]), records[i])) {
      case CollectorLink::Refused::No:
        ++accepted_messages_;
        accepted_octets_ += octets;
        accepted_records_ += records[i];
        break;
      case CollectorLink::Refused::NotConnected: counters.drops[unreachable_].add(records[i]); break;
      case CollectorLink::Refused::QueueFull: counters.drops[queue_full_].add(records[i]); break;
    }
  }
}

// Offline: the queue is full because the pace (or a slow TCP collector)
// holds it back, not because packets keep coming; waiting here makes the
// channels into the exporter fill and the offline lanes wait. Given up
// (the message then counts as lost) when nothing has gone out for a while:
// a collector that does not read must not stop the run.
void ExporterBase::wait_for_room(size_t bytes) {
  constexpr uint64_t kNoProgressNs = 2'000'000'000ull;
  uint64_t last_progress = mono_ns();
  size_t queued = link_->queued_bytes();
  while (!link_->has_room(bytes) && !ctx_.stop_now.load(std::memory_order_relaxed)) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    uint64_t now = mono_ns();
    link_->poll(now);
    settle();
    if (link_->queued_bytes() < queued) last_progress = now;
    queued = link_->queued_bytes();
    if (now - last_progress > kNoProgressNs) return;
  }
}

void ExporterBase::encode(FlowEncoder &encoder, const FlowRecord *recs, size_t n, uint32_t now_s) {
  flow_export::Messages msgs;
  std::vector<uint32_t> records;
  encoder.encode(recs, n, now_s, false, msgs, &records);
  send_all(msgs, records);
}

void ExporterBase::push_flows(int, FlowBatch &batch) {
  tick();
  if (!link_->accepting()) {  // TCP collector away: the records are lost, counted, nothing waits
    counters.drops[unreachable_].add(batch.count);
    batch.count = 0;
    return;
  }
  if (held_.empty()) held_since_ns_ = mono_ns();
  held_.insert(held_.end(), batch.recs, batch.recs + batch.count);
  batch.count = 0;
  if (held_.size() >= kHoldRecords) encode_held();
}

void ExporterBase::encode_held() {
  if (held_.empty()) return;
  if (!link_->accepting()) {
    counters.drops[unreachable_].add(held_.size());
    held_.clear();
    return;
  }
  uint32_t now_s = export_time();
  if (encoders_.size() == 1) {
    encode(*encoders_[0], held_.data(), held_.size(), now_s);
  } else {
    // A shared exporter with a domain per lane: each lane's records in
    // messages of their own.
    for (const FlowRecord &r : held_) by_lane_[r.lane % by_lane_.size()].push_back(r);
    for (size_t l = 0; l < by_lane_.size(); ++l) {
      if (by_lane_[l].empty()) continue;
      encode(*encoders_[l], by_lane_[l].data(), by_lane_[l].size(), now_s);
      by_lane_[l].clear();
    }
  }
  held_.clear();
  settle();
}

void ExporterBase::flush() {
  encode_held();
  uint64_t now = mono_ns();
  link_->poll(now);
  settle();
  if (link_->connected()) send_options(!tcp_);  // the last statistics, after the last records
  settle();
  drain_deadline_ns_ = now + (tcp_ ? kTcpDrainNs : 2 * link_->paced_drain_ns() + 1'000'000'000ull);
}

bool ExporterBase::drain_pending(uint64_t now_ns) {
  if (!drain_deadline_ns_) flush();
  link_->poll(now_ns);
  settle();
  return link_->idle() || now_ns >= drain_deadline_ns_ || ctx_.stop_now.load(std::memory_order_relaxed);
}

void ExporterBase::abandon_pending(const char *why) {
  settle();
  uint64_t n = link_->abandon() + held_.size();
  held_.clear();
  if (n) counters.drops[counters.reason(why, true)].add(n);
}

std::string ExporterBase::collector() const { return link_->describe(); }
uint64_t ExporterBase::messages() const { return link_->messages(); }
uint64_t ExporterBase::sent_bytes() const { return link_->bytes(); }
uint64_t ExporterBase::errors() const { return link_->errors(); }
uint64_t ExporterBase::connections() const { return link_->connects(); }
uint64_t ExporterBase::queued() const { return link_->queued_records() + held_.size(); }

void ExporterBase::report_metrics(ElementMetrics &out) const {
  out.counter("exporter_records_total", double(counters.records_absorbed.get()));
  out.counter("exporter_messages_total", double(link_->messages()));
  out.counter("exporter_bytes_total", double(link_->bytes()));
  out.counter("exporter_send_errors_total", double(link_->errors()));
  out.counter("exporter_connections_total", double(link_->connects()));
  out.gauge("exporter_queued_records", double(link_->queued_records() + held_.size()));
  out.gauge("exporter_queued_bytes", double(link_->queued_bytes()));
}

void ExporterBase::report(std::vector<std::string> &lines) const {
  std::string pace = tcp_ ? "" : ", paced at " + format_rate(double(rate_bps_), RateUnit::Bits) +
                                     (lane() >= 0 && ctx_.graph().lanes.size() > 1 ? " over all lanes" : "");
  std::string line = "collector " + link_->describe() + ": " + std::to_string(link_->messages()) + " messages, " +
                     std::to_string(link_->bytes()) + " bytes, " + std::to_string(link_->errors()) + " send errors, " +
                     std::to_string(link_->connects()) + " connection(s)" + pace + ", queue peak " +
                     format_bytes(int64_t(link_->queue_peak())) + ";";
  if (!tcp_)
    line += link_->batching() ? " " + std::to_string(link_->batched_datagrams()) + " of the messages sent in " +
                                    std::to_string(link_->batches()) + " batches (UDP_SEGMENT);"
                              : " messages sent one a call (the kernel refused UDP_SEGMENT);";
  if (sampling_interval_) line += " options: sampling 1 in " + std::to_string(sampling_interval_) + ";";
  for (const auto &e : encoders_) line += " " + domain_arg_ + " " + std::to_string(e->domain()) + ": " + e->report() + ";";
  line.pop_back();
  lines.push_back(line);
}

}  // namespace sluice::elements
