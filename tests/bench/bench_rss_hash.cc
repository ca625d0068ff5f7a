// ns per hash: the table-driven Toeplitz (engine/packet/rss_hash.hh) against
// DPDK's rte_softrss, same flows, same key, same run; and the symmetric key's
// folded hash against a byte-by-byte one (the same key with its last byte
// changed: no 16-bit period, so no folding).
//   bench_rss_hash [repetitions]
// Throughput over independent hashes, as in a burst. Each repetition hashes
// every flow of a fixed set; the best and the median repetition are reported,
// the best being the least disturbed on a shared machine. rte_softrss gets its
// input already in host order, so its byte swapping is not counted.
#include <arpa/inet.h>
#include <rte_thash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "engine/packet/rss_hash.hh"

using namespace sluice;

namespace {

constexpr size_t kFlows = 1024;  // inputs stay in L1/L2, like a burst's headers
constexpr int kPassesPerRep = 64;

struct FlowV4 {
  uint32_t src, dst;
  uint16_t sport, dport;
};
struct FlowV6 {
  uint8_t src[16], dst[16];
  uint16_t sport, dport;
};

struct Timing {
  double best_ns, median_ns;
  uint32_t checksum;
};

// Runs hash_one(i) over all flows, kPassesPerRep times per repetition.
template <typename F>
Timing measure(int reps, F hash_one) {
  std::vector<double> ns(reps);
  uint32_t sum = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int p = 0; p < kPassesPerRep; ++p)
      for (size_t i = 0; i < kFlows; ++i) sum ^= hash_one(i);
    const auto t1 = std::chrono::steady_clock::now();
    ns[r] = std::chrono::duration<double, std::nano>(t1 - t0).count() / (kPassesPerRep * kFlows);
  }
  std::sort(ns.begin(), ns.end());
  return {ns.front(), ns[reps / 2], sum};
}

void report(const char *input, const Timing &table, const Timing &softrss) {
  std::printf("%-16s %8.2f %8.2f   %8.2f %8.2f   %6.1fx %6.1fx%s\n", input, table.best_ns,
              table.median_ns, softrss.best_ns, softrss.median_ns,
              softrss.best_ns / table.best_ns, softrss.median_ns / table.median_ns,
              table.checksum == softrss.checksum ? "" : "   HASHES DIFFER");
}

uint32_t host_word(const uint8_t *p) {
  uint32_t w;
  std::memcpy(&w, p, 4);
  return ntohl(w);
}

}  // namespace

int main(int argc, char **argv) {
  const int reps = argc > 1 ? std::max(1, std::atoi(argv[1])) : 200;
  const ToeplitzHash h(ToeplitzHash::kSymmetricKey);
  alignas(4) uint8_t key[ToeplitzHash::kKeyLen];  // rte_softrss reads 32-bit words
  std::memcpy(key, ToeplitzHash::kSymmetricKey, sizeof key);

  std::mt19937_64 rng(42);
  std::vector<FlowV4> v4(kFlows);
  std::vector<FlowV6> v6(kFlows);
  std::vector<rte_thash_tuple> t4(kFlows), t6(kFlows);
  for (size_t i = 0; i < kFlows; ++i) {
    const uint64_t a = rng(), b = rng();
    v4[i] = {uint32_t(a), uint32_t(a >> 32), uint16_t(b), uint16_t(b >> 16)};
    t4[i].v4.src_addr = ntohl(v4[i].src);
    t4[i].v4.dst_addr = ntohl(v4[i].dst);
    t4[i].v4.sport = ntohs(v4[i].sport);
    t4[i].v4.dport = ntohs(v4[i].dport);

    for (uint8_t &byte : v6[i].src) byte = uint8_t(rng());
    for (uint8_t &byte : v6[i].dst) byte = uint8_t(rng());
    v6[i].sport = uint16_t(b >> 32);
    v6[i].dport = uint16_t(b >> 48);
    for (int w = 0; w < 4; ++w) {
      const uint32_t s = host_word(v6[i].src + 4 * w), d = host_word(v6[i].dst + 4 * w);
      std::memcpy(t6[i].v6.src_addr + 4 * w, &s, 4);
      std::memcpy(t6[i].v6.dst_addr + 4 * w, &d, 4);
    }
    t6[i].v6.sport = ntohs(v6[i].sport);
    t6[i].v6.dport = ntohs(v6[i].dport);
  }

  auto softrss = [&](std::vector<rte_thash_tuple> &t, uint32_t words) {
    return measure(reps, [&, words](size_t i) {
      return rte_softrss(reinterpret_cast<uint32_t *>(&t[i]), words, key);
    });
  };

  std::printf("%d repetitions of %d x %zu hashes; ns per hash, best and median\n", reps,
              kPassesPerRep, kFlows);
  std::printf("%-16s %17s   %17s   %14s\n", "", "table-driven", "rte_softrss", "softrss/table");
  std::printf("%-16s %8s %8s   %8s %8s   %6s %6s\n", "input", "best", "median", "best", "median",
              "best", "median");
  report("IPv4 2-tuple",
         measure(reps, [&](size_t i) { return h.hash_ipv4(v4[i].src, v4[i].dst); }),
         softrss(t4, RTE_THASH_V4_L3_LEN));
  report("IPv4 4-tuple", measure(reps, [&](size_t i) {
           return h.hash_ipv4(v4[i].src, v4[i].dst, v4[i].sport, v4[i].dport);
         }),
         softrss(t4, RTE_THASH_V4_L4_LEN));
  report("IPv6 2-tuple",
         measure(reps, [&](size_t i) { return h.hash_ipv6(v6[i].src, v6[i].dst); }),
         softrss(t6, RTE_THASH_V6_L3_LEN));
  report("IPv6 4-tuple", measure(reps, [&](size_t i) {
           return h.hash_ipv6(v6[i].src, v6[i].dst, v6[i].sport, v6[i].dport);
         }),
         softrss(t6, RTE_THASH_V6_L4_LEN));

  uint8_t unfolded_key[ToeplitzHash::kKeyLen];
  std::memcpy(unfolded_key, ToeplitzHash::kSymmetricKey, sizeof unfolded_key);
  unfolded_key[ToeplitzHash::kKeyLen - 1] ^= 1;
  const ToeplitzHash bytes(unfolded_key);
  std::printf("\n%-16s %17s   %17s   %14s\n", "", "folded (symm.)", "byte by byte", "bytes/folded");
  auto report_fold = [](const char *input, const Timing &folded, const Timing &by_byte) {
    std::printf("%-16s %8.2f %8.2f   %8.2f %8.2f   %6.1fx %6.1fx   (checksums %08x %08x)\n", input, folded.best_ns,
                folded.median_ns, by_byte.best_ns, by_byte.median_ns, by_byte.best_ns / folded.best_ns,
                by_byte.median_ns / folded.median_ns, folded.checksum, by_byte.checksum);
  };
  report_fold("IPv4 4-tuple",
              measure(reps, [&](size_t i) { return h.hash_ipv4(v4[i].src, v4[i].dst, v4[i].sport, v4[i].dport); }),
              measure(reps, [&](size_t i) { return bytes.hash_ipv4(v4[i].src, v4[i].dst, v4[i].sport, v4[i].dport); }));
  report_fold("IPv6 4-tuple",
              measure(reps, [&](size_t i) { return h.hash_ipv6(v6[i].src, v6[i].dst, v6[i].sport, v6[i].dport); }),
              measure(reps, [&](size_t i) { return bytes.hash_ipv6(v6[i].src, v6[i].dst, v6[i].sport, v6[i].dport); }));
}
