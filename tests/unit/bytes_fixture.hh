// Packets and messages built byte by byte in tests: a byte string, numbers
// in network byte order, and byte strings put together.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace sluice::test::bytes {

using Bytes = std::vector<uint8_t>;

inline Bytes cat(std::initializer_list<Bytes> parts) {
  Bytes out;
  for (const Bytes &p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}
// The low 16, 24 or 32 bits of v, big-endian.
inline Bytes be16(uint64_t v) { return {uint8_t(v >> 8), uint8_t(v)}; }
inline Bytes be24(uint64_t v) { return {uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)}; }
inline Bytes be32(uint64_t v) { return {uint8_t(v >> 24), uint8_t(v >> 16), uint8_t(v >> 8), uint8_t(v)}; }
inline Bytes zeros(size_t n) { return Bytes(n, 0); }

}  // namespace sluice::test::bytes
