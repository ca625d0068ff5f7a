// Software RSS: the table-driven Toeplitz hash against DPDK's reference
// implementation and the published verification vectors, the symmetry of the
// 0x6d5a key, and how lane_for spreads flows.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <rte_thash.h>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "engine/packet/rss_hash.hh"

using namespace sluice;

namespace {

// Fields in network byte order, as in the headers.
struct FlowV4 {
  uint32_t src, dst;
  uint16_t sport, dport;
};
struct FlowV6 {
  uint8_t src[16], dst[16];
  uint16_t sport, dport;
};

FlowV4 random_v4(std::mt19937_64 &rng) {
  uint64_t a = rng(), b = rng();
  return {uint32_t(a), uint32_t(a >> 32), uint16_t(b), uint16_t(b >> 16)};
}

FlowV6 random_v6(std::mt19937_64 &rng) {
  FlowV6 f;
  for (size_t i = 0; i < 16; i += 8) {
    uint64_t a = rng(), b = rng();
    std::memcpy(f.src + i, &a, 8);
    std::memcpy(f.dst + i, &b, 8);
  }
  uint64_t p = rng();
  f.sport = uint16_t(p);
  f.dport = uint16_t(p >> 16);
  return f;
}

// rte_softrss reads the key as 32-bit words.
struct AlignedKey {
  alignas(4) uint8_t bytes[ToeplitzHash::kKeyLen];
  explicit AlignedKey(const uint8_t *key) { std::memcpy(bytes, key, sizeof bytes); }
};

// DPDK's input: 32-bit words in host order; its tuple structs put dport before
// sport so that the word holding them reads sport:dport once in host order.
uint32_t softrss_v4(const FlowV4 &f, bool ports, const AlignedKey &key) {
  rte_thash_tuple t{};
  t.v4.src_addr = ntohl(f.src);
  t.v4.dst_addr = ntohl(f.dst);
  t.v4.sport = ntohs(f.sport);
  t.v4.dport = ntohs(f.dport);
  return rte_softrss(reinterpret_cast<uint32_t *>(&t),
                     ports ? RTE_THASH_V4_L4_LEN : RTE_THASH_V4_L3_LEN, key.bytes);
}

// What rte_thash_load_v6_addrs does, without its SSSE3 shuffle: the project
// builds for baseline x86-64.
void load_words(const uint8_t *bytes, size_t words, uint8_t *out) {
  for (size_t i = 0; i < words; ++i) {
    uint32_t w;
    std::memcpy(&w, bytes + 4 * i, 4);
    w = ntohl(w);
    std::memcpy(out + 4 * i, &w, 4);
  }
}

uint32_t softrss_v6(const FlowV6 &f, bool ports, const AlignedKey &key) {
  rte_thash_tuple t{};
  load_words(f.src, 4, t.v6.src_addr);
  load_words(f.dst, 4, t.v6.dst_addr);
  t.v6.sport = ntohs(f.sport);
  t.v6.dport = ntohs(f.dport);
  return rte_softrss(reinterpret_cast<uint32_t *>(&t),
                     ports ? RTE_THASH_V6_L4_LEN : RTE_THASH_V6_L3_LEN, key.bytes);
}

struct NamedKey {
  const char *name;
  const uint8_t *key;
};
const NamedKey kKeys[] = {{"symmetric", ToeplitzHash::kSymmetricKey},
                          {"Microsoft", ToeplitzHash::kMicrosoftKey}};

}  // namespace

TEST_CASE("rss: the table-driven hash equals DPDK's rte_softrss", "[rss]") {
  for (const NamedKey &k : kKeys) {
    INFO(k.name << " key");
    const ToeplitzHash h(k.key);
    const AlignedKey aligned(k.key);
    std::mt19937_64 rng(0x5eed);
    for (int i = 0; i < 20000; ++i) {
      const FlowV4 f = random_v4(rng);
      REQUIRE(h.hash_ipv4(f.src, f.dst) == softrss_v4(f, false, aligned));
      REQUIRE(h.hash_ipv4(f.src, f.dst, f.sport, f.dport) == softrss_v4(f, true, aligned));
    }
    for (int i = 0; i < 20000; ++i) {
      const FlowV6 f = random_v6(rng);
      REQUIRE(h.hash_ipv6(f.src, f.dst) == softrss_v6(f, false, aligned));
      REQUIRE(h.hash_ipv6(f.src, f.dst, f.sport, f.dport) == softrss_v6(f, true, aligned));
    }
    // Every input length rte_softrss accepts, not only the tuple sizes.
    uint8_t bytes[ToeplitzHash::kMaxInputLen];
    alignas(4) uint8_t words[ToeplitzHash::kMaxInputLen];
    for (int i = 0; i < 2000; ++i) {
      for (uint8_t &b : bytes) b = uint8_t(rng());
      for (size_t n = 0; n <= ToeplitzHash::kMaxInputLen / 4; ++n) {
        load_words(bytes, n, words);
        REQUIRE(h.hash(bytes, 4 * n) ==
                rte_softrss(reinterpret_cast<uint32_t *>(words), n, aligned.bytes));
      }
    }
  }
}

