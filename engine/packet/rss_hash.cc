#include "engine/packet/rss_hash.hh"

#include <arpa/inet.h>

#include <stdexcept>
#include <string>

namespace sluice {

const uint8_t ToeplitzHash::kSymmetricKey[kKeyLen] = {
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
    0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a, 0x6d, 0x5a,
};

const uint8_t ToeplitzHash::kMicrosoftKey[kKeyLen] = {
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67,
    0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb,
    0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30,
    0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};

ToeplitzHash::ToeplitzHash(const uint8_t *key, size_t key_len) : max_len_(0) {
  if (key_len < 4 || key_len > kKeyLen)
    throw std::invalid_argument("Toeplitz key of " + std::to_string(key_len) +
                                " bytes; expected 4 to " + std::to_string(kKeyLen));
  max_len_ = key_len - 4;
  for (size_t pos = 0; pos < max_len_; ++pos) {
    // Key bits [8*pos, 8*pos + 40): the 32-bit windows of all 8 bits of this byte.
    uint64_t window = 0;
    for (size_t k = 0; k < 5; ++k) window = window << 8 | key[pos + k];
    // Input bit b (0 = most significant) of this byte contributes key bits
    // [8*pos + b, 8*pos + b + 32).
    uint32_t bit_part[8];
    for (int b = 0; b < 8; ++b) bit_part[b] = uint32_t(window >> (8 - b));
    for (unsigned v = 0; v < 256; ++v) {
      uint32_t h = 0;
      for (int b = 0; b < 8; ++b)
        if (v & (0x80u >> b)) h ^= bit_part[b];
      table_[pos][v] = h;
    }
  }
  // hash_folded() needs the key's 16-bit period over all of it, and both tables built.
  period16_ = max_len_ >= 2 && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  for (size_t i = 2; i < key_len; ++i) period16_ = period16_ && key[i] == key[i - 2];
}

uint32_t rss_hash(const PacketMeta &m, const ToeplitzHash &hash) {
  if (!m.is_ip()) return 0;
  bool ports = m.has_l4() && !m.is_fragment() &&
               (m.ip_proto == 6 || m.ip_proto == 17 || m.ip_proto == 132);
  uint16_t sport = htons(m.src_port), dport = htons(m.dst_port);
  if (m.is_ipv4()) {
    uint32_t src, dst;  // the last 4 bytes of the v4-mapped addresses
    std::memcpy(&src, m.src_addr + 12, 4);
    std::memcpy(&dst, m.dst_addr + 12, 4);
    return ports ? hash.hash_ipv4(src, dst, sport, dport) : hash.hash_ipv4(src, dst);
  }
  return ports ? hash.hash_ipv6(m.src_addr, m.dst_addr, sport, dport)
               : hash.hash_ipv6(m.src_addr, m.dst_addr);
}

uint32_t symmetric_hash(const PacketMeta &m) {
  static const ToeplitzHash hash(ToeplitzHash::kSymmetricKey);
  return rss_hash(m, hash);
}

}  // namespace sluice
