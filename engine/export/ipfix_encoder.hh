// Flow records as IPFIX messages (RFC 7011), biflows as RFC 5103 records.
// A pure library: no sockets, no clocks. IPFIXExporter holds one encoder per
// observation domain and transport session, feeds it batches of records and
// sends the messages it returns.
//
// Templates (set id 2), one per record kind; numbers are IANA element ids,
// lengths in octets, "R" = reverse element (enterprise bit set, PEN 29305,
// RFC 5103). The fields of flow_fields.hh (kFields), in this order:
//
//   sourceIPv4Address 8 (4) or sourceIPv6Address 27 (16),
//   destinationIPv4Address 12 (4) or destinationIPv6Address 28 (16),
//   sourceTransportPort 7 (2), destinationTransportPort 11 (2),
//   protocolIdentifier 4 (1), vlanId 58 (2), packetDeltaCount 2 (8),
//   octetDeltaCount 1 (8) (octets at IP level), flowStartMilliseconds 152 (8),
//   flowEndMilliseconds 153 (8), tcpControlBits 6 (1),
//   minimumIpTotalLength 25 (2), maximumIpTotalLength 26 (2) (reduced-size),
//   flowEndReason 136 (1);
//   then the optional fields the graph's FlowTables keep (`fields`):
//   ingressInterface 10 (4), egressInterface 14 (4), flowDirection 61 (1),
//   sourceMacAddress 56 (6), destinationMacAddress 80 (6),
//   ipClassOfService 5 (1), minimumTTL 52 (1), maximumTTL 53 (1),
//   dot1qCustomerVlanId 245 (2), icmpTypeCodeIPv4 32 (2) (IPv4 records) or
//   icmpTypeCodeIPv6 139 (2) (IPv6), mplsTopLabelStackSection 70 (3);
//   biflow templates add R packetDeltaCount, R octetDeltaCount,
//   R tcpControlBits, R minimumIpTotalLength, R maximumIpTotalLength, and of
//   the optional ones R minimumTTL, R maximumTTL (not R ipClassOfService:
//   nfdump reads it as the forward direction's).
//
// Template ids: 256 IPv4 uniflow, 257 IPv6 uniflow, 258 IPv4 biflow, 259
// IPv6 biflow with every optional field (FlowTable's default) and no
// extension field; records of 84, 108, 107, 131 octets. +4 with extension
// fields; + 8 * (the optional fields left out, as a FlowFieldSet) otherwise,
// so that one id always means one layout (template_id()). Without any
// optional field: 53, 77, 74, 98 octets.
//
// The non-reverse counters describe the forward direction (`FlowRecord::fwd`,
// the direction of the first packet), the reverse ones `FlowRecord::rev`
// (RFC 5103); for a uniflow `fwd` is the whole flow. flowStart/EndMilliseconds
// are the whole flow's (a biflow's first packet in either direction to its
// last), packet times truncated to milliseconds, start <= end. There are no
// reverse times: nfdump's nfcapd reads a reverse flowStartMilliseconds as the
// record's own and would report the reverse direction's times for the biflow
// (the per-direction times are in FlowLog). A biflow whose reverse direction
// saw nothing still goes with a biflow template: reverse counters, flags and
// lengths all zero.
//
// With `uniflows` (IPFIXExporter's `biflow uniflows`) a biflow record goes
// as two uniflow records instead, as NetFlow v9 sends it: the forward one as
// the key says, the reverse one with its endpoints swapped (ICMP keeps its
// type and code), each with its own direction's counters and times; a
// direction that saw no packet sends none. Only the uniflow templates are
// announced then. For collectors that do not read RFC 5103 reverse elements
// (goflow2, akvorado without a mapping).
//
// Sets are not padded (RFC 7011 §3.3.1 makes padding optional). No message
// exceeds `max_message`; a batch is grouped by template, records of one
// template going into as few data sets as the message size allows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "engine/export/flow_encoder.hh"
#include "engine/export/flow_fields.hh"
#include "engine/export/message_builder.hh"
#include "engine/flow/flow_extension.hh"
#include "engine/flow/flow_record.hh"

