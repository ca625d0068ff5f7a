// engine/flow/flow_cache.cc compiled again for bench_flow_cache, in a
// namespace of its own, with another hash in place of SipHash-1-3; built once
// per BENCH_VARIANT_x (tests/CMakeLists.txt):
//   crc     the hash the table had before issue 13 (two CRC32C chains with
//           fixed seeds, MurmurHash3 finaliser) and no probe bound: the table
//           as it was
//   sip24   SipHash-2-4, the same code with more rounds
//   sodium  libsodium's crypto_shorthash (SipHash-2-4), a library call
#include <cstdint>

#include "engine/flow/flow_hash.hh"
#include "engine/flow/page_populator.hh"
#include "tests/bench/bench_flow_cache_results.hh"

#if BENCH_VARIANT_crc
#define VARIANT_NS sluice_bench_crc
#define VARIANT bench_variant_crc
#define VARIANT_NAME "CRC32C, unbounded (before)"
#elif BENCH_VARIANT_sip24
#define VARIANT_NS sluice_bench_sip24
#define VARIANT bench_variant_sip24
#define VARIANT_NAME "SipHash-2-4 (same code)"
#elif BENCH_VARIANT_sodium
#define VARIANT_NS sluice_bench_sodium
#define VARIANT bench_variant_sodium
#define VARIANT_NAME "SipHash-2-4 (libsodium)"
#else
#error "define BENCH_VARIANT_crc, _sip24 or _sodium"
#endif

// The hash's header stays in namespace sluice (the key type and the key from
// the OS are shared with the library), as does the populator's; everything
// below the #define is in VARIANT_NS instead.
namespace VARIANT_NS {
using sluice::PagePopulator;
using sluice::flow_hash;
using sluice::flow_hash_key_for_new_table;
using sluice::FlowHashKey;
using sluice::siphash_40;
}  // namespace VARIANT_NS
#define sluice VARIANT_NS

#if BENCH_VARIANT_crc
#include <nmmintrin.h>
namespace sluice {
inline uint64_t old_crc_hash(const FlowHashKey &, const uint64_t w[5]) {
  uint64_t a = 0x8f1bbcdc, b = 0x2545f491;
  a = _mm_crc32_u64(a, w[0]), b = _mm_crc32_u64(b, w[4]);
  a = _mm_crc32_u64(a, w[1]), b = _mm_crc32_u64(b, w[3]);
  a = _mm_crc32_u64(a, w[2]), b = _mm_crc32_u64(b, w[2]);
  a = _mm_crc32_u64(a, w[3]), b = _mm_crc32_u64(b, w[1]);
  a = _mm_crc32_u64(a, w[4]), b = _mm_crc32_u64(b, w[0]);
  uint64_t h = a << 32 | b;
  h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull, h ^= h >> 33;
  return h;
}
}  // namespace sluice
#define SLUICE_FLOW_CACHE_HASH old_crc_hash
#define SLUICE_FLOW_CACHE_MAX_PROBE UINT32_MAX
#elif BENCH_VARIANT_sip24
#define SLUICE_FLOW_CACHE_HASH siphash_40<2, 4>
#elif BENCH_VARIANT_sodium
#include <sodium.h>
namespace sluice {
inline uint64_t sodium_hash(const FlowHashKey &k, const uint64_t w[5]) {
  uint64_t h;
  crypto_shorthash(reinterpret_cast<unsigned char *>(&h), reinterpret_cast<const unsigned char *>(w), 40,
                   reinterpret_cast<const unsigned char *>(&k));
  return h;
}
}  // namespace sluice
#define SLUICE_FLOW_CACHE_HASH sodium_hash
#endif

#define BENCH_HASH SLUICE_FLOW_CACHE_HASH
#include "engine/flow/flow_cache.cc"
#include "tests/bench/bench_flow_cache_cases.hh"

extern const BenchVariant VARIANT;
const BenchVariant VARIANT = {VARIANT_NAME, sluice::bench_cases::hash_ns, sluice::bench_cases::uniform,
                              sluice::bench_cases::attack};
