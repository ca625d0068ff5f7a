// What IPFIXExporter and NetFlowV9Exporter share: records in, messages from
// the protocol's encoder out on a CollectorLink, templates refreshed over UDP
// and resent on each new TCP connection; and the part of their specs that is
// the same. Nothing blocks the thread: records the link refuses, or loses
// with a dropped connection, are counted by reason.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/element_spec.hh"
#include "engine/export/collector_link.hh"
#include "engine/export/flow_encoder.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice::elements {

// An exporter's spec: `collector` (described by collector_doc) first, then
// the protocol's own arguments, then those every exporter has, its handlers
// and its input.
ElementSpec exporter_spec(ElementSpec spec, std::string collector_doc, std::vector<ArgSpec> protocol_args);

class ExporterBase : public RuntimeElement {
 public:
  ExporterBase(const Node &n, RunContext &c, bool tcp);

  bool wants_tick() const override { return true; }
  void prepare() override;  // resolves the collector, then make_encoder()
  void tick() override;
  void flush() override;
  void report(std::vector<std::string> &lines) const override;
  std::optional<std::string> read_handler(const std::string &name) const override;
  void report_metrics(MetricSink &out) const override;

  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override;

 protected:
  // The protocol's encoder, for messages of at most max_message octets (the
  // mtu less IP and transport headers).
  virtual std::unique_ptr<FlowEncoder> make_encoder(size_t max_message) = 0;

 private:
  void send_all(flow_export::Messages &msgs, const std::vector<uint32_t> &records);
  void settle();

  bool tcp_;
  std::unique_ptr<CollectorLink> link_;
  std::unique_ptr<FlowEncoder> encoder_;
  uint64_t refresh_ns_ = 0, next_refresh_ = 0;
  int unreachable_ = -1, lost_ = -1;
};

}  // namespace sluice::elements
