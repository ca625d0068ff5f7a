// ns per flow record of the IPFIX and NetFlow v9 encoders (what an exporter
// does with a record before its socket: the data records written into
// messages); run by hand, not a test:
//   bench_export [RECORDS]      (default 200000)
// The records: 80% IPv4, 20% IPv6, biflows with both directions, every
// optional field kept, varied values; 2048 of them taken again and again, so
// that they are in the caches, as a flow table's records are when handed on
// (a cold record costs a memory wait, not encoding). Each encoder (IPFIX biflows, IPFIX
// uniflows, NetFlow v9, with the optional fields and without) takes them in
// batches of 256, as an exporter's flush does; 7 passes each, interleaved,
// the best reported. To compare two builds, run both binaries one after the
// other, more than once: these machines are shared and noisy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "engine/export/ipfix_encoder.hh"
#include "engine/export/netflow_v9_encoder.hh"

using namespace sluice;
using Clock = std::chrono::steady_clock;

static std::vector<FlowRecord> make_records(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<FlowRecord> recs(n);
  for (FlowRecord &r : recs) {
    r = FlowRecord{};
    bool v6 = rng() % 5 == 0;
    r.key.is_ipv6 = v6;
    for (int i = 0; i < 16; ++i) r.key.src_addr[i] = uint8_t(rng()), r.key.dst_addr[i] = uint8_t(rng());
    if (!v6)
      for (int i = 0; i < 12; ++i) r.key.src_addr[i] = r.key.dst_addr[i] = i >= 10 ? 0xff : 0;
    r.key.src_port = uint16_t(rng()), r.key.dst_port = uint16_t(rng());
    r.key.proto = rng() % 4 == 0 ? 17 : 6;
    r.key.vlan = uint16_t(rng() % 4096);
    uint64_t t0 = 1'700'000'000'000'000'000ull + rng() % 1'000'000'000'000ull;
    for (FlowCounters *c : {&r.fwd, &r.rev}) {
      c->packets = 1 + rng() % 1000;
      c->octets = c->packets * (40 + rng() % 1400);
      c->first_ns = t0 + rng() % 1'000'000'000;
      c->last_ns = c->first_ns + rng() % 30'000'000'000ull;
      c->min_len = 40, c->max_len = uint16_t(40 + rng() % 1460);
      c->tcp_flags = uint8_t(rng()), c->tos = uint8_t(rng());
      c->min_ttl = 32, c->max_ttl = 64;
      c->if_index = uint32_t(rng() % 8);
      for (int i = 0; i < 6; ++i) c->src_mac[i] = uint8_t(rng()), c->dst_mac[i] = uint8_t(rng());
    }
    r.reason = FlowEndReason::IdleTimeout;
    r.biflow = 1;
    r.flow_direction = uint8_t(rng() % 2);
    r.mpls_top[0] = uint8_t(rng()), r.mpls_top[1] = uint8_t(rng()), r.mpls_top[2] = uint8_t(rng());
    r.vlan_inner = uint16_t(rng() % 4096);
  }
  return recs;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? size_t(std::strtoull(argv[1], nullptr, 10)) : 200000;
  if (n == 0) {
    std::fprintf(stderr, "usage: bench_export [RECORDS > 0]\n");
    return 2;
  }
  constexpr size_t kDistinct = 2048;
  const std::vector<FlowRecord> recs = make_records(kDistinct);
  struct Variant {
    const char *name;
    std::function<std::unique_ptr<FlowEncoder>()> make;
  };
  const Variant variants[] = {
      {"ipfix biflows, every optional field",
       [] { return std::make_unique<ipfix::IpfixEncoder>(ipfix::IpfixEncoderConfig{}); }},
      {"ipfix biflows, no optional field",
       [] { return std::make_unique<ipfix::IpfixEncoder>(ipfix::IpfixEncoderConfig{.fields = 0}); }},
      {"ipfix uniflows, every optional field",
       [] { return std::make_unique<ipfix::IpfixEncoder>(ipfix::IpfixEncoderConfig{.uniflows = true}); }},
      {"netflow v9, every optional field",
       [] { return std::make_unique<netflow_v9::NetFlowV9Encoder>(netflow_v9::NetFlowV9EncoderConfig{}); }},
  };
  constexpr size_t kBatch = 256;  // divides kDistinct
  constexpr int kPasses = 7;
  std::vector<double> best(std::size(variants), 1e30);
  std::vector<size_t> octets(std::size(variants), 0);
  flow_export::Messages out;
  for (int pass = 0; pass < kPasses; ++pass)
    for (size_t v = 0; v < std::size(variants); ++v) {
      std::unique_ptr<FlowEncoder> enc = variants[v].make();
      size_t bytes = 0;
      auto t0 = Clock::now();
      for (size_t at = 0; at < n; at += kBatch) {
        out.clear();
        enc->encode(recs.data() + at % kDistinct, std::min(kBatch, n - at), 1'700'000'000, at == 0, out);
        for (const auto &m : out) bytes += m.size();
      }
      double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / double(n);
      best[v] = std::min(best[v], ns);
      octets[v] = bytes;
    }
  std::printf("%zu flow records, batches of %zu; ns per flow record, best of %d passes\n", n, kBatch, kPasses);
  for (size_t v = 0; v < std::size(variants); ++v)
    std::printf("  %-40s %8.1f ns  %6.1f octets/record\n", variants[v].name, best[v], double(octets[v]) / double(n));
  return 0;
}
