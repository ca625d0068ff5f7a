#include "engine/flow/flow_hash.hh"

#include <sys/random.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace sluice {

namespace {

// SipHash-1-3 of L keys, each step applied to all L before the next (so the
// compiler puts the L lanes in one vector register): what siphash_40<1, 3>
// gives for each.
template <int L>
[[gnu::always_inline]] inline void siphash13_40_lanes(const FlowHashKey &key, const uint64_t (*w)[5], uint64_t *h) {
  uint64_t v0[L], v1[L], v2[L], v3[L];
  for (int l = 0; l < L; ++l) {
    v0[l] = key.k0 ^ 0x736f6d6570736575ull, v1[l] = key.k1 ^ 0x646f72616e646f6dull;
    v2[l] = key.k0 ^ 0x6c7967656e657261ull, v3[l] = key.k1 ^ 0x7465646279746573ull;
  }
  auto round = [&] {
    for (int l = 0; l < L; ++l) {
      v0[l] += v1[l], v1[l] = __builtin_rotateleft64(v1[l], 13), v1[l] ^= v0[l], v0[l] = __builtin_rotateleft64(v0[l], 32);
      v2[l] += v3[l], v3[l] = __builtin_rotateleft64(v3[l], 16), v3[l] ^= v2[l];
      v0[l] += v3[l], v3[l] = __builtin_rotateleft64(v3[l], 21), v3[l] ^= v0[l];
      v2[l] += v1[l], v1[l] = __builtin_rotateleft64(v1[l], 17), v1[l] ^= v2[l], v2[l] = __builtin_rotateleft64(v2[l], 32);
    }
  };
  for (int i = 0; i < 5; ++i) {
    for (int l = 0; l < L; ++l) v3[l] ^= w[l][i];
    round();
    for (int l = 0; l < L; ++l) v0[l] ^= w[l][i];
  }
  const uint64_t last = uint64_t(40) << 56;  // the length byte, as in siphash_40
  for (int l = 0; l < L; ++l) v3[l] ^= last;
  round();
  for (int l = 0; l < L; ++l) v0[l] ^= last, v2[l] ^= 0xff;
  round(), round(), round();
  for (int l = 0; l < L; ++l) h[l] = v0[l] ^ v1[l] ^ v2[l] ^ v3[l];
}

#if defined(__x86_64__)
[[gnu::target("avx2")]] void flow_hash_avx2(const FlowHashKey &key, const uint64_t (*w)[5], unsigned n,
                                               uint64_t *h) {
  for (unsigned i = 0; i + 8 <= n; i += 8) siphash13_40_lanes<8>(key, w + i, h + i);
}
// AVX-512 has a 64-bit vector rotate (vprolq), where AVX2 takes two shifts
// and an or for each of SipHash's rotations, and gathers word i of eight
// keys (40 bytes apart) in one instruction: 3.4 ns a key against 5.6 for
// the AVX2 path (bench_flow_hash, Intel Xeon). Two or four groups of eight
// side by side measured no faster: the vector ports are busy already.
[[gnu::target("avx512f,avx512vl"), gnu::always_inline]] inline void sip_round_avx512(__m512i &v0, __m512i &v1,
                                                                                     __m512i &v2, __m512i &v3) {
  v0 = _mm512_add_epi64(v0, v1), v1 = _mm512_rol_epi64(v1, 13), v1 = _mm512_xor_si512(v1, v0);
  v0 = _mm512_rol_epi64(v0, 32);
  v2 = _mm512_add_epi64(v2, v3), v3 = _mm512_rol_epi64(v3, 16), v3 = _mm512_xor_si512(v3, v2);
  v0 = _mm512_add_epi64(v0, v3), v3 = _mm512_rol_epi64(v3, 21), v3 = _mm512_xor_si512(v3, v0);
  v2 = _mm512_add_epi64(v2, v1), v1 = _mm512_rol_epi64(v1, 17), v1 = _mm512_xor_si512(v1, v2);
  v2 = _mm512_rol_epi64(v2, 32);
}
[[gnu::target("avx512f,avx512vl")]] void flow_hash_avx512(const FlowHashKey &key, const uint64_t (*w)[5],
                                                            unsigned n, uint64_t *h) {
  const __m512i word0 = _mm512_setr_epi64(0, 5, 10, 15, 20, 25, 30, 35);  // of each of 8 keys, in words
  const __m512i k0 = _mm512_set1_epi64(int64_t(key.k0)), k1 = _mm512_set1_epi64(int64_t(key.k1));
  for (unsigned g = 0; g + 8 <= n; g += 8) {
    __m512i v0 = _mm512_xor_si512(k0, _mm512_set1_epi64(0x736f6d6570736575ll));
    __m512i v1 = _mm512_xor_si512(k1, _mm512_set1_epi64(0x646f72616e646f6dll));
    __m512i v2 = _mm512_xor_si512(k0, _mm512_set1_epi64(0x6c7967656e657261ll));
    __m512i v3 = _mm512_xor_si512(k1, _mm512_set1_epi64(0x7465646279746573ll));
    for (int i = 0; i < 5; ++i) {
      const __m512i m = _mm512_i64gather_epi64(_mm512_add_epi64(word0, _mm512_set1_epi64(i)), w + g, 8);
      v3 = _mm512_xor_si512(v3, m);
      sip_round_avx512(v0, v1, v2, v3);
      v0 = _mm512_xor_si512(v0, m);
    }
    const __m512i last = _mm512_set1_epi64(int64_t(uint64_t(40) << 56));  // the length byte, as in siphash_40
    v3 = _mm512_xor_si512(v3, last);
    sip_round_avx512(v0, v1, v2, v3);
    v0 = _mm512_xor_si512(v0, last), v2 = _mm512_xor_si512(v2, _mm512_set1_epi64(0xff));
    for (int r = 0; r < 3; ++r) sip_round_avx512(v0, v1, v2, v3);
    _mm512_storeu_si512(h + g, _mm512_xor_si512(_mm512_xor_si512(v0, v1), _mm512_xor_si512(v2, v3)));
  }
}
const bool cpu_has_avx2 = [] {
  __builtin_cpu_init();  // a static initializer may run before libgcc's
  return __builtin_cpu_supports("avx2") != 0;
}();
const bool cpu_has_avx512 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") != 0 && __builtin_cpu_supports("avx512vl") != 0;
}();
#else
const bool cpu_has_avx2 = false, cpu_has_avx512 = false;
#endif

}  // namespace

