// What this machine's memory gives one core for random cache lines: the
// floor under a flow table that does not fit in the caches. Run by hand, not
// a test:
//   bench_memory [MiB]        (default 1024: far more than any cache)
// 1. Latency: a pointer chase through the buffer's lines in a random cycle
//    (each load waits for the one before): ns per line.
// 2. Throughput: random lines read and written (one word each, as a counter
//    update), their addresses known ahead (as a batch's hashed keys are), in
//    groups of G: the G lines prefetched, then each touched. ns per line, for
//    G = 1 .. 64 and three prefetch kinds (for writing into L1, reading into
//    L1, into L2 only). The best G is how many misses one core keeps in
//    flight at best: latency / ns per line.
// 3. The flow table's shape: a batch of 32 packets, each a random 64-byte
//    bucket line whose content names a random 128-byte entry (two adjacent
//    lines) and, optionally, a 64-byte line of another array (FlowTable
//    `fields`): the buckets prefetched for the batch, then the entries
//    16 packets ahead, then each packet's three or four lines touched, the
//    way FlowCache::account_batch() goes. ns per packet: no flow table of
//    that layout goes faster on this machine, whatever its code.
// 4. Lines another cpu read just before: a 4 MiB span read line by line in
//    order (as a trace is walked) from memory, and again on a second cpu
//    right after the first read it: whether the cpus share their last cache
//    level, and what a walk of lines the other cpu brought in costs
//    (TraceMapping::keep_pace keeps a trace's lanes together for it).
// The buffer is mapped with transparent huge pages advised and written
// before any timing (no page faults, few TLB misses). Each figure is the best
// of 5 repetitions (the least disturbed on a shared machine) and the median.
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

constexpr size_t kLine = 64;
constexpr int kReps = 5;

double now_ns() {
  return double(std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch())
                    .count());
}

struct Figure {
  double best, median;
};

Figure figure_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), v[v.size() / 2]};
}

template <class F>
Figure repeat(F &&once) {
  std::vector<double> v;
  for (int r = 0; r < kReps; ++r) v.push_back(once());
  return figure_of(std::move(v));
}

void *map(size_t bytes) {
  void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("mmap");
    std::exit(1);
  }
  madvise(p, bytes, MADV_HUGEPAGE);
  std::memset(p, 1, bytes);
  return p;
}

enum class Hint { WriteL1, ReadL1, ReadL2 };
const char *hint_name(Hint h) {
  switch (h) {
    case Hint::WriteL1: return "prefetchw (L1, for writing)";
    case Hint::ReadL1: return "prefetcht0 (L1)";
    default: return "prefetcht1 (L2)";
  }
}

template <Hint H>
inline void prefetch(const void *p) {
  if constexpr (H == Hint::WriteL1) __builtin_prefetch(p, 1, 3);
  else if constexpr (H == Hint::ReadL1) __builtin_prefetch(p, 0, 3);
  else __builtin_prefetch(p, 0, 2);
}

volatile uint64_t g_sink;

// 1. A random cycle through every line: line i holds the index of the next.
double chase_ns(uint64_t *buf, size_t lines, size_t steps) {
  uint64_t *at = buf;
  const double t0 = now_ns();
  for (size_t s = 0; s < steps; ++s) at = buf + *at * (kLine / 8);
  const double t = now_ns() - t0;
  g_sink = uint64_t(at - buf);
  (void)lines;
  return t / double(steps);
}

// 2. Groups of g random lines: prefetched, then each updated.
template <Hint H>
double group_ns(uint64_t *buf, const std::vector<uint32_t> &idx, unsigned g) {
  const size_t n = idx.size() / g * g;
  const double t0 = now_ns();
  for (size_t i = 0; i < n; i += g) {
    for (unsigned k = 0; k < g; ++k) prefetch<H>(buf + size_t(idx[i + k]) * (kLine / 8));
    for (unsigned k = 0; k < g; ++k) ++buf[size_t(idx[i + k]) * (kLine / 8)];
  }
  return (now_ns() - t0) / double(n);
}

