// ns per packet of the ingress parser on 64-byte Ethernet IPv4 TCP frames
// (1,024 distinct ones in 64 KiB, in the caches as a NIC's DMA leaves
// them): parse_packet() with its fast path for the common case, and
// parse_packet_general() without it, side by side in one run. By hand, not a
// test:
//   bench_parse [ROUNDS]   (default 5; 20M packets a variant a round)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/packet/parse.hh"

using namespace sluice;

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  constexpr int kFrames = 1024, kLen = 60, kPackets = 20'000'000;
  std::vector<uint8_t> ring(kFrames * 64, 0);
  for (int i = 0; i < kFrames; ++i) {
    uint8_t *f = &ring[size_t(i) * 64];
    f[12] = 0x08;  // IPv4
    uint8_t *ip = f + 14;
    ip[0] = 0x45, ip[3] = kLen - 14, ip[6] = 0x40, ip[8] = 64, ip[9] = 6;
    ip[12] = 10, ip[15] = uint8_t(i), ip[16] = 172, ip[19] = uint8_t(i >> 3);
    uint8_t *tcp = ip + 20;
    tcp[0] = uint8_t(i), tcp[1] = 7, tcp[3] = 80, tcp[12] = 0x50, tcp[13] = 0x10;
  }
  PacketMeta metas[32];
  std::vector<double> general, fast;
  for (int r = 0; r < rounds; ++r) {
    for (int with_fast_path = 0; with_fast_path < 2; ++with_fast_path) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kPackets; ++i) {
        const uint8_t *f = &ring[size_t(i & (kFrames - 1)) * 64];
        PacketMeta &m = metas[i & 31];
        if (with_fast_path) parse_packet(f, kLen, LinkType::Ethernet, m, kLen);
        else parse_packet_general(f, kLen, LinkType::Ethernet, m, kLen);
        asm volatile("" : : "r"(&m) : "memory");  // the meta is used
      }
      double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kPackets;
      (with_fast_path ? fast : general).push_back(ns);
    }
  }
  std::sort(general.begin(), general.end());
  std::sort(fast.begin(), fast.end());
  const double g = general[general.size() / 2], f = fast[fast.size() / 2];
  std::printf("64-byte Ethernet IPv4 TCP, median of %d rounds:\n", rounds);
  std::printf("  parse_packet_general  %6.2f ns/packet\n", g);
  std::printf("  parse_packet          %6.2f ns/packet  (%.2fx)\n", f, g / f);
}
