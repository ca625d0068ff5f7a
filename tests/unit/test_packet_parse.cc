// The ingress header parser: hand-built packets of every protocol and
// encapsulation with exact field checks, every malformed reason, every
// truncation of a few packets, and real captures compared with libpcap's BPF.
#include <pcap/pcap.h>

#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "bytes_fixture.hh"
#include "engine/packet/parse.hh"

using namespace sluice;

namespace {

using namespace sluice::test::bytes;
using Addr = std::array<uint8_t, 16>;

Bytes prefix(const Bytes &p, size_t n) { return Bytes(p.begin(), p.begin() + n); }

Addr v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}
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

// ---- L4 ----
Bytes tcp(uint16_t sport, uint16_t dport, uint8_t flags, Bytes options = {}, Bytes payload = {}) {
  uint8_t doff = uint8_t((20 + options.size()) / 4);
  return cat({be16(sport), be16(dport), zeros(8), {uint8_t(doff << 4), flags}, zeros(6), options,
              payload});
}
Bytes udp(uint16_t sport, uint16_t dport, Bytes payload = {}) {
  return cat({be16(sport), be16(dport), be16(uint16_t(8 + payload.size())), zeros(2), payload});
}
Bytes icmp(uint8_t type, uint8_t code) { return {type, code, 0, 0, 0, 1, 0, 7}; }
Bytes sctp(uint16_t sport, uint16_t dport) { return cat({be16(sport), be16(dport), zeros(8)}); }

// ---- L3 ----
struct V4 {
  Addr src = v4(10, 0, 0, 1), dst = v4(192, 168, 1, 2);
  uint8_t ttl = 64, tos = 0;
  uint16_t frag = 0x4000;  // flags and offset: DF
  Bytes options = {};
  int total_delta = 0;  // added to the correct total length
};
Bytes ipv4(uint8_t proto, const Bytes &payload, V4 o = {}) {
  uint8_t ihl = uint8_t((20 + o.options.size()) / 4);
  uint16_t total = uint16_t(int(20 + o.options.size() + payload.size()) + o.total_delta);
  return cat({{uint8_t(0x40 | ihl), o.tos}, be16(total), be16(0x1234), be16(o.frag),
              {o.ttl, proto, 0, 0},
              Bytes(o.src.begin() + 12, o.src.end()), Bytes(o.dst.begin() + 12, o.dst.end()),
              o.options, payload});
}
struct V6 {
  Addr src = v6(0x2001, 1), dst = v6(0x2001, 2);
  uint8_t hlim = 255, tclass = 0;
  int plen_delta = 0;
};
Bytes ipv6(uint8_t next, const Bytes &payload, V6 o = {}) {
  uint16_t plen = uint16_t(int(payload.size()) + o.plen_delta);
  return cat({{uint8_t(0x60 | o.tclass >> 4), uint8_t(o.tclass << 4), 0, 0}, be16(plen),
              {next, o.hlim}, Bytes(o.src.begin(), o.src.end()), Bytes(o.dst.begin(), o.dst.end()),
              payload});
}
// Hop-by-hop, routing, destination options: len8 units of 8 bytes.
Bytes ext(uint8_t next, size_t len8, const Bytes &rest) {
  Bytes h(len8 * 8, 0);
  h[0] = next, h[1] = uint8_t(len8 - 1);
  return cat({h, rest});
}
Bytes frag6(uint8_t next, uint16_t offset, bool more, const Bytes &rest) {
  return cat({{next, 0}, be16(uint16_t(offset << 3 | more)), {0, 0, 0, 9}, rest});
}
Bytes ah(uint8_t next, const Bytes &rest) {  // 24 bytes: payload length field 4 (words - 2)
  Bytes h(24, 0);
  h[0] = next, h[1] = 4;
  return cat({h, rest});
}

// ---- L2 and link layers ----
const Bytes kMacs = {0, 1, 2, 3, 4, 5, 0, 6, 7, 8, 9, 10};
Bytes ether(uint16_t type, const Bytes &payload) { return cat({kMacs, be16(type), payload}); }
Bytes tag(uint16_t vid, uint16_t next_type) { return cat({be16(uint16_t(0x2000 | vid)), be16(next_type)}); }
Bytes mpls(std::initializer_list<uint32_t> labels, const Bytes &payload) {
  Bytes out;
  size_t i = 0;
  for (uint32_t l : labels) {
    bool bottom = ++i == labels.size();
    out.insert(out.end(), {uint8_t(l >> 12), uint8_t(l >> 4), uint8_t(l << 4 | bottom), 64});
  }
  return cat({out, payload});
}
Bytes pppoe(uint16_t ppp_proto, const Bytes &payload) {
  return cat({{0x11, 0x00}, be16(0x0042), be16(uint16_t(payload.size() + 2)), be16(ppp_proto),
              payload});
}
Bytes sll(uint16_t proto, const Bytes &payload) {
  return cat({be16(0), be16(1), be16(6), {1, 2, 3, 4, 5, 6, 0, 0}, be16(proto), payload});
}
Bytes sll2(uint16_t proto, const Bytes &payload) {
  return cat({be16(proto), zeros(2), {0, 0, 0, 2}, be16(1), {0, 6}, {1, 2, 3, 4, 5, 6, 0, 0},
              payload});
}
Bytes loopback(uint32_t family, bool big_endian, const Bytes &payload) {
  Bytes h = {uint8_t(family), uint8_t(family >> 8), uint8_t(family >> 16), uint8_t(family >> 24)};
  if (big_endian) std::reverse(h.begin(), h.end());
  return cat({h, payload});
}
// NFLOG TLVs are in host byte order (little-endian on the machines we run on).
Bytes nflog_tlv(uint16_t type, const Bytes &value) {
  uint16_t len = uint16_t(4 + value.size());
  Bytes t = {uint8_t(len), uint8_t(len >> 8), uint8_t(type), uint8_t(type >> 8)};
  t.insert(t.end(), value.begin(), value.end());
  t.resize((t.size() + 3) & ~size_t(3), 0);
  return t;
}
Bytes nflog(const Bytes &ip_packet) {
  return cat({{2, 0, 0, 42}, nflog_tlv(1, {0x08, 0x00, 1, 0}), nflog_tlv(10, {'e', 't', 'h'}),
              nflog_tlv(9, ip_packet)});
}

PacketMeta parse(const Bytes &p, LinkType link = LinkType::Ethernet, uint32_t wirelen = 0) {
  PacketMeta m;
  parse_packet(p.data(), uint32_t(p.size()), link, m, wirelen);
  return m;
}

constexpr uint8_t kSyn = 0x02, kAck = 0x10, kPsh = 0x08;

}  // namespace

TEST_CASE("PacketMeta is one cache line at most", "[packet]") {
  STATIC_REQUIRE(sizeof(PacketMeta) <= 64);
}

