// Flow records as NetFlow version 9 export packets (RFC 3954). A pure library:
// no sockets, no clocks. NetFlowV9Exporter holds one encoder per source id,
// feeds it batches of records and sends the packets it returns; it decides
// when templates are refreshed (`send_templates`).
//
// Templates (FlowSet id 0): the fields of flow_fields.hh (kFields), as IPFIX
// sends them but for the times; field type (length in octets):
//
//   IPV4_SRC_ADDR 8 (4) | IPV6_SRC_ADDR 27 (16)
//   IPV4_DST_ADDR 12 (4) | IPV6_DST_ADDR 28 (16)
//   L4_SRC_PORT 7 (2), L4_DST_PORT 11 (2), PROTOCOL 4 (1), SRC_VLAN 58 (2)
//   IN_PKTS 2 (8), IN_BYTES 1 (8)                      octets at IP level
//   FIRST_SWITCHED 22 (4), LAST_SWITCHED 21 (4)        ms of sysUptime, see below
//   TCP_FLAGS 6 (1), MIN_PKT_LNGTH 25 (2), MAX_PKT_LNGTH 26 (2)
//   flowEndReason 136 (1)                              unless end_reason is false
//   the optional fields the graph's FlowTables keep (`fields`):
//   INPUT_SNMP 10 (4), OUTPUT_SNMP 14 (4), DIRECTION 61 (1),
//   IN_SRC_MAC 56 (6), IN_DST_MAC 80 (6), SRC_TOS 5 (1), MIN_TTL 52 (1),
//   MAX_TTL 53 (1), dot1qCustomerVlanId 245 (2), ICMP_TYPE 32 (2) (ICMP
//   and ICMPv6: RFC 3954 does not tell them apart), MPLS_LABEL_1 70 (3)
//
// Template 256 is IPv4, 257 IPv6 with every optional field (76 and 100
// octets per record); + 8 * (the optional fields left out, as a
// FlowFieldSet) otherwise, as IPFIX numbers them. Without any optional
// field: 45 and 69 octets.
//
// RFC 3954 defines no end-reason field type. 136 is IANA's flowEndReason:
// IANA's IPFIX element ids extend the NetFlow v9 field type space (0-127 are
// v9's own) and v9 exporters (Cisco Flexible NetFlow, ASA NSEL) use ids from
// it; a collector that does not know a type skips it by the template's
// length. tshark decodes it in v9. `end_reason false` leaves it out for
// collectors that want RFC 3954 types only (the record is then 44 / 68).
//
// Biflows: v9 has none, so a biflow record becomes two records: the forward
// one (key as is, FlowRecord::fwd) and, when the reverse direction saw any
// packet, the reverse one (addresses and ports swapped, FlowRecord::rev),
// both with the record's end reason. ICMP and ICMPv6 keep their ports
// unswapped: there they are 0 and type << 8 | code, not endpoints.
//
// Time. A v9 header carries UNIX seconds and sysUptime (ms since the
// exporter's boot, 32 bits); FIRST_SWITCHED and LAST_SWITCHED are sysUptime
// values, so a collector places a packet time t at
//   unix_secs * 1000 - sysUptime + SWITCHED = boot + SWITCHED.
// The encoder has no boot: it picks a boot time B (UNIX ms) at the first
// packet, kBootLeadMs before the oldest time it has to express (the export
// time or a record's first packet), so every value is a small positive number.
// When a later batch has a time before B, or would carry a value past
// kMaxUptimeMs (2^31 - 1, about 24.8 days: collectors that read the fields as
// signed stay right), B moves to kBootLeadMs before that batch's oldest time:
// to a collector the exporter rebooted, so the templates go out again first.
// Values stay valid over traces of any length. A time that still cannot be
// expressed (a batch spanning more than 24.8 days) is clamped into range and
// counted in clamped(). Times are truncated to ms, FIRST <= LAST.
//
// The export time and the records' packet times must be on the same clock
// (both trace time, or both wall time); the encoder does not read a clock.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/export/flow_encoder.hh"
#include "engine/export/flow_fields.hh"
#include "engine/export/message_builder.hh"
#include "engine/flow/flow_record.hh"

