// Tunnel decapsulation (elements/plugins/tunnel_headers): hand-built VXLAN,
// GTP-U and GRE packets with exact checks of the inner headers and offsets,
// every truncation and random corruptions of them (run under ASan: nothing
// read out of bounds), the kinds not opened; and the tunnels of a real trace
// compared with tshark's dissection of their inner packets.
#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <unistd.h>

#include <array>
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bytes_fixture.hh"
#include "elements/plugins/tunnel_headers.hh"
#include "engine/packet/parse.hh"

using namespace sluice;
using namespace sluice_plugins;

namespace {

using namespace sluice::test::bytes;
using Addr = std::array<uint8_t, 16>;

Addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) { return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d}; }
Addr v6(uint16_t first, uint16_t last) {  // first::last
  Addr a{};
  a[0] = uint8_t(first >> 8), a[1] = uint8_t(first), a[14] = uint8_t(last >> 8), a[15] = uint8_t(last);
  return a;
}
Addr addr(const uint8_t *p) {
  Addr a;
  std::memcpy(a.data(), p, 16);
  return a;
}

Bytes tcp(uint16_t sport, uint16_t dport, Bytes payload = {}) {
  return cat({be16(sport), be16(dport), zeros(8), {0x50, 0x18}, zeros(6), payload});
}
Bytes udp(uint16_t sport, uint16_t dport, Bytes payload = {}) {
  return cat({be16(sport), be16(dport), be16(uint16_t(8 + payload.size())), zeros(2), payload});
}
// IPv4 flags and fragment offset: DF by default.
Bytes ipv4(Addr src, Addr dst, uint8_t proto, const Bytes &payload, uint16_t frag = 0x4000, int total_delta = 0) {
  return cat({{0x45, 0}, be16(uint16_t(int(20 + payload.size()) + total_delta)), be16(0x1234), be16(frag),
              {64, proto, 0, 0}, Bytes(src.begin() + 12, src.end()), Bytes(dst.begin() + 12, dst.end()), payload});
}
Bytes ipv6(Addr src, Addr dst, uint8_t next, const Bytes &payload) {
  return cat({{0x60, 0, 0, 0}, be16(uint16_t(payload.size())), {next, 64}, Bytes(src.begin(), src.end()),
              Bytes(dst.begin(), dst.end()), payload});
}
const Bytes kMacs = {0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10};
Bytes ether(uint16_t type, const Bytes &payload) { return cat({kMacs, be16(type), payload}); }
// An 802.1Q-tagged frame.
Bytes ether_vlan(uint16_t vid, uint16_t type, const Bytes &payload) {
  return cat({kMacs, be16(0x8100), be16(vid), be16(type), payload});
}

Bytes vxlan(uint32_t vni, const Bytes &inner, uint8_t flags = 0x08) {
  return cat({{flags, 0, 0, 0}, be32(vni << 8), inner});
}
// A GTPv1-U header: `flags` (0x30 plain, 0x32 with a sequence number, 0x34
// with extension headers), then the optional octets and `exts` (each an
// extension header whose last octet the next one's type is written into).
Bytes gtpu(uint32_t teid, const Bytes &inner, uint8_t flags = 0x30, std::vector<Bytes> exts = {},
           uint8_t type = 0xff) {
  Bytes opt;
  if (flags & 0x07) {
    opt = {0, 7, 0, uint8_t(exts.empty() ? 0 : 0x85)};  // sequence number, N-PDU, next extension type
    for (size_t i = 0; i < exts.size(); ++i) {
      exts[i].back() = i + 1 < exts.size() ? 0x85 : 0;
      opt.insert(opt.end(), exts[i].begin(), exts[i].end());
    }
  }
  Bytes body = cat({opt, inner});
  return cat({{flags, type}, be16(uint16_t(body.size())), be32(teid), body});
}
// PDU session container (TS 38.415): 4 octets, length 1.
Bytes pdu_session(uint8_t qfi) { return {1, 0x10, qfi, 0}; }

Bytes gre(uint16_t proto, const Bytes &inner, uint8_t flags = 0, uint32_t key = 0, uint8_t version = 0) {
  Bytes h = cat({{flags, version}, be16(proto)});
  if (flags & 0x80) h = cat({h, {0xab, 0xcd, 0, 0}});  // checksum, reserved
  if (flags & 0x20) h = cat({h, be32(key)});
  if (flags & 0x10) h = cat({h, be32(77)});  // sequence number
  return cat({h, inner});
}

const Addr kOuterA = v4(10, 1, 0, 1), kOuterB = v4(10, 1, 0, 2);
const Addr kInnerA = v4(192, 168, 7, 1), kInnerB = v4(172, 16, 3, 9);

// The outer frame: Ethernet, VLAN 100, IPv4 from A to B.
Bytes outer_udp(uint16_t sport, uint16_t dport, const Bytes &payload) {
  return ether_vlan(100, 0x0800, ipv4(kOuterA, kOuterB, 17, udp(sport, dport, payload)));
}
Bytes outer_gre(const Bytes &payload) { return ether_vlan(100, 0x0800, ipv4(kOuterA, kOuterB, 47, payload)); }

