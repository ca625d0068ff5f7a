// ns per key of the flow table's hash (SipHash-1-3 of a 40-byte key) as
// account_batch() asks for it, batches of 32 keys: each way flow_hash_batch()
// can take on this CPU (one key at a time, 8 at a time on AVX2, 8 on
// AVX-512 with its rotate), side by side in one run. By hand, not a test:
//   bench_flow_hash [ROUNDS]   (default 7; 20M keys a way a round)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "engine/flow/flow_hash.hh"

using namespace sluice;

int main(int argc, char **argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 7;
  constexpr unsigned kBatch = 32, kBatches = 1024;  // 1.3 MB of keys: in L2/L3, as a batch's keys are
  constexpr int kKeys = 20'000'000;
  std::mt19937_64 rng(1);
  std::vector<uint64_t> words(size_t(kBatch) * kBatches * 5);
  for (auto &x : words) x = rng();
  const FlowHashKey key{rng(), rng()};
  const struct {
    FlowHashPath path;
    const char *name;
  } paths[] = {{FlowHashPath::Scalar, "one at a time"}, {FlowHashPath::Avx2, "AVX2, 8 at a time"},
               {FlowHashPath::Avx512, "AVX-512, 8 at a time"}};
  std::vector<double> ns[3];
  uint64_t h[kBatch], want[kBatch], sink = 0;
  for (int p = 0; p < 3; ++p) {  // a wrong path is no faster
    if (!flow_hash_batch_on(paths[p].path, key, reinterpret_cast<const uint64_t(*)[5]>(words.data()), kBatch, h)) continue;
    flow_hash_batch_on(FlowHashPath::Scalar, key, reinterpret_cast<const uint64_t(*)[5]>(words.data()), kBatch, want);
    if (!std::equal(h, h + kBatch, want)) {
      std::fprintf(stderr, "%s gives other hashes than one at a time\n", paths[p].name);
      return 1;
    }
  }
  for (int r = 0; r < rounds; ++r) {
    for (int p = 0; p < 3; ++p) {
      if (!flow_hash_batch_on(paths[p].path, key, nullptr, 0, h)) continue;
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < kKeys / int(kBatch); ++i) {
        const uint64_t(*w)[5] = reinterpret_cast<const uint64_t(*)[5]>(&words[size_t(i % kBatches) * kBatch * 5]);
        flow_hash_batch_on(paths[p].path, key, w, kBatch, h);
        sink += h[i & (kBatch - 1)];
      }
      ns[p].push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / kKeys);
    }
  }
  std::printf("SipHash-1-3 of 40-byte keys, batches of %u, median of %d rounds (flow_hash_batch here: %s):\n", kBatch,
              rounds, paths[int(flow_hash_best_path())].name);
  double scalar = 0;
  for (int p = 0; p < 3; ++p) {
    if (ns[p].empty()) {
      std::printf("  %-24s not on this CPU\n", paths[p].name);
      continue;
    }
    std::sort(ns[p].begin(), ns[p].end());
    const double m = ns[p][ns[p].size() / 2];
    if (p == 0) scalar = m;
    std::printf("  %-24s %6.2f ns/key  (%.2fx one at a time)\n", paths[p].name, m, scalar / m);
  }
  return sink == 42;  // keeps the hashes used
}
