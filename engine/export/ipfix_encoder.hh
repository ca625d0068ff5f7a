// Flow records as IPFIX messages (RFC 7011), biflows as RFC 5103 records.
// A pure library: no sockets, no clocks. IPFIXExporter holds one encoder per
// observation domain and transport session, feeds it batches of records and
// sends the messages it returns.
//
// Templates (set id 2), one per record kind; numbers are IANA element ids,
// lengths in octets, "R" = reverse element (enterprise bit set, PEN 29305,
// RFC 5103):
//
//   256 IPv4 uniflow (53 octets per record)    257 IPv6 uniflow (77)
//   258 IPv4 biflow  (74)                      259 IPv6 biflow  (98)
//
//   sourceIPv4Address 8 (4) | sourceIPv6Address 27 (16)
//   destinationIPv4Address 12 (4) | destinationIPv6Address 28 (16)
//   sourceTransportPort 7 (2), destinationTransportPort 11 (2)
//   protocolIdentifier 4 (1), vlanId 58 (2)
//   packetDeltaCount 2 (8), octetDeltaCount 1 (8)      octets at IP level
//   flowStartMilliseconds 152 (8), flowEndMilliseconds 153 (8)
//   tcpControlBits 6 (1)                               reduced-size (unsigned16 since RFC 7125)
//   minimumIpTotalLength 25 (2), maximumIpTotalLength 26 (2)   reduced-size
//   flowEndReason 136 (1)
//   biflow templates add:
//   R packetDeltaCount 2 (8), R octetDeltaCount 1 (8),
//   R tcpControlBits 6 (1), R minimumIpTotalLength 25 (2), R maximumIpTotalLength 26 (2)
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
// Sets are not padded (RFC 7011 §3.3.1 makes padding optional). No message
// exceeds `max_message`; a batch is grouped by template, records of one
// template going into as few data sets as the message size allows.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "engine/flow/flow_record.hh"

namespace sluice::ipfix {

inline constexpr uint16_t kVersion = 10;
inline constexpr uint16_t kTemplateSetId = 2;
inline constexpr size_t kMessageHeaderLen = 16;
inline constexpr size_t kSetHeaderLen = 4;
inline constexpr uint32_t kReversePen = 29305;  // RFC 5103: reverse information elements

inline constexpr uint16_t kTemplateV4 = 256;
inline constexpr uint16_t kTemplateV6 = 257;
inline constexpr uint16_t kTemplateV4Bi = 258;
inline constexpr uint16_t kTemplateV6Bi = 259;
inline constexpr uint16_t kTemplateIds[4] = {kTemplateV4, kTemplateV6, kTemplateV4Bi, kTemplateV6Bi};

// One field specifier: element id (without the enterprise bit), length, and
// the private enterprise number (0 for IANA elements).
struct FieldSpec {
  uint16_t id;
  uint16_t length;
  uint32_t pen;
};

// The fields of template `template_id` (one of kTemplateIds), in record order.
std::span<const FieldSpec> template_fields(uint16_t template_id);
// Octets per data record of that template; octets of its template record.
size_t record_length(uint16_t template_id);
size_t template_record_length(uint16_t template_id);
// The template a record is sent with.
uint16_t template_for(const FlowRecord &rec);

// The smallest max_message the encoder accepts: one message holding the
// largest template record, and one holding the largest data record.
size_t min_message_size();

struct IpfixEncoderConfig {
  uint32_t domain = 1;        // observation domain id, in every message header
  size_t max_message = 1472;  // octets of an IPFIX message: MTU - IP - UDP/TCP headers, computed by the caller
};

class IpfixEncoder {
 public:
  // Throws std::invalid_argument when max_message is below min_message_size()
  // or above 65535 (the message length field).
  explicit IpfixEncoder(const IpfixEncoderConfig &cfg);

  // Appends to `out` the messages carrying these records, each at most
  // max_message octets. A template goes out (in the same message or an
  // earlier one) before the first data record that uses it; with
  // `send_templates` all four templates lead the first message (the UDP
  // refresh), even when n == 0. Data records are grouped by template, not
  // kept in input order.
  void encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
              std::vector<std::vector<uint8_t>> &out);

  // Appends messages holding the four templates and nothing else (TCP
  // connect, UDP refresh with nothing to send). One message unless
  // max_message is too small for all four.
  void templates(uint32_t export_time_s, std::vector<std::vector<uint8_t>> &out);

  // RFC 7011 §3.1: data records sent so far in this domain, mod 2^32: the
  // sequence number the next message will carry.
  uint32_t sequence() const { return sequence_; }

  // Templates go out again before any data (a new TCP connection, a
  // restarted collector). The sequence number carries on.
  void reset_templates() { announced_ = 0; }

  uint32_t domain() const { return cfg_.domain; }
  size_t max_message() const { return cfg_.max_message; }

 private:
  class Builder;
  void add_templates(Builder &b);
  IpfixEncoderConfig cfg_;
  uint32_t sequence_ = 0;
  unsigned announced_ = 0;  // bit i: kTemplateIds[i] has been sent
  std::vector<uint32_t> order_;
};

}  // namespace sluice::ipfix