TEST_CASE("Ethernet IPv4 TCP: every field", "[packet]") {
  V4 o;
  o.ttl = 57, o.tos = 0xb8;
  Bytes p = ether(0x0800, ipv4(6, tcp(40000, 443, kSyn | kAck, zeros(12), Bytes(10, 'x')), o));
  PacketMeta m = parse(p);
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ethertype == 0x0800);
  CHECK(m.is_ipv4());
  CHECK_FALSE(m.is_ipv6());
  CHECK(m.has_l4());
  CHECK_FALSE(m.is_fragment());
  CHECK(m.flags == (PacketMeta::kIpv4 | PacketMeta::kHasL4 | PacketMeta::kEthernet));
  CHECK(m.l3_offset == 14);
  CHECK(m.l4_offset == 34);
  CHECK(m.payload_offset == 34 + 32);
  CHECK(addr(m.src_addr) == v4(10, 0, 0, 1));
  CHECK(addr(m.dst_addr) == v4(192, 168, 1, 2));
  CHECK(m.ip_proto == 6);
  CHECK(m.ip_total_length == 20 + 32 + 10);
  CHECK(m.ttl == 57);
  CHECK(m.tos == 0xb8);
  CHECK(m.src_port == 40000);
  CHECK(m.dst_port == 443);
  CHECK(m.tcp_flags == (kSyn | kAck));
  CHECK(m.vlan_count == 0);
  CHECK(m.mpls_count == 0);
}

TEST_CASE("UDP, Ethernet padding, ICMP, SCTP over IPv4", "[packet]") {
  // 42 bytes of headers padded to the 60-byte Ethernet minimum: the padding
  // is not IP and not payload.
  Bytes p = ether(0x0800, ipv4(17, udp(5353, 53)));
  p.resize(60, 0);
  PacketMeta m = parse(p);
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_proto == 17);
  CHECK(m.ip_total_length == 28);
  CHECK(m.src_port == 5353);
  CHECK(m.dst_port == 53);
  CHECK(m.payload_offset == 42);
  CHECK(m.tcp_flags == 0);

  // ICMP keys as flow meters do: source port 0, destination port type << 8 | code.
  m = parse(ether(0x0800, ipv4(1, icmp(3, 13))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.has_l4());
  CHECK(m.src_port == 0);
  CHECK(m.dst_port == (3 << 8 | 13));
  CHECK(m.payload_offset == 34 + 4);

  m = parse(ether(0x0800, ipv4(132, sctp(2905, 3868))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_proto == 132);
  CHECK(m.src_port == 2905);
  CHECK(m.dst_port == 3868);
  CHECK(m.payload_offset == 34 + 12);

  // A protocol the parser does not know: IP is complete, no L4, payload at L4.
  m = parse(ether(0x0800, ipv4(47, zeros(8))));  // GRE
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK_FALSE(m.has_l4());
  CHECK(m.l4_offset == 34);
  CHECK(m.payload_offset == 34);
  CHECK(m.src_port == 0);
  CHECK(m.dst_port == 0);
}

TEST_CASE("IPv4 options", "[packet]") {
  V4 o;
  o.options = {0x94, 0x04, 0, 0, 0x01, 0x01, 0x01, 0x00};  // router alert, NOPs, EOL
  PacketMeta m = parse(ether(0x0800, ipv4(17, udp(1, 2), o)));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.flags == (PacketMeta::kIpv4 | PacketMeta::kIpOptions | PacketMeta::kHasL4 | PacketMeta::kEthernet));
  CHECK(m.l4_offset == 14 + 28);
  CHECK(m.ip_total_length == 28 + 8);
  CHECK(m.src_port == 1);
}

TEST_CASE("IPv4 fragments: only the first carries L4", "[packet]") {
  V4 o;
  o.frag = 0x2000;  // MF, offset 0
  PacketMeta m = parse(ether(0x0800, ipv4(17, udp(123, 456, zeros(16)), o)));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.is_fragment());
  CHECK(m.is_first_fragment());
  CHECK(m.has_l4());
  CHECK(m.src_port == 123);

  for (uint16_t frag : {uint16_t(0x2000 | 185), uint16_t(185)}) {  // a middle and the last fragment
    o.frag = frag;
    m = parse(ether(0x0800, ipv4(17, zeros(24), o)));
    INFO("frag field " << frag);
    REQUIRE(m.status == ParseStatus::Ok);
    CHECK(m.is_fragment());
    CHECK_FALSE(m.is_first_fragment());
    CHECK_FALSE(m.has_l4());
    CHECK(m.ip_proto == 17);
    CHECK(m.l4_offset == 34);
    CHECK(m.payload_offset == 34);
    CHECK(m.src_port == 0);
  }

  o.frag = 0x4000;  // DF alone is no fragment
  m = parse(ether(0x0800, ipv4(17, udp(1, 2), o)));
  CHECK_FALSE(m.is_fragment());
  CHECK_FALSE(m.is_first_fragment());
}

TEST_CASE("Ethernet IPv6 TCP and ICMPv6: every field", "[packet]") {
  V6 o;
  o.hlim = 63, o.tclass = 0x2e;
  PacketMeta m = parse(ether(0x86dd, ipv6(6, tcp(1234, 80, kPsh | kAck, {}, Bytes(5, 'y')), o)));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ethertype == 0x86dd);
  CHECK(m.flags == (PacketMeta::kIpv6 | PacketMeta::kHasL4 | PacketMeta::kEthernet));
  CHECK(m.l3_offset == 14);
  CHECK(m.l4_offset == 54);
  CHECK(m.payload_offset == 74);
  CHECK(addr(m.src_addr) == v6(0x2001, 1));
  CHECK(addr(m.dst_addr) == v6(0x2001, 2));
  CHECK(m.ip_proto == 6);
  CHECK(m.ip_total_length == 40 + 25);
  CHECK(m.ttl == 63);
  CHECK(m.tos == 0x2e);
  CHECK(m.src_port == 1234);
  CHECK(m.dst_port == 80);
  CHECK(m.tcp_flags == (kPsh | kAck));

  m = parse(ether(0x86dd, ipv6(58, icmp(128, 0))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_proto == 58);
  CHECK(m.src_port == 0);
  CHECK(m.dst_port == 128 << 8);
}

