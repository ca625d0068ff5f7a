// libFuzzer target: the plugin library's data-path parsers on any packet:
// the Ethernet frame parsed, its tunnel opened (TunnelDecap), then the
// names looked for in the payload, outer and inner (ServerNames: TLS, QUIC
// Initials decrypted, DNS). Nothing may read outside the frame (ASan), a
// decapsulated packet's metadata must keep the parser's promises, and a name
// is never longer than what was copied.
#include <cstdint>
#include <cstring>
#include <initializer_list>

#include "elements/plugins/server_name_parse.hh"
#include "elements/plugins/tunnel_headers.hh"
#include "engine/packet/parse.hh"

using namespace sluice;
using namespace sluice_plugins;
using namespace sluice::server_names;

static void check(bool ok) {
  if (!ok) __builtin_trap();
}

static void names(const PacketMeta &m, const uint8_t *data, size_t len) {
  static QuicInitialDecryptor quic;
  char server[64], dns[64];  // smaller than kMaxName: the cut path too
  FoundNames found;
  find_names(m, data, len, quic, server, dns, sizeof server, found);
  check((found.server == FoundNames::None) == (found.server_len == 0));
  check(found.server_len <= 65535 && found.dns_len <= 65535);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t caplen = uint32_t(size);
  for (uint32_t wirelen : {caplen, caplen + 1500}) {
    PacketMeta m;
    parse_packet(data, caplen, LinkType::Ethernet, m, wirelen);
    names(m, data, caplen);
    PacketMeta outer = m;
    Tunnel t{};
    DecapResult r = decapsulate(data, caplen, wirelen, m, t);
    if (r != DecapResult::Decapsulated) {
      check(std::memcmp(&outer, &m, sizeof m) == 0);  // left as it was
      continue;
    }
    check(t.type != TunnelType::None);
    check(m.is_ip());
    check(m.l3_offset > outer.l3_offset && m.l3_offset < caplen);
    if (m.has_l4()) check(m.l4_offset > m.l3_offset && m.l4_offset + 4u <= caplen);
    if (m.status == ParseStatus::Ok) check(m.payload_offset >= m.l4_offset && m.payload_offset <= caplen);
    names(m, data, caplen);
  }
  return 0;
}
