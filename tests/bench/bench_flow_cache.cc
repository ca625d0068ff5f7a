// ns per packet of FlowCache::account() and account_batch(), for the table as
// built (SipHash-1-3) and, side by side in the same run, the same table with
// other hashes (bench_flow_cache_variant.cc): the CRC32C hash it had before
// (and no probe bound), SipHash-2-4, libsodium's SipHash-2-4. Run by hand,
// not a test:
//   bench_flow_cache [--attack-seconds S] [FLOWS ...]   (default: 10000 1000000 10000000)
// 1. The hash alone, 32 keys at a time: ns per key.
// 2. The attack of issue 13: 60000 IPv6 flows crafted to share one home
//    bucket and tag under the CRC hash (tests/unit/crafted_flow_keys.hh) in a
//    table of 64K flows: ns per insert, then per packet to them in random
//    order (one at a time, batches of 32) for S seconds each (default 2).
// 3. For each N: a table of capacity N (prefaulted), filled with N IPv4 TCP
//    flows (one packet each: the insert rate), then max(4M, 2N) packets to
//    flows drawn uniformly at random, one at a time and in batches of 32,
//    then a full expire() scan that finds nothing due, then one that finds
//    every flow due (each leaves, and its key is taken out of the index:
//    "expire", ns per flow). The PacketMeta of
//    each packet is built on the fly from its flow number; that cost is
//    measured alone and subtracted. Timeouts are longer than the run.
// 4. For each N, the table as built with no optional record fields and
//    with all of them (FlowTable `fields none` / `all`: a second array of
//    64 bytes per flow, read and written by every packet), one after the
//    other, batches of 32 as in 3.
// Figures are for comparison within a run: the machines this runs on are
// shared and noisy. The variants of one case run one after the other.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/flow/flow_cache.hh"
#include "tests/bench/bench_flow_cache_cases.hh"

extern const BenchVariant bench_variant_crc, bench_variant_sip24;
#ifdef BENCH_HAVE_SODIUM
extern const BenchVariant bench_variant_sodium;
#endif

namespace {

const BenchVariant kBuilt = {"SipHash-1-3 (as built)", sluice::bench_cases::hash_ns, sluice::bench_cases::uniform,
                             sluice::bench_cases::attack};

std::vector<const BenchVariant *> variants() {
  std::vector<const BenchVariant *> v = {&bench_variant_crc, &kBuilt, &bench_variant_sip24};
#ifdef BENCH_HAVE_SODIUM
  v.push_back(&bench_variant_sodium);
#endif
  return v;
}

}  // namespace

int main(int argc, char **argv) {
  std::vector<uint64_t> sizes;
  double attack_seconds = 2;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--attack-seconds") == 0 && i + 1 < argc)
      attack_seconds = std::strtod(argv[++i], nullptr);
    else
      sizes.push_back(std::strtoull(argv[i], nullptr, 10));
  }
  if (sizes.empty()) sizes = {10'000, 1'000'000, 10'000'000};

  std::printf("hash alone, 32 keys at a time:\n");
  for (const BenchVariant *v : variants()) std::printf("  %-28s %6.2f ns/key\n", v->name, v->hash_ns());

  constexpr size_t kAttackFlows = 60'000;
  std::printf("\nattack: %zu IPv6 flows crafted against the CRC hash, table of 64K flows:\n", kAttackFlows);
  for (const BenchVariant *v : variants()) {
    AttackResult r = v->attack(kAttackFlows, attack_seconds);
    std::printf("  %-28s insert %10.1f  account %10.1f  batch %10.1f ns/pkt  longest probe %5llu buckets  "
                "probe limit %llu  evicted %llu  active %zu\n",
                v->name, r.insert_ns, r.account_ns, r.batch_ns, (unsigned long long)r.longest_probe,
                (unsigned long long)r.probe_limit, (unsigned long long)r.evicted, r.active);
  }

  std::printf("\nuniform random flows:\n");
  for (uint64_t n : sizes)
    for (const BenchVariant *v : variants()) {
      UniformResult r = v->uniform(n);
      std::printf("  %-28s %10llu flows  %6.1f B/flow  build %6.1f ms  insert %6.1f  account %6.1f  batch %6.1f "
                  "ns/pkt  scan %5.2f ns/slot  expire %6.1f ns/flow  longest probe %llu  (meta %4.1f ns)%s\n",
                  v->name, (unsigned long long)n, double(r.bytes) / double(n), r.build_ms, r.insert_ns,
                  r.account_ns, r.batch_ns, r.scan_ns, r.expire_ns, (unsigned long long)r.longest_probe, r.meta_ns,
                  r.ok ? "" : "  !! flows lost or created twice");
    }

  std::printf("\noptional record fields (as built, batches of 32):\n");
  for (uint64_t n : sizes) {
    double ns[2];
    for (int all = 0; all < 2; ++all) {
      UniformResult r = sluice::bench_cases::uniform_with(n, all ? sluice::kAllFlowFields : 0);
      ns[all] = r.batch_ns;
      std::printf("  fields %-4s %10llu flows  %6.1f B/flow  insert %6.1f  batch %6.1f ns/pkt%s\n", all ? "all" : "none",
                  (unsigned long long)n, double(r.bytes) / double(n), r.insert_ns, r.batch_ns,
                  r.ok ? "" : "  !! flows lost or created twice");
    }
    std::printf("  all / none: %.2f\n", ns[1] / ns[0]);
  }
  return 0;
}