TEST_CASE("IPv6 extension headers", "[packet]") {
  // hop-by-hop (8), routing (24), destination options (16), then UDP
  Bytes p = ether(0x86dd, ipv6(0, ext(43, 1, ext(60, 3, ext(17, 2, udp(7, 9))))));
  PacketMeta m = parse(p);
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.flags == (PacketMeta::kIpv6 | PacketMeta::kIpv6ExtHeaders | PacketMeta::kHasL4 | PacketMeta::kEthernet));
  CHECK(m.ip_proto == 17);
  CHECK(m.l4_offset == 54 + 8 + 24 + 16);
  CHECK(m.payload_offset == m.l4_offset + 8);
  CHECK(m.src_port == 7);
  CHECK(m.dst_port == 9);
  CHECK(m.ip_total_length == 40 + 48 + 8);

  // AH's length counts 4-byte words, minus 2
  m = parse(ether(0x86dd, ipv6(51, ah(6, tcp(22, 2222, kAck)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_proto == 6);
  CHECK(m.l4_offset == 54 + 24);
  CHECK(m.src_port == 22);

  // ESP and "no next header" end the walk: IP is complete, there is no L4
  for (uint8_t last : {uint8_t(50), uint8_t(59)}) {
    m = parse(ether(0x86dd, ipv6(0, ext(last, 1, zeros(16)))));
    REQUIRE(m.status == ParseStatus::Ok);
    CHECK(m.ip_proto == last);
    CHECK_FALSE(m.has_l4());
    CHECK(m.l4_offset == 62);
    CHECK(m.payload_offset == 62);
  }

  // exactly the limit is fine
  Bytes chain = udp(1, 2);
  for (int i = 0; i < kMaxIpv6ExtHeaders; ++i) chain = ext(i == 0 ? 17 : 60, 1, chain);
  m = parse(ether(0x86dd, ipv6(60, chain)));
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.src_port == 1);
}

TEST_CASE("IPv6 fragments", "[packet]") {
  // first fragment, behind a hop-by-hop header: L4 is there
  PacketMeta m = parse(ether(0x86dd, ipv6(0, ext(44, 1, frag6(17, 0, true, udp(53, 5300, zeros(8)))))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.is_fragment());
  CHECK(m.is_first_fragment());
  CHECK(m.has_l4());
  CHECK(m.ip_proto == 17);
  CHECK(m.l4_offset == 54 + 16);
  CHECK(m.src_port == 53);

  // a later fragment: the protocol is known, the rest is data
  m = parse(ether(0x86dd, ipv6(44, frag6(17, 181, false, zeros(32)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.is_fragment());
  CHECK_FALSE(m.is_first_fragment());
  CHECK_FALSE(m.has_l4());
  CHECK(m.ip_proto == 17);
  CHECK(m.l4_offset == 62);
  CHECK(m.payload_offset == 62);

  // an atomic fragment (offset 0, no more) is a whole datagram
  m = parse(ether(0x86dd, ipv6(44, frag6(6, 0, false, tcp(1, 2, kSyn)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK_FALSE(m.is_fragment());
  CHECK(m.has_l4());
  CHECK(m.flags & PacketMeta::kIpv6ExtHeaders);
}

TEST_CASE("VLAN tags: 802.1Q, QinQ, legacy 0x9100, up to the limit", "[packet]") {
  PacketMeta m = parse(cat({kMacs, be16(0x8100), tag(100, 0x0800), ipv4(6, tcp(1, 2, kSyn))}));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.vlan_count == 1);
  CHECK(m.vlan_outer == 100);
  CHECK(m.vlan_inner == 0);
  CHECK(m.ethertype == 0x0800);
  CHECK(m.l3_offset == 18);
  CHECK(m.l4_offset == 38);

  m = parse(cat({kMacs, be16(0x88a8), tag(10, 0x8100), tag(20, 0x86dd), ipv6(17, udp(1, 2))}));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.vlan_count == 2);
  CHECK(m.vlan_outer == 10);
  CHECK(m.vlan_inner == 20);
  CHECK(m.l3_offset == 22);
  CHECK(m.is_ipv6());

  Bytes p = cat({kMacs, be16(0x9100), tag(4095, 0x8100), tag(1, 0x8100), tag(2, 0x88a8), tag(3, 0x0800),
                 ipv4(17, udp(1, 2))});
  m = parse(p);
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.vlan_count == kMaxVlanTags);
  CHECK(m.vlan_outer == 4095);
  CHECK(m.vlan_inner == 1);
  CHECK(m.l3_offset == 14 + 4 * kMaxVlanTags);
}

TEST_CASE("MPLS label stacks", "[packet]") {
  PacketMeta m = parse(ether(0x8847, mpls({16, 1000}, ipv4(6, tcp(1, 2, kSyn)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.mpls_count == 2);
  CHECK(m.ethertype == 0x8847);
  CHECK(m.l3_offset == 22);
  CHECK(m.is_ipv4());
  CHECK(m.src_port == 1);
  // the top entry without its TTL: label 16, traffic class 0, not the bottom
  CHECK(m.mpls_top[0] == 0x00);
  CHECK(m.mpls_top[1] == 0x01);
  CHECK(m.mpls_top[2] == 0x00);

  m = parse(cat({kMacs, be16(0x8100), tag(7, 0x8848), mpls({3}, ipv6(17, udp(1, 2)))}));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.vlan_count == 1);
  CHECK(m.mpls_count == 1);
  CHECK(m.l3_offset == 22);
  CHECK(m.is_ipv6());
  CHECK((m.mpls_top[0] << 12 | m.mpls_top[1] << 4 | m.mpls_top[2] >> 4) == 3);
  CHECK((m.mpls_top[2] & 1) == 1);  // bottom of stack

  // an Ethernet pseudowire (control word 0) is not IP
  m = parse(ether(0x8847, mpls({100}, cat({zeros(4), ether(0x0800, ipv4(6, tcp(1, 2, 0)))}))));
  CHECK(m.status == ParseStatus::NonIp);
  CHECK(m.mpls_count == 1);
}

TEST_CASE("PPPoE sessions", "[packet]") {
  PacketMeta m = parse(ether(0x8864, pppoe(0x0021, ipv4(17, udp(1, 2)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.is_pppoe());
  CHECK(m.ethertype == 0x8864);
  CHECK(m.l3_offset == 22);
  CHECK(m.is_ipv4());
  CHECK(m.flags == (PacketMeta::kIpv4 | PacketMeta::kPppoe | PacketMeta::kHasL4 | PacketMeta::kEthernet));

  m = parse(ether(0x8864, pppoe(0x0057, ipv6(6, tcp(1, 2, kSyn)))));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.is_pppoe());
  CHECK(m.is_ipv6());
  CHECK(m.l4_offset == 62);

  CHECK(parse(ether(0x8864, pppoe(0xc021, zeros(10)))).status == ParseStatus::NonIp);  // LCP
  CHECK(parse(ether(0x8863, zeros(20))).status == ParseStatus::NonIp);  // discovery
}

TEST_CASE("non-IP frames are not malformed", "[packet]") {
  PacketMeta m = parse(ether(0x0806, zeros(28)));  // ARP
  CHECK(m.status == ParseStatus::NonIp);
  CHECK(m.ethertype == 0x0806);
  CHECK_FALSE(m.is_ip());
  m = parse(ether(0x0026, zeros(38)));  // 802.3 length field, LLC follows
  CHECK(m.status == ParseStatus::NonIp);
  CHECK(m.ethertype == 0x0026);
}

TEST_CASE("pcap link types", "[packet]") {
  Bytes v4tcp = ipv4(6, tcp(1000, 2000, kSyn));
  Bytes v6udp = ipv6(17, udp(3000, 4000));

  struct Case {
    const char *what;
    LinkType link;
    Bytes packet;
    uint16_t l3_offset;
    bool ipv6;
  };
  std::vector<Case> cases = {
      {"Linux SLL", LinkType::LinuxSll, sll(0x0800, v4tcp), 16, false},
      {"Linux SLL, VLAN", LinkType::LinuxSll, sll(0x8100, cat({tag(5, 0x86dd), v6udp})), 20, true},
      {"Linux SLL2", LinkType::LinuxSll2, sll2(0x86dd, v6udp), 20, true},
      {"NULL, little-endian AF_INET", LinkType::Null, loopback(2, false, v4tcp), 4, false},
      {"NULL, big-endian AF_INET", LinkType::Null, loopback(2, true, v4tcp), 4, false},
      {"NULL, Linux AF_INET6", LinkType::Null, loopback(10, false, v6udp), 4, true},
      {"NULL, macOS AF_INET6", LinkType::Null, loopback(30, false, v6udp), 4, true},
      {"NULL, FreeBSD AF_INET6", LinkType::Null, loopback(28, false, v6udp), 4, true},
      {"LOOP, OpenBSD AF_INET6", LinkType::Loop, loopback(24, true, v6udp), 4, true},
      {"DLT_RAW 12, IPv4", LinkType::RawDlt12, v4tcp, 0, false},
      {"DLT_RAW 14, IPv6", LinkType::RawDlt14, v6udp, 0, true},
      {"LINKTYPE_RAW, IPv6", LinkType::Raw, v6udp, 0, true},
      {"LINKTYPE_RAW, IPv4", LinkType::Raw, v4tcp, 0, false},
      {"IPV4", LinkType::Ipv4, v4tcp, 0, false},
      {"IPV6", LinkType::Ipv6, v6udp, 0, true},
      {"PPP, HDLC-like framing", LinkType::Ppp, cat({{0xff, 0x03, 0x00, 0x21}, v4tcp}), 4, false},
      {"PPP, no framing", LinkType::Ppp, cat({{0x00, 0x57}, v6udp}), 2, true},
      {"PPP, compressed protocol", LinkType::Ppp, cat({{0xff, 0x03, 0x21}, v4tcp}), 3, false},
      {"PPP, MPLS", LinkType::Ppp, cat({{0x02, 0x81}, mpls({20}, v4tcp)}), 6, false},
      {"NFLOG", LinkType::Nflog, nflog(v4tcp), 4 + 8 + 8 + 4, false},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    PacketMeta m = parse(c.packet, c.link);
    REQUIRE(m.status == ParseStatus::Ok);
    CHECK(m.l3_offset == c.l3_offset);
    CHECK(m.is_ipv6() == c.ipv6);
    CHECK(m.is_ipv4() == !c.ipv6);
    CHECK(m.ethertype == (c.ipv6 ? 0x86dd : c.link == LinkType::Ppp && c.l3_offset == 6 ? 0x8847 : 0x0800));
    CHECK(m.has_l4());
    CHECK(m.src_port == (c.ipv6 ? 3000 : 1000));
    CHECK_FALSE(m.is_ethernet());  // no MAC addresses where the frame has none
  }

  CHECK(parse(loopback(7, false, v4tcp), LinkType::Null).status == ParseStatus::NonIp);
  CHECK(parse(cat({{0xc0, 0x21}, zeros(8)}), LinkType::Ppp).status == ParseStatus::NonIp);
  CHECK(parse(sll(0x0806, zeros(28)), LinkType::LinuxSll).status == ParseStatus::NonIp);
  CHECK(parse(v6udp, LinkType::Ipv4).status == ParseStatus::BadIpVersion);
  CHECK(parse(v4tcp, LinkType::Ipv6).status == ParseStatus::BadIpVersion);
  CHECK(parse(v4tcp, LinkType(147)).status == ParseStatus::UnsupportedLinkType);
}

TEST_CASE("a snap length cuts the capture, not the packet", "[packet]") {
  Bytes p = ether(0x0800, ipv4(6, tcp(1, 2, kAck, {}, Bytes(1000, 'z'))));
  const uint32_t snap = 96;
  PacketMeta m = parse(prefix(p, snap), LinkType::Ethernet, uint32_t(p.size()));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 1040);
  CHECK(m.payload_offset == 54);
  CHECK_FALSE(m.ip_length_from_frame());
  // Without the wire length the frame is taken to be what was captured, and
  // an IP length past its end is a lie: the IP length is what the frame holds.
  m = parse(prefix(p, snap));
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == snap - 14);
  CHECK(m.ip_length_from_frame());
}

TEST_CASE("IP length 0 (TSO, GRO) or past the frame: what the frame holds, below the header malformed", "[packet]") {
  // IPv4 total length 0: a TCP segmentation offload super-frame as captured
  // on the sender, 3000 bytes of payload. Its transport header is read.
  V4 zero_total;
  zero_total.total_delta = -(20 + 20 + 3000);
  Bytes tso = ether(0x0800, ipv4(6, tcp(1000, 80, kAck, {}, Bytes(3000, 'x')), zero_total));
  REQUIRE(tso[16] == 0);
  REQUIRE(tso[17] == 0);
  PacketMeta m = parse(tso);
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 3040);
  CHECK(m.ip_length_from_frame());
  CHECK(m.has_l4());
  CHECK(m.src_port == 1000);
  CHECK(m.dst_port == 80);
  CHECK(m.payload_offset == 54);
  // Cut by a snap length, the wire length still says what the frame held.
  m = parse(prefix(tso, 96), LinkType::Ethernet, uint32_t(tso.size()));
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 3040);

  // IPv6 payload length 0 (generic receive offload), not a jumbogram.
  V6 zero_plen;
  zero_plen.plen_delta = -(20 + 2000);
  m = parse(ether(0x86dd, ipv6(6, tcp(2000, 443, kAck, {}, Bytes(2000, 'y')), zero_plen)));
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 2060);
  CHECK(m.ip_length_from_frame());
  CHECK(m.src_port == 2000);
  // ... but with next header 59 ("no next header", a Teredo bubble) 0 is the
  // true length, and Ethernet padding is not counted.
  V6 bubble;
  bubble.plen_delta = -6;  // 14 + 40 + 6 bytes of padding: the 60-byte minimum
  m = parse(ether(0x86dd, ipv6(59, zeros(6), bubble)));
  REQUIRE(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 40);
  CHECK_FALSE(m.ip_length_from_frame());

  // A bogus total length: a 105-byte frame claiming 37,211 bytes (as in
  // ndpi_merged.pcap). The frame's 91 IP bytes are the length.
  V4 bogus;
  bogus.total_delta = 37211 - (20 + 8 + 63);
  Bytes bogus_frame = ether(0x0800, ipv4(17, udp(53, 5353, Bytes(63, 'z')), bogus));
  REQUIRE(bogus_frame.size() == 105);
  m = parse(bogus_frame);
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 91);
  CHECK(m.ip_length_from_frame());
  CHECK(m.src_port == 53);
  // The same in IPv6.
  V6 long_plen;
  long_plen.plen_delta = 1000;
  m = parse(ether(0x86dd, ipv6(17, udp(1, 2, Bytes(10, 'u')), long_plen)));
  CHECK(m.status == ParseStatus::Ok);
  CHECK(m.ip_total_length == 58);
  CHECK(m.ip_length_from_frame());

  // A length field the frame holds is believed; the padding after it is not IP.
  m = parse(ether(0x0800, ipv4(17, udp(1, 2))));
  CHECK(m.ip_total_length == 28);
  CHECK_FALSE(m.ip_length_from_frame());

  // Shorter than the IPv4 header (10 bytes; 1 to 19 alike): malformed, no IP.
  V4 short_total;
  short_total.total_delta = 10 - (20 + 20);
  m = parse(ether(0x0800, ipv4(6, tcp(1, 2, kAck), short_total)));
  CHECK(m.status == ParseStatus::BadIpTotalLength);
  CHECK_FALSE(m.is_ip());
  // Total length 0 in a frame that cannot hold the header with its options.
  V4 zero_with_options;
  zero_with_options.options = zeros(8);
  zero_with_options.total_delta = -28;
  m = parse(ipv4(253, {}, zero_with_options), LinkType::Raw, 0);
  CHECK(m.status == ParseStatus::Ok);  // 28 bytes: the header, nothing after it (protocol 253: no L4 to read)
  CHECK(m.ip_total_length == 28);
  m = parse(prefix(ipv4(253, {}, zero_with_options), 24), LinkType::Raw, 0);
  CHECK(m.status == ParseStatus::BadIpTotalLength);
}

TEST_CASE("every malformed reason from a minimal packet", "[packet]") {
  struct Case {
    const char *what;
    ParseStatus expected;
    Bytes packet;
    LinkType link = LinkType::Ethernet;
    uint32_t wirelen = 0;
  };
  Bytes v4udp = ipv4(17, udp(1, 2));
  Bytes too_many_tags = kMacs;
  for (int i = 0; i <= kMaxVlanTags; ++i) too_many_tags = cat({too_many_tags, be16(0x8100), be16(1)});
  too_many_tags = cat({too_many_tags, be16(0x0800), v4udp});
  std::vector<uint32_t> labels(kMaxMplsLabels + 1, 16);
  Bytes stack;
  for (size_t i = 0; i < labels.size(); ++i)
    stack.insert(stack.end(), {0, 1, uint8_t(i + 1 == labels.size()), 64});
  Bytes ext_chain = udp(1, 2);
  for (int i = 0; i <= kMaxIpv6ExtHeaders; ++i) ext_chain = ext(i == 0 ? 17 : 60, 1, ext_chain);
  V4 short_total, no_room_for_tcp;
  short_total.total_delta = -21;     // 7: below the 20-byte header
  no_room_for_tcp.total_delta = -1;  // the TCP header would end past the datagram
  V6 short_plen;
  short_plen.plen_delta = -20;  // ends inside the 16-byte hop-by-hop header
  Bytes bad_ihl = ipv4(17, udp(1, 2));
  bad_ihl[0] = 0x44;
  Bytes bad_doff = tcp(1, 2, kSyn);
  bad_doff[12] = 0x40;
  Bytes long_doff = tcp(1, 2, kSyn);
  long_doff[12] = 0x60;
  Bytes cut_options = ipv4(17, udp(1, 2), V4{.options = zeros(8)});

  std::vector<Case> cases = {
      {"13-byte Ethernet", ParseStatus::TruncatedL2, zeros(13)},
      {"VLAN tag cut", ParseStatus::TruncatedL2, cat({kMacs, be16(0x8100), {0, 1}})},
      {"MPLS label cut", ParseStatus::TruncatedL2, ether(0x8847, {0, 1, 0})},
      {"PPPoE header cut", ParseStatus::TruncatedL2, ether(0x8864, {0x11, 0, 0, 1, 0, 2, 0})},
      {"SLL header cut", ParseStatus::TruncatedL2, zeros(15), LinkType::LinuxSll},
      {"NFLOG without payload", ParseStatus::TruncatedL2, {2, 0, 0, 1}, LinkType::Nflog},
      {"IPv4 header cut", ParseStatus::TruncatedL3, ether(0x0800, zeros(19))},
      {"IPv4 options cut", ParseStatus::TruncatedL3, ether(0x0800, prefix(cut_options, 24)), LinkType::Ethernet, 14 + 36},
      {"IPv6 header cut", ParseStatus::TruncatedL3, ether(0x86dd, zeros(39))},
      {"IPv6 extension header cut", ParseStatus::TruncatedL3, prefix(ipv6(0, ext(17, 1, {})), 47), LinkType::Raw, 48},
      {"empty raw IP", ParseStatus::TruncatedL3, {}, LinkType::Raw},
      {"TCP header cut", ParseStatus::TruncatedL4, prefix(ipv4(6, tcp(1, 2, 0)), 39), LinkType::Raw, 40},
      {"UDP header cut", ParseStatus::TruncatedL4, prefix(ipv6(17, udp(1, 2)), 47), LinkType::Raw, 48},
      {"ICMP header cut", ParseStatus::TruncatedL4, prefix(ipv4(1, icmp(0, 0)), 23), LinkType::Raw, 28},
      {"SCTP header cut", ParseStatus::TruncatedL4, prefix(ipv4(132, sctp(1, 2)), 31), LinkType::Raw, 32},
      {"IPv6 behind EtherType IPv4", ParseStatus::BadIpVersion, ether(0x0800, ipv6(17, udp(1, 2)))},
      {"raw IP version 5", ParseStatus::BadIpVersion, {0x50}, LinkType::Raw},
      {"IHL 4", ParseStatus::BadIpv4HeaderLength, bad_ihl, LinkType::Raw},
      {"IPv4 total length below the header", ParseStatus::BadIpTotalLength, ipv4(17, udp(1, 2), short_total), LinkType::Raw},
      {"IPv4 total length ends inside TCP", ParseStatus::BadIpTotalLength, ipv4(6, tcp(1, 2, 0), no_room_for_tcp), LinkType::Raw},
      {"IPv6 payload length ends inside an extension header", ParseStatus::BadIpTotalLength, ipv6(0, ext(17, 2, udp(1, 2)), short_plen), LinkType::Raw},
      {"TCP data offset 4", ParseStatus::BadTcpHeaderLength, ipv4(6, bad_doff), LinkType::Raw},
      {"TCP data offset past the datagram", ParseStatus::BadTcpHeaderLength, ipv4(6, long_doff), LinkType::Raw},
      {"too many VLAN tags", ParseStatus::TooManyVlanTags, too_many_tags},
      {"too many MPLS labels", ParseStatus::TooManyMplsLabels, ether(0x8847, cat({stack, v4udp}))},
      {"too many IPv6 extension headers", ParseStatus::TooManyIpv6ExtHeaders, ipv6(60, ext_chain), LinkType::Raw},
      {"NFLOG TLV of length 2", ParseStatus::BadLinkHeader, {2, 0, 0, 1, 2, 0, 9, 0}, LinkType::Nflog},
      {"unknown link type", ParseStatus::UnsupportedLinkType, v4udp, LinkType(147)},
      {"ARP", ParseStatus::NonIp, ether(0x0806, zeros(28))},
      {"valid", ParseStatus::Ok, v4udp, LinkType::Raw},
  };
  std::set<ParseStatus> seen;
  for (const Case &c : cases) {
    INFO(c.what);
    PacketMeta m = parse(c.packet, c.link, c.wirelen);
    CHECK(parse_status_name(m.status) == std::string(parse_status_name(c.expected)));
    CHECK(m.payload_offset == (c.expected == ParseStatus::Ok ? 28 : 0));
    seen.insert(m.status);
  }
  CHECK(seen.size() == size_t(kParseStatusCount));

  // What stays valid past the point of failure: a TCP header cut inside its
  // options keeps ports and flags; an IPv4 header cut inside its options
  // keeps addresses.
  Bytes p = ipv4(6, tcp(80, 8080, kSyn, zeros(20)));
  PacketMeta m = parse(prefix(p, 44), LinkType::Raw, uint32_t(p.size()));
  CHECK(m.status == ParseStatus::TruncatedL4);
  CHECK(m.has_l4());
  CHECK(m.src_port == 80);
  CHECK(m.tcp_flags == kSyn);
  m = parse(ether(0x0800, prefix(cut_options, 24)), LinkType::Ethernet, 50);
  CHECK(m.is_ipv4());
  CHECK(m.l4_offset == 0);
  CHECK(addr(m.dst_addr) == v4(192, 168, 1, 2));
}

TEST_CASE("status names are distinct and stable", "[packet]") {
  std::set<std::string> names;
  for (int i = 0; i < kParseStatusCount; ++i) {
    std::string n = parse_status_name(ParseStatus(i));
    CHECK(n.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") == std::string::npos);
    names.insert(n);
  }
  CHECK(names.size() == size_t(kParseStatusCount));
  CHECK(std::string(parse_status_name(ParseStatus::TruncatedL4)) == "truncated_l4");
  CHECK(std::string(parse_status_name(ParseStatus::TooManyIpv6ExtHeaders)) == "too_many_ipv6_ext_headers");
}

// Every prefix of a packet parses the same whatever lies after it in memory
// (so nothing past caplen is read), and is truncated exactly while it ends
// before the last header.
TEST_CASE("every truncation of valid packets", "[packet]") {
  struct Case {
    const char *what;
    LinkType link;
    Bytes packet;
  };
  std::vector<Case> cases = {
      {"VLAN IPv4 options TCP options", LinkType::Ethernet,
       cat({kMacs, be16(0x8100), tag(9, 0x0800),
            ipv4(6, tcp(1, 2, kSyn, zeros(12), zeros(4)), V4{.options = zeros(4)})})},
      {"QinQ MPLS IPv6 ext headers first fragment UDP", LinkType::Ethernet,
       cat({kMacs, be16(0x88a8), tag(1, 0x8100), tag(2, 0x8847),
            mpls({16, 17}, ipv6(0, ext(44, 1, frag6(17, 0, true, udp(1, 2, zeros(3))))))})},
      {"PPPoE IPv6 AH TCP", LinkType::Ethernet, ether(0x8864, pppoe(0x0057, ipv6(51, ah(6, tcp(1, 2, kAck)))))},
      {"SLL2 IPv4 SCTP", LinkType::LinuxSll2, sll2(0x0800, ipv4(132, sctp(1, 2)))},
      {"NFLOG IPv6 ICMPv6", LinkType::Nflog, nflog(ipv6(58, icmp(128, 0)))},
      {"NULL IPv4 UDP", LinkType::Null, loopback(2, false, ipv4(17, udp(1, 2)))},
      {"PPP IPv4 TCP", LinkType::Ppp, cat({{0xff, 0x03, 0x00, 0x21}, ipv4(6, tcp(1, 2, 0))})},
  };
  for (const Case &c : cases) {
    INFO(c.what);
    const uint32_t len = uint32_t(c.packet.size());
    PacketMeta whole = parse(c.packet, c.link);
    REQUIRE(whole.status == ParseStatus::Ok);
    Bytes zeros_after(len), ones_after(len);
    for (uint32_t cut = 0; cut < len; ++cut) {
      std::fill(zeros_after.begin(), zeros_after.end(), 0x00);
      std::fill(ones_after.begin(), ones_after.end(), 0xff);
      std::copy_n(c.packet.begin(), cut, zeros_after.begin());
      std::copy_n(c.packet.begin(), cut, ones_after.begin());
      PacketMeta a, b;
      parse_packet(zeros_after.data(), cut, c.link, a, len);
      parse_packet(ones_after.data(), cut, c.link, b, len);
      INFO("cut at " << cut);
      REQUIRE(std::memcmp(&a, &b, sizeof a) == 0);
      bool truncated = a.status == ParseStatus::TruncatedL2 || a.status == ParseStatus::TruncatedL3 ||
                       a.status == ParseStatus::TruncatedL4;
      REQUIRE(truncated == (cut < whole.payload_offset));
      if (!truncated) REQUIRE(std::memcmp(&a, &whole, sizeof a) == 0);
    }
  }
}

// ---- real captures ----

namespace {

const std::string kTraceDir = SLUICE_SOURCE_DIR "/../shared/traces";

class Trace {
 public:
  explicit Trace(const std::string &path) {
    char err[PCAP_ERRBUF_SIZE];
    p_ = pcap_open_offline(path.c_str(), err);
    if (!p_) error_ = err;
  }
  ~Trace() {
    if (p_) pcap_close(p_);
  }
  Trace(const Trace &) = delete;
  Trace &operator=(const Trace &) = delete;
  pcap_t *handle() const { return p_; }
  const std::string &error() const { return error_; }
  bool next(pcap_pkthdr *&h, const uint8_t *&d) { return pcap_next_ex(p_, &h, &d) == 1; }

 private:
  pcap_t *p_ = nullptr;
  std::string error_;
};

struct Tally {
  uint64_t packets = 0;
  uint64_t by_status[kParseStatusCount] = {};
  uint64_t cut_by_snaplen = 0;  // caplen < len
  uint64_t vlan = 0, qinq = 0, mpls = 0, pppoe = 0, fragments = 0, ipv6_ext = 0;
  void add(const pcap_pkthdr &h, const PacketMeta &m) {
    ++packets;
    ++by_status[int(m.status)];
    cut_by_snaplen += h.caplen < h.len;
    vlan += m.vlan_count > 0;
    qinq += m.vlan_count > 1;
    mpls += m.mpls_count > 0;
    pppoe += m.is_pppoe();
    fragments += m.is_fragment();
    ipv6_ext += (m.flags & PacketMeta::kIpv6ExtHeaders) != 0;
  }
  std::string summary() const {
    std::ostringstream os;
    os << packets << " packets:";
    for (int i = 0; i < kParseStatusCount; ++i)
      if (by_status[i]) os << " " << parse_status_name(ParseStatus(i)) << " " << by_status[i];
    os << "; VLAN " << vlan << " (QinQ " << qinq << "), MPLS " << mpls << ", PPPoE " << pppoe
       << ", fragments " << fragments << ", IPv6 extension headers " << ipv6_ext
       << "; cut by snap length " << cut_by_snaplen;
    return os.str();
  }
};

bool link_supported(int dlt) {
  PacketMeta m;
  return parse_packet(nullptr, 0, LinkType(dlt), m) != ParseStatus::UnsupportedLinkType;
}

}  // namespace

namespace {
// parse_packet() against parse_packet_general() on one frame: the same
// meta, byte for byte (metas are compared and hashed as bytes).
// The captured bytes are copied into a buffer of exactly caplen bytes, so
// that a read past them is a heap overflow AddressSanitizer reports (the
// fast path once read the TCP data offset of a capture cut before it:
// found by fuzz_packet).
bool same_as_general(const Bytes &p, uint32_t caplen, uint32_t wirelen, LinkType link = LinkType::Ethernet) {
  std::unique_ptr<uint8_t[]> captured(new uint8_t[caplen ? caplen : 1]);
  std::memcpy(captured.get(), p.data(), caplen);
  PacketMeta fast, general;
  std::memset(&fast, 0x5a, sizeof fast);  // what the parse leaves unwritten shows
  std::memset(&general, 0xa5, sizeof general);
  ParseStatus a = parse_packet(captured.get(), caplen, link, fast, wirelen);
  ParseStatus b = parse_packet_general(captured.get(), caplen, link, general, wirelen);
  return a == b && std::memcmp(&fast, &general, sizeof fast) == 0;
}
}  // namespace

// parse_packet() takes a fast path for untagged Ethernet, IPv4 without
// options, TCP or UDP; it must give exactly what the general parse gives,
// for such frames and for every frame a byte or a length away from one.
TEST_CASE("parse: the fast path gives what the general parse gives", "[packet]") {
  V4 o;
  o.ttl = 57, o.tos = 0xb8;
  const std::vector<Bytes> frames = {
      ether(0x0800, ipv4(6, tcp(40000, 443, kSyn | kAck, {}, Bytes(10, 'x')), o)),
      ether(0x0800, ipv4(6, tcp(40000, 443, kPsh | kAck, zeros(12)), o)),  // options, no payload
      ether(0x0800, ipv4(17, udp(5353, 53, Bytes(30, 'q')), o)),
      ether(0x0800, ipv4(17, udp(1, 2), o)),
      cat({ether(0x0800, ipv4(17, udp(1, 2), o)), zeros(18)}),  // Ethernet padding after the datagram
      ether(0x0800, ipv4(6, tcp(1, 2, kSyn), o)),
  };
  uint64_t compared = 0, differ = 0, fast_shaped = 0;
  std::ostringstream first;
  auto check = [&](const Bytes &f, uint32_t caplen, uint32_t wirelen, const char *what, size_t at) {
    ++compared;
    if (same_as_general(f, caplen, wirelen)) return;
    if (++differ <= 5) first << what << " at " << at << ", caplen " << caplen << ", wirelen " << wirelen << "\n";
  };
  for (const Bytes &f : frames) {
    const uint32_t len = uint32_t(f.size());
    PacketMeta m;
    parse_packet_general(f.data(), len, LinkType::Ethernet, m, 0);
    REQUIRE(m.status == ParseStatus::Ok);
    fast_shaped += m.has_l4();
    // every capture length, with the wire length the frame's, longer, and unknown
    for (uint32_t cut = 0; cut <= len; ++cut)
      for (uint32_t wire : {uint32_t(0), len, len + 100}) check(f, cut, wire, "cut", cut);
    // every byte of the headers set to values that matter to the parse
    for (size_t i = 0; i < std::min<size_t>(len, 70); ++i)
      for (int v : {0x00, 0x01, 0x05, 0x06, 0x11, 0x20, 0x40, 0x45, 0x46, 0x50, 0x80, 0xff, f[i] ^ 0x01, f[i] ^ 0x10}) {
        Bytes g = f;
        g[i] = uint8_t(v);
        for (uint32_t wire : {uint32_t(0), len + 3}) check(g, len, wire, "byte", i);
      }
  }
  INFO(first.str());
  CHECK(differ == 0);
  CHECK(fast_shaped == frames.size());
  CHECK(compared > 10000);
}

TEST_CASE("real captures of every link type", "[packet][traces]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(kTraceDir) / "linktypes";
  if (!fs::is_directory(dir)) {
    WARN("skipped: no trace directory " << dir.string());
    return;
  }
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE_FALSE(files.empty());

  for (const fs::path &file : files) {
    INFO(file.filename().string());
    Trace t(file.string());
    REQUIRE(t.handle() != nullptr);
    const int dlt = pcap_datalink(t.handle());
    INFO("link type " << dlt);
    CHECK(link_supported(dlt));
    Tally tally;
    pcap_pkthdr *h;
    const uint8_t *d;
    PacketMeta m;
    while (t.next(h, d)) {
      parse_packet(d, h->caplen, LinkType(dlt), m, h->len);
      tally.add(*h, m);
      if (m.status == ParseStatus::NonIp) CHECK((m.ethertype != 0x0800 && m.ethertype != 0x86dd));
    }
    std::cout << "parse " << file.filename().string() << " (link type " << dlt
              << "): " << tally.summary() << "\n";
    CHECK(tally.by_status[int(ParseStatus::Ok)] > 0);
    // These captures hold well-formed traffic: everything parses, IP or not
    // (the SLL2 one has ARP and RARP).
    CHECK(tally.by_status[int(ParseStatus::Ok)] + tally.by_status[int(ParseStatus::NonIp)] ==
          tally.packets);
  }
}

namespace {

// The filters our classification is compared with, and what it says for each.
constexpr const char *kBpfBase[] = {"ip", "ip6", "tcp", "udp", "sctp", "icmp", "icmp6"};
constexpr int kFilters = 7;
bool ours(const PacketMeta &m, int filter) {
  switch (filter) {
    case 0: return m.is_ipv4();
    case 1: return m.is_ipv6();
    case 2: return m.is_ip() && m.ip_proto == 6;
    case 3: return m.is_ip() && m.ip_proto == 17;
    case 4: return m.is_ip() && m.ip_proto == 132;
    case 5: return m.is_ipv4() && m.ip_proto == 1;  // libpcap's "icmp" is IPv4 only
    default: return m.is_ipv6() && m.ip_proto == 58;
  }
}

// Why our answer and BPF's differ on a packet. Every class is a known
// limitation of what the BPF filters look at, not a parser error:
enum Difference {
  // IP inside MPLS or PPPoE: for libpcap "ip" means EtherType 0x0800 right
  // after the VLAN tags ("mpls and ip", "pppoes and ip" reach further).
  Encapsulated,
  // EtherType IPv4/IPv6 but the IP header is cut or invalid (bad version,
  // IHL, length): BPF reads the EtherType and the protocol byte at its fixed
  // offset and trusts them; we parse no IP from such a packet.
  InvalidIpHeader,
  // IPv6 whose L4 header follows extension headers other than one fragment
  // header: libpcap's "tcp", "udp", "icmp6"... look only at the fixed
  // header's next-header field and at a fragment header right after it.
  Ipv6ExtHeaders,
  Unexplained,
  kDifferences
};
constexpr const char *kDifferenceName[] = {"encapsulated", "invalid_ip_header",
                                           "ipv6_ext_headers", "unexplained"};

Difference explain(const PacketMeta &m, const uint8_t *d, uint32_t caplen, bool our_answer) {
  if (our_answer && (m.mpls_count || m.is_pppoe())) return Encapsulated;
  bool l3_error = m.status == ParseStatus::TruncatedL3 || m.status == ParseStatus::BadIpVersion ||
                  m.status == ParseStatus::BadIpv4HeaderLength ||
                  m.status == ParseStatus::BadIpTotalLength;
  if (!our_answer && !m.is_ip() && l3_error) return InvalidIpHeader;
  if (our_answer && m.is_ipv6()) {
    uint32_t l3 = m.l3_offset;
    uint8_t first = d[l3 + 6];
    bool bpf_sees_it = first == m.ip_proto ||
                       (first == 44 && l3 + 40 < caplen && d[l3 + 40] == m.ip_proto);
    if (!bpf_sees_it) return Ipv6ExtHeaders;
  }
  return Unexplained;
}

class Filters {
 public:
  // One program per filter and per number of VLAN tags before the network
  // layer: "vlan and vlan and tcp" for QinQ.
  explicit Filters(pcap_t *p) {
    for (int tags = 0; tags <= kMaxVlanTags; ++tags)
      for (int f = 0; f < kFilters; ++f) {
        std::string expr;
        for (int i = 0; i < tags; ++i) expr += "vlan and ";
        expr += kBpfBase[f];
        ok_ = ok_ && pcap_compile(p, &prog_[tags][f], expr.c_str(), 1, PCAP_NETMASK_UNKNOWN) == 0;
        compiled_[tags][f] = ok_;
      }
  }
  ~Filters() {
    for (int tags = 0; tags <= kMaxVlanTags; ++tags)
      for (int f = 0; f < kFilters; ++f)
        if (compiled_[tags][f]) pcap_freecode(&prog_[tags][f]);
  }
  Filters(const Filters &) = delete;
  Filters &operator=(const Filters &) = delete;
  bool ok() const { return ok_; }
  bool match(int tags, int filter, const pcap_pkthdr *h, const uint8_t *d) const {
    return pcap_offline_filter(&prog_[tags][filter], h, d) != 0;
  }

 private:
  bpf_program prog_[kMaxVlanTags + 1][kFilters] = {};
  bool compiled_[kMaxVlanTags + 1][kFilters] = {};
  bool ok_ = true;
};

}  // namespace

TEST_CASE("ndpi_merged.pcap: statuses, and agreement with libpcap's BPF", "[packet][traces]") {
  const std::string path = kTraceDir + "/ndpi_merged.pcap";
  if (!std::filesystem::is_regular_file(path)) {
    WARN("skipped: no trace " << path);
    return;
  }
  Trace t(path);
  REQUIRE(t.handle() != nullptr);
  REQUIRE(pcap_datalink(t.handle()) == DLT_EN10MB);
  Filters filters(t.handle());
  REQUIRE(filters.ok());

  Tally tally;
  uint64_t differences[kFilters][kDifferences] = {};
  std::ostringstream unexplained;  // the first few, for the failure message
  pcap_pkthdr *h;
  const uint8_t *d;
  PacketMeta m;
  uint64_t differ_from_general = 0;
  while (t.next(h, d)) {
    parse_packet(d, h->caplen, LinkType::Ethernet, m, h->len);
    PacketMeta general;
    parse_packet_general(d, h->caplen, LinkType::Ethernet, general, h->len);
    differ_from_general += std::memcmp(&m, &general, sizeof m) != 0;
    tally.add(*h, m);
    for (int f = 0; f < kFilters; ++f) {
      bool our_answer = ours(m, f);
      if (our_answer == filters.match(m.vlan_count, f, h, d)) continue;
      Difference why = explain(m, d, h->caplen, our_answer);
      if (why == Unexplained && differences[f][Unexplained] < 5)
        unexplained << "packet " << tally.packets << " '" << kBpfBase[f] << "': ours "
                    << our_answer << ", status " << parse_status_name(m.status) << "\n";
      ++differences[f][why];
    }
  }

  std::cout << "parse ndpi_merged.pcap: " << tally.summary() << "\n";
  for (int f = 0; f < kFilters; ++f) {
    std::cout << "parse ndpi_merged.pcap: differences from BPF '" << kBpfBase[f] << "':";
    for (int why = 0; why < kDifferences; ++why)
      std::cout << " " << kDifferenceName[why] << " " << differences[f][why];
    std::cout << "\n";
  }
  INFO(unexplained.str());
  CHECK(tally.by_status[int(ParseStatus::UnsupportedLinkType)] == 0);
  CHECK(differ_from_general == 0);  // parse_packet's fast path
  for (int f = 0; f < kFilters; ++f) {
    CHECK(differences[f][Unexplained] == 0);
    // The explained classes are rare: well under 1% of the packets each.
    for (int why = 0; why < Unexplained; ++why) CHECK(differences[f][why] * 100 < tally.packets);
  }
}
