#include "engine/flow/flow_hash.hh"

#include <sys/random.h>

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
const bool cpu_has_avx2 = [] {
  __builtin_cpu_init();  // a static initializer may run before libgcc's
  return __builtin_cpu_supports("avx2") != 0;
}();
#endif

}  // namespace

void flow_hash_batch(const FlowHashKey &key, const uint64_t (*w)[5], unsigned n, uint64_t *h) {
  unsigned done = 0;
#if defined(__x86_64__)
  if (cpu_has_avx2) {
    done = n / 8 * 8;
    flow_hash_avx2(key, w, done, h);
  }
#endif
  for (unsigned i = done; i < n; ++i) h[i] = flow_hash(key, w[i]);
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