FlowHashPath flow_hash_best_path() {
  return cpu_has_avx512 ? FlowHashPath::Avx512 : cpu_has_avx2 ? FlowHashPath::Avx2 : FlowHashPath::Scalar;
}

bool flow_hash_batch_on(FlowHashPath path, const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h) {
  // The vector path for groups of eight, if any: the rest one at a time.
  void (*groups)(const FlowHashKey &, const uint64_t(*)[5], unsigned, uint64_t *) = nullptr;
#if defined(__x86_64__)
  if (path == FlowHashPath::Avx2) groups = flow_hash_avx2;
  if (path == FlowHashPath::Avx512) groups = flow_hash_avx512;
#endif
  if ((path == FlowHashPath::Avx2 && !cpu_has_avx2) || (path == FlowHashPath::Avx512 && !cpu_has_avx512)) return false;
  unsigned done = 0;
  if (groups) {
    done = n / 8 * 8;
    groups(key, w, done, h);
  }
  for (unsigned i = done; i < n; ++i) h[i] = flow_hash(key, w[i]);
  return true;
}

void flow_hash_batch(const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h) {
  static const FlowHashPath best = flow_hash_best_path();
  flow_hash_batch_on(best, key, w, n, h);
}

bool parse_flow_hash_key(const char *text, FlowHashKey &key) {
  if (std::strlen(text) != 32) return false;
  uint8_t b[16];
  for (int i = 0; i < 32; ++i) {
    char c = text[i];
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (v < 0) return false;
    b[i / 2] = uint8_t(i % 2 ? b[i / 2] | v : v << 4);
  }
  key = {};
  for (int i = 0; i < 8; ++i) {
    key.k0 |= uint64_t(b[i]) << (8 * i);
    key.k1 |= uint64_t(b[8 + i]) << (8 * i);
  }
  return true;
}

FlowHashKey flow_hash_key_for_new_table() {
  FlowHashKey key;
  if (const char *text = std::getenv("SLUICE_FLOW_HASH_KEY")) {
    if (!parse_flow_hash_key(text, key))
      throw std::invalid_argument("SLUICE_FLOW_HASH_KEY must be 32 hex digits (16 bytes), not \"" +
                                  std::string(text) + "\"");
    return key;
  }
  uint8_t b[16];
  for (size_t got = 0; got < sizeof b;) {
    ssize_t n = getrandom(b + got, sizeof b - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw std::system_error(errno, std::generic_category(), "getrandom for the flow hash key");
    got += size_t(n);
  }
  std::memcpy(&key.k0, b, 8);
  std::memcpy(&key.k1, b + 8, 8);
  return key;
}

}  // namespace sluice
