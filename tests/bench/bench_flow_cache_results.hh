// What bench_flow_cache_cases.hh measures, outside any namespace, so that the
// variants built in namespaces of their own return the same types.
#pragma once
#include <cstddef>
#include <cstdint>

struct UniformResult {
  double build_ms = 0, insert_ns = 0, account_ns = 0, batch_ns = 0, scan_ns = 0, meta_ns = 0;
  double expire_ns = 0;  // per flow, an expire() scan that finds every flow due
  size_t bytes = 0;
  uint64_t longest_probe = 0;
  bool ok = false;  // every flow created once, left once, none lost
};

struct AttackResult {
  double insert_ns = 0, account_ns = 0, batch_ns = 0;
  uint64_t longest_probe = 0, probe_limit = 0, evicted = 0;
  size_t active = 0;
};

// A flow table built with another hash: its name and its cases.
struct BenchVariant {
  const char *name;
  double (*hash_ns)();
  UniformResult (*uniform)(uint64_t flows);
  AttackResult (*attack)(size_t flows, double seconds);
};
