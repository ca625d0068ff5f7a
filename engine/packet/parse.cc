#include "engine/packet/parse.hh"

#include <cstring>

namespace sluice {
namespace {

constexpr uint16_t kEthIpv4 = 0x0800;
constexpr uint16_t kEthIpv6 = 0x86dd;
constexpr uint16_t kEthVlan = 0x8100;       // 802.1Q
constexpr uint16_t kEthQinQ = 0x88a8;       // 802.1ad service tag
constexpr uint16_t kEthQinQLegacy = 0x9100; // pre-802.1ad QinQ, still seen
constexpr uint16_t kEthMpls = 0x8847;
constexpr uint16_t kEthMplsMulticast = 0x8848;
constexpr uint16_t kEthPppoeSession = 0x8864;

constexpr uint8_t kProtoHopByHop = 0;
constexpr uint8_t kProtoIcmp = 1;
constexpr uint8_t kProtoTcp = 6;
constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoRouting = 43;
constexpr uint8_t kProtoFragment = 44;
constexpr uint8_t kProtoAh = 51;
constexpr uint8_t kProtoIcmpv6 = 58;
constexpr uint8_t kProtoNoNext = 59;
constexpr uint8_t kProtoDestOpts = 60;
constexpr uint8_t kProtoSctp = 132;

constexpr uint32_t kMaxLookedAt = 0xffff;  // offsets are stored in 16 bits

inline uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }

struct Frame {
  const uint8_t *data;
  uint32_t caplen;   // bytes that may be read
  uint32_t wirelen;  // bytes the packet had on the wire, >= caplen
};

// Whether the header [off, off + n) can be read. It must end inside the IP
// datagram (`end`, from the IP length field; else that field is wrong) and
// inside the capture (else the capture was cut short).
inline ParseStatus need(const Frame &f, uint32_t end, uint32_t off, uint32_t n,
                        ParseStatus truncated) {
  if (off + n > end) return ParseStatus::BadIpTotalLength;
  if (off + n > f.caplen) return truncated;
  return ParseStatus::Ok;
}

// Upper-layer header at `off`; `end` is where the IP datagram ends.
ParseStatus parse_l4(const Frame &f, uint32_t off, uint32_t end, PacketMeta &m) {
  const uint8_t *p = f.data + off;
  ParseStatus s;
  switch (m.ip_proto) {
    case kProtoTcp: {
      if ((s = need(f, end, off, 20, ParseStatus::TruncatedL4)) != ParseStatus::Ok) return s;
      m.src_port = be16(p);
      m.dst_port = be16(p + 2);
      m.tcp_flags = p[13];
      m.flags |= PacketMeta::kHasL4;
      // The fixed header fits the datagram: a data offset that does not is
      // the TCP header's fault, not the IP length's.
      uint32_t len = uint32_t(p[12] >> 4) * 4;
      if (len < 20 || off + len > end) return ParseStatus::BadTcpHeaderLength;
      if (off + len > f.caplen) return ParseStatus::TruncatedL4;
      m.payload_offset = uint16_t(off + len);
      return ParseStatus::Ok;
    }
    case kProtoUdp:
    case kProtoSctp:  // SCTP common header: ports, verification tag, checksum
    {
      uint32_t len = m.ip_proto == kProtoUdp ? 8 : 12;
      if ((s = need(f, end, off, len, ParseStatus::TruncatedL4)) != ParseStatus::Ok) return s;
      m.src_port = be16(p);
      m.dst_port = be16(p + 2);
      m.flags |= PacketMeta::kHasL4;
      m.payload_offset = uint16_t(off + len);
      return ParseStatus::Ok;
    }
    case kProtoIcmp:
    case kProtoIcmpv6:  // type, code, checksum; the rest is message body
      if ((s = need(f, end, off, 4, ParseStatus::TruncatedL4)) != ParseStatus::Ok) return s;
      m.dst_port = uint16_t(p[0] << 8 | p[1]);
      m.flags |= PacketMeta::kHasL4;
      m.payload_offset = uint16_t(off + 4);
      return ParseStatus::Ok;
    default:
      m.payload_offset = uint16_t(off);
      return ParseStatus::Ok;
  }
}

ParseStatus parse_ipv4(const Frame &f, uint32_t off, PacketMeta &m) {
  m.l3_offset = uint16_t(off);
  if (off + 20 > f.caplen) return ParseStatus::TruncatedL3;
  const uint8_t *ip = f.data + off;
  if (ip[0] >> 4 != 4) return ParseStatus::BadIpVersion;
  uint32_t hlen = uint32_t(ip[0] & 0x0f) * 4;
  if (hlen < 20) return ParseStatus::BadIpv4HeaderLength;
  // The length field is believed when the frame holds it. 0 (a capture of
  // a TCP segmentation offload's super-frame) or more than the frame holds
  // (a bogus field): the IP length is what the frame holds, as tshark counts
  // it. Shorter than the header: malformed.
  uint32_t total = be16(ip + 2);
  const uint32_t held = f.wirelen - off;  // >= 20: off + 20 <= caplen <= wirelen
  const bool from_frame = total == 0 || total > held;
  if (from_frame) total = held;
  if (total < hlen) return ParseStatus::BadIpTotalLength;

  m.src_addr[10] = m.src_addr[11] = m.dst_addr[10] = m.dst_addr[11] = 0xff;  // v4-mapped
  std::memcpy(m.src_addr + 12, ip + 12, 4);
  std::memcpy(m.dst_addr + 12, ip + 16, 4);
  m.tos = ip[1];
  m.ttl = ip[8];
  m.ip_proto = ip[9];
  m.ip_total_length = total;
  m.flags |= PacketMeta::kIpv4;
  if (from_frame) m.flags |= PacketMeta::kIpLengthFromFrame;
  if (hlen > 20) m.flags |= PacketMeta::kIpOptions;
  uint32_t frag_offset = be16(ip + 6) & 0x1fff;
  bool more_fragments = ip[6] & 0x20;
  if (frag_offset || more_fragments)
    m.flags |= frag_offset ? PacketMeta::kFragment
                           : PacketMeta::kFragment | PacketMeta::kFirstFragment;

  if (off + hlen > f.caplen) return ParseStatus::TruncatedL3;
  m.l4_offset = uint16_t(off + hlen);
  if (frag_offset) {  // only the first fragment carries the L4 header
    m.payload_offset = m.l4_offset;
    return ParseStatus::Ok;
  }
  return parse_l4(f, off + hlen, off + total, m);
}

inline bool is_ipv6_ext_header(uint8_t nh) {
  return nh == kProtoHopByHop || nh == kProtoRouting || nh == kProtoDestOpts ||
         nh == kProtoFragment || nh == kProtoAh;
}

ParseStatus parse_ipv6(const Frame &f, uint32_t off, PacketMeta &m) {
  m.l3_offset = uint16_t(off);
  if (off + 40 > f.caplen) return ParseStatus::TruncatedL3;
  const uint8_t *ip = f.data + off;
  if (ip[0] >> 4 != 6) return ParseStatus::BadIpVersion;
  // As IPv4's total length: payload length 0 (a generic receive offload's
  // super-frame) or more than the frame holds: what the frame holds. Not
  // with next header "no next header", where 0 is the true length (Teredo
  // bubbles). A jumbogram (RFC 2675, payload length 0) is what its frame holds.
  uint32_t total = be16(ip + 4) + 40u;
  const uint32_t held = f.wirelen - off;  // >= 40
  const bool from_frame = (total == 40 && ip[6] != kProtoNoNext) || total > held;
  if (from_frame) total = held;

  std::memcpy(m.src_addr, ip + 8, 16);
  std::memcpy(m.dst_addr, ip + 24, 16);
  m.tos = uint8_t((ip[0] & 0x0f) << 4 | ip[1] >> 4);
  m.ttl = ip[7];
  m.ip_total_length = total;
  m.flags |= PacketMeta::kIpv6;
  if (from_frame) m.flags |= PacketMeta::kIpLengthFromFrame;

  // Walk the extension headers; ip_proto ends as the first header that is
  // not one (the L4 protocol, ESP, or something the parser does not know).
  const uint32_t end = off + total;
  uint32_t pos = off + 40;
  m.ip_proto = ip[6];
  for (int n = 0; is_ipv6_ext_header(m.ip_proto); ++n) {
    if (n == kMaxIpv6ExtHeaders) return ParseStatus::TooManyIpv6ExtHeaders;
    ParseStatus s;
    if ((s = need(f, end, pos, 2, ParseStatus::TruncatedL3)) != ParseStatus::Ok) return s;
    const uint8_t *h = f.data + pos;
    uint32_t len = m.ip_proto == kProtoFragment ? 8
                   : m.ip_proto == kProtoAh     ? (h[1] + 2u) * 4  // AH counts 4-byte words
                                                : (h[1] + 1u) * 8;
    if ((s = need(f, end, pos, len, ParseStatus::TruncatedL3)) != ParseStatus::Ok) return s;
    m.flags |= PacketMeta::kIpv6ExtHeaders;
    if (m.ip_proto == kProtoFragment) {
      uint32_t frag_offset = be16(h + 2) & 0xfff8;
      bool more_fragments = h[3] & 1;
      // An atomic fragment (offset 0, no more) is a whole datagram.
      if (frag_offset || more_fragments)
        m.flags |= frag_offset ? PacketMeta::kFragment
                               : PacketMeta::kFragment | PacketMeta::kFirstFragment;
      if (frag_offset) {  // a non-first fragment: what follows is data, not headers
        m.ip_proto = h[0];
        m.l4_offset = m.payload_offset = uint16_t(pos + len);
        return ParseStatus::Ok;
      }
    }
    m.ip_proto = h[0];
    pos += len;
  }
  m.l4_offset = uint16_t(pos);
  return parse_l4(f, pos, end, m);
}

// IPv4 or IPv6 by the version nibble, where nothing else says which; 0 when
// the nibble is neither. The caller has checked that off < caplen.
inline uint16_t ethertype_by_version(const Frame &f, uint32_t off) {
  switch (f.data[off] >> 4) {
    case 4: return kEthIpv4;
    case 6: return kEthIpv6;
    default: return 0;
  }
}

ParseStatus parse_network(const Frame &f, uint32_t off, uint16_t ethertype, PacketMeta &m);

ParseStatus parse_mpls(const Frame &f, uint32_t off, PacketMeta &m) {
  for (;;) {
    if (m.mpls_count == kMaxMplsLabels) return ParseStatus::TooManyMplsLabels;
    if (off + 4 > f.caplen) return ParseStatus::TruncatedL2;
    bool bottom_of_stack = f.data[off + 2] & 1;
    if (m.mpls_count == 0) std::memcpy(m.mpls_top, f.data + off, 3);
    ++m.mpls_count;
    off += 4;
    if (bottom_of_stack) break;
  }
  // MPLS does not say what it carries; anything but IP (an Ethernet
  // pseudowire, say) is left alone.
  if (off >= f.caplen) return ParseStatus::TruncatedL3;
  uint16_t type = ethertype_by_version(f, off);
  return type ? parse_network(f, off, type, m) : ParseStatus::NonIp;
}

// The network layers PPP carries, as EtherTypes; 0 for the rest (LCP, ...).
inline uint16_t ppp_to_ethertype(uint16_t protocol) {
  switch (protocol) {
    case 0x0021: return kEthIpv4;
    case 0x0057: return kEthIpv6;
    case 0x0281: return kEthMpls;
    default: return 0;
  }
}

// A PPP protocol field at `off`: one byte when compressed (RFC 1661: the
// low bit of the last byte is set, and only of the last), else two.
ParseStatus parse_ppp_protocol(const Frame &f, uint32_t off, PacketMeta &m) {
  if (off >= f.caplen) return ParseStatus::TruncatedL2;
  uint16_t protocol = f.data[off];
  if (protocol & 1) {
    off += 1;
  } else {
    if (off + 2 > f.caplen) return ParseStatus::TruncatedL2;
    protocol = be16(f.data + off);
    off += 2;
  }
  uint16_t type = ppp_to_ethertype(protocol);
  if (!m.ethertype) m.ethertype = type;  // PPP as the link layer; PPPoE keeps 0x8864
  return type ? parse_network(f, off, type, m) : ParseStatus::NonIp;
}

ParseStatus parse_network(const Frame &f, uint32_t off, uint16_t ethertype, PacketMeta &m) {
  switch (ethertype) {
    case kEthIpv4: return parse_ipv4(f, off, m);
    case kEthIpv6: return parse_ipv6(f, off, m);
    case kEthMpls:
    case kEthMplsMulticast: return parse_mpls(f, off, m);
    case kEthPppoeSession:
      // version/type, code, session id, length; then PPP
      if (off + 6 > f.caplen) return ParseStatus::TruncatedL2;
      m.flags |= PacketMeta::kPppoe;
      return parse_ppp_protocol(f, off + 6, m);
    default: return ParseStatus::NonIp;  // includes 802.3 lengths (< 0x0600)
  }
}

// A link layer that announced `type` for what starts at `off`; VLAN tags
// are walked here, whatever link layer they follow.
ParseStatus parse_ethertype(const Frame &f, uint16_t type, uint32_t off, PacketMeta &m) {
  while (type == kEthVlan || type == kEthQinQ || type == kEthQinQLegacy) {
    if (m.vlan_count == kMaxVlanTags) return ParseStatus::TooManyVlanTags;
    if (off + 4 > f.caplen) return ParseStatus::TruncatedL2;
    uint16_t vid = be16(f.data + off) & 0x0fff;
    if (m.vlan_count == 0) m.vlan_outer = vid;
    else if (m.vlan_count == 1) m.vlan_inner = vid;
    ++m.vlan_count;
    type = be16(f.data + off + 2);
    off += 4;
  }
  m.ethertype = type;
  return parse_network(f, off, type, m);
}

ParseStatus parse_raw_ip(const Frame &f, uint32_t off, PacketMeta &m) {
  if (off >= f.caplen) return ParseStatus::TruncatedL3;
  m.ethertype = ethertype_by_version(f, off);
  return m.ethertype ? parse_network(f, off, m.ethertype, m) : ParseStatus::BadIpVersion;
}

// BSD loopback: a 4-byte address family. DLT_NULL writes it in the
// capturing host's byte order, DLT_LOOP in network order; families are
// small numbers, so a value with high bits set is byte-swapped.
ParseStatus parse_loopback(const Frame &f, PacketMeta &m) {
  if (f.caplen < 4) return ParseStatus::TruncatedL2;
  const uint8_t *p = f.data;
  uint32_t family = uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
                    uint32_t(p[3]) << 24;
  if (family > 0xffff) family = __builtin_bswap32(family);
  switch (family) {
    case 2: m.ethertype = kEthIpv4; break;  // AF_INET everywhere
    case 10:                                // AF_INET6: Linux
    case 24:                                //   NetBSD, OpenBSD, BSD/OS
    case 28:                                //   FreeBSD, DragonFly
    case 30: m.ethertype = kEthIpv6; break; //   macOS
    default: return ParseStatus::NonIp;
  }
  return parse_network(f, 4, m.ethertype, m);
}

// NFLOG: a 4-byte header, then TLVs (length includes the 4-byte TLV header,
// padded to 4 bytes) until NFULA_PAYLOAD, which holds the IP packet. TLV
// length and type are in host byte order: the kernel writes them so, and
// libpcap swaps them when it reads a file from a host of the other order.
ParseStatus parse_nflog(const Frame &f, PacketMeta &m) {
  constexpr uint16_t kNfulaPayload = 9;
  uint32_t off = 4;
  for (;;) {
    if (off + 4 > f.caplen) return ParseStatus::TruncatedL2;
    uint16_t len, type;
    std::memcpy(&len, f.data + off, 2);
    std::memcpy(&type, f.data + off + 2, 2);
    if (len < 4) return ParseStatus::BadLinkHeader;
    if (type == kNfulaPayload) return parse_raw_ip(f, off + 4, m);
    off += (len + 3u) & ~3u;
  }
}

// The common case in one straight pass: an untagged Ethernet frame with an
// IPv4 header without options, not a fragment, its length field believed,
// and a whole TCP or UDP header inside the datagram and the capture. Fills
// `out` exactly as the general parse below would (the test "parse: the
// fast path gives what the general parse gives" compares them byte for
// byte) and returns true; false for anything else, out untouched. On a
// 64-byte frame the general parse, four calls deep, cost more than the
// flow table's hash (docs/performance.md).
inline bool parse_ethernet_ipv4_fast(const uint8_t *data, uint32_t caplen, uint32_t wirelen, PacketMeta &out) {
  constexpr uint32_t kL3 = 14, kL4 = kL3 + 20;
  if (caplen < kL4 + 8 || caplen >= kMaxLookedAt || be16(data + 12) != kEthIpv4) return false;
  const uint8_t *ip = data + kL3;
  const uint32_t total = be16(ip + 2);
  const uint8_t proto = ip[9];
  // version 4, IHL 5; length field neither 0 nor past the frame; no fragment bits but DF
  if (ip[0] != 0x45 || total == 0 || total > wirelen - kL3 || (be16(ip + 6) & 0x3fff) != 0) return false;
  const uint8_t *l4 = data + kL4;
  uint32_t l4_len;
  if (proto == kProtoTcp) {
    if (total < 20 + 20 || caplen < kL4 + 20) return false;  // before the data offset is read
    l4_len = uint32_t(l4[12] >> 4) * 4;
    if (l4_len < 20 || 20 + l4_len > total || kL4 + l4_len > caplen) return false;
  } else if (proto == kProtoUdp) {
    l4_len = 8;
    if (total < 20 + 8) return false;
  } else {
    return false;
  }
  std::memset(&out, 0, sizeof out);
  out.src_addr[10] = out.src_addr[11] = out.dst_addr[10] = out.dst_addr[11] = 0xff;
  std::memcpy(out.src_addr + 12, ip + 12, 4);
  std::memcpy(out.dst_addr + 12, ip + 16, 4);
  out.src_port = be16(l4);
  out.dst_port = be16(l4 + 2);
  out.ip_proto = proto;
  out.status = ParseStatus::Ok;
  out.flags = PacketMeta::kEthernet | PacketMeta::kIpv4 | PacketMeta::kHasL4;
  out.l3_offset = uint16_t(kL3);
  out.l4_offset = uint16_t(kL4);
  out.payload_offset = uint16_t(kL4 + l4_len);
  out.ethertype = kEthIpv4;
  out.ip_total_length = total;
  out.ttl = ip[8];
  out.tos = ip[1];
  out.tcp_flags = proto == kProtoTcp ? l4[13] : 0;
  return true;
}

}  // namespace