struct Result {
  DecapResult r;
  Tunnel t;
  PacketMeta outer, meta;
};
// Parses `frame` (the first caplen octets captured, wirelen on the wire) and
// decapsulates it. The captured octets are copied into a buffer of exactly
// their size, so that ASan sees a read past them.
Result decap(const Bytes &frame, size_t caplen = SIZE_MAX, size_t wirelen = SIZE_MAX) {
  if (caplen > frame.size()) caplen = frame.size();
  if (wirelen > frame.size()) wirelen = frame.size();
  std::unique_ptr<uint8_t[]> data(new uint8_t[caplen ? caplen : 1]);
  std::memcpy(data.get(), frame.data(), caplen);
  Result out{};
  parse_packet(data.get(), uint32_t(caplen), LinkType::Ethernet, out.outer, uint32_t(wirelen));
  out.meta = out.outer;
  out.r = decapsulate(data.get(), uint32_t(caplen), uint32_t(wirelen), out.meta, out.t);
  return out;
}
bool unchanged(const Result &x) { return std::memcmp(&x.outer, &x.meta, sizeof x.meta) == 0; }

// Where the inner packet starts in each frame: outer Ethernet + VLAN (18),
// IPv4 (20), then UDP (8) or not.
constexpr uint32_t kOuterIp = 18, kOuterL4 = 38, kUdpPayload = 46;

}  // namespace

TEST_CASE("tunnel decap: VXLAN with inner IPv4 TCP", "[tunnel]") {
  Bytes inner = ether(0x0800, ipv4(kInnerA, kInnerB, 6, tcp(40000, 443, Bytes(10, 'x'))));
  for (uint16_t port : {uint16_t(4789), uint16_t(8472)}) {
    Result x = decap(outer_udp(54321, port, vxlan(0x123456, inner)));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.type == TunnelType::Vxlan);
    CHECK(x.t.id == 0x123456);
    const PacketMeta &m = x.meta;
    CHECK(m.status == ParseStatus::Ok);
    CHECK(m.is_ipv4());
    CHECK(addr(m.src_addr) == kInnerA);
    CHECK(addr(m.dst_addr) == kInnerB);
    CHECK(m.ip_proto == 6);
    CHECK(m.src_port == 40000);
    CHECK(m.dst_port == 443);
    CHECK(m.tcp_flags == 0x18);
    uint32_t start = kUdpPayload + 8;  // the inner Ethernet frame
    CHECK(m.l3_offset == start + 14);
    CHECK(m.l4_offset == start + 34);
    CHECK(m.payload_offset == start + 54);
    CHECK(m.ip_total_length == 20 + 20 + 10);
    CHECK(m.ethertype == 0x0800);
    // the outer tag (100) is the transport's: the inner frame has none
    CHECK(m.vlan_count == 0);
    CHECK(m.vlan_outer == 0);
  }
  // octets after the outer IP datagram (a trailer) are not the inner packet's
  Result x = decap(cat({outer_udp(54321, 4789, vxlan(1, inner)), zeros(6)}));
  REQUIRE(x.r == DecapResult::Decapsulated);
  CHECK(x.meta.ip_total_length == 20 + 20 + 10);
  CHECK(x.meta.payload_offset == kUdpPayload + 8 + 54);
}

TEST_CASE("tunnel decap: VXLAN keeps the inner frame's own VLAN tag", "[tunnel]") {
  Bytes inner = ether_vlan(7, 0x0800, ipv4(kInnerA, kInnerB, 17, udp(5353, 53)));
  Result x = decap(outer_udp(1, 4789, vxlan(42, inner)));
  REQUIRE(x.r == DecapResult::Decapsulated);
  CHECK(x.t.id == 42);
  CHECK(x.meta.vlan_count == 1);
  CHECK(x.meta.vlan_outer == 7);
  CHECK(x.meta.l3_offset == kUdpPayload + 8 + 18);
  CHECK(x.meta.src_port == 5353);
  CHECK(x.meta.dst_port == 53);
}

