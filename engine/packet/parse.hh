// The ingress header parser: one pass over a packet's bytes into PacketMeta.
// It works on a plain byte span so the runtime can call it on mbuf data, the
// pcap reader on trace records and the tests on hand-built packets. No
// allocation, no exceptions, no global state: it is also compiled to bitcode.
#pragma once
#include <cstdint>

#include "engine/packet/packet_meta.hh"

namespace sluice {

// Limits that bound the work per packet; a packet past one is malformed.
inline constexpr int kMaxVlanTags = 4;
inline constexpr int kMaxMplsLabels = 8;
inline constexpr int kMaxIpv6ExtHeaders = 8;

// Parses the headers in data[0, caplen) into `out` (which it overwrites) and
// returns out.status. Never reads outside data[0, caplen); only the first
// 64 KiB are looked at, so every offset fits the meta's 16-bit fields.
//
// wirelen is the length of the packet on the wire (pcap's len, an mbuf's
// pkt_len when the headers are in its first segment); 0 means caplen. It tells
// a capture cut short by a snap length (the IP length stands) from an IP
// length field that claims more bytes than the frame had (the IP length is
// what the frame holds: PacketMeta::kIpLengthFromFrame).
ParseStatus parse_packet(const uint8_t *data, uint32_t caplen, LinkType link, PacketMeta &out,
                         uint32_t wirelen = 0);

// The same without the fast path for the common case (untagged Ethernet,
// IPv4 without options, TCP or UDP) that parse_packet() tries first: what
// that path must agree with, for the tests.
ParseStatus parse_packet_general(const uint8_t *data, uint32_t caplen, LinkType link, PacketMeta &out,
                                 uint32_t wirelen = 0);

// Stable short name for counters and logs: "ok", "non_ip", "truncated_l2", ...
const char *parse_status_name(ParseStatus s);

}  // namespace sluice
