#include "tunnel_headers.hh"

#include "engine/packet/parse.hh"

using sluice::LinkType;
using sluice::PacketMeta;
using sluice::ParseStatus;

namespace sluice_plugins {
namespace {

constexpr uint8_t kProtoUdp = 17;
constexpr uint8_t kProtoGre = 47;
constexpr uint16_t kPortVxlan = 4789;       // IANA
constexpr uint16_t kPortVxlanLinux = 8472;  // the Linux kernel's default, older than the IANA port
constexpr uint16_t kPortGtpU = 2152;

constexpr uint8_t kVxlanFlagI = 0x08;  // the VNI is valid: must be set (RFC 7348)

constexpr uint8_t kGtpVersionShift = 5;
constexpr uint8_t kGtpFlagPt = 0x10;  // protocol type: 1 GTP, 0 GTP' (charging)
constexpr uint8_t kGtpFlagE = 0x04;   // extension headers follow
constexpr uint8_t kGtpFlagsOptional = 0x07;  // E, S or PN: the 4 optional octets are there
constexpr uint8_t kGtpGpdu = 0xff;
// Bounds the work per packet; more in one G-PDU is not seen in practice.
constexpr int kMaxGtpExtHeaders = 16;

constexpr uint8_t kGreFlagC = 0x80;  // checksum (and reserved1) present
constexpr uint8_t kGreFlagK = 0x20;  // key present
constexpr uint8_t kGreFlagS = 0x10;  // sequence number present
// RFC 1701's routing (R), strict source route (s) and the first recursion
// bit: RFC 2784 receivers discard a packet with any of them set.
constexpr uint8_t kGreFlagsRfc1701 = 0x4c;
constexpr uint16_t kGreIpv4 = 0x0800;
constexpr uint16_t kGreIpv6 = 0x86dd;
constexpr uint16_t kGreEthernet = 0x6558;  // transparent Ethernet bridging

constexpr uint32_t kMaxLookedAt = 0xffff;  // offsets are stored in 16 bits

inline uint16_t be16(const uint8_t *p) { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t be32(const uint8_t *p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

// A tunnel's payload: the headers before `end` (where the payload ends on
// the wire) that the capture holds, up to `readable`.
struct Payload {
  const uint8_t *data;
  uint32_t end;       // where the tunnel's payload ends on the wire
  uint32_t readable;  // octets that may be read: min(capture, end)

  bool fits(uint32_t off, uint32_t n) const { return off + n <= readable; }
  void end_at(uint32_t e) {
    end = e;
    if (readable > e) readable = e;
  }
};

// What the tunnel header says: where the inner packet starts and what it is.
struct Inner {
  uint32_t start;
  LinkType link;
};

DecapResult walk_vxlan(const Payload &p, uint32_t off, Tunnel &t, Inner &in) {
  if (!p.fits(off, 8)) return DecapResult::Malformed;
  if (!(p.data[off] & kVxlanFlagI)) return DecapResult::Malformed;
  t.id = be32(p.data + off + 4) >> 8;
  in = {off + 8, LinkType::Ethernet};
  return DecapResult::Decapsulated;
}

DecapResult walk_gtpu(Payload &p, uint32_t off, Tunnel &t, Inner &in) {
  if (!p.fits(off, 8)) return DecapResult::Malformed;
  const uint8_t *h = p.data + off;
  uint8_t flags = h[0];
  // GTPv1 with PT 1 is what port 2152 carries; anything else is not GTP-U
  if (flags >> kGtpVersionShift != 1 || !(flags & kGtpFlagPt)) return DecapResult::Malformed;
  t.id = be32(h + 4);
  // echo, error indication, end marker: signalling of the tunnel, no T-PDU
  if (h[1] != kGtpGpdu) return DecapResult::Unsupported;
  uint32_t gtp_end = off + 8 + be16(h + 2);  // the length counts what follows the first 8 octets
  if (gtp_end > p.end) return DecapResult::Malformed;
  p.end_at(gtp_end);
  uint32_t pos = off + 8;
  if (flags & kGtpFlagsOptional) {
    if (!p.fits(off, 12)) return DecapResult::Malformed;
    // the next extension header type is only meaningful with E set
    uint8_t next = flags & kGtpFlagE ? h[11] : 0;
    pos = off + 12;
    for (int n = 0; next != 0; ++n) {
      if (n == kMaxGtpExtHeaders || !p.fits(pos, 1)) return DecapResult::Malformed;
      uint32_t len = uint32_t(p.data[pos]) * 4;  // in 4-octet units, the length octet included
      if (len == 0 || !p.fits(pos, len)) return DecapResult::Malformed;
      next = p.data[pos + len - 1];
      pos += len;
    }
  }
  if (!p.fits(pos, 1)) return DecapResult::Malformed;  // no T-PDU, or cut before it
  uint8_t version = p.data[pos] >> 4;
  if (version != 4 && version != 6) return DecapResult::Unsupported;
  in = {pos, LinkType::Raw};
  return DecapResult::Decapsulated;
}

DecapResult walk_gre(const Payload &p, uint32_t off, Tunnel &t, Inner &in) {
  if (!p.fits(off, 4)) return DecapResult::Malformed;
  const uint8_t *h = p.data + off;
  uint8_t version = h[1] & 0x07;
  if (version == 1) return DecapResult::Unsupported;  // PPTP's enhanced GRE (RFC 2637)
  if (version != 0) return DecapResult::Malformed;
  if (h[0] & kGreFlagsRfc1701) return DecapResult::Unsupported;
  uint32_t key_at = off + 4 + (h[0] & kGreFlagC ? 4 : 0);
  uint32_t len = key_at - off + (h[0] & kGreFlagK ? 4 : 0) + (h[0] & kGreFlagS ? 4 : 0);
  if (!p.fits(off, len)) return DecapResult::Malformed;
  if (h[0] & kGreFlagK) t.id = be32(p.data + key_at);
  LinkType link;
  switch (be16(h + 2)) {
    // the protocol type says which IP version: an inner header of the other
    // one is malformed (the parse says BadIpVersion)
    case kGreIpv4: link = LinkType::Ipv4; break;
    case kGreIpv6: link = LinkType::Ipv6; break;
    case kGreEthernet: link = LinkType::Ethernet; break;
    default: return DecapResult::Unsupported;  // PPP, MPLS, ERSPAN, NSH, ...
  }
  in = {off + len, link};
  return DecapResult::Decapsulated;
}

}  // namespace

DecapResult decapsulate(const uint8_t *data, uint32_t caplen, uint32_t wirelen, PacketMeta &meta, Tunnel &tunnel) {
  tunnel = {TunnelType::None, 0};
  // the outer headers must have been read to the end of IP's
  if (!meta.is_ip() || meta.status != ParseStatus::Ok || meta.l4_offset == 0) return DecapResult::NotTunnel;
  TunnelType type = TunnelType::None;
  if (meta.ip_proto == kProtoUdp && meta.has_l4()) {
    if (meta.dst_port == kPortVxlan || meta.dst_port == kPortVxlanLinux) type = TunnelType::Vxlan;
    else if (meta.dst_port == kPortGtpU) type = TunnelType::GtpU;
  } else if (meta.ip_proto == kProtoGre) {
    type = TunnelType::Gre;
  }
  if (type == TunnelType::None) return DecapResult::NotTunnel;
  if (meta.is_fragment()) {
    // a later fragment is the datagram's data, no header; the first alone
    // is not opened either, so all of them are metered as the outer flow
    if (!meta.is_first_fragment()) return DecapResult::NotTunnel;
    tunnel.type = type;
    return DecapResult::Unsupported;
  }
  tunnel.type = type;

  uint32_t wire = wirelen > caplen ? wirelen : caplen;
  uint32_t cap = caplen < kMaxLookedAt ? caplen : kMaxLookedAt;
  // trailing octets of the frame (padding, a trailer) are not the tunnel's
  uint32_t ip_end = uint32_t(meta.l3_offset) + meta.ip_total_length;
  Payload p{data, ip_end < wire ? ip_end : wire, 0};
  p.readable = cap < p.end ? cap : p.end;

  Inner in{};
  DecapResult r;
  if (type == TunnelType::Gre) {
    r = walk_gre(p, meta.l4_offset, tunnel, in);
  } else {
    uint32_t udp = meta.l4_offset;
    if (!p.fits(udp, 8)) return DecapResult::Malformed;
    uint32_t udp_len = be16(data + udp + 4);
    if (udp_len < 8 || udp + udp_len > p.end) return DecapResult::Malformed;
    p.end_at(udp + udp_len);
    r = type == TunnelType::Vxlan ? walk_vxlan(p, udp + 8, tunnel, in) : walk_gtpu(p, udp + 8, tunnel, in);
  }
  if (r != DecapResult::Decapsulated) return r;

  // the walks leave in.start <= p.readable <= 65535: every inner offset plus
  // the start still fits 16 bits
  PacketMeta inner;
  sluice::parse_packet(data + in.start, p.readable - in.start, in.link, inner, p.end - in.start);
  if (!inner.is_ip()) return inner.status == ParseStatus::NonIp ? DecapResult::Unsupported : DecapResult::Malformed;
  // The outer datagram says where the inner one ends: an inner length field
  // of 0 or past that end (which the parser replaces by what the frame
  // holds) is a cut or broken inner packet, not one to open.
  if (inner.ip_length_from_frame()) return DecapResult::Malformed;
  uint16_t start = uint16_t(in.start);
  inner.l3_offset = uint16_t(inner.l3_offset + start);  // set with the IP header, 0 for raw IP
  if (inner.l4_offset) inner.l4_offset = uint16_t(inner.l4_offset + start);
  if (inner.payload_offset) inner.payload_offset = uint16_t(inner.payload_offset + start);
  meta = inner;
  return DecapResult::Decapsulated;
}

const char *tunnel_type_name(TunnelType t) {
  switch (t) {
    case TunnelType::None: return "none";
    case TunnelType::Vxlan: return "vxlan";
    case TunnelType::GtpU: return "gtp-u";
    case TunnelType::Gre: return "gre";
  }
  return "unknown";
}

const char *decap_result_name(DecapResult r) {
  switch (r) {
    case DecapResult::NotTunnel: return "not_tunnel";
    case DecapResult::Decapsulated: return "decapsulated";
    case DecapResult::Malformed: return "malformed";
    case DecapResult::Unsupported: return "unsupported";
  }
  return "unknown";
}

}  // namespace sluice_plugins