TEST_CASE("tunnel decap: GTP-U with extension headers and inner IPv6 UDP", "[tunnel]") {
  Bytes inner = ipv6(v6(0x2001, 0xa), v6(0x2a00, 0xb), 17, udp(3000, 4000, Bytes(5, 1)));
  SECTION("one extension header") {
    Result x = decap(outer_udp(2152, 2152, gtpu(0xdeadbeef, inner, 0x34, {pdu_session(9)})));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.type == TunnelType::GtpU);
    CHECK(x.t.id == 0xdeadbeef);
    const PacketMeta &m = x.meta;
    CHECK(m.status == ParseStatus::Ok);
    CHECK(m.is_ipv6());
    CHECK(addr(m.src_addr) == v6(0x2001, 0xa));
    CHECK(addr(m.dst_addr) == v6(0x2a00, 0xb));
    CHECK(m.ip_proto == 17);
    CHECK(m.src_port == 3000);
    CHECK(m.dst_port == 4000);
    uint32_t start = kUdpPayload + 12 + 4;
    CHECK(m.l3_offset == start);
    CHECK(m.l4_offset == start + 40);
    CHECK(m.payload_offset == start + 48);
    CHECK(m.ethertype == 0x86dd);
    CHECK(m.vlan_count == 0);
  }
  SECTION("two extension headers, one of 8 octets") {
    Bytes long_ext = {2, 1, 2, 3, 4, 5, 6, 0};
    Result x = decap(outer_udp(2152, 2152, gtpu(7, inner, 0x34, {long_ext, pdu_session(1)})));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.meta.l3_offset == kUdpPayload + 12 + 8 + 4);
    CHECK(x.meta.src_port == 3000);
  }
  SECTION("a sequence number, no extension header") {
    Result x = decap(outer_udp(40000, 2152, gtpu(7, inner, 0x32)));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.meta.l3_offset == kUdpPayload + 12);
  }
  SECTION("the plain 8-octet header, inner IPv4") {
    Result x = decap(outer_udp(2152, 2152, gtpu(1, ipv4(kInnerA, kInnerB, 6, tcp(1, 2)))));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.meta.l3_offset == kUdpPayload + 8);
    CHECK(x.meta.l4_offset == kUdpPayload + 28);
    CHECK(x.meta.is_ipv4());
    CHECK(addr(x.meta.src_addr) == kInnerA);
  }
}

TEST_CASE("tunnel decap: GRE with a key and inner IPv4", "[tunnel]") {
  Bytes inner = ipv4(kInnerA, kInnerB, 6, tcp(2222, 22));
  SECTION("key only") {
    Result x = decap(outer_gre(gre(0x0800, inner, 0x20, 0xcafe0001)));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.type == TunnelType::Gre);
    CHECK(x.t.id == 0xcafe0001);
    CHECK(addr(x.meta.src_addr) == kInnerA);
    CHECK(addr(x.meta.dst_addr) == kInnerB);
    CHECK(x.meta.ip_proto == 6);
    CHECK(x.meta.src_port == 2222);
    CHECK(x.meta.dst_port == 22);
    CHECK(x.meta.l3_offset == kOuterL4 + 8);
    CHECK(x.meta.l4_offset == kOuterL4 + 28);
    CHECK(x.meta.payload_offset == kOuterL4 + 48);
  }
  SECTION("checksum, key and sequence number") {
    Result x = decap(outer_gre(gre(0x0800, inner, 0xb0, 99)));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.id == 99);
    CHECK(x.meta.l3_offset == kOuterL4 + 16);
  }
  SECTION("no key: id 0; inner IPv6") {
    Result x = decap(outer_gre(gre(0x86dd, ipv6(v6(1, 1), v6(1, 2), 58, {128, 0, 0, 0, 0, 1, 0, 1}))));
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.id == 0);
    CHECK(x.meta.is_ipv6());
    CHECK(x.meta.ip_proto == 58);
    CHECK(x.meta.dst_port == 128 << 8);
    CHECK(x.meta.l3_offset == kOuterL4 + 4);
  }
  SECTION("over IPv6") {
    Bytes f = ether(0x86dd, ipv6(v6(0xfd00, 1), v6(0xfd00, 2), 47, gre(0x0800, inner, 0x20, 5)));
    Result x = decap(f);
    REQUIRE(x.r == DecapResult::Decapsulated);
    CHECK(x.t.id == 5);
    CHECK(x.meta.l3_offset == 14 + 40 + 8);
    CHECK(addr(x.meta.src_addr) == kInnerA);
  }
  SECTION("an inner header of the other IP version is malformed") {
    Result x = decap(outer_gre(gre(0x86dd, inner)));
    CHECK(x.r == DecapResult::Malformed);
    CHECK(unchanged(x));
  }
}

TEST_CASE("tunnel decap: GRE transparent Ethernet bridging", "[tunnel]") {
  Bytes inner = ether_vlan(12, 0x0800, ipv4(kInnerB, kInnerA, 17, udp(123, 123)));
  Result x = decap(outer_gre(gre(0x6558, inner, 0x20, 1000)));
  REQUIRE(x.r == DecapResult::Decapsulated);
  CHECK(x.t.type == TunnelType::Gre);
  CHECK(x.t.id == 1000);
  CHECK(addr(x.meta.src_addr) == kInnerB);
  CHECK(x.meta.src_port == 123);
  CHECK(x.meta.vlan_outer == 12);
  CHECK(x.meta.l3_offset == kOuterL4 + 8 + 18);
  CHECK(x.meta.l4_offset == kOuterL4 + 8 + 38);
  CHECK(x.meta.payload_offset == kOuterL4 + 8 + 46);
}

