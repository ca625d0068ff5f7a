// The cases bench_flow_cache measures, written against FlowCache. Included
// once by bench_flow_cache.cc (the table as built, namespace sluice) and once
// by each bench_flow_cache_variant.cc build, which compiles flow_cache.cc
// again in a namespace of its own with another hash (and bound), so the
// variants run side by side in one process.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tests/bench/bench_flow_cache_results.hh"
#include "tests/unit/crafted_flow_keys.hh"

#ifndef BENCH_HASH
#define BENCH_HASH flow_hash
#endif

namespace sluice::bench_cases {

using Clock = std::chrono::steady_clock;

inline double ns_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
}

inline uint64_t xorshift(uint64_t &s) {
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  return s;
}

// Flow i: 10.a.b.c:sport -> 172.16.x.y:443, a bijection of i for i < 2^24 * 64512.
inline void make_meta(uint64_t i, PacketMeta &m) {
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

inline FlowCacheConfig bench_config(uint64_t flows) {
  FlowCacheConfig cfg;
  cfg.capacity = flows;
  cfg.idle_ns = 1'000'000'000'000ull;
  cfg.active_ns = 1'000'000'000'000ull;
  cfg.prefault = true;
  return cfg;
}

// The hash alone on 32 keys at a time (as account_batch hashes): ns per key.
inline double hash_ns() {
  const FlowHashKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  uint64_t w[32][5];
  for (unsigned j = 0; j < 32; ++j)
    for (unsigned i = 0; i < 5; ++i) w[j][i] = j * 0x9e3779b97f4a7c15ull + i;
  constexpr unsigned kRounds = 200'000;
  uint64_t sink = 0;
  auto t0 = Clock::now();
  for (unsigned r = 0; r < kRounds; ++r)
    for (unsigned j = 0; j < 32; ++j) {
      w[j][1] += r;
      sink += BENCH_HASH(key, w[j]);
    }
  double ns = ns_since(t0) / (32.0 * kRounds);
  return sink == 42 ? ns + 1e-9 : ns;
}

// A table of capacity N filled with N flows (one packet each: the insert rate),
// then max(4M, 2N) packets to flows drawn uniformly at random, one at a time
// and in batches of 32, then a full expire() scan that finds nothing due,
// then one that finds every flow due.
// `fields`: the optional record fields the table keeps; with any, every
// packet comes with a source (an Ethernet frame's MAC addresses, an
// interface), as FlowTable gives it.
inline UniformResult uniform_with(uint64_t flows, FlowFieldSet fields) {
  UniformResult res;
  auto t0 = Clock::now();
  FlowCacheConfig cfg = bench_config(flows);
  cfg.fields = fields;
  FlowCache cache(cfg);
  static const uint8_t frame[12] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1};
  FlowPacketSource sources[32];
  for (FlowPacketSource &src : sources) src = {frame, 3, 0};
  const FlowPacketSource *batch_sources = fields ? sources : nullptr;
  res.build_ms = ns_since(t0) / 1e6;
  res.bytes = cache.bytes();

  constexpr unsigned B = 32;
  PacketMeta metas[B];
  const PacketMeta *ptrs[B];
  uint64_t times[B];
  FlowRecord out[B * FlowCache::kMaxRecordsPerPacket];
  FlowPacketOutcome outcomes[B];
  for (unsigned k = 0; k < B; ++k) ptrs[k] = &metas[k];
  uint64_t now = 1'700'000'000'000'000'000ull;
  unsigned n;

  t0 = Clock::now();
  for (uint64_t i = 0; i < flows; ++i) {
    make_meta(i, metas[0]);
    cache.account(metas[0], ++now, out, &n, nullptr, fields ? &sources[0] : nullptr);
  }
  res.insert_ns = ns_since(t0) / double(flows);

  const uint64_t packets = std::max<uint64_t>(4'000'000, 2 * flows) / B * B;
  std::vector<uint32_t> order(packets);
  uint64_t s = 88172645463325252ull;
  for (uint32_t &o : order) o = uint32_t(xorshift(s) % flows);

  // baseline: building the metas alone, subtracted from the two below
  uint64_t sink = 0;
  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; ++i) {
    make_meta(order[i], metas[i % B]);
    sink += metas[i % B].src_addr[15];
  }
  res.meta_ns = ns_since(t0) / double(packets) + (sink == 42 ? 1e-9 : 0);

  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; ++i) {
    make_meta(order[i], metas[0]);
    cache.account(metas[0], ++now, out, &n, nullptr, fields ? &sources[0] : nullptr);
  }
  res.account_ns = ns_since(t0) / double(packets) - res.meta_ns;

  t0 = Clock::now();
  for (uint64_t i = 0; i < packets; i += B) {
    for (unsigned k = 0; k < B; ++k) {
      make_meta(order[i + k], metas[k]);
      times[k] = ++now;
    }
    cache.account_batch(ptrs, times, B, outcomes, out, &n, nullptr, batch_sources);
  }
  res.batch_ns = ns_since(t0) / double(packets) - res.meta_ns;

  t0 = Clock::now();
  size_t got = 0;
  for (size_t pos = 0; pos < cache.slots();) pos = cache.expire(now, pos, cache.slots(), out, B, &got);
  res.scan_ns = ns_since(t0) / double(cache.slots());

  const FlowCache::Stats &st = cache.stats();
  res.ok = st.created == flows && st.records() == 0 && cache.active() == flows;
  res.longest_probe = st.longest_probe;

  // then every flow due: each leaves (a record) and is taken out of the index
  const uint64_t later = now + cfg.idle_ns;
  t0 = Clock::now();
  for (size_t pos = 0; pos < cache.slots();) pos = cache.expire(later, pos, cache.slots(), out, B, &got);
  res.expire_ns = ns_since(t0) / double(flows);
  res.ok = res.ok && st.records() == flows && cache.active() == 0;
  return res;
}
inline UniformResult uniform(uint64_t flows) { return uniform_with(flows, 0); }

