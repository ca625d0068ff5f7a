#include "engine/flow/flow_hash.hh"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <system_error>

namespace sluice {

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