TEST_CASE("tunnel decap: kinds not opened are unsupported, the packet unchanged", "[tunnel]") {
  Bytes ip = ipv4(kInnerA, kInnerB, 6, tcp(1, 2));
  auto unsupported = [](const Bytes &frame, TunnelType type) {
    Result x = decap(frame);
    CHECK(x.r == DecapResult::Unsupported);
    CHECK(x.t.type == type);
    CHECK(unchanged(x));
  };
  // PPTP: version 1, key present (payload length, call id), PPP inside
  unsupported(outer_gre(gre(0x880b, {0xff, 0x03, 0x00, 0x21}, 0x30, 0x00100001, 1)), TunnelType::Gre);
  unsupported(outer_gre(gre(0x0800, ip, 0x40)), TunnelType::Gre);   // RFC 1701 routing
  unsupported(outer_gre(gre(0x8847, ip)), TunnelType::Gre);         // MPLS
  unsupported(outer_udp(2152, 2152, gtpu(1, {}, 0x32, {}, 1)), TunnelType::GtpU);  // echo request
  unsupported(outer_udp(2152, 2152, gtpu(1, {}, 0x30, {}, 0xfe)), TunnelType::GtpU);  // end marker
  unsupported(outer_udp(2152, 2152, gtpu(1, {0x80, 1, 2, 3})), TunnelType::GtpU);  // not IP
  unsupported(outer_udp(1, 4789, vxlan(1, ether(0x0806, zeros(28)))), TunnelType::Vxlan);  // ARP
  // the first of IP fragments
  unsupported(ether(0x0800, ipv4(kOuterA, kOuterB, 17, udp(1, 4789, vxlan(1, ether(0x0800, ip))), 0x2000)),
              TunnelType::Vxlan);
}

TEST_CASE("tunnel decap: headers that cannot be walked are malformed, the packet unchanged", "[tunnel]") {
  Bytes ip = ipv4(kInnerA, kInnerB, 6, tcp(1, 2));
  auto malformed = [](const Bytes &frame, TunnelType type) {
    Result x = decap(frame);
    CHECK(x.r == DecapResult::Malformed);
    CHECK(x.t.type == type);
    CHECK(unchanged(x));
  };
  malformed(outer_udp(1, 4789, vxlan(1, ether(0x0800, ip), 0x00)), TunnelType::Vxlan);  // no I flag
  for (uint8_t flags : {uint8_t(0x50), uint8_t(0x20)}) {  // version 2; GTP' (PT 0)
    Bytes g = gtpu(1, ip);
    g[0] = flags;
    malformed(outer_udp(1, 2152, g), TunnelType::GtpU);
  }
  malformed(outer_gre(gre(0x0800, ip, 0, 0, 2)), TunnelType::Gre);  // version 2
  {
    Bytes g = gtpu(1, ip);
    g[3] += 4;  // a length past the UDP payload
    malformed(outer_udp(1, 2152, g), TunnelType::GtpU);
  }
  {
    Bytes g = gtpu(1, ip, 0x34, {pdu_session(1)});
    g[12] = 0;  // an extension header of length 0
    malformed(outer_udp(1, 2152, g), TunnelType::GtpU);
  }
  {
    Bytes g = gtpu(1, ip, 0x34, {pdu_session(1)});
    g[12] = 200;  // an extension header past the end
    malformed(outer_udp(1, 2152, g), TunnelType::GtpU);
  }
  {
    Bytes g = gtpu(1, {}, 0x34, {pdu_session(1)});
    malformed(outer_udp(1, 2152, g), TunnelType::GtpU);  // a G-PDU with nothing in it
  }
  {
    Bytes f = outer_udp(1, 4789, vxlan(1, ether(0x0800, ip)));
    f[kOuterL4 + 4] = 0, f[kOuterL4 + 5] = 7;  // UDP length below 8
    malformed(f, TunnelType::Vxlan);
    f[kOuterL4 + 4] = 0xff;  // UDP length past the IP datagram
    malformed(f, TunnelType::Vxlan);
  }
  // an inner IP length past the outer datagram: trailing octets of the frame are not the tunnel's
  malformed(cat({outer_gre(gre(0x0800, ipv4(kInnerA, kInnerB, 6, tcp(1, 2), 0x4000, 4))), zeros(4)}),
            TunnelType::Gre);
  malformed(outer_udp(1, 4789, vxlan(1, Bytes(10, 0))), TunnelType::Vxlan);  // inner Ethernet cut short
}

TEST_CASE("tunnel decap: other traffic is not touched", "[tunnel]") {
  Bytes ip = ipv4(kInnerA, kInnerB, 6, tcp(1, 2));
  auto not_tunnel = [](const Bytes &frame) {
    Result x = decap(frame);
    CHECK(x.r == DecapResult::NotTunnel);
    CHECK(x.t.type == TunnelType::None);
    CHECK(x.t.id == 0);
    CHECK(unchanged(x));
  };
  not_tunnel(outer_udp(5353, 53, zeros(20)));
  not_tunnel(outer_udp(4789, 5555, vxlan(1, ether(0x0800, ip))));  // a reply from the port: not VXLAN
  not_tunnel(outer_udp(2152, 5555, gtpu(1, ip)));
  not_tunnel(ether(0x0800, ipv4(kOuterA, kOuterB, 6, tcp(1, 4789, vxlan(1, ether(0x0800, ip))))));
  not_tunnel(ether(0x0806, zeros(28)));
  // a later fragment: its data is no header
  not_tunnel(ether(0x0800, ipv4(kOuterA, kOuterB, 47, gre(0x0800, ip), 0x0010)));
  not_tunnel(ether(0x0800, ipv4(kOuterA, kOuterB, 17, udp(1, 4789, vxlan(1, ether(0x0800, ip))), 0x0010)));
}

