// Flow keys crafted to collide under the flow table's former hash (two
// CRC32C chains over the 40 key bytes with fixed seeds, then the MurmurHash3
// finaliser): the attack of issue 13, finding 9. Used by
// tests/unit/test_flow_cache.cc and tests/bench/bench_flow_cache.cc.
//
// How: CRC is linear over GF(2), crc(c, x ^ y) = crc(c, x) ^ crc(0, y), so
// the 64 bits the finaliser mixes are an affine function of the key bits,
// seeds or not. Let 96 bits vary (the interface id of an IPv6 source
// address in one /64, and both ports): 96 unknowns against 64 equations
// leave at least 2^32 keys whose 64 bits, and so whose whole hash (the
// finaliser is a bijection), home bucket and tag, are all the same. The
// keys differing from a base key by a combination of the null space's
// vectors are those.
#pragma once
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/packet/packet_meta.hh"

namespace crafted {

// The former hash, in software (the SSE4.2 crc32 instruction's CRC32C).
inline uint32_t crc32c_u64(uint32_t crc, uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    crc ^= uint8_t(v >> (8 * i));
    for (int b = 0; b < 8; ++b) crc = crc >> 1 ^ (0x82f63b78u & (0u - (crc & 1)));
  }
  return crc;
}

// Before the finaliser: what the old hash made equal, the finaliser kept equal.
inline uint64_t old_hash_linear_part(const uint64_t w[5]) {
  uint32_t a = 0x8f1bbcdc, b = 0x2545f491;
  for (int i = 0; i < 5; ++i) a = crc32c_u64(a, w[i]), b = crc32c_u64(b, w[4 - i]);
  return uint64_t(a) << 32 | b;
}

inline uint64_t old_hash(const uint64_t w[5]) {
  uint64_t h = old_hash_linear_part(w);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

// The key words (FlowKey layout) of a TCP packet 2001:db8:0:1::x port sport ->
// 2001:db8:0:2::1 port dport. The source compares lower, so direction bi keeps
// this order (canonical) and the table hashes these very words.
inline void base_key(uint64_t w[5]) {
  uint8_t k[40] = {};
  const uint8_t src[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0};
  const uint8_t dst[16] = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1};
  std::memcpy(k, src, 16);
  std::memcpy(k + 16, dst, 16);
  k[32] = 0x39, k[33] = 0x30;  // sport 12345
  k[34] = 0xbb, k[35] = 0x01;  // dport 443
  k[36] = 6;                   // TCP
  k[37] = 1;                   // is_ipv6
  std::memcpy(w, k, 40);
}

// Unknown i: bit i of word 1 (the source's interface id) for i < 64, else bit
// i - 64 of word 4 (source port, destination port).
inline void flip(uint64_t w[5], unsigned i) {
  if (i < 64) w[1] ^= 1ull << i;
  else w[4] ^= 1ull << (i - 64);
}

// n keys (n <= 2^32) whose old hash is the base key's, as packets.
inline std::vector<sluice::PacketMeta> colliding_packets(size_t n) {
  constexpr unsigned kUnknowns = 96;
  uint64_t base[5];
  base_key(base);
  const uint64_t h0 = old_hash_linear_part(base);
  // Gaussian elimination on the columns (what flipping each unknown does to
  // the 64 bits); a column that reduces to zero gives a null-space vector:
  // the set of unknowns it was combined from.
  struct Row {
    uint64_t bits;
    uint64_t combo[2];  // unknowns, as a 96-bit set
    uint64_t pivot;     // a bit set in this row and in no other pivot row
  };
  std::vector<Row> pivots, null_space;
  for (unsigned i = 0; i < kUnknowns; ++i) {
    uint64_t w[5];
    std::memcpy(w, base, sizeof w);
    flip(w, i);
    Row r{old_hash_linear_part(w) ^ h0, {i < 64 ? 1ull << i : 0, i < 64 ? 0 : 1ull << (i - 64)}, 0};
    for (const Row &p : pivots)
      if (r.bits & p.pivot) r.bits ^= p.bits, r.combo[0] ^= p.combo[0], r.combo[1] ^= p.combo[1];
    if (r.bits == 0) {
      null_space.push_back(r);
      continue;
    }
    r.pivot = 1ull << (63 - __builtin_clzll(r.bits));
    for (Row &p : pivots)
      if (p.bits & r.pivot) p.bits ^= r.bits, p.combo[0] ^= r.combo[0], p.combo[1] ^= r.combo[1];
    pivots.push_back(r);
  }
  std::vector<sluice::PacketMeta> out;
  out.reserve(n);
  for (uint64_t j = 0; j < n && j < (1ull << null_space.size()); ++j) {
    uint64_t w[5];
    std::memcpy(w, base, sizeof w);
    for (unsigned b = 0; b < null_space.size(); ++b)
      if (j >> b & 1)
        for (unsigned i = 0; i < kUnknowns; ++i)
          if (null_space[b].combo[i / 64] >> (i % 64) & 1) flip(w, i);
    sluice::PacketMeta m;
    std::memset(&m, 0, sizeof m);
    std::memcpy(m.src_addr, w, 16);
    std::memcpy(m.dst_addr, reinterpret_cast<const uint8_t *>(w) + 16, 16);
    m.src_port = uint16_t(w[4]);
    m.dst_port = uint16_t(w[4] >> 16);
    m.ip_proto = 6;
    m.status = sluice::ParseStatus::Ok;
    m.flags = sluice::PacketMeta::kIpv6 | sluice::PacketMeta::kHasL4;
    m.ip_total_length = 60;
    m.tcp_flags = 0x10;  // ACK
    out.push_back(m);
  }
  return out;
}

}  // namespace crafted
