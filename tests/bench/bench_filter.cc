// ns per packet of a Filter expression: libpcap's interpreter (bpf_filter)
// against the same program compiled to native code (engine/packet/bpf_jit.cc:
// the IR a fused loop inlines, alone), side by side
// on the same packets; run by hand, not a test:
//   bench_filter [EXPRESSION ...]
// The packets are 1M frames of TrafficGen's default mix (IMIX sizes, 10%
// IPv6, 30% UDP), generated in memory. Each expression runs over all of them
// 5 times per engine, interleaved; the best pass of each is reported, with
// the share of packets that matched (both engines must agree) and the time
// LLVM took to compile it. Compare figures within one run: these machines
// are shared and noisy.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "engine/packet/bpf_jit.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/traffic/traffic_model.hh"

using namespace sluice;
using Clock = std::chrono::steady_clock;

int main(int argc, char **argv) {
  std::vector<std::string> exprs(argv + 1, argv + argc);
  if (exprs.empty())
    exprs = {"ip or ip6", "tcp port 443", "udp and dst port 53", "net 10.0.0.0/8 and tcp[tcpflags] & tcp-syn != 0",
             "ip6 and (tcp port 80 or tcp port 8080)", "vlan or (ip and len > 1000)"};
  TrafficConfig cfg;
  cfg.new_flows_per_s = 50000;
  cfg.duration_ns = 1'000'000'000;
  GeneratedTraffic g = generate_traffic(cfg);
  const GeneratedLane &lane = g.lanes[0];
  const size_t n = std::min<size_t>(lane.size(), 1'000'000);
  std::printf("%zu packets; ns per packet, best of 5 passes\n", n);
  std::printf("  %-50s %10s %10s %8s %8s %10s\n", "expression", "libpcap", "native", "ratio", "match", "compile");
  for (const std::string &e : exprs) {
    auto interpreted = PcapFilter::compile(e, LinkType::Ethernet);
    if (!interpreted) {
      std::printf("  %-50s does not compile\n", e.c_str());
      continue;
    }
    auto t0 = Clock::now();
    std::string err;
    std::unique_ptr<BpfJit> native = BpfJit::compile(interpreted->insns(), interpreted->insn_count(), &err);
    if (!native) {
      std::printf("  %-50s %s\n", e.c_str(), err.c_str());
      continue;
    }
    double compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    double best[2] = {1e30, 1e30};
    size_t matched[2] = {0, 0};
    for (int pass = 0; pass < 5; ++pass)
      for (int which = 0; which < 2; ++which) {
        size_t m = 0;
        auto s = Clock::now();
        for (size_t i = 0; i < n; ++i) {
          uint32_t len = uint32_t(lane.packets[i].length);
          m += which ? native->run(lane.frame(i), len, len) != 0 : interpreted->matches(lane.frame(i), len, len);
        }
        double ns = std::chrono::duration<double, std::nano>(Clock::now() - s).count() / double(n);
        best[which] = std::min(best[which], ns);
        matched[which] = m;
      }
    std::printf("  %-50s %10.2f %10.2f %7.2fx %7.1f%% %8.1f ms%s\n", e.c_str(), best[0], best[1], best[0] / best[1],
                100.0 * double(matched[1]) / double(n), compile_ms, matched[0] == matched[1] ? "" : "  DIFFER");
  }
}
