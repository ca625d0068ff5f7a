// The flow table's hash: SipHash-1-3 (Aumasson and Bernstein) of the 40-byte
// flow key under a 128-bit secret key, one per table (FlowCache).
//
// Why a keyed PRF: the table's home bucket and tag come from this hash. The
// hash it replaced (CRC32C chains, a fixed seed) was linear, so anyone who
// can send packets could solve for keys that all land in one bucket with one
// tag, and each packet then compared its key with every one of them. With a
// key the sender does not know, where a flow lands is as good as random to
// the sender. A keyed CRC would not do: for keys of equal length,
// crc(seed, x) ^ crc(seed, y) does not depend on the seed.
//
// Why written here rather than taken from libsodium (Debian libsodium23):
// its crypto_shorthash is SipHash-2-4 only. Measured in the table
// (tests/bench/bench_flow_cache.cc, account_batch, medians of 3 runs on a
// loaded 2-vCPU VM), libsodium's SipHash-2-4 and this code's cost the same,
// and SipHash-1-3 (the variant Rust's and CPython's hash tables use against
// hash flooding) about 30 ns less per packet: 81 / 124 / 153 ns at 10K / 1M /
// 10M flows against 115 / 157 / 197. It is also straight-line code in the
// flow cache's bitcode, which a fused JIT loop inlines. Both SipHash-2-4 and
// SipHash-1-3 are checked against the reference test vectors
// (tests/unit/test_flow_cache.cc).
#pragma once
#include <cstdint>

namespace sluice {

struct FlowHashKey {
  uint64_t k0 = 0, k1 = 0;  // the key's bytes 0-7 and 8-15, little-endian
  bool operator==(const FlowHashKey &) const = default;
};

// x rotated left by N. -march=x86-64-v2 (the host build) tunes rotates into
// shld, which on the AMD EPYC (Zen 5) of our machines made SipHash-1-3 three
// times slower than rol does; the bitcode (SLUICE_BITCODE) is left to the
// JIT's target, x86-64-v3 by default, which has rorx.
template <int N>
inline uint64_t rotl(uint64_t x) {
#if defined(__x86_64__) && !defined(__BMI2__) && !defined(SLUICE_BITCODE)
  asm("rolq %1, %0" : "+r"(x) : "i"(N) : "cc");
  return x;
#else
  return __builtin_rotateleft64(x, N);
#endif
}

// SipHash-c-d of 40 bytes given as five little-endian 64-bit words: what the
// reference implementation gives for those 40 bytes.
template <int C, int D>
inline uint64_t siphash_40(const FlowHashKey &key, const uint64_t w[5]) {
  uint64_t v0 = key.k0 ^ 0x736f6d6570736575ull, v1 = key.k1 ^ 0x646f72616e646f6dull;
  uint64_t v2 = key.k0 ^ 0x6c7967656e657261ull, v3 = key.k1 ^ 0x7465646279746573ull;
  auto rounds = [&](int n) {
    for (int r = 0; r < n; ++r) {
      v0 += v1, v1 = rotl<13>(v1), v1 ^= v0, v0 = rotl<32>(v0);
      v2 += v3, v3 = rotl<16>(v3), v3 ^= v2;
      v0 += v3, v3 = rotl<21>(v3), v3 ^= v0;
      v2 += v1, v1 = rotl<17>(v1), v1 ^= v2, v2 = rotl<32>(v2);
    }
  };
  for (int i = 0; i < 5; ++i) {
    v3 ^= w[i];
    rounds(C);
    v0 ^= w[i];
  }
  const uint64_t last = uint64_t(40) << 56;  // the length byte; no bytes left over
  v3 ^= last;
  rounds(C);
  v0 ^= last;
  v2 ^= 0xff;
  rounds(D);
  return v0 ^ v1 ^ v2 ^ v3;
}

inline uint64_t flow_hash(const FlowHashKey &key, const uint64_t w[5]) { return siphash_40<1, 3>(key, w); }

// flow_hash() of n keys at once: h[i] = flow_hash(key, w[i]). Where the CPU
// has AVX2, eight keys go through SipHash side by side in vector registers
// (one key's rounds are a chain of dependent steps; eight keys' are not):
// 4.5 ns a key against 13.7 one at a time, on the AMD EPYC of our VMs; where
// it has AVX-512, eight with its vector rotate and gather: 3.4 ns a key
// against 5.6 with AVX2 on an Intel Xeon (docs/performance.md).
// Elsewhere, and for the last n % 8, one at a time.
// A host function (not in the flow cache's bitcode): the CPU check is made
// once, and a fused loop calls it once a batch.
void flow_hash_batch(const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h);

// The ways flow_hash_batch() can take, for the tests and benchmarks to run
// each: flow_hash_batch_on() is false (and writes nothing) where the CPU
// lacks the path's instructions.
enum class FlowHashPath { Scalar, Avx2, Avx512 };
FlowHashPath flow_hash_best_path();  // what flow_hash_batch() takes on this CPU
bool flow_hash_batch_on(FlowHashPath path, const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h);

// The key for a new table: SLUICE_FLOW_HASH_KEY (32 hex digits, the key's 16
// bytes in order) when set, so that a run can be repeated with the same
// index layout; else 16 bytes from the OS (getrandom). Throws
// std::invalid_argument for a malformed SLUICE_FLOW_HASH_KEY,
// std::system_error when the OS gives no random bytes.
FlowHashKey flow_hash_key_for_new_table();

// Parses 32 hex digits into a key; false if `text` is not that.
bool parse_flow_hash_key(const char *text, FlowHashKey &key);

}  // namespace sluice