// The symmetric key's hash is computed folded (the even input bytes XORed
// together, and the odd ones: ToeplitzHash::hash_folded); a key without a
// 16-bit period, byte by byte. Both against the definition, bit by bit, at
// every input length (not only multiples of 4, as above), and with keys
// whose period breaks at the first or last byte.
TEST_CASE("rss: a key with a 16-bit period hashes folded inputs, as the definition does", "[rss]") {
  auto toeplitz = [](const uint8_t *key, const uint8_t *in, size_t len) {
    uint32_t h = 0;
    for (size_t bit = 0; bit < 8 * len; ++bit) {
      if (!(in[bit / 8] & (0x80u >> (bit % 8)))) continue;
      uint32_t window = 0;  // key bits [bit, bit + 32)
      for (size_t k = 0; k < 32; ++k)
        window = window << 1 | ((key[(bit + k) / 8] >> (7 - (bit + k) % 8)) & 1u);
      h ^= window;
    }
    return h;
  };
  uint8_t first_off[ToeplitzHash::kKeyLen], last_off[ToeplitzHash::kKeyLen];
  std::memcpy(first_off, ToeplitzHash::kSymmetricKey, sizeof first_off);
  std::memcpy(last_off, ToeplitzHash::kSymmetricKey, sizeof last_off);
  first_off[0] ^= 1;
  last_off[ToeplitzHash::kKeyLen - 1] ^= 0x80;
  const NamedKey keys[] = {{"symmetric", ToeplitzHash::kSymmetricKey},
                           {"microsoft", ToeplitzHash::kMicrosoftKey},
                           {"symmetric, first byte off", first_off},
                           {"symmetric, last byte off", last_off}};
  std::mt19937_64 rng(0xf01d);
  uint8_t in[ToeplitzHash::kMaxInputLen];
  for (const NamedKey &k : keys) {
    INFO(k.name << " key");
    const ToeplitzHash h(k.key);
    for (int i = 0; i < 3000; ++i) {
      for (uint8_t &b : in) b = uint8_t(rng());
      for (size_t len = 0; len <= ToeplitzHash::kMaxInputLen; ++len) {
        INFO("length " << len);
        REQUIRE(h.hash(in, len) == toeplitz(k.key, in, len));
      }
    }
  }
  // Short keys: the period holds, but fewer than two tables are built.
  for (size_t key_len : {4, 5, 6, 7}) {
    const ToeplitzHash h(ToeplitzHash::kSymmetricKey, key_len);
    for (size_t len = 0; len <= h.max_input_len(); ++len) {
      for (uint8_t &b : in) b = uint8_t(rng());
      REQUIRE(h.hash(in, len) == toeplitz(ToeplitzHash::kSymmetricKey, in, len));
    }
  }
}

// Microsoft's "Verifying the RSS Hash Calculation" suite, also in the Intel
// 82599 datasheet (7.1.2.8.3) and DPDK's app/test/test_thash.c.
TEST_CASE("rss: Microsoft RSS verification suite", "[rss]") {
  const ToeplitzHash h(ToeplitzHash::kMicrosoftKey);
  struct Vector {
    const char *src, *dst;
    uint16_t sport, dport;
    uint32_t hash_2tuple, hash_4tuple;
  };

  const Vector v4[] = {
      {"66.9.149.187", "161.142.100.80", 2794, 1766, 0x323e8fc2, 0x51ccc178},
      {"199.92.111.2", "65.69.140.83", 14230, 4739, 0xd718262a, 0xc626b0ea},
      {"24.19.198.95", "12.22.207.184", 12898, 38024, 0xd2d0a5de, 0x5c2b394a},
      {"38.27.205.30", "209.142.163.6", 48228, 2217, 0x82989176, 0xafc7327f},
      {"153.39.163.191", "202.188.127.2", 44251, 1303, 0x5d1809c5, 0x10e828a2},
  };
  for (const Vector &v : v4) {
    INFO(v.src << ":" << v.sport << " -> " << v.dst << ":" << v.dport);
    uint32_t src, dst;
    REQUIRE(inet_pton(AF_INET, v.src, &src) == 1);
    REQUIRE(inet_pton(AF_INET, v.dst, &dst) == 1);
    CHECK(h.hash_ipv4(src, dst) == v.hash_2tuple);
    CHECK(h.hash_ipv4(src, dst, htons(v.sport), htons(v.dport)) == v.hash_4tuple);
  }

  const Vector v6[] = {
      {"3ffe:2501:200:1fff::7", "3ffe:2501:200:3::1", 2794, 1766, 0x2cc18cd5, 0x40207d3d},
      {"3ffe:501:8::260:97ff:fe40:efab", "ff02::1", 14230, 4739, 0x0f0c461c, 0xdde51bbf},
      {"3ffe:1900:4545:3:200:f8ff:fe21:67cf", "fe80::200:f8ff:fe21:67cf", 44251, 38024,
       0x4b61e985, 0x02d1feef},
  };
  for (const Vector &v : v6) {
    INFO("[" << v.src << "]:" << v.sport << " -> [" << v.dst << "]:" << v.dport);
    uint8_t src[16], dst[16];
    REQUIRE(inet_pton(AF_INET6, v.src, src) == 1);
    REQUIRE(inet_pton(AF_INET6, v.dst, dst) == 1);
    CHECK(h.hash_ipv6(src, dst) == v.hash_2tuple);
    CHECK(h.hash_ipv6(src, dst, htons(v.sport), htons(v.dport)) == v.hash_4tuple);
  }
}

