// Per-packet metadata: the headers of a packet, parsed once at ingress
// (engine/packet/parse) and read by every element after that. It lives in the
// mbuf private area, so it is small (one cache line) and trivially copyable.
#pragma once
#include <cstdint>
#include <type_traits>

namespace sluice {

// Link-layer header types of packets handed to the parser. The values are the
// pcap LINKTYPE_* numbers and, on Linux, the DLT_* numbers pcap_datalink()
// returns for them, so either can be cast to LinkType. libpcap reports
// LINKTYPE_RAW (101) as DLT_RAW, which is 12 on most systems and 14 on BSD/OS:
// all three mean raw IP.
enum class LinkType : uint16_t {
  Null = 0,         // BSD loopback: 4-byte address family in the capturer's byte order
  Ethernet = 1,     // Ethernet II / 802.3, also what DPDK ports deliver
  Ppp = 9,          // PPP, with or without the HDLC-like ff 03 prefix
  RawDlt12 = 12,    // raw IPv4 or IPv6 (DLT_RAW on Linux and most systems)
  RawDlt14 = 14,    // raw IPv4 or IPv6 (DLT_RAW on BSD/OS)
  Raw = 101,        // raw IPv4 or IPv6 (LINKTYPE_RAW)
  Loop = 108,       // OpenBSD loopback: 4-byte address family, network byte order
  LinuxSll = 113,   // Linux cooked capture v1, 16-byte header
  Ipv4 = 228,       // raw IPv4 only
  Ipv6 = 229,       // raw IPv6 only
  Nflog = 239,      // Linux NFLOG: TLVs, the packet in NFULA_PAYLOAD
  LinuxSll2 = 276,  // Linux cooked capture v2, 20-byte header
};

// The outcome of parsing one packet. Ok and NonIp are normal traffic; every
// other value is a distinct reason a packet is counted as malformed.
// parse_status_name() gives each a stable short name for counters.
enum class ParseStatus : uint8_t {
  Ok,                     // every header the parser knows was present and valid
  NonIp,                  // not malformed: the network layer is not IP (ARP, LLDP, ...)
  TruncatedL2,            // capture ends inside the link layer, VLAN tags, MPLS or PPPoE
  TruncatedL3,            // ... inside the IPv4 header with options, or IPv6 and its extension headers
  TruncatedL4,            // ... inside the TCP (with options), UDP, ICMP or SCTP header
  BadIpVersion,           // version field does not match what the link layer announced
  BadIpv4HeaderLength,    // IHL below 5
  BadIpTotalLength,       // IP length shorter than the IPv4 header, or ending inside an IPv6 extension or L4 header
  BadTcpHeaderLength,     // TCP data offset below 5, or past the end of the IP datagram
  TooManyVlanTags,        // more than kMaxVlanTags
  TooManyMplsLabels,      // more than kMaxMplsLabels
  TooManyIpv6ExtHeaders,  // more than kMaxIpv6ExtHeaders
  BadLinkHeader,          // a link header that cannot be walked (NFLOG TLV shorter than 4 bytes)
  UnsupportedLinkType,
};
inline constexpr int kParseStatusCount = int(ParseStatus::UnsupportedLinkType) + 1;

// Fields are filled as headers are parsed and stay zero past the point where
// parsing stopped; the flags say which groups are valid:
//   is_ipv4() / is_ipv6(): the fixed IP header was valid: addresses, ip_proto
//     (so far), ip_total_length, ttl, tos, l3_offset
//   l4_offset != 0: the IP options or extension headers were read to their end
//   has_l4(): src_port, dst_port (and tcp_flags for TCP)
// So a packet truncated inside its TCP options has status TruncatedL4 and still
// has_l4(), with ports and flags. payload_offset is set only with status Ok.
//
// A flow key is src_addr, dst_addr, src_port, dst_port, ip_proto (the first
// 37 bytes, in that order) plus is_ipv6(): IPv4 addresses are stored
// v4-mapped (::ffff:a.b.c.d), so both families key the same way, and the
// family bit keeps an IPv6 packet that carries a v4-mapped address apart.
struct PacketMeta {
  // Network byte order, as on the wire.
  uint8_t src_addr[16];
  uint8_t dst_addr[16];
  // Host byte order. TCP, UDP, SCTP: the ports. ICMP and ICMPv6 key the way
  // NetFlow and IPFIX flow meters do: src_port 0, dst_port type << 8 | code.
  uint16_t src_port;
  uint16_t dst_port;
  uint8_t ip_proto;  // last next-header: the L4 protocol, or ESP, or what the parser did not know
  ParseStatus status;
  uint16_t flags;
  // Byte offsets from the start of the packet. l3: the IP header. l4: the
  // upper-layer header after IPv6 extension headers (in a non-first fragment,
  // the fragment's data). payload: after the last header parsed; equals l4
  // for protocols the parser does not know.
  uint16_t l3_offset;
  uint16_t l4_offset;
  uint16_t payload_offset;
  // EtherType that announced the network layer, after any VLAN tags (0x8847
  // for MPLS, 0x8864 for PPPoE); for link types without one, the EtherType
  // of what the link header, PPP protocol or IP version said (0x0800, 0x86dd,
  // 0x8847). 0 where the link layer was not read to its end.
  uint16_t ethertype;
  // IP-level length: IPv4 total length, IPv6 payload length + 40. Octet
  // counters use it. It never exceeds the frame: a length field of 0 (TSO,
  // GRO captures) or claiming more than the frame holds gives the bytes the
  // frame holds from l3_offset on (wire length, not capture length), with
  // kIpLengthFromFrame.
  uint32_t ip_total_length;
  uint16_t vlan_outer;  // VLAN ids (12 bits) of the first and second tag; 0 when absent
  uint16_t vlan_inner;
  uint8_t vlan_count;   // tags seen, 802.1Q and 802.1ad alike
  uint8_t mpls_count;   // labels in the MPLS stack
  uint8_t ttl;          // IPv4 TTL, IPv6 hop limit
  uint8_t tos;          // IPv4 TOS, IPv6 traffic class
  uint8_t tcp_flags;    // TCP header byte 13: CWR ECE URG ACK PSH RST SYN FIN
  // The top MPLS label stack entry without its TTL (label << 4 | traffic
  // class << 1 | bottom of stack), as IPFIX mplsTopLabelStackSection sends
  // it; zero without MPLS.
  uint8_t mpls_top[3];

