// What IPFIXExporter and NetFlowV9Exporter share: records in, messages from
// the protocol's encoders out on a CollectorLink, templates refreshed over
// UDP and resent on each new TCP connection; and the part of their specs
// that is the same. Nothing blocks the thread: messages wait in the link's
// bounded queue (UDP: sent at the paced `rate`); records the link refuses,
// loses with a dropped connection, or still holds when the element is given
// up are counted by reason.
//
// Options records (engine/export/options_records.hh): the exporter's
// statistics, and the sampling interval when a Sample is upstream of the
// FlowTables whose records reach it. Their templates and records go at each
// new connection (UDP: the first message), with every template refresh over
// UDP, every `template_refresh` over TCP (records only), and at the end of
// input or removal (flush()), in each domain's messages. The statistics are
// of the whole instance: messages, octets and flow records handed to the
// transport before the message carrying them, and flow records lost.
//
// Observation domains (IPFIX) and source ids (NetFlow v9): one encoder, with
// its own sequence numbers and templates, per domain. With domains per lane,
// lane l's records go in messages of domain base + l only; otherwise the
// instance has the one domain `base`.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/core/element_spec.hh"
#include "engine/export/collector_link.hh"
#include "engine/export/flow_encoder.hh"
#include "engine/export/options_records.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice::elements {

// An exporter's spec: `collector` (described by collector_doc) first, then
// the protocol's own arguments, its domain arguments (`domain_arg`, the base
// id, and `domain_arg`_per: lane, exporter or auto; `domain_what` names them
// in the docs), then those every exporter has, its handlers and its input.
ElementSpec exporter_spec(ElementSpec spec, std::string collector_doc, std::vector<ArgSpec> protocol_args,
                          const std::string &domain_arg, const std::string &domain_what);

class ExporterBase : public RuntimeElement {
 public:
  // domain_arg: the name of the protocol's domain argument ("domain", "source_id").
  ExporterBase(const Node &n, RunContext &c, bool tcp, std::string domain_arg);

  bool wants_tick() const override { return true; }
  void prepare() override;  // resolves the collector, makes the encoders
  void tick() override;
  // End of input or removal: sends what the pace and the socket allow now,
  // never waits. drain_pending() sends the rest, a little at each call, and
  // is true once the queue is empty, or once it gives up: 2 s after flush()
  // over TCP, twice the time the queue needs at the pace plus 1 s over UDP,
  // or at a second Ctrl-C. abandon_pending() counts what is left as lost with its
  // reason. Both may run on a thread other than the segment's once the
  // segment no longer runs the element.
  void flush() override;
  bool drain_pending(uint64_t now_ns) override;
  void abandon_pending(const char *why) override;
  void report(std::vector<std::string> &lines) const override;
  // Handlers (exporter_spec).
  std::string collector() const;
  uint64_t messages() const;
  uint64_t sent_bytes() const;
  uint64_t errors() const;
  uint64_t connections() const;
  uint64_t queued() const;
  uint64_t sampling_interval() const { return sampling_interval_; }
  void report_metrics(ElementMetrics &out) const override;

  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override;

 protected:
  // The protocol's encoder for one domain, for messages of at most
  // max_message octets (the mtu less IP and transport headers).
  virtual std::unique_ptr<FlowEncoder> make_encoder(uint32_t domain, size_t max_message) = 0;
  // The protocol of the options records.
  virtual flow_export::Protocol options_protocol() const = 0;

 private:
  void make_encoders(size_t max_message);
  void find_sampling();
  // Options records (with their templates when `templates`) in every domain.
  void send_options(bool templates);
  void encode(FlowEncoder &encoder, const FlowRecord *recs, size_t n, uint32_t now_s);
  void encode_held();  // the records held, into messages
  void send_all(flow_export::Messages &msgs, const std::vector<uint32_t> &records);
  void settle();
  void wait_for_room(size_t bytes);

  bool tcp_;
  std::string domain_arg_;
  std::unique_ptr<CollectorLink> link_;
  // One per domain: by lane when domains are per lane and the exporter is
  // shared, else the instance's one.
  std::vector<std::unique_ptr<FlowEncoder>> encoders_;
  std::vector<std::vector<FlowRecord>> by_lane_;  // a mixed batch split per lane
  // Records wait here until there are enough to fill messages, or for at
  // most kHoldNs: each batch encoded alone left its last message part
  // empty (a trace probe sent 50,676 datagrams of 736 octets on average).
  std::vector<FlowRecord> held_;
  uint64_t held_since_ns_ = 0;
  uint64_t rate_bps_ = 0;
  uint64_t refresh_ns_ = 0, next_refresh_ = 0;
  uint64_t drain_deadline_ns_ = 0;  // set by flush()
  bool offline_ = false;            // fed only by offline lanes (trace files, unpaced TrafficGen)
  int unreachable_ = -1, lost_ = -1, queue_full_ = -1;
  double sampling_rate_ = 1;       // share of the packets the exported flows were metered from
  uint32_t sampling_interval_ = 0; // what the sampling record says; 0: not sampled, no record
  // Taken by the link for sending: what the statistics record reports.
  uint64_t accepted_messages_ = 0, accepted_octets_ = 0, accepted_records_ = 0;
};

}  // namespace sluice::elements
