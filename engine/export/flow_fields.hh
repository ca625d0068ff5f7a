// The flow record fields Sluice exports: one table for IPFIX and NetFlow v9.
// A row is one field: its IANA information element (IPFIX), its RFC 3954
// field type (NetFlow v9: the same number and length except for the times),
// and how its value is taken from a flow record. Both encoders build their
// templates from this table and write records with it, so the two protocols
// always carry the same fields.
//
// A record's fields, in order: the source and destination addresses of its
// IP version, then every other field in table order, of those the record
// kind has (IPv4 or IPv6) and the exporter sends (the optional fields of
// FlowField its graph's tables keep); an IPFIX biflow adds the reverse
// element (RFC 5103) of each per-direction field.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <span>
#include <vector>

#include "engine/flow/flow_record.hh"

namespace sluice::flow_export {

inline constexpr uint64_t ms(uint64_t ns) { return ns / 1'000'000; }

// A flow record as one exported record describes it. IPFIX sends a flow
// record as one record: the key as it is, the whole flow's times, the
// forward counters (and the reverse ones in the reverse elements of a
// biflow). NetFlow v9 has no biflows: one record per direction, the reverse
// one with its endpoints swapped and its own times.
struct View {
  const FlowRecord *rec;
  const FlowCounters *counters;        // what the per-direction fields describe
  const FlowCounters *other;           // the other direction (egressInterface)
  const uint8_t *src_addr, *dst_addr;  // 16 octets, IPv4 v4-mapped
  uint16_t src_port, dst_port;
  uint64_t start_ms, end_ms;           // end >= start