TEST_CASE("tunnel decap: a capture cut at every length neither crashes nor half-opens a tunnel", "[tunnel]") {
  Bytes tcp_payload(30, 'p');
  struct Case {
    const char *name;
    Bytes frame;
  };
  std::vector<Case> cases = {
      {"vxlan", outer_udp(9, 4789, vxlan(5, ether_vlan(3, 0x0800, ipv4(kInnerA, kInnerB, 6, tcp(1, 2, tcp_payload)))))},
      {"gtp-u", outer_udp(2152, 2152,
                          gtpu(5, ipv6(v6(1, 1), v6(1, 2), 6, tcp(1, 2, tcp_payload)), 0x34,
                               {Bytes{2, 1, 2, 3, 4, 5, 6, 0}, pdu_session(1)}))},
      {"gre", outer_gre(gre(0x0800, ipv4(kInnerA, kInnerB, 6, tcp(1, 2, tcp_payload)), 0xb0, 5))},
      {"gre teb", outer_gre(gre(0x6558, ether(0x0800, ipv4(kInnerA, kInnerB, 6, tcp(1, 2, tcp_payload))), 0x20, 5))},
  };
  for (const Case &c : cases) {
    INFO(c.name);
    Result whole = decap(c.frame);
    REQUIRE(whole.r == DecapResult::Decapsulated);
    uint32_t inner_l4 = whole.meta.l4_offset;  // the inner IP header ends here
    for (size_t len = 0; len < c.frame.size(); ++len) {
      INFO("captured " << len << " of " << c.frame.size());
      // cut by a snap length (the wire length is the whole frame's) ...
      Result x = decap(c.frame, len);
      if (len >= inner_l4) {
        // the inner IP header is there: opened, the inner status says what is missing
        REQUIRE(x.r == DecapResult::Decapsulated);
        CHECK(x.t.id == whole.t.id);
        CHECK(std::memcmp(x.meta.src_addr, whole.meta.src_addr, 32) == 0);
        CHECK(x.meta.status == (len >= whole.meta.payload_offset ? ParseStatus::Ok : ParseStatus::TruncatedL4));
        CHECK(x.meta.l3_offset == whole.meta.l3_offset);
      } else {
        CHECK((x.r == DecapResult::Malformed || x.r == DecapResult::NotTunnel));
        CHECK(unchanged(x));
      }
      // ... or a frame that short on the wire too: never a half-opened tunnel
      Result y = decap(c.frame, len, len);
      CHECK(y.r != DecapResult::Decapsulated);
      CHECK(unchanged(y));
    }
  }
}

TEST_CASE("tunnel decap: corrupted tunnel packets are read within bounds", "[tunnel]") {
  Bytes payload(40, 'p');
  std::vector<Bytes> frames = {
      outer_udp(9, 4789, vxlan(5, ether(0x0800, ipv4(kInnerA, kInnerB, 6, tcp(1, 2, payload))))),
      outer_udp(2152, 2152, gtpu(5, ipv4(kInnerA, kInnerB, 17, udp(1, 2, payload)), 0x34, {pdu_session(1)})),
      outer_gre(gre(0x6558, ether(0x86dd, ipv6(v6(1, 1), v6(1, 2), 6, tcp(1, 2, payload))), 0xb0, 5)),
  };
  std::mt19937 rng(1234);
  int outcomes[kDecapResults] = {};
  for (const Bytes &f : frames) {
    for (int round = 0; round < 4000; ++round) {
      Bytes g = f;
      // corrupt a few octets past the outer IP header (its addresses and
      // lengths stay readable), sometimes cut the capture
      int n = 1 + int(rng() % 4);
      for (int i = 0; i < n; ++i) g[kOuterIp + 9 + rng() % (g.size() - kOuterIp - 9)] = uint8_t(rng());
      size_t cap = rng() % 4 ? g.size() : rng() % g.size();
      Result x = decap(g, cap);
      ++outcomes[int(x.r)];
      if (x.r == DecapResult::Decapsulated) {
        CHECK(x.meta.is_ip());
        CHECK(x.meta.l3_offset < cap);
        CHECK(x.meta.l4_offset <= cap);
        CHECK(x.meta.payload_offset <= cap);
      } else {
        CHECK(unchanged(x));
      }
    }
  }
  // the corruption reaches every outcome
  for (int r = 0; r < kDecapResults; ++r) CHECK(outcomes[r] > 0);
}

// ------------------------------------------------------------ a real trace