namespace sluice::ipfix {

inline constexpr uint16_t kVersion = 10;
inline constexpr uint16_t kTemplateSetId = 2;
inline constexpr size_t kMessageHeaderLen = 16;
inline constexpr size_t kSetHeaderLen = flow_export::kSetHeaderLen;
inline constexpr uint32_t kReversePen = flow_export::kReversePen;

inline constexpr uint16_t kTemplateV4 = 256;
inline constexpr uint16_t kTemplateV6 = 257;
inline constexpr uint16_t kTemplateV4Bi = 258;
inline constexpr uint16_t kTemplateV6Bi = 259;
inline constexpr uint16_t kTemplateIds[4] = {kTemplateV4, kTemplateV6, kTemplateV4Bi, kTemplateV6Bi};

// One field specifier: element id (without the enterprise bit), length, and
// the private enterprise number (0 for IANA elements).
using FieldSpec = flow_export::FieldSpec;

// The id of the template of record kind `kind` (0..3: the order of
// kTemplateIds) with the optional fields `fields`, and extension fields or not.
uint16_t template_id(int kind, FlowFieldSet fields, bool ext);

// Of a template without extension fields (an id template_id() gives with
// ext false; else std::invalid_argument): its fields in record order, octets
// per data record, octets of its template record.
std::vector<FieldSpec> template_fields(uint16_t template_id);
size_t record_length(uint16_t template_id);
size_t template_record_length(uint16_t template_id);

// The smallest max_message an encoder with every optional field and no
// extension field accepts: one message holding the largest template record,
// and one holding the largest data record.
size_t min_message_size();

// An extension field (flow_extension.hh) the records carry: appended to
// every template after the fields above. A Text field is a variable-length
// string (RFC 7011 §7: a one-octet length, then the octets; length 0 when
// the flow got none), a Number unsigned in its size.
struct IpfixExtField {
  FlowExtSlot slot;
  uint16_t id;   // information element id
  uint32_t pen;  // private enterprise number, 0 for IANA
};

// With extension fields the templates are those ids + 4 (the extension
// fields after the others), so that a collector never sees one template id
// with two layouts from one exporter.
inline constexpr uint16_t kExtTemplateOffset = 4;

struct IpfixEncoderConfig {
  uint32_t domain = 1;        // observation domain id, in every message header
  size_t max_message = 1472;  // octets of an IPFIX message: MTU - IP - UDP/TCP headers, computed by the caller
  std::vector<IpfixExtField> ext = {};  // in record order
  bool uniflows = false;           // biflows as two uniflow records (see the top of the file)
  FlowFieldSet fields = kAllFlowFields;  // the optional fields the records carry
};

class IpfixEncoder final : public FlowEncoder, private flow_export::MessageBuilder::Header {
 public:
  // Throws std::invalid_argument when max_message is below min_message_size()
  // or above 65535 (the message length field).
  explicit IpfixEncoder(const IpfixEncoderConfig &cfg);

  // FlowEncoder's, for IPFIX: no message exceeds max_message; data records
  // are grouped by template, not kept in input order; templates() makes one
  // message of the four templates unless max_message is too small for all
  // four; sequence() counts the data records sent in this domain, mod 2^32
  // (RFC 7011 §3.1).
  void encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
              flow_export::Messages &out, std::vector<uint32_t> *flow_records = nullptr) override;
  void templates(uint32_t export_time_s, flow_export::Messages &out) override;
  void encode_options(std::span<const flow_export::OptionsRecord> recs, uint32_t export_time_s,
                      flow_export::Messages &out) override;
  uint32_t sequence() const override { return sequence_; }
  void reset_templates() override { announced_ = 0; }
  uint32_t domain() const override { return cfg_.domain; }
  size_t max_message() const { return cfg_.max_message; }
  std::string report() const override;

 private:
  void begin(uint8_t *header) override;
  void end(uint8_t *header, size_t length, uint32_t data_records, uint32_t records) override;
  flow_export::MessageBuilder builder(flow_export::Messages &out, std::vector<uint32_t> *flow_records);
  void add_template(flow_export::MessageBuilder &b, int t);
  uint16_t template_id(int t) const { return ids_[t]; }
  int kinds() const { return cfg_.uniflows ? 2 : 4; }  // templates in use: kTemplateIds[0, kinds())
  int template_of(const FlowRecord &r) const;          // the index in kTemplateIds of its records
  void add_record(flow_export::MessageBuilder &b, int t, const flow_export::View &v, const FlowRecord &r);
  size_t ext_length(const FlowRecord &r) const;  // octets of its extension fields
  void write_ext(uint8_t *p, const FlowRecord &r) const;

  IpfixEncoderConfig cfg_;
  flow_export::RecordOps ops_[4];  // each template's data record but the extension fields
  std::vector<FieldSpec> specs_[4];                    // and its specifiers, the extension ones included
  size_t template_len_[4];
  size_t record_len_[4];  // without extension fields
  uint16_t ids_[4];
  uint32_t sequence_ = 0;
  uint32_t export_time_s_ = 0;  // of the messages being built
  unsigned announced_ = 0;      // bit i: kTemplateIds[i] has been sent
  std::vector<uint32_t> order_;
};

}  // namespace sluice::ipfix