  // The whole record: for a biflow, its first packet in either direction to
  // its last (there are no reverse times: see ipfix_encoder.hh).
  static View whole(const FlowRecord &r) {
    uint64_t start = ms(r.first_ns()), end = ms(r.last_ns());
    return {&r, &r.fwd, &r.rev, r.key.src_addr, r.key.dst_addr, r.key.src_port, r.key.dst_port, start,
            end > start ? end : start};
  }
  // One direction: forward as the key says, reverse with the endpoints
  // swapped; ICMP and ICMPv6 keep their ports, which are 0 and
  // type << 8 | code there, not endpoints.
  static View direction(const FlowRecord &r, bool reverse) {
    const FlowCounters &c = reverse ? r.rev : r.fwd;
    bool icmp = r.key.proto == 1 || r.key.proto == 58;
    bool swap_ports = reverse && !icmp;
    uint64_t start = ms(c.first_ns), end = ms(c.last_ns);
    return {&r,
            &c,
            reverse ? &r.fwd : &r.rev,
            reverse ? r.key.dst_addr : r.key.src_addr,
            reverse ? r.key.src_addr : r.key.dst_addr,
            swap_ports ? r.key.dst_port : r.key.src_port,
            swap_ports ? r.key.src_port : r.key.dst_port,
            start,
            end > start ? end : start};
  }
  // The same record, its per-direction fields from `c` (IPFIX reverse elements).
  View with_counters(const FlowCounters &c) const {
    View v = *this;
    v.counters = &c;
    return v;
  }
};

// How a field's value is written.
enum class Kind : uint8_t {
  Ipv4Address,  // the last 4 octets of address(view)
  Ipv6Address,  // 16 octets
  Number,       // value(view), unsigned, big-endian in the field's length
  TimeMs,       // value(view), UNIX ms: IPFIX writes it as is, NetFlow v9 as a sysUptime
  Octets,       // the field's length of octets from address(view): a MAC address
};

struct Field {
  const char *name;  // IANA information element name
  uint16_t ipfix_id, ipfix_length;
  uint16_t v9_type, v9_length;
  Kind kind;
  bool per_direction;  // from one direction's counters: has a reverse element in IPFIX biflows
  uint64_t (*value)(const View &) = nullptr;          // Number, TimeMs
  const uint8_t *(*address)(const View &) = nullptr;  // Ipv4Address, Ipv6Address, Octets
  FlowFieldSet optional = 0;  // the FlowField that brings it; 0: in every record
  uint8_t family = 0;         // 4 or 6: only in the records of that IP version; 0: both
};

// IANA element ids; the NetFlow v9 field type is the same number unless the
// row says otherwise (FIRST_SWITCHED 22 and LAST_SWITCHED 21, sysUptime ms).
// 136 is IANA's flowEndReason, which RFC 3954 does not define: see
// netflow_v9_encoder.hh.
inline constexpr Field kFields[] = {
    {"sourceIPv4Address", 8, 4, 8, 4, Kind::Ipv4Address, false, nullptr, [](const View &v) { return v.src_addr; }},
    {"destinationIPv4Address", 12, 4, 12, 4, Kind::Ipv4Address, false, nullptr, [](const View &v) { return v.dst_addr; }},
    {"sourceIPv6Address", 27, 16, 27, 16, Kind::Ipv6Address, false, nullptr, [](const View &v) { return v.src_addr; }},
    {"destinationIPv6Address", 28, 16, 28, 16, Kind::Ipv6Address, false, nullptr, [](const View &v) { return v.dst_addr; }},
    {"sourceTransportPort", 7, 2, 7, 2, Kind::Number, false, [](const View &v) -> uint64_t { return v.src_port; }},
    {"destinationTransportPort", 11, 2, 11, 2, Kind::Number, false, [](const View &v) -> uint64_t { return v.dst_port; }},
    {"protocolIdentifier", 4, 1, 4, 1, Kind::Number, false, [](const View &v) -> uint64_t { return v.rec->key.proto; }},
    {"vlanId", 58, 2, 58, 2, Kind::Number, false, [](const View &v) -> uint64_t { return v.rec->key.vlan & 0x0fff; }},
    // octets at IP level
    {"packetDeltaCount", 2, 8, 2, 8, Kind::Number, true, [](const View &v) { return v.counters->packets; }},
    {"octetDeltaCount", 1, 8, 1, 8, Kind::Number, true, [](const View &v) { return v.counters->octets; }},
    {"flowStartMilliseconds", 152, 8, 22, 4, Kind::TimeMs, false, [](const View &v) { return v.start_ms; }},
    {"flowEndMilliseconds", 153, 8, 21, 4, Kind::TimeMs, false, [](const View &v) { return v.end_ms; }},
    // reduced-size encodings (tcpControlBits is unsigned16 since RFC 7125)
    {"tcpControlBits", 6, 1, 6, 1, Kind::Number, true, [](const View &v) -> uint64_t { return v.counters->tcp_flags; }},
    {"minimumIpTotalLength", 25, 2, 25, 2, Kind::Number, true, [](const View &v) -> uint64_t { return v.counters->min_len; }},
    {"maximumIpTotalLength", 26, 2, 26, 2, Kind::Number, true, [](const View &v) -> uint64_t { return v.counters->max_len; }},
    {"flowEndReason", 136, 1, 136, 1, Kind::Number, false, [](const View &v) -> uint64_t { return uint8_t(v.rec->reason); }},
    // optional (FlowField), NetFlow v9: INPUT_SNMP, OUTPUT_SNMP, DIRECTION, IN_SRC_MAC, IN_DST_MAC,
    // SRC_TOS, MIN_TTL, MAX_TTL, ICMP_TYPE, MPLS_LABEL_1; 245 from IANA's space
    {"ingressInterface", 10, 4, 10, 4, Kind::Number, false, [](const View &v) -> uint64_t { return v.counters->if_index; },
     nullptr, flow_field_bit(FlowField::InIf)},
    {"egressInterface", 14, 4, 14, 4, Kind::Number, false, [](const View &v) -> uint64_t { return v.other->if_index; },
     nullptr, flow_field_bit(FlowField::OutIf)},
    {"flowDirection", 61, 1, 61, 1, Kind::Number, false, [](const View &v) -> uint64_t { return v.rec->flow_direction; },
     nullptr, flow_field_bit(FlowField::Direction)},
    {"sourceMacAddress", 56, 6, 56, 6, Kind::Octets, false, nullptr, [](const View &v) { return v.counters->src_mac; },
     flow_field_bit(FlowField::SrcMac)},
    {"destinationMacAddress", 80, 6, 80, 6, Kind::Octets, false, nullptr, [](const View &v) { return v.counters->dst_mac; },
     flow_field_bit(FlowField::DstMac)},
    // not per direction: nfdump reads a reverse ipClassOfService as the forward one
    {"ipClassOfService", 5, 1, 5, 1, Kind::Number, false, [](const View &v) -> uint64_t { return v.counters->tos; }, nullptr,
     flow_field_bit(FlowField::Tos)},
    {"minimumTTL", 52, 1, 52, 1, Kind::Number, true, [](const View &v) -> uint64_t { return v.counters->min_ttl; }, nullptr,
     flow_field_bit(FlowField::Ttl)},
    {"maximumTTL", 53, 1, 53, 1, Kind::Number, true, [](const View &v) -> uint64_t { return v.counters->max_ttl; }, nullptr,
     flow_field_bit(FlowField::Ttl)},
    {"dot1qCustomerVlanId", 245, 2, 245, 2, Kind::Number, false, [](const View &v) -> uint64_t { return v.rec->vlan_inner; },
     nullptr, flow_field_bit(FlowField::InnerVlan)},
    // the key's ICMP "port" (type << 8 | code); 0 in records of other protocols
    {"icmpTypeCodeIPv4", 32, 2, 32, 2, Kind::Number, false,
     [](const View &v) -> uint64_t { return v.rec->key.proto == 1 ? v.rec->key.dst_port : 0; }, nullptr,
     flow_field_bit(FlowField::Icmp), 4},
    // NetFlow v9: ICMP_TYPE for both (nfdump reads no 139 in v9)
    {"icmpTypeCodeIPv6", 139, 2, 32, 2, Kind::Number, false,
     [](const View &v) -> uint64_t { return v.rec->key.proto == 58 ? v.rec->key.dst_port : 0; }, nullptr,
     flow_field_bit(FlowField::Icmp), 6},
    {"mplsTopLabelStackSection", 70, 3, 70, 3, Kind::Number, false,
     [](const View &v) -> uint64_t {
       const uint8_t *m = v.rec->mpls_top;
       return uint64_t(m[0]) << 16 | uint64_t(m[1]) << 8 | m[2];
     },
     nullptr, flow_field_bit(FlowField::Mpls)},
};
inline constexpr uint16_t kFlowEndReasonId = 136;

// One field of a template: a row of kFields, and whether it is that row's
// reverse element (IPFIX biflows).
struct TemplateField {
  const Field *field;
  bool reverse;
};

constexpr bool is_address(const Field &f) { return f.kind == Kind::Ipv4Address || f.kind == Kind::Ipv6Address; }
constexpr bool in_record(const Field &f, bool ipv6, FlowFieldSet optional) {
  if (f.optional && !(f.optional & optional)) return false;
  if (f.family) return (f.family == 6) == ipv6;
  return !is_address(f) || (f.kind == Kind::Ipv6Address) == ipv6;
}

// The fields of a record of that kind, in order (see the top of the file),
// with the optional ones of `optional`.
inline std::vector<TemplateField> record_fields(bool ipv6, bool biflow, FlowFieldSet optional) {
  std::vector<TemplateField> t;
  for (const Field &f : kFields)
    if (is_address(f) && in_record(f, ipv6, optional)) t.push_back({&f, false});
  for (const Field &f : kFields)
    if (!is_address(f) && in_record(f, ipv6, optional)) t.push_back({&f, false});
  if (biflow)
    for (const Field &f : kFields)
      if (f.per_direction && in_record(f, ipv6, optional)) t.push_back({&f, true});
  return t;
}

// A big-endian unsigned number in `len` octets: v's low `len` bytes, most
// significant first. The lengths fields have (1, 2, 4, 8) are one store
// each: a data record is mostly these.
inline void put_be(uint8_t *p, uint64_t v, size_t len) {
  switch (len) {
    case 1: *p = uint8_t(v); return;
    case 2: { const uint16_t b = __builtin_bswap16(uint16_t(v)); std::memcpy(p, &b, 2); return; }
    case 4: { const uint32_t b = __builtin_bswap32(uint32_t(v)); std::memcpy(p, &b, 4); return; }
    case 8: { const uint64_t b = __builtin_bswap64(v); std::memcpy(p, &b, 8); return; }
  }
  for (size_t i = len; i-- > 0; v >>= 8) p[i] = uint8_t(v);
}

enum class Protocol : uint8_t { Ipfix, NetFlowV9 };
inline constexpr uint32_t kReversePen = 29305;  // RFC 5103: reverse information elements

constexpr uint16_t length_of(const Field &f, Protocol p) { return p == Protocol::Ipfix ? f.ipfix_length : f.v9_length; }

// A field specifier of a template record: element id (field type), length,
// and the private enterprise number (0: none; always 0 in NetFlow v9).
struct FieldSpec {
  uint16_t id;
  uint16_t length;
  uint32_t pen;
  bool operator==(const FieldSpec &) const = default;
};

inline std::vector<FieldSpec> field_specs(std::span<const TemplateField> fields, Protocol p) {
  std::vector<FieldSpec> s;
  for (const TemplateField &t : fields) {
    const Field &f = *t.field;
    s.push_back({p == Protocol::Ipfix ? f.ipfix_id : f.v9_type, length_of(f, p), t.reverse ? kReversePen : 0});
  }
  return s;
}

// Octets of a data record; of a template record (with its 4-octet header,
// 8 octets for a specifier with an enterprise number).
constexpr size_t data_record_length(std::span<const FieldSpec> f) {
  size_t n = 0;
  for (const FieldSpec &s : f) n += s.length;
  return n;
}
constexpr size_t template_record_length(std::span<const FieldSpec> f) {
  size_t n = 4;
  for (const FieldSpec &s : f) n += s.pen ? 8 : 4;
  return n;
}

// A template record: id, field count, the specifiers (RFC 7011 §3.4.1, RFC 3954 §5.2).
inline void write_template_record(uint8_t *p, uint16_t template_id, std::span<const FieldSpec> fields) {
  put_be(p, template_id, 2);
  put_be(p + 2, fields.size(), 2);
  p += 4;
  for (const FieldSpec &f : fields) {
    put_be(p, f.pen ? (0x8000u | f.id) : f.id, 2);
    put_be(p + 2, f.length, 2);
    p += 4;
    if (f.pen) {
      put_be(p, f.pen, 4);
      p += 4;
    }
  }
}

// A template's data record as write_data_record() runs it: one op per
// field, its row of kFields (+ kFieldRows for a reverse element), then
// kRecordEnd.
inline constexpr size_t kFieldRows = std::size(kFields);
inline constexpr uint8_t kRecordEnd = uint8_t(2 * kFieldRows);
using RecordOps = std::vector<uint8_t>;

inline RecordOps record_ops(std::span<const TemplateField> fields) {
  RecordOps ops;
  for (const TemplateField &t : fields) ops.push_back(uint8_t((t.field - kFields) + (t.reverse ? kFieldRows : 0)));
  ops.push_back(kRecordEnd);
  return ops;
}

// Field I of kFields taken from v, written at p in protocol P's length;
// returns the octet after it.
template <size_t I, Protocol P, class Time>
inline uint8_t *put_field(uint8_t *p, const View &v, Time &time) {
  constexpr const Field &f = kFields[I];
  constexpr size_t len = length_of(f, P);
  if constexpr (f.kind == Kind::Ipv4Address) std::memcpy(p, f.address(v) + 12, 4);
  else if constexpr (f.kind == Kind::Ipv6Address) std::memcpy(p, f.address(v), 16);
  else if constexpr (f.kind == Kind::Number) put_be(p, f.value(v), len);
  else if constexpr (f.kind == Kind::TimeMs) put_be(p, time(f.value(v)), len);
  else std::memcpy(p, f.address(v), len);
  return p + len;
}

// A data record: the fields of `ops` (record_ops() of a template of
// protocol P) taken from `v` (a reverse element's from the record's reverse
// counters), times through `time(ms)`: the value the protocol sends for a
// UNIX ms.
//
// Threaded code: each field's code is straight-line (its length, kind and
// value known at compile time) and ends in a jump of its own to the next
// field's. A loop over the fields with one switch on the kind, a call
// through the row's function and a switch on the length mispredicted its
// shared jumps field after field (tests/bench/bench_export.cc: ~140 ns an
// IPFIX biflow record before, see docs/performance.md); a jump per field
// learns which field follows it in the templates in use.
#define SLUICE_FIELD_ROWS(X)                                                                                   \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15) X(16) X(17) X(18) X(19) \
      X(20) X(21) X(22) X(23) X(24) X(25) X(26) X(27)
static_assert(kFieldRows == 28, "a row added to kFields is added to SLUICE_FIELD_ROWS too");
template <Protocol P, class Time>
void write_data_record(uint8_t *p, const View &v, const RecordOps &ops, Time &&time) {
#define SLUICE_FORWARD_LABEL(I) &&forward_##I,
#define SLUICE_REVERSE_LABEL(I) &&reverse_##I,
  static const void *const kJumps[] = {SLUICE_FIELD_ROWS(SLUICE_FORWARD_LABEL) SLUICE_FIELD_ROWS(SLUICE_REVERSE_LABEL) &&end};
  static_assert(std::size(kJumps) == kRecordEnd + 1);
  const View rev = v.with_counters(v.rec->rev);
  const uint8_t *op = ops.data();
  goto *kJumps[*op];
#define SLUICE_FIELD_CODE(I)                  \
  forward_##I : p = put_field<I, P>(p, v, time); \
  goto *kJumps[*++op];                        \
  reverse_##I : p = put_field<I, P>(p, rev, time); \
  goto *kJumps[*++op];
  SLUICE_FIELD_ROWS(SLUICE_FIELD_CODE)
end:
  return;
#undef SLUICE_FORWARD_LABEL
#undef SLUICE_REVERSE_LABEL
#undef SLUICE_FIELD_CODE
}
#undef SLUICE_FIELD_ROWS

}  // namespace sluice::flow_export
