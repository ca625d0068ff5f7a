// libFuzzer target: any byte string as a packet of every link type, whole
// and as if cut by a snap length, must parse without reading outside it
// (ASan) and give metadata that keeps the parser's promises.
#include <cstdint>
#include <cstring>

#include "engine/packet/parse.hh"

using namespace sluice;

static void check(bool ok) {
  if (!ok) __builtin_trap();
}

static void parse_and_check(const uint8_t *data, uint32_t caplen, LinkType link,
                            uint32_t wirelen) {
  PacketMeta m;
  ParseStatus s = parse_packet(data, caplen, link, m, wirelen);
  check(s == m.status);
  check(std::strcmp(parse_status_name(s), "unknown") != 0);
  check(m.vlan_count <= kMaxVlanTags && m.mpls_count <= kMaxMplsLabels);
  uint32_t frame = wirelen > caplen ? wirelen : caplen;
  if (m.is_ip()) {
    check(m.is_ipv4() != m.is_ipv6());
    check(m.l3_offset + (m.is_ipv4() ? 20u : 40u) <= caplen);
    check(m.l3_offset + m.ip_total_length <= frame);
  }
  if (m.l4_offset) check(m.is_ip() && m.l4_offset <= caplen && m.l4_offset > m.l3_offset);
  if (m.has_l4()) check(m.l4_offset && m.l4_offset + 4u <= caplen);
  if (s == ParseStatus::Ok) {
    check(m.is_ip() && m.l4_offset);
    check(m.payload_offset >= m.l4_offset && m.payload_offset <= caplen);
    check(m.payload_offset <= m.l3_offset + m.ip_total_length);
  } else {
    check(m.payload_offset == 0);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static constexpr LinkType kLinks[] = {
      LinkType::Null,  LinkType::Ethernet, LinkType::Ppp,      LinkType::RawDlt12,
      LinkType::RawDlt14, LinkType::Raw,   LinkType::Loop,     LinkType::LinuxSll,
      LinkType::Ipv4,  LinkType::Ipv6,     LinkType::Nflog,    LinkType::LinuxSll2,
  };
  uint32_t caplen = uint32_t(size);
  for (LinkType link : kLinks) {
    parse_and_check(data, caplen, link, 0);
    parse_and_check(data, caplen, link, caplen + 1500);
  }
  return 0;
}