ParseStatus parse_packet(const uint8_t *data, uint32_t caplen, LinkType link, PacketMeta &out,
                         uint32_t wirelen) {
  if (link == LinkType::Ethernet && parse_ethernet_ipv4_fast(data, caplen, wirelen > caplen ? wirelen : caplen, out))
    return ParseStatus::Ok;
  return parse_packet_general(data, caplen, link, out, wirelen);
}

ParseStatus parse_packet_general(const uint8_t *data, uint32_t caplen, LinkType link, PacketMeta &out,
                                 uint32_t wirelen) {
  std::memset(&out, 0, sizeof out);  // padding too: metas compare and hash as bytes
  Frame f{data, caplen < kMaxLookedAt ? caplen : kMaxLookedAt, wirelen > caplen ? wirelen : caplen};
  ParseStatus s;
  switch (link) {
    case LinkType::Ethernet:
      if (f.caplen >= 14) out.flags |= PacketMeta::kEthernet;
      s = f.caplen < 14 ? ParseStatus::TruncatedL2 : parse_ethertype(f, be16(data + 12), 14, out);
      break;
    case LinkType::LinuxSll:  // packet type, ARPHRD, address length, address (8), protocol
      s = f.caplen < 16 ? ParseStatus::TruncatedL2 : parse_ethertype(f, be16(data + 14), 16, out);
      break;
    case LinkType::LinuxSll2:  // protocol first, then reserved, ifindex, ARPHRD, ... (20 bytes)
      s = f.caplen < 20 ? ParseStatus::TruncatedL2 : parse_ethertype(f, be16(data), 20, out);
      break;
    case LinkType::Ppp:
      // RFC 1662 framing (address ff, control 03) is optional; no protocol
      // field starts with ff, so that byte tells.
      s = parse_ppp_protocol(f, f.caplen >= 1 && data[0] == 0xff ? 2 : 0, out);
      break;
    case LinkType::RawDlt12:
    case LinkType::RawDlt14:
    case LinkType::Raw: s = parse_raw_ip(f, 0, out); break;
    case LinkType::Ipv4:
      out.ethertype = kEthIpv4;
      s = parse_ipv4(f, 0, out);
      break;
    case LinkType::Ipv6:
      out.ethertype = kEthIpv6;
      s = parse_ipv6(f, 0, out);
      break;
    case LinkType::Null:
    case LinkType::Loop: s = parse_loopback(f, out); break;
    case LinkType::Nflog: s = parse_nflog(f, out); break;
    default: s = ParseStatus::UnsupportedLinkType; break;
  }
  out.status = s;
  return s;
}

const char *parse_status_name(ParseStatus s) {
  switch (s) {
    case ParseStatus::Ok: return "ok";
    case ParseStatus::NonIp: return "non_ip";
    case ParseStatus::TruncatedL2: return "truncated_l2";
    case ParseStatus::TruncatedL3: return "truncated_l3";
    case ParseStatus::TruncatedL4: return "truncated_l4";
    case ParseStatus::BadIpVersion: return "bad_ip_version";
    case ParseStatus::BadIpv4HeaderLength: return "bad_ipv4_header_length";
    case ParseStatus::BadIpTotalLength: return "bad_ip_total_length";
    case ParseStatus::BadTcpHeaderLength: return "bad_tcp_header_length";
    case ParseStatus::TooManyVlanTags: return "too_many_vlan_tags";
    case ParseStatus::TooManyMplsLabels: return "too_many_mpls_labels";
    case ParseStatus::TooManyIpv6ExtHeaders: return "too_many_ipv6_ext_headers";
    case ParseStatus::BadLinkHeader: return "bad_link_header";
    case ParseStatus::UnsupportedLinkType: return "unsupported_link_type";
  }
  return "unknown";
}

}  // namespace sluice
