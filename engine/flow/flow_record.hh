// Flow records: what a FlowTable emits on its `flows` output and what
// GCSlicer, the exporters and FlowLog consume. Plain data, trivially
// copyable, so that records move between threads through rings by value.
#pragma once
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

// What one direction of a flow carried.
struct FlowCounters {
  uint64_t packets;
  uint64_t octets;    // IP level: the sum of IP total lengths
  uint64_t first_ns;  // packet times (UNIX ns) of the first and last packet; 0 when packets == 0
  uint64_t last_ns;
  uint16_t min_len;   // smallest and largest IP total length
  uint16_t max_len;
  uint8_t tcp_flags;  // OR of the TCP flags seen
  uint8_t pad[3];
};
static_assert(sizeof(FlowCounters) == 40);

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
  uint32_t pad;
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
static_assert(sizeof(FlowRecord) % 8 == 0);

}  // namespace sluice
