// Software RSS: the Toeplitz hash NICs compute, for virtual devices that
// compute none (PLATFORM.md: mbuf->hash.rss stays 0 on every vdev), and the
// hash-to-lane mapping of a NIC's redirection table. With kSymmetricKey both
// directions of a flow get the same hash, hence the same lane.
#pragma once
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "engine/packet/packet_meta.hh"

namespace sluice {

// Table-driven Toeplitz: the hash is linear (XOR) in the input bits, so the
// contribution of every byte value at every input position is precomputed
// and hashing is one table load and XOR per input byte, instead of a
// shift-and-XOR per set input bit with data-dependent branches (two loads in
// all for a key with a 16-bit period, such as kSymmetricKey: hash_folded).
//
// Results equal DPDK's rte_softrss and the Microsoft RSS verification suite
// for the same key and the standard input order: source address, destination
// address, source port, destination port, all in network byte order.
class ToeplitzHash {
 public:
  static constexpr size_t kKeyLen = 40;  // what NICs and DPDK use
  // Input bit i, when set, contributes key bits [i, i+32): a 40-byte key
  // covers 36 bytes of input, exactly an IPv6 4-tuple.
  static constexpr size_t kMaxInputLen = kKeyLen - 4;

  // 0x6d5a repeated: the key has a 16-bit period, and addresses and ports start
  // at multiples of 16 bits in the input, so swapping source and destination
  // (addresses and ports together) leaves the hash unchanged (Woo & Park,
  // "Scalable TCP Session Monitoring with Symmetric Receive-side Scaling", 2012).
  // The price: the hash depends only on the XOR of the tuple's 16-bit words,
  // and its upper 16 bits equal its lower 16. It spreads flows over lanes
  // well; it is not a flow-table hash.
  static const uint8_t kSymmetricKey[kKeyLen];
  // Microsoft's verification key, the default of many NIC drivers.
  static const uint8_t kMicrosoftKey[kKeyLen];

  // key_len must be 4..kKeyLen (throws std::invalid_argument otherwise); inputs
  // may then be up to key_len - 4 bytes long. Builds 36 KiB of tables.
  explicit ToeplitzHash(const uint8_t *key, size_t key_len = kKeyLen);

  // Toeplitz hash of len bytes; len <= max_input_len().
  uint32_t hash(const uint8_t *input, size_t len) const {
    assert(len <= max_len_);
    if (period16_) return hash_folded(input, len);
    uint32_t h = 0;
    for (size_t i = 0; i < len; ++i) h ^= table_[i][input[i]];
    return h;
  }
  size_t max_input_len() const { return max_len_; }

  // Standard RSS inputs. Every argument is in network byte order, as read
  // from the packet headers; IPv6 addresses are 16 bytes each.
  uint32_t hash_ipv4(uint32_t src, uint32_t dst) const {
    uint8_t in[8];
    std::memcpy(in, &src, 4);
    std::memcpy(in + 4, &dst, 4);
    return hash(in, sizeof in);
  }
  uint32_t hash_ipv4(uint32_t src, uint32_t dst, uint16_t sport, uint16_t dport) const {
    uint8_t in[12];
    std::memcpy(in, &src, 4);
    std::memcpy(in + 4, &dst, 4);
    std::memcpy(in + 8, &sport, 2);
    std::memcpy(in + 10, &dport, 2);
    return hash(in, sizeof in);
  }
  uint32_t hash_ipv6(const uint8_t *src, const uint8_t *dst) const {
    uint8_t in[32];
    std::memcpy(in, src, 16);
    std::memcpy(in + 16, dst, 16);
    return hash(in, sizeof in);
  }
  uint32_t hash_ipv6(const uint8_t *src, const uint8_t *dst, uint16_t sport,
                     uint16_t dport) const {
    uint8_t in[36];
    std::memcpy(in, src, 16);
    std::memcpy(in + 16, dst, 16);
    std::memcpy(in + 32, &sport, 2);
    std::memcpy(in + 34, &dport, 2);
    return hash(in, sizeof in);
  }

 private:
  // A key with a 16-bit period (kSymmetricKey) gives every byte at an even
  // input position the same table, and every byte at an odd one the same:
  // the hash being linear, the even bytes are XORed together first, and the
  // odd ones, 8 bytes at a time, then looked up once each (2 loads from
  // 2 KiB, against a load a byte from up to 36 KiB).
  uint32_t hash_folded(const uint8_t *input, size_t len) const {
    uint64_t x = 0;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
      uint64_t w;
      std::memcpy(&w, input + i, 8);
      x ^= w;
    }
    for (; i < len; ++i) x ^= uint64_t(input[i]) << (8 * (i & 7));
    // little-endian: the byte at offset i is byte i % 8 of x, and folding
    // keeps each byte's parity
    x ^= x >> 32;
    x ^= x >> 16;
    return table_[0][x & 0xff] ^ table_[1][x >> 8 & 0xff];
  }
  uint32_t table_[kMaxInputLen][256];
  size_t max_len_;
  bool period16_ = false;  // hash_folded() gives the same (set by the constructor)
};

// Redirection table entries of ixgbe NICs (82599, X540, X550).
inline constexpr uint32_t kRetaSize = 128;

// The lane a hash goes to, as a NIC does it: the low 7 bits of the hash index
// a 128-entry redirection table, filled round-robin with the queues (entry i
// holds queue i % queues: the default of the Linux drivers and of DPDK's
// ixgbe PMD). So software RSS over N lanes puts a flow on the queue an ixgbe
// with default RETA and the same key would.
// When lanes does not divide 128 the entries cannot be shared evenly: a lane
// gets floor(128/lanes) or ceil(128/lanes) of them (over 2..16 lanes, at most
// 9.4% above and 8.6% below an even share). lanes must be >= 1.
inline uint32_t lane_for(uint32_t hash, uint32_t lanes) {
  return (hash & (kRetaSize - 1)) % lanes;
}

// The symmetric hash of a parsed packet, as a NIC with kSymmetricKey computes
// it: TCP, UDP and SCTP packets that are not fragments hash their addresses
// and ports, other IP packets (fragments included, as NICs do) their addresses
// only, and non-IP packets hash to 0. Both directions of a flow get the same
// value, so lane_for(symmetric_hash(m), n) keeps a connection in one lane.
uint32_t symmetric_hash(const PacketMeta &m);
// The same inputs hashed with any key (e.g. kMicrosoftKey, not symmetric).
uint32_t rss_hash(const PacketMeta &m, const ToeplitzHash &hash);

}  // namespace sluice