// The attack: `flows` IPv6 flows crafted to collide under the former hash
// (tests/unit/crafted_flow_keys.hh) in a table of 64K flows, one packet each
// (insert), then packets to them in random order, one at a time and in
// batches, for at least `seconds` each (or 4M packets).
inline AttackResult attack(size_t flows, double seconds) {
  AttackResult res;
  std::vector<PacketMeta> metas = crafted::colliding_packets(flows);
  FlowCache cache(bench_config(1 << 16));
  constexpr unsigned B = 32;
  FlowRecord out[B * FlowCache::kMaxRecordsPerPacket];
  FlowPacketOutcome outcomes[B];
  const PacketMeta *ptrs[B];
  uint64_t times[B];
  uint64_t now = 1'700'000'000'000'000'000ull;
  unsigned n;

  auto t0 = Clock::now();
  for (const PacketMeta &m : metas) cache.account(m, ++now, out, &n);
  res.insert_ns = ns_since(t0) / double(flows);

  uint64_t s = 88172645463325252ull;
  auto run = [&](bool batch) {
    uint64_t done = 0;
    const auto t0 = Clock::now();
    do {
      for (unsigned r = 0; r < 64; ++r, done += B) {
        for (unsigned k = 0; k < B; ++k) {
          ptrs[k] = &metas[xorshift(s) % flows];
          times[k] = ++now;
        }
        if (batch)
          cache.account_batch(ptrs, times, B, outcomes, out, &n);
        else
          for (unsigned k = 0; k < B; ++k) cache.account(*ptrs[k], times[k], out, &n);
      }
    } while (ns_since(t0) < seconds * 1e9 && done < 4'000'000);
    return ns_since(t0) / double(done);
  };
  res.account_ns = run(false);
  res.batch_ns = run(true);
  const FlowCache::Stats &st = cache.stats();
  res.longest_probe = st.longest_probe;
  res.probe_limit = st.probe_limit;
  res.evicted = st.evicted;
  res.active = cache.active();
  return res;
}

}  // namespace sluice::bench_cases