namespace {

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  if (!s.empty() && s.back() == sep) out.push_back("");
  return out;
}

// What tshark says of a packet it calls VXLAN, GTP or GRE.
struct Dissected {
  TunnelType type = TunnelType::None;
  bool opened = false;  // what we must open: G-PDU, GRE version 0, an inner IP layer
  Addr src{}, dst{};
  uint8_t proto = 0;
  uint16_t sport = 0, dport = 0;
  uint32_t id = 0;
  std::string protocols;
};

// The fields asked of tshark, in order.
const char *const kFields[] = {"frame.number", "frame.protocols", "ip.src",      "ip.dst",      "ip.proto",
                               "ipv6.src",     "ipv6.dst",        "ipv6.nxt",    "tcp.srcport", "tcp.dstport",
                               "udp.srcport",  "udp.dstport",     "sctp.srcport", "sctp.dstport", "icmp.type",
                               "icmp.code",    "icmpv6.type",     "icmpv6.code", "gtp.message", "vxlan.vni",
                               "gtp.teid",     "gre.key",         "gre.flags.version"};
enum Field {
  kNumber, kProtocols, kIpSrc, kIpDst, kIpProto, kIp6Src, kIp6Dst, kIp6Nxt, kTcpSport, kTcpDport, kUdpSport,
  kUdpDport, kSctpSport, kSctpDport, kIcmpType, kIcmpCode, kIcmp6Type, kIcmp6Code, kGtpMessage, kVxlanVni,
  kGtpTeid, kGreKey, kGreVersion, kFieldCount
};

// The n-th (from 0) of a field's comma-separated occurrences, or "".
std::string nth(const std::vector<std::string> &row, Field f, int n) {
  std::vector<std::string> v = split(row[f], ',');
  return n >= 0 && n < int(v.size()) ? v[n] : "";
}
unsigned long number(const std::string &s) { return s.empty() ? 0 : std::strtoul(s.c_str(), nullptr, 0); }

// The inner packet of the tunnel: the first IP layer after the tunnel's
// layer in frame.protocols, and the occurrence of each field it has (a
// layer's fields are its protocol's n-th occurrence, n counted in the list).
Dissected dissect(const std::vector<std::string> &row) {
  Dissected d;
  d.protocols = row[kProtocols];
  std::vector<std::string> layers = split(row[kProtocols], ':');
  std::map<std::string, int> seen;  // occurrences of each protocol so far
  size_t i = 0;
  for (; i < layers.size(); ++i) {
    const std::string &l = layers[i];
    if (l == "vxlan") d.type = TunnelType::Vxlan;
    else if (l == "gtp") d.type = TunnelType::GtpU;
    else if (l == "gre") d.type = TunnelType::Gre;
    if (d.type != TunnelType::None) break;
    ++seen[l];
  }
  if (d.type == TunnelType::None) return d;
  switch (d.type) {
    case TunnelType::Vxlan: d.id = uint32_t(number(nth(row, kVxlanVni, 0))); break;
    case TunnelType::GtpU:
      d.id = uint32_t(number(nth(row, kGtpTeid, 0)));
      if (number(nth(row, kGtpMessage, 0)) != 0xff) return d;
      break;
    case TunnelType::Gre:
      d.id = uint32_t(number(nth(row, kGreKey, 0)));
      if (number(nth(row, kGreVersion, 0)) != 0) return d;
      break;
    default: break;
  }
  // the inner IP layer
  for (++i; i < layers.size() && layers[i] != "ip" && layers[i] != "ipv6"; ++i) ++seen[layers[i]];
  if (i == layers.size()) return d;
  bool v6 = layers[i] == "ipv6";
  int ip_n = seen[layers[i]]++;
  std::string src = nth(row, v6 ? kIp6Src : kIpSrc, ip_n), dst = nth(row, v6 ? kIp6Dst : kIpDst, ip_n);
  if (v6) {
    inet_pton(AF_INET6, src.c_str(), d.src.data());
    inet_pton(AF_INET6, dst.c_str(), d.dst.data());
  } else {
    d.src = d.dst = v4(0, 0, 0, 0);
    inet_pton(AF_INET, src.c_str(), d.src.data() + 12);
    inet_pton(AF_INET, dst.c_str(), d.dst.data() + 12);
  }
  // the transport after it (IPv6 extension headers are layers "ipv6.*")
  for (++i; i < layers.size() && layers[i].rfind("ipv6.", 0) == 0; ++i) ++seen[layers[i]];
  std::string l4 = i < layers.size() ? layers[i] : "";
  int n = seen[l4];
  auto ports = [&](uint8_t proto, Field sport, Field dport) {
    d.proto = proto;
    d.sport = uint16_t(number(nth(row, sport, n)));
    d.dport = uint16_t(number(nth(row, dport, n)));
  };
  if (l4 == "tcp") {
    ports(6, kTcpSport, kTcpDport);
  } else if (l4 == "udp") {
    ports(17, kUdpSport, kUdpDport);
  } else if (l4 == "sctp") {
    ports(132, kSctpSport, kSctpDport);
  } else if (l4 == "icmp" || l4 == "icmpv6") {
    bool i6 = l4 == "icmpv6";
    d.proto = i6 ? 58 : 1;
    d.dport = uint16_t(number(nth(row, i6 ? kIcmp6Type : kIcmpType, n)) << 8 |
                       number(nth(row, i6 ? kIcmp6Code : kIcmpCode, n)));
  } else if (l4 == "esp") {
    d.proto = 50;
  } else {
    d.proto = uint8_t(number(nth(row, v6 ? kIp6Nxt : kIpProto, ip_n)));
  }
  d.opened = true;
  return d;
}

