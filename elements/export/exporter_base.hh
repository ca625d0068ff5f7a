// What IPFIXExporter and NetFlowV9Exporter share: records in, messages from
// an encoder out on a CollectorLink, templates refreshed over UDP and resent
// on each new TCP connection. Nothing blocks the thread: records the link
// refuses, or loses with a dropped connection, are counted by reason.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/export/collector_link.hh"
#include "engine/runtime/element_runtime.hh"

namespace sluice::elements {

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

 protected:
  // The protocol's part. max_message: octets a message may have (the mtu less
  // IP and transport headers).
  virtual void make_encoder(size_t max_message) = 0;
  virtual void encode(const FlowRecord *recs, size_t n, uint32_t now_s, std::vector<std::vector<uint8_t>> &out) = 0;
  virtual void templates(uint32_t now_s, std::vector<std::vector<uint8_t>> &out) = 0;
  virtual void reset_templates() = 0;
  // Flow records message i of the last encode() carries (0: templates only).
  virtual uint64_t records_in(const std::vector<std::vector<uint8_t>> &msgs, size_t i) const = 0;
  virtual std::string protocol_report() const = 0;

 public:
  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override;

 protected:
  bool tcp_;
  std::unique_ptr<CollectorLink> link_;

 private:
  void settle();

 private:
  uint64_t refresh_ns_ = 0, next_refresh_ = 0;
  int unreachable_ = -1, lost_ = -1;
};

}  // namespace sluice::elements