namespace sluice::netflow_v9 {

inline constexpr uint16_t kVersion = 9;
inline constexpr uint16_t kTemplateFlowSetId = 0;
inline constexpr size_t kHeaderLen = 20;
inline constexpr size_t kFlowSetHeaderLen = flow_export::kSetHeaderLen;
inline constexpr uint16_t kTemplateV4 = 256;
inline constexpr uint16_t kTemplateV6 = 257;
inline constexpr uint16_t kTemplateIds[2] = {kTemplateV4, kTemplateV6};
inline constexpr uint64_t kBootLeadMs = 3600 * 1000;        // B is this long before the oldest time
inline constexpr uint64_t kMaxUptimeMs = (1ull << 31) - 1;  // largest sysUptime / SWITCHED value sent

// A field specifier: field type, length (pen is always 0).
using FieldSpec = flow_export::FieldSpec;

struct NetFlowV9EncoderConfig {
  uint32_t source_id = 1;     // in every packet header
  size_t max_message = 1472;  // octets of an export packet: MTU - IP - UDP headers, computed by the caller
  bool end_reason = true;     // flowEndReason (136) in the templates
  FlowFieldSet fields = kAllFlowFields;  // the optional fields the records carry
};

class NetFlowV9Encoder final : public FlowEncoder, private flow_export::MessageBuilder::Header {
 public:
  // Throws std::invalid_argument when max_message is below min_message_size()
  // or above 65535.
  explicit NetFlowV9Encoder(const NetFlowV9EncoderConfig &cfg);

  // FlowEncoder's, for NetFlow v9: no packet exceeds max_message, data
  // FlowSets are padded to 4 octets, records are grouped by template;
  // templates() makes one packet of both templates; sequence() counts the
  // export packets sent, mod 2^32 (RFC 3954 §5.1).
  void encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
              flow_export::Messages &out, std::vector<uint32_t> *flow_records = nullptr) override;
  void templates(uint32_t export_time_s, flow_export::Messages &out) override;
  void encode_options(std::span<const flow_export::OptionsRecord> recs, uint32_t export_time_s,
                      flow_export::Messages &out) override;
  uint32_t sequence() const override { return sequence_; }
  void reset_templates() override { announced_ = 0; }

  // Its templates' ids (IPv4, IPv6).
  uint16_t template_id(bool ipv6) const { return ids_[ipv6 ? 1 : 0]; }
  // The fields of template `template_id` (template_id()), octets per record.
  std::span<const FieldSpec> template_fields(uint16_t template_id) const;
  size_t record_length(uint16_t template_id) const;
  // The smallest max_message accepted: a header, a FlowSet header and the
  // largest template record or data record with padding.
  size_t min_message_size() const;

  // The boot time in use (UNIX ms); 0 before the first packet.
  uint64_t boot_ms() const { return boot_ms_; }
  // Times that had to be clamped to fit sysUptime (see above).
  uint64_t clamped() const { return clamped_; }
  uint32_t domain() const override { return cfg_.source_id; }
  size_t max_message() const { return cfg_.max_message; }
  std::string report() const override;

 private:
  void begin(uint8_t *header) override;
  void end(uint8_t *header, size_t length, uint32_t data_records, uint32_t records) override;
  flow_export::MessageBuilder builder(uint32_t export_time_s, flow_export::Messages &out,
                                      std::vector<uint32_t> *flow_records);
  void add_templates(flow_export::MessageBuilder &b);
  void set_boot(uint64_t oldest_ms, uint64_t newest_ms);
  uint32_t uptime(uint64_t t_ms);

  NetFlowV9EncoderConfig cfg_;
  flow_export::RecordOps ops_[2];  // IPv4, IPv6: the data records
  std::vector<FieldSpec> specs_[2];
  uint16_t ids_[2];
  uint32_t sequence_ = 0;
  unsigned announced_ = 0;  // bit i: kTemplateIds[i] has been sent
  bool booted_ = false;
  uint64_t boot_ms_ = 0;
  uint64_t clamped_ = 0;
  uint64_t data_records_ = 0;  // v9 data records sent (a biflow makes two)
  uint32_t export_time_s_ = 0, sys_uptime_ = 0;  // of the packets being built
  std::vector<uint32_t> order_;
};

}  // namespace sluice::netflow_v9