// 3. The flow table's shape (see the header).
struct alignas(64) Bucket {
  uint32_t entry[16];
};
struct alignas(128) Entry {
  uint64_t w[16];
};
struct alignas(64) Attrs {
  uint64_t w[8];
};

double table_ns(Bucket *buckets, Entry *entries, Attrs *attrs, const std::vector<uint32_t> &bucket_of) {
  constexpr unsigned kBatch = 32, kAhead = 16;
  const size_t n = bucket_of.size() / kBatch * kBatch;
  const double t0 = now_ns();
  for (size_t base = 0; base < n; base += kBatch) {
    const uint32_t *b = &bucket_of[base];
    for (unsigned i = 0; i < kBatch; ++i) __builtin_prefetch(&buckets[b[i]], 1, 3);
    auto prefetch_entry = [&](unsigned i) {
      uint32_t e = buckets[b[i]].entry[0];
      __builtin_prefetch(&entries[e], 1, 3);
      __builtin_prefetch(reinterpret_cast<const char *>(&entries[e]) + 64, 1, 3);
      if (attrs) __builtin_prefetch(&attrs[e], 1, 3);
    };
    for (unsigned i = 0; i < kAhead; ++i) prefetch_entry(i);
    for (unsigned i = 0; i < kBatch; ++i) {
      if (i + kAhead < kBatch) prefetch_entry(i + kAhead);
      uint32_t e = buckets[b[i]].entry[0];
      Entry &en = entries[e];
      en.w[0] += 1;   // the key line
      en.w[8] += 64;  // the counters' line
      if (attrs) attrs[e].w[0] += 1;
    }
  }
  return (now_ns() - t0) / double(n);
}

// Reads a line of each 64 bytes of [p, p + n) in order: ns per line.
double walk_ns(const uint8_t *p, size_t n) {
  const double t0 = now_ns();
  uint64_t sum = 0;
  for (size_t i = 0; i < n; i += kLine) sum += p[i];
  const double t = now_ns() - t0;
  if (sum == 1) std::printf(" ");  // keeps the loads
  return t / double(n / kLine);
}

// fn on a thread pinned to `cpu`.
template <class F>
void on_cpu(int cpu, F &&fn) {
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    fn();
  }).join();
}

}  // namespace