TEST_CASE("rss: the symmetric key gives both directions of a flow one hash", "[rss]") {
  const ToeplitzHash sym(ToeplitzHash::kSymmetricKey);
  const ToeplitzHash ms(ToeplitzHash::kMicrosoftKey);
  std::mt19937_64 rng(0x5e77);
  int ms_symmetric = 0;
  for (int i = 0; i < 20000; ++i) {
    const FlowV4 f = random_v4(rng);
    const uint32_t fwd = sym.hash_ipv4(f.src, f.dst, f.sport, f.dport);
    REQUIRE(fwd == sym.hash_ipv4(f.dst, f.src, f.dport, f.sport));
    REQUIRE(sym.hash_ipv4(f.src, f.dst) == sym.hash_ipv4(f.dst, f.src));
    // The documented cost of the 16-bit key period.
    REQUIRE(fwd >> 16 == (fwd & 0xffff));
    ms_symmetric += ms.hash_ipv4(f.src, f.dst, f.sport, f.dport) ==
                    ms.hash_ipv4(f.dst, f.src, f.dport, f.sport);
  }
  for (int i = 0; i < 20000; ++i) {
    const FlowV6 f = random_v6(rng);
    REQUIRE(sym.hash_ipv6(f.src, f.dst, f.sport, f.dport) ==
            sym.hash_ipv6(f.dst, f.src, f.dport, f.sport));
    REQUIRE(sym.hash_ipv6(f.src, f.dst) == sym.hash_ipv6(f.dst, f.src));
  }
  // Symmetry comes from the key, not from the hash: a general key breaks it.
  CHECK(ms_symmetric < 100);
}

TEST_CASE("rss: keys of 4 to 40 bytes, inputs up to key length - 4", "[rss]") {
  const uint8_t key[ToeplitzHash::kKeyLen + 1] = {};
  CHECK(ToeplitzHash(key, 4).max_input_len() == 0);
  CHECK(ToeplitzHash(key, 16).max_input_len() == 12);
  CHECK_THROWS_AS(ToeplitzHash(key, 3), std::invalid_argument);
  CHECK_THROWS_AS(ToeplitzHash(key, ToeplitzHash::kKeyLen + 1), std::invalid_argument);
}

// Each lane should get its share of the 128 redirection-table entries. With
// 100k flows, 5% of the smallest share (8 entries, 6250 flows) is 4 standard
// deviations of a uniform hash; the seed is fixed, so the outcome is too (the
// largest deviation is 3.3%). Against an even share of flows the RETA itself
// is off by up to 9.4% (see lane_for).
TEST_CASE("rss: lane_for spreads flows like a NIC's redirection table", "[rss]") {
  const ToeplitzHash h(ToeplitzHash::kSymmetricKey);
  std::mt19937_64 rng(0x1a4e);
  std::vector<uint32_t> hashes;
  for (int i = 0; i < 100000; ++i) {
    const FlowV4 f = random_v4(rng);
    hashes.push_back(h.hash_ipv4(f.src, f.dst, f.sport, f.dport));
  }
  for (uint32_t lanes = 2; lanes <= 16; ++lanes) {
    std::vector<double> count(lanes), entries(lanes);
    for (uint32_t e = 0; e < kRetaSize; ++e) entries[e % lanes] += 1;
    for (uint32_t hv : hashes) count[lane_for(hv, lanes)] += 1;
    for (uint32_t l = 0; l < lanes; ++l) {
      const double expected = double(hashes.size()) * entries[l] / kRetaSize;
      INFO(lanes << " lanes, lane " << l << ": " << count[l] << " flows, expected " << expected);
      CHECK(std::abs(count[l] - expected) <= 0.05 * expected);
    }
  }
}
