// ns per packet of FlowCache::account() and account_batch() with N flows in
// the table, and ns per slot of an expiry scan; run by hand, not a test:
//   bench_flow_cache [FLOWS ...]        (default: 10000 1000000 10000000)
// For each N: a table of capacity N (prefaulted), filled with N IPv4 TCP flows
// (one packet each: the insert rate), then max(4M, 2N) packets to flows drawn
// uniformly at random (every packet a lookup miss in the CPU caches once N is
// large), one at a time and in batches of 32, then a full expire() scan that
// finds nothing due. The PacketMeta of each packet is built on the fly from its
// flow number; that cost is measured alone and subtracted. Timeouts are longer
// than the run, so nothing leaves. Figures are for comparison within a run:
// the machines this runs on are shared and noisy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/flow/flow_cache.hh"

using namespace sluice;

namespace {

using Clock = std::chrono::steady_clock;

double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

// Flow i: 10.a.b.c:sport -> 172.16.x.y:443, a bijection of i for i < 2^24 * 64512.
void make_meta(uint64_t i, PacketMeta &m) {
  std::memset(&m, 0, sizeof m);
  m.src_addr[10] = m.src_addr[11] = m.dst_addr[10] = m.dst_addr[11] = 0xff;
  uint32_t host = uint32_t(i % (1u << 24));
  m.src_addr[12] = 10;
  m.src_addr[13] = uint8_t(host >> 16);
  m.src_addr[14] = uint8_t(host >> 8);
  m.src_addr[15] = uint8_t(host);
  uint32_t server = uint32_t(i * 2654435761u) % 4096;
  m.dst_addr[12] = 172;
  m.dst_addr[13] = 16;
  m.dst_addr[14] = uint8_t(server >> 8);
  m.dst_addr[15] = uint8_t(server);
  m.src_port = uint16_t(1024 + (i >> 24) % 64512);
  m.dst_port = 443;
  m.ip_proto = 6;
  m.flags = PacketMeta::kIpv4 | PacketMeta::kHasL4;
  m.ip_total_length = 40 + uint32_t(i % 1460);
  m.tcp_flags = 0x10;
}

uint64_t xorshift(uint64_t &s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

void run(uint64_t flows) {
  FlowCacheConfig cfg;
  cfg.capacity = flows;
  cfg.idle_ns = 1'000'000'000'000ull;
  cfg.active_ns = 1'000'000'000'000ull;
  cfg.prefault = true;
  auto t0 = Clock::now();
  FlowCache cache(cfg);
  double build_ms = ns_since(t0) / 1e6;

  constexpr unsigned B = 32;
  PacketMeta metas[B];
  const PacketMeta *ptrs[B];
  uint64_t times[B];
  FlowRecord out[B * FlowCache::kMaxRecordsPerPacket];
  FlowPacketOutcome outcomes[B];
  for (unsigned k = 0; k < B; ++k) ptrs[k] = &metas[k];
  uint64_t now = 1'700'000'000'000'000'000ull;
  unsigned n;

  // 1. insert: one packet per flow
  t0 = Clock::now();
  for (uint64_t i = 0; i < flows; ++i) {
    make_meta(i, metas[0]);
    cache.account(metas[0], ++now, out, &n);
  }
  double insert_ns = ns_since(t0) / double(flows);
  if (cache.active() != flows) std::printf("!! active %zu\n", cache.active());

  const uint64_t packets = std::max<uint64_t>(4'000'000, 2 * flows) / B * B;
  std::vector<uint32_t> order(packets);
  uint64_t s = 88172645463325252ull;
  for (uint32_t &o : order) o = uint32_t(xorshift(s) % flows);

  // baseline: building the metas alone
  uint64_t sink = 0;
  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; ++i) {
    make_meta(order[i], metas[i % B]);
    sink += metas[i % B].src_addr[15];
  }
  double base_ns = ns_since(t0) / double(packets);

  // 2. one packet at a time
  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; ++i) {
    make_meta(order[i], metas[0]);
    cache.account(metas[0], ++now, out, &n);
  }
  double one_ns = ns_since(t0) / double(packets) - base_ns;

  // 3. batches of 32
  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; i += B) {
    for (unsigned k = 0; k < B; ++k) {
      make_meta(order[i + k], metas[k]);
      times[k] = ++now;
    }
    cache.account_batch(ptrs, times, B, outcomes, out, &n);
  }
  double batch_ns = ns_since(t0) / double(packets) - base_ns;

  // 4. a full expiry scan, nothing due
  t0 = Clock::now();
  size_t got = 0;
  for (size_t pos = 0; pos < cache.slots();) pos = cache.expire(now, pos, cache.slots(), out, B, &got);
  double scan_ns = ns_since(t0) / double(cache.slots());

  const FlowCache::Stats &st = cache.stats();
  if (st.created != flows || st.records() != 0) std::printf("!! created %llu records %llu\n",
                                                           (unsigned long long)st.created,
                                                           (unsigned long long)st.records());
  std::printf("%10llu flows  %7.1f MB  %5.1f B/flow  build %7.1f ms  insert %6.1f  account %6.1f  "
              "batch %6.1f ns/pkt  scan %5.2f ns/slot  (meta %4.1f ns)%s\n",
              (unsigned long long)flows, double(cache.bytes()) / 1e6, double(cache.bytes()) / double(flows),
              build_ms, insert_ns, one_ns, batch_ns, scan_ns, base_ns, sink == 42 ? " " : "");
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<uint64_t> sizes;
  for (int i = 1; i < argc; ++i) sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  if (sizes.empty()) sizes = {10'000, 1'000'000, 10'000'000};
  for (uint64_t n : sizes) run(n);
  return 0;
}
