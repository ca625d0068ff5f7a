// Flow records: what a FlowTable emits on its `flows` output and what
// GCSlicer, the exporters and FlowLog consume. Plain data, trivially
// copyable, so that records move between threads through rings by value.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/flow/flow_extension.hh"

namespace sluice {

// flowEndReason, with the IPFIX values (RFC 5102 / IANA element 136).
enum class FlowEndReason : uint8_t {
  IdleTimeout = 1,
  ActiveTimeout = 2,
  EndOfFlow = 3,        // TCP FIN or RST
  ForcedEnd = 4,        // end of input, shutdown, a table removed on reload
  LackOfResources = 5,  // evicted from a full table
};
const char *flow_end_reason_name(FlowEndReason r);  // "idle timeout", "active timeout", ...

// The optional fields of a flow record, beyond the key, counters, times,
// TCP flags, IP lengths and end reason that every record has. A FlowTable
// keeps those its `fields` argument names (by these names), and its records
// carry them; exporters and FlowLog write the ones the graph's tables keep.
enum class FlowField : uint8_t {
  InIf,       // in_if: ingressInterface, per direction
  OutIf,      // out_if: egressInterface: the interface the other direction came in on
  Direction,  // direction: flowDirection
  SrcMac,     // src_mac: sourceMacAddress, per direction
  DstMac,     // dst_mac: destinationMacAddress, per direction
  Tos,        // tos: ipClassOfService, per direction
  Ttl,        // ttl: minimumTTL and maximumTTL, per direction
  InnerVlan,  // inner_vlan: dot1qCustomerVlanId
  Icmp,       // icmp: icmpTypeCodeIPv4 / icmpTypeCodeIPv6 (from the key's ports)
  Mpls,       // mpls: mplsTopLabelStackSection
};
inline constexpr int kFlowFieldCount = int(FlowField::Mpls) + 1;
using FlowFieldSet = uint32_t;  // bit (1 << FlowField)
constexpr FlowFieldSet flow_field_bit(FlowField f) { return FlowFieldSet(1) << int(f); }
inline constexpr FlowFieldSet kAllFlowFields = (FlowFieldSet(1) << kFlowFieldCount) - 1;
const char *flow_field_name(FlowField f);  // "in_if", "ttl", ...: FlowTable's `fields` symbols

// An address of a FlowKey as text ("10.0.0.1", "2001:db8::1"): IPv4 from
// its v4-mapped form.
std::string flow_address_text(const uint8_t addr[16], bool ipv6);

// The fields that identify a flow. Addresses as in PacketMeta (network byte
// order, IPv4 v4-mapped); ports in host byte order (ICMP: 0 and
// type << 8 | code). Fields a FlowTable's `key` leaves out are zero.
struct FlowKey {
  uint8_t src_addr[16];
  uint8_t dst_addr[16];
  uint16_t src_port;
  uint16_t dst_port;
  uint8_t proto;
  uint8_t is_ipv6;  // 1 for IPv6; the address family of the record
  uint16_t vlan;    // outer VLAN id, 0 when untagged (or not in the key)
};
static_assert(sizeof(FlowKey) == 40);

// What one direction of a flow carried. The fields after tcp_flags are the
// optional ones (FlowTable `fields`, FlowRecordFields below): zero unless
// the table keeps them.
struct FlowCounters {
  uint64_t packets;
  uint64_t octets;    // IP level: the sum of IP total lengths
  uint64_t first_ns;  // packet times (UNIX ns) of the first and last packet; 0 when packets == 0
  uint64_t last_ns;
  uint16_t min_len;   // smallest and largest IP total length
  uint16_t max_len;
  uint8_t tcp_flags;  // OR of the TCP flags seen
  uint8_t tos;        // IPv4 TOS / IPv6 traffic class of the first packet
  uint8_t min_ttl;    // smallest and largest IPv4 TTL / IPv6 hop limit
  uint8_t max_ttl;
  uint32_t if_index;  // interface the first packet came in on (its source's `ifindex`)
  uint8_t src_mac[6]; // MAC addresses of the first packet (Ethernet frames)
  uint8_t dst_mac[6];
};
static_assert(sizeof(FlowCounters) == 56);

// One record. `fwd` is the direction of the flow's first packet (key src ->
// dst). A uniflow record (FlowTable direction uni) has rev all zero and
// biflow == 0; a biflow record (RFC 5103) carries both directions.
struct FlowRecord {
  FlowKey key;
  FlowCounters fwd;
  FlowCounters rev;
  FlowEndReason reason;
  uint8_t biflow;
  uint16_t lane;  // the lane that metered it
  // Optional fields of the whole record (FlowTable `fields`), zero unless
  // kept: of the record's first packet.
  uint8_t flow_direction;  // its source's `direction`: 0 ingress, 1 egress
  uint8_t mpls_top[3];     // PacketMeta::mpls_top
  uint16_t vlan_inner;     // PacketMeta::vlan_inner
  uint8_t pad[6];
  // Extension fields (flow_extension.hh): the slots of the fields elements
  // set, zero where a flow got no value or a table keeps no fields.
  uint8_t ext[kFlowExtBytes];
  uint64_t packets() const { return fwd.packets + rev.packets; }
  uint64_t octets() const { return fwd.octets + rev.octets; }
  // After an active timeout a biflow record may carry the reverse direction only.
  uint64_t first_ns() const {
    return !fwd.packets || (rev.packets && rev.first_ns < fwd.first_ns) ? rev.first_ns : fwd.first_ns;
  }
  uint64_t last_ns() const { return rev.last_ns > fwd.last_ns ? rev.last_ns : fwd.last_ns; }
};
static_assert(std::is_trivially_copyable_v<FlowRecord>);
static_assert(offsetof(FlowRecord, ext) % 8 == 0);
static_assert(sizeof(FlowRecord) % 8 == 0);

}  // namespace sluice
