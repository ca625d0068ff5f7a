// Options templates and options data records (RFC 7011 §3.4.2.2 and §4,
// RFC 3954 §6.1) for IPFIXExporter and NetFlowV9Exporter: the exporter's
// statistics, and the packet sampling of the flows it exports. A pure
// library like the encoders: it makes the records, an encoder puts them in
// messages (FlowEncoder::encode_options) and the exporter decides when.
//
// IPFIX (options template set id 3; element id (length in octets)):
//
//   65280 exporter statistics (RFC 7011 §4.1 and §4.3 in one record)
//     scope exportingProcessId 144 (4)    the exporter instance's first domain
//     exportedMessageTotalCount 41 (8)    messages sent before this one
//     exportedOctetTotalCount 40 (8)      their octets (IPFIX messages, no IP/UDP/TCP headers)
//     exportedFlowRecordTotalCount 42 (8) flow records they completed
//     notSentFlowTotalCount 166 (8)       flow records lost, all reasons together
//   65281 sampling (only when the exported flows were sampled)
//     scope observationDomainId 149 (4)   the message's domain
//     samplingInterval 34 (4)             N of "1 packet in N": 1/rate rounded
//     selectorAlgorithm 304 (1)           4: uniform probabilistic sampling
//     samplingProbability 311 (8)         rate, float64 (exact where 1/rate is no integer)
//
// NetFlow v9 (options template FlowSet id 1; field type (length)): the same
// ids, scope System 1 (4) = the source id, then
//   65280: TOTAL_BYTES_EXP 40 (8), TOTAL_PKTS_EXP 41 (8) (export packets),
//         TOTAL_FLOWS_EXP 42 (8), notSentFlowTotalCount 166 (8);
//   65281: SAMPLING_INTERVAL 34 (4), selectorAlgorithm 304 (1) = 4,
//         samplingProbability 311 (8).
// 166, 304 and 311 are IANA's IPFIX ids, which extend the v9 field type
// space as flowEndReason 136 does in the data templates (netflow_v9_encoder.hh).
//
// The algorithm: Sample picks each packet independently with probability
// `rate`: PSAMP's uniform probabilistic sampling (RFC 5475 §6.2.2.1,
// selectorAlgorithm 4, parameter samplingProbability; RFC 5477), not
// count-based systematic sampling (1, samplingPacketInterval 305 /
// samplingPacketSpace 306) nor n-out-of-N (3). samplingInterval is what
// collectors scale by: nfdump's nfcapd (1.7.1) multiplies packets and octets
// of every data record of the domain by it (the records carry no selectorId:
// one sampling per exporter). SAMPLING_ALGORITHM 35 is not sent: nfcapd 1.7.1
// ignores a sampling record that has 35 beside 34 (tried, IPFIX and v9).
//
// Each options template goes in a set of its own: nfcapd reads one template
// per options template set.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "engine/export/flow_fields.hh"
#include "engine/export/message_builder.hh"

namespace sluice::flow_export {

inline constexpr uint16_t kIpfixOptionsTemplateSetId = 3;
inline constexpr uint16_t kV9OptionsTemplateFlowSetId = 1;
// Far above the data templates' ids (256 + 8 * the optional-field sets,
// ipfix_encoder.hh), so that one id never has two layouts.
inline constexpr uint16_t kStatsTemplateId = 65280;
inline constexpr uint16_t kSamplingTemplateId = 65281;
inline constexpr uint8_t kSelectorUniformProbabilistic = 4;

// One record for the encoder: the set it goes in, its octets, whether it is
// a data record (an options data record is one: IPFIX sequence numbers count
// it), and whether it must start a set of its own.
struct OptionsRecord {
  uint16_t set_id;
  std::vector<uint8_t> bytes;
  bool data;
  bool own_set;
};

// What the statistics record says, counted by the exporter.
struct ExporterStats {
  uint32_t process_id = 0;     // exportingProcessId (IPFIX); v9 uses the source id
  uint64_t messages = 0;       // messages handed to the transport before this one
  uint64_t octets = 0;         // their octets
  uint64_t flow_records = 0;   // flow records they completed
  uint64_t not_sent_flows = 0; // flow records lost (queue full, collector unreachable, ...)
};

// The sampling interval for a rate: 1/rate rounded to the nearest integer
// (collectors take an integer N); 0 for rate >= 1 (not sampled: no record).
uint32_t sampling_interval(double rate);

// The options template records; the sampling one only when `sampling`.
std::vector<OptionsRecord> options_templates(Protocol p, bool sampling);
// The options data records for `domain` (IPFIX observation domain, v9
// source id): statistics, and sampling when sampling_interval(rate) > 0.
std::vector<OptionsRecord> options_data(Protocol p, uint32_t domain, const ExporterStats &stats, double rate);

// Adds the records to a message builder, in order (the encoders' encode_options).
void add_options(MessageBuilder &b, std::span<const OptionsRecord> recs);

}  // namespace sluice::flow_export
