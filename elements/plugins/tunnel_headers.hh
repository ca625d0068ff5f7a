// Tunnel headers: finds the packet a VXLAN, GTP-U or GRE tunnel carries,
// so that a flow meter keys on the inner packet (TunnelDecap). A pure
// function of the packet's bytes and its parse: no DPDK, no allocation, no
// global state (the JIT compiles it from bitcode into fused loops).
//
// Only the outermost tunnel is opened: a tunnel inside the inner packet is
// left as the inner packet's payload.
//
//   VXLAN  UDP destination port 4789 (IANA) or 8472 (the Linux default);
//          RFC 7348: an 8-octet header with the I flag set, a 24-bit VNI;
//          the inner packet is an Ethernet frame.
//   GTP-U  UDP destination port 2152; 3GPP TS 29.281: version 1, protocol
//          type GTP, message type 255 (G-PDU) only; 8 octets, 4 more when
//          the E, S or PN flag is set, then the extension headers when E is
//          set; the TEID is the tunnel id; the inner packet is IPv4 or IPv6.
//   GRE    IP protocol 47; RFC 2784/2890: version 0, C, K and S add 4 octets
//          each; protocol 0x0800 IPv4, 0x86DD IPv6, 0x6558 Ethernet (TEB);
//          the key is the tunnel id (0 without K). Version 1 (PPTP's
//          enhanced GRE) and RFC 1701's routing are not opened.
//
// The UDP tunnels are told by their destination port alone, as the RFC and
// TS say senders use it (the source port is free: VXLAN puts a hash of the
// inner headers there).
#pragma once
#include <cstdint>

#include "engine/packet/packet_meta.hh"

namespace sluice_plugins {

enum class TunnelType : uint8_t { None = 0, Vxlan = 1, GtpU = 2, Gre = 3 };
inline constexpr int kTunnelTypes = 4;

struct Tunnel {
  TunnelType type;
  uint32_t id;  // VNI (24 bits), TEID, or GRE key (0 without one)
};

enum class DecapResult : uint8_t {
  NotTunnel,     // not a tunnel this knows (or an IP fragment after the first)
  Decapsulated,  // meta describes the inner packet
  Malformed,     // a tunnel header that cannot be walked: cut short, its lengths
                 // disagree, bits that must be set are not; or an inner packet
                 // cut short (or broken) before its IP header
  Unsupported,   // a valid header of a kind not opened: GRE version 1 or with
                 // routing, a GTP-U message other than a G-PDU, an inner
                 // protocol other than IP (ARP in VXLAN, PPP or MPLS in GRE),
                 // a tunnel packet that is the first of IP fragments
};
inline constexpr int kDecapResults = 4;

// Opens the outermost tunnel of the packet data[0, caplen), whose length on
// the wire was `wirelen` (0: caplen), and whose headers `meta` holds (the
// parse of the outer packet, for any link type: only its offsets are used).
//
// Decapsulated: `meta` becomes parse_packet() of the inner packet (link type
// Ethernet for VXLAN and GRE 0x6558, IPv4 or IPv6 for GTP-U and GRE IP),
// with l3_offset, l4_offset and payload_offset counted from data[0] again (0
// where the inner parse left them 0), so they still point into the frame.
// The inner packet ends where the outer IP datagram (and for GTP-U, its
// length field) says it does: trailing octets of the frame are not its own,
// and a capture cut by a snap length is truncated, not a bad length. The
// inner meta has its own VLAN tags (those of an inner Ethernet frame, none
// for an inner IP packet): the outer tags belong to the transport network.
// The inner packet counts as opened once its IP header was found, whatever
// its status after that (TruncatedL4, ...): the flow table meters it as it
// would any packet with that status.
//
// Otherwise `meta` is left as it is. `tunnel` is the tunnel's type and id
// for Decapsulated, its type (and id, if read) for Malformed and
// Unsupported, {None, 0} for NotTunnel.
//
// Never reads outside data[0, min(caplen, 65535)).
DecapResult decapsulate(const uint8_t *data, uint32_t caplen, uint32_t wirelen, sluice::PacketMeta &meta,
                        Tunnel &tunnel);

// Stable short names: "vxlan", "gtp-u", "gre" ("none"); "not_tunnel",
// "decapsulated", "malformed", "unsupported".
const char *tunnel_type_name(TunnelType t);
const char *decap_result_name(DecapResult r);

}  // namespace sluice_plugins