std::string run_capture(const std::string &cmd) {
  FILE *p = popen(cmd.c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  REQUIRE(pclose(p) == 0);
  return out;
}

std::string text(const Addr &a) {
  char buf[INET6_ADDRSTRLEN];
  bool mapped = std::memcmp(a.data(), v4(0, 0, 0, 0).data(), 12) == 0;
  inet_ntop(mapped ? AF_INET : AF_INET6, mapped ? a.data() + 12 : a.data(), buf, sizeof buf);
  return buf;
}

bool have_tshark() { return std::system("command -v tshark > /dev/null 2>&1") == 0; }

// Our decapsulation of every packet of a pcap beside tshark's dissection.
struct Comparison {
  int expected[kTunnelTypes] = {};  // packets tshark opens to an inner IP packet, per type
  int agree[kTunnelTypes] = {};     // ... that we open to the same tunnel id and 5-tuple
  int ours[kDecapResults][kTunnelTypes] = {};
  int not_opened_by_tshark = 0;     // GTP signalling, GRE version 1, no inner IP
  std::vector<std::string> disagreements;

  std::string summary() const {
    std::string s = "tunnel packets tshark opens to an inner IP packet, and we open alike:";
    for (TunnelType ty : {TunnelType::Vxlan, TunnelType::GtpU, TunnelType::Gre})
      s += std::string(" ") + tunnel_type_name(ty) + " " + std::to_string(agree[int(ty)]) + "/" +
           std::to_string(expected[int(ty)]);
    s += "; tunnel packets tshark does not open (GTP signalling, GRE version 1, no inner IP): " +
         std::to_string(not_opened_by_tshark) + "; ours:";
    for (DecapResult r : {DecapResult::Decapsulated, DecapResult::Malformed, DecapResult::Unsupported})
      for (TunnelType ty : {TunnelType::Vxlan, TunnelType::GtpU, TunnelType::Gre})
        if (ours[int(r)][int(ty)])
          s += std::string(" ") + decap_result_name(r) + " " + tunnel_type_name(ty) + " " +
               std::to_string(ours[int(r)][int(ty)]);
    return s;
  }
};

Comparison compare_with_tshark(const std::string &path) {
  std::string cmd = "tshark -r '" + path + "' -Y 'vxlan || gtp || gre' -T fields -E separator='|'";
  for (const char *f : kFields) cmd += std::string(" -e ") + f;
  std::map<uint64_t, Dissected> theirs;
  for (const std::string &line : split(run_capture(cmd + " 2>/dev/null"), '\n')) {
    if (line.empty()) continue;
    std::vector<std::string> row = split(line, '|');
    REQUIRE(row.size() == size_t(kFieldCount));
    theirs[number(row[kNumber])] = dissect(row);
  }

  Comparison c;
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *pcap = pcap_open_offline(path.c_str(), err);
  REQUIRE(pcap);
  REQUIRE(pcap_datalink(pcap) == DLT_EN10MB);
  pcap_pkthdr *h;
  const u_char *data;
  for (uint64_t frame = 1; pcap_next_ex(pcap, &h, &data) == 1; ++frame) {
    PacketMeta m;
    parse_packet(data, h->caplen, LinkType::Ethernet, m, h->len);
    PacketMeta outer = m;
    Tunnel t;
    DecapResult r = decapsulate(data, h->caplen, h->len, m, t);
    ++c.ours[int(r)][int(t.type)];
    if (r != DecapResult::Decapsulated) CHECK(std::memcmp(&outer, &m, sizeof m) == 0);
    std::string at = "frame " + std::to_string(frame);
    auto it = theirs.find(frame);
    if (it == theirs.end() || it->second.type == TunnelType::None) {
      if (r == DecapResult::Decapsulated)
        c.disagreements.push_back(at + ": we open a " + tunnel_type_name(t.type) + " tunnel tshark does not see");
      continue;
    }
    const Dissected &d = it->second;
    if (!d.opened) {
      ++c.not_opened_by_tshark;
      if (r == DecapResult::Decapsulated)
        c.disagreements.push_back(at + ": opened, tshark has no inner IP (" + d.protocols + ")");
      continue;
    }
    ++c.expected[int(d.type)];
    if (r == DecapResult::Decapsulated && t.type == d.type && t.id == d.id && addr(m.src_addr) == d.src &&
        addr(m.dst_addr) == d.dst && m.ip_proto == d.proto && m.src_port == d.sport && m.dst_port == d.dport) {
      ++c.agree[int(d.type)];
      continue;
    }
    c.disagreements.push_back(at + " (" + d.protocols + "): tshark " + tunnel_type_name(d.type) + " " +
                              std::to_string(d.id) + " " + text(d.src) + " " + text(d.dst) + " " +
                              std::to_string(d.proto) + " " + std::to_string(d.sport) + " " +
                              std::to_string(d.dport) + "; ours " + decap_result_name(r) + " " +
                              tunnel_type_name(t.type) + " " + std::to_string(t.id) + " " + text(addr(m.src_addr)) +
                              " " + text(addr(m.dst_addr)) + " " + std::to_string(m.ip_proto) + " " +
                              std::to_string(m.src_port) + " " + std::to_string(m.dst_port));
  }
  pcap_close(pcap);
  return c;
}

}  // namespace