int main(int argc, char **argv) {
  const size_t mib = argc > 1 ? size_t(std::strtoull(argv[1], nullptr, 10)) : 1024;
  const size_t bytes = mib << 20, lines = bytes / kLine;
  auto *buf = static_cast<uint64_t *>(map(bytes));
  std::mt19937_64 rng(1);

  // 1. latency
  {
    std::vector<uint32_t> order(lines);
    for (size_t i = 0; i < lines; ++i) order[i] = uint32_t(i);
    std::shuffle(order.begin() + 1, order.end(), rng);
    for (size_t i = 0; i < lines; ++i) buf[size_t(order[i]) * (kLine / 8)] = order[(i + 1) % lines];
    const size_t steps = std::min<size_t>(lines, 4'000'000);
    Figure f = repeat([&] { return chase_ns(buf, lines, steps); });
    std::printf("buffer %zu MiB (transparent huge pages advised), best and median of %d\n", mib, kReps);
    std::printf("1. latency, dependent loads of random lines:   %6.1f ns/line (median %.1f)\n", f.best, f.median);
  }

  // 2. throughput in groups
  std::vector<uint32_t> idx(8'000'000);
  std::uniform_int_distribution<uint32_t> any_line(0, uint32_t(lines - 1));
  for (uint32_t &i : idx) i = any_line(rng);
  std::printf("2. random lines updated, addresses known ahead, prefetched G at a time: ns/line\n");
  std::printf("   %-30s", "G");
  const unsigned groups[] = {1, 2, 4, 8, 12, 16, 24, 32, 48, 64};
  for (unsigned g : groups) std::printf(" %6u", g);
  std::printf("\n");
  auto row = [&](Hint h, auto fn) {
    std::printf("   %-30s", hint_name(h));
    double best = 1e9;
    unsigned best_g = 0;
    for (unsigned g : groups) {
      Figure f = repeat([&] { return fn(g); });
      if (f.best < best) best = f.best, best_g = g;
      std::printf(" %6.1f", f.best);
    }
    std::printf("   best %.1f ns/line at G %u\n", best, best_g);
    return best;
  };
  double best_line = row(Hint::WriteL1, [&](unsigned g) { return group_ns<Hint::WriteL1>(buf, idx, g); });
  best_line = std::min(best_line, row(Hint::ReadL1, [&](unsigned g) { return group_ns<Hint::ReadL1>(buf, idx, g); }));
  best_line = std::min(best_line, row(Hint::ReadL2, [&](unsigned g) { return group_ns<Hint::ReadL2>(buf, idx, g); }));

  // 3. the flow table's shape, at 1M and 2M slots (the bench's 1M flows in a
  // table of twice that), from the same buffer
  std::printf("3. the flow table's lines (bucket, then its 128-byte entry, [then 64 bytes more]), batches of 32: ns/packet\n");
  for (size_t slots : {size_t(1) << 20, size_t(2) << 20}) {
    const size_t nb = slots / 4;
    size_t need = nb * sizeof(Bucket) + slots * (sizeof(Entry) + sizeof(Attrs));
    if (need > bytes) {
      std::printf("   %zu slots: needs %zu MiB, buffer %zu\n", slots, need >> 20, mib);
      continue;
    }
    auto *buckets = reinterpret_cast<Bucket *>(buf);
    auto *entries = reinterpret_cast<Entry *>(reinterpret_cast<char *>(buf) + nb * sizeof(Bucket));
    auto *attrs = reinterpret_cast<Attrs *>(reinterpret_cast<char *>(entries) + slots * sizeof(Entry));
    std::uniform_int_distribution<uint32_t> any_slot(0, uint32_t(slots - 1));
    for (size_t b = 0; b < nb; ++b) buckets[b].entry[0] = any_slot(rng);
    std::vector<uint32_t> bucket_of(8'000'000);
    std::uniform_int_distribution<uint32_t> any_bucket(0, uint32_t(nb - 1));
    for (uint32_t &b : bucket_of) b = any_bucket(rng);
    Figure three = repeat([&] { return table_ns(buckets, entries, nullptr, bucket_of); });
    Figure four = repeat([&] { return table_ns(buckets, entries, attrs, bucket_of); });
    std::printf("   %4zuM slots: 3 lines %5.1f ns/packet (median %.1f), 4 lines %5.1f (median %.1f); "
                "at the best ns/line of 2.: %.1f and %.1f\n",
                slots >> 20, three.best, three.median, four.best, four.median, 3 * best_line, 4 * best_line);
  }

  // 4. a span another cpu read just before
  cpu_set_t allowed;
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c)
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  if (cpus.size() < 2) {
    std::printf("4. skipped: one cpu\n");
  } else {
    constexpr size_t kSpan = size_t(4) << 20;
    std::vector<double> cold, warm, again;
    for (int r = 0; r < kReps; ++r) {
      auto *span = static_cast<uint8_t *>(map(kSpan));
      std::memset(span, r, kSpan);
      on_cpu(cpus[0], [&] {
        for (size_t i = 0; i < bytes; i += kLine) reinterpret_cast<uint8_t *>(buf)[i]++;  // the span out of the caches
        cold.push_back(walk_ns(span, kSpan));
      });
      on_cpu(cpus[0], [&] { walk_ns(span, kSpan); });
      on_cpu(cpus[1], [&] { warm.push_back(walk_ns(span, kSpan)); });
      on_cpu(cpus[1], [&] { again.push_back(walk_ns(span, kSpan)); });
      munmap(span, kSpan);
    }
    std::printf("4. a 4 MiB span read in order, medians of %d: from memory %.2f ns/line; on cpu %d just after cpu %d "
                "read it %.2f; read again there %.2f\n",
                kReps, figure_of(cold).median, cpus[1], cpus[0], figure_of(warm).median, figure_of(again).median);
  }
  munmap(buf, bytes);
  return 0;
}