  static constexpr uint16_t kIpv4 = 1 << 0;
  static constexpr uint16_t kIpv6 = 1 << 1;
  static constexpr uint16_t kFragment = 1 << 2;       // part of a fragmented datagram
  static constexpr uint16_t kFirstFragment = 1 << 3;  // ... the one at offset 0 (carries L4)
  static constexpr uint16_t kHasL4 = 1 << 4;
  static constexpr uint16_t kPppoe = 1 << 5;          // came through a PPPoE session
  static constexpr uint16_t kIpOptions = 1 << 6;      // IPv4 header longer than 20 bytes
  static constexpr uint16_t kIpv6ExtHeaders = 1 << 7; // IPv6 extension headers before l4_offset
  static constexpr uint16_t kIpLengthFromFrame = 1 << 8;  // IP length field 0 or past the frame: the frame's
  static constexpr uint16_t kEthernet = 1 << 9;  // an Ethernet frame: destination and source MAC in its first 12 bytes

  bool is_ipv4() const { return flags & kIpv4; }
  bool is_ipv6() const { return flags & kIpv6; }
  bool is_ip() const { return flags & (kIpv4 | kIpv6); }
  bool is_fragment() const { return flags & kFragment; }
  bool is_first_fragment() const { return flags & kFirstFragment; }
  bool has_l4() const { return flags & kHasL4; }
  bool is_pppoe() const { return flags & kPppoe; }
  bool ip_length_from_frame() const { return flags & kIpLengthFromFrame; }
  bool is_ethernet() const { return flags & kEthernet; }
};

static_assert(sizeof(PacketMeta) == 64, "PacketMeta must fit one cache line");
static_assert(std::is_trivially_copyable_v<PacketMeta>);

}  // namespace sluice