TEST_CASE("tunnel decap: the tunnels of a real trace open to what tshark dissects inside", "[tunnel][ndpi]") {
  namespace fs = std::filesystem;
  fs::path trace = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces/ndpi_merged.pcap";
  if (!fs::exists(trace)) {
    WARN("skipped: " << trace << " is absent (the shared traces are not beside the project)");
    return;
  }
  if (!have_tshark()) {
    WARN("skipped: tshark is not installed");
    return;
  }
  Comparison c = compare_with_tshark(trace.string());
  WARN(c.summary());
  for (const std::string &d : c.disagreements) UNSCOPED_INFO(d);
  CHECK(c.disagreements.empty());
  // the trace has VXLAN and GTP-U tunnels; its one GRE packet is PPTP's
  // (version 1), which neither opens
  CHECK(c.expected[int(TunnelType::Vxlan)] > 0);
  CHECK(c.expected[int(TunnelType::GtpU)] > 0);
  CHECK(c.ours[int(DecapResult::Unsupported)][int(TunnelType::Gre)] == c.not_opened_by_tshark);
}

// The trace has no GRE that opens: the hand-built tunnels, GRE of every
// kind among them, dissected by tshark too.
TEST_CASE("tunnel decap: hand-built tunnels open to what tshark dissects inside", "[tunnel]") {
  namespace fs = std::filesystem;
  if (!have_tshark()) {
    WARN("skipped: tshark is not installed");
    return;
  }
  Bytes ip4 = ipv4(kInnerA, kInnerB, 6, tcp(2222, 22, Bytes(8, 'x')));
  Bytes ip6 = ipv6(v6(0x2001, 0xa), v6(0x2a00, 0xb), 17, udp(3000, 4000, Bytes(5, 1)));
  std::vector<Bytes> frames = {
      outer_udp(54321, 4789, vxlan(0x123456, ether(0x0800, ip4))),
      outer_udp(54321, 4789, vxlan(7, ether_vlan(9, 0x86dd, ip6))),
      outer_udp(2152, 2152, gtpu(0xdeadbeef, ip6, 0x34, {pdu_session(9)})),
      outer_udp(2152, 2152, gtpu(5, ip4, 0x32)),
      outer_udp(2152, 2152, gtpu(6, ip4)),
      outer_gre(gre(0x0800, ip4, 0x20, 0xcafe0001)),
      outer_gre(gre(0x0800, ip4, 0xb0, 99)),
      outer_gre(gre(0x0800, ip4, 0x10)),
      outer_gre(gre(0x86dd, ip6)),
      outer_gre(gre(0x6558, ether_vlan(12, 0x0800, ip4), 0x20, 1000)),
      ether(0x86dd, ipv6(v6(0xfd00, 1), v6(0xfd00, 2), 47, gre(0x86dd, ip6, 0x20, 5))),
      outer_gre(gre(0x880b, {0xff, 0x03, 0x00, 0x21}, 0x30, 0x00100001, 1)),  // PPTP: not opened
      outer_udp(2152, 2152, gtpu(1, {}, 0x32, {}, 1)),                        // echo request: not opened
  };
  fs::path path = fs::temp_directory_path() / ("sluice_tunnels_" + std::to_string(getpid()) + ".pcap");
  pcap_t *pd = pcap_open_dead(DLT_EN10MB, 65535);
  pcap_dumper_t *d = pcap_dump_open(pd, path.c_str());
  REQUIRE(d);
  for (const Bytes &f : frames) {
    pcap_pkthdr h{};
    h.caplen = h.len = uint32_t(f.size());
    pcap_dump(reinterpret_cast<u_char *>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(pd);
  Comparison c = compare_with_tshark(path.string());
  fs::remove(path);
  INFO(c.summary());
  for (const std::string &s : c.disagreements) UNSCOPED_INFO(s);
  CHECK(c.disagreements.empty());
  CHECK(c.agree[int(TunnelType::Vxlan)] == 2);
  CHECK(c.agree[int(TunnelType::GtpU)] == 3);
  CHECK(c.agree[int(TunnelType::Gre)] == 6);
  CHECK(c.not_opened_by_tshark == 2);
}
