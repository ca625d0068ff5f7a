// What an exporter element needs of an encoder: IpfixEncoder and
// NetFlowV9Encoder, pure libraries that turn flow records into messages of
// one observation domain (IPFIX) or source id (NetFlow v9).
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/export/message_builder.hh"
#include "engine/export/options_records.hh"
#include "engine/flow/flow_record.hh"

namespace sluice {

class FlowEncoder {
 public:
  virtual ~FlowEncoder() = default;

  // Appends to `out` the messages carrying these records. A template goes
  // out (in the same message or an earlier one) before the first data record
  // that uses it; with `send_templates` all templates lead the first message
  // (the UDP refresh), even when n == 0. With `flow_records`, appends for
  // each message the number of these records that it completes (a record
  // that becomes several data records counts in the message of its last).
  virtual void encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
                      flow_export::Messages &out, std::vector<uint32_t> *flow_records = nullptr) = 0;
  // Appends messages holding the templates and nothing else.
  virtual void templates(uint32_t export_time_s, flow_export::Messages &out) = 0;
  // Appends messages holding these options templates and options data
  // records (options_records.hh), in order, under this encoder's header
  // (domain, sequence, time). IPFIX sequence numbers count the data records.
  virtual void encode_options(std::span<const flow_export::OptionsRecord> recs, uint32_t export_time_s,
                              flow_export::Messages &out) = 0;
  // Templates go out again before any data (a new TCP connection, a
  // restarted collector). The sequence number carries on.
  virtual void reset_templates() = 0;
  // The sequence number the next message will carry.
  virtual uint32_t sequence() const = 0;
  // The observation domain (IPFIX) or source id (NetFlow v9) in every header.
  virtual uint32_t domain() const = 0;
  // For the run summary: "sequence 1234", and what else the protocol counts.
  virtual std::string report() const = 0;
};

}  // namespace sluice
