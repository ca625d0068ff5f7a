// IPFIX biflows as goflow2 (netsampler/goflow2, a collector nobody here
// wrote) decodes them, in both of IPFIXExporter's biflow modes: RFC 5103
// records, whose reverse counters goflow2 reads only through a mapping of
// the reverse elements (configs/collectors/goflow2-rfc5103.yaml, the one
// users are given), and two uniflow records per biflow, which it reads as
// they are. Its JSON output is compared with what FlowLog wrote. goflow2
// is built once from its Go module (tests/tools/goflow2.sh); the test skips,
// saying why, where that cannot be done.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "collector_fixture.hh"
#include "flow_csv_fixture.hh"
#include "run_fixture.hh"

using namespace sluice::test;

namespace {

// The goflow2 binary, or "" after a warning saying why there is none.
std::string goflow2_binary() {
  Run r = run_cmd("cd " SLUICE_SOURCE_DIR " && tests/tools/goflow2.sh 2>&1");
  std::string out = r.out.substr(0, r.out.find_last_not_of('\n') + 1);
  if (r.status != 0) {
    WARN("skipped: " << out);
    return "";
  }
  return out.substr(out.rfind('\n') + 1);
}

// A value of goflow2's one-line JSON object: a string's text or a number's digits.
std::string json_value(const std::string &line, const std::string &key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\":(\"([^\"]*)\"|([0-9]+))"))) return "";
  return m[2].matched ? m[2].str() : m[3].str();
}

// The lines goflow2 wrote to `path` once there are `want`, or after 30 s
// (it decodes as it receives, and may lag behind on a loaded machine).
std::vector<std::string> goflow2_lines(const std::string &path, size_t want) {
  std::vector<std::string> lines;
  for (int tries = 0; tries < 120; ++tries) {
    lines.clear();
    std::ifstream f(path);
    std::string l;
    while (std::getline(f, l))
      if (!l.empty()) lines.push_back(l);
    if (lines.size() >= want) break;
    usleep(250 * 1000);
  }
  return lines;
}

std::string key_of(const std::string &j) {
  return proto_number(json_value(j, "proto")) + " " + canonical_addr(json_value(j, "src_addr")) + " " +
         json_value(j, "src_port") + " " + canonical_addr(json_value(j, "dst_addr")) + " " + json_value(j, "dst_port");
}

uint64_t ms_of(const std::string &j, const std::string &key) { return std::stoull(json_value(j, key)) / 1000000; }


}  // namespace

TEST_CASE("flows: goflow2 decodes IPFIX biflows as RFC 5103 records (with a mapping) and as uniflows, equal to FlowLog",
          "[flows][collectors][goflow2]") {
  std::string goflow2 = goflow2_binary();
  if (goflow2.empty()) return;
  std::string dir = scratch("flows", "goflow2");
  int rfc_port = test_port(11), uni_port = test_port(12);
  auto collector = [&](int port, const std::string &out, const std::string &extra) {
    // One decoding worker: with several, goflow2 may decode a message of
    // data before the one with its template and drop it (until the next
    // template refresh), which would make the counts a race.
    std::vector<std::string> argv = {goflow2, "-listen", "netflow://127.0.0.1:" + std::to_string(port) + "?workers=1",
                                     "-format", "json", "-transport.file", out, "-addr", "127.0.0.1:0"};
    if (!extra.empty()) argv.insert(argv.end(), {"-mapping", extra});
    return Collector(argv, port);
  };
  Collector rfc = collector(rfc_port, dir + "/rfc5103.json", SLUICE_SOURCE_DIR "/configs/collectors/goflow2-rfc5103.yaml");
  Collector uni = collector(uni_port, dir + "/uniflows.json", "");
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, ipv6 0.3, udp 0.3)"
      " -> Timestamp(clock pcap) -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction bi)"
      " -> GCSlicer(table ft) -> rfc, uni, log;\n"
      "rfc :: shared IPFIXExporter(127.0.0.1:" + std::to_string(rfc_port) + ");\n"
      "uni :: shared IPFIXExporter(127.0.0.1:" + std::to_string(uni_port) + ", biflow uniflows, domain 2);\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);

  // FlowLog: a line per direction, a biflow's reverse line right after its forward one.
  std::vector<Line> log = read_csv(dir + "/flows.csv");
  REQUIRE(log.size() > 300);
  std::map<std::string, std::string> per_direction, biflows;
  for (const Line &l : log)
    per_direction[l.key()] = std::to_string(l.start_ms) + ".." + std::to_string(l.end_ms) + " " +
                             std::to_string(l.packets) + " " + std::to_string(l.bytes);
  for (size_t i = 0; i < log.size(); ++i) {
    const Line &l = log[i];
    const Line *rev = i + 1 < log.size() && log[i + 1].src == l.dst && log[i + 1].sport == l.dport &&
                              log[i + 1].dst == l.src && log[i + 1].dport == l.sport && log[i + 1].proto == l.proto
                          ? &log[i + 1]
                          : nullptr;
    uint64_t start = rev ? std::min(l.start_ms, rev->start_ms) : l.start_ms;
    uint64_t end = rev ? std::max(l.end_ms, rev->end_ms) : l.end_ms;
    biflows[l.key()] = std::to_string(start) + ".." + std::to_string(end) + " " + std::to_string(l.packets) + " " +
                       std::to_string(l.bytes) + " " + std::to_string(rev ? rev->packets : 0) + " " +
                       std::to_string(rev ? rev->bytes : 0);
    if (rev) ++i;
  }
  REQUIRE(biflows.size() < per_direction.size());  // the trace has biflows with both directions

  // Uniflows: one message per direction, as FlowLog's lines.
  std::map<std::string, std::string> got_uni;
  for (const std::string &j : goflow2_lines(dir + "/uniflows.json", per_direction.size())) {
    CHECK(json_value(j, "type") == "IPFIX");
    got_uni[key_of(j)] = std::to_string(ms_of(j, "time_flow_start_ns")) + ".." +
                         std::to_string(ms_of(j, "time_flow_end_ns")) + " " + json_value(j, "packets") + " " +
                         json_value(j, "bytes");
  }
  CHECK(got_uni.size() == per_direction.size());
  CHECK(got_uni == per_direction);

  // RFC 5103: one message per biflow, the reverse counters through the mapping.
  std::map<std::string, std::string> got_rfc;
  for (const std::string &j : goflow2_lines(dir + "/rfc5103.json", biflows.size())) {
    std::string rev_packets = json_value(j, "rev_packets"), rev_bytes = json_value(j, "rev_bytes");
    got_rfc[key_of(j)] = std::to_string(ms_of(j, "time_flow_start_ns")) + ".." +
                         std::to_string(ms_of(j, "time_flow_end_ns")) + " " + json_value(j, "packets") + " " +
                         json_value(j, "bytes") + " " + (rev_packets.empty() ? "0" : rev_packets) + " " +
                         (rev_bytes.empty() ? "0" : rev_bytes);
  }
  rfc.stop();
  uni.stop();
  CHECK(got_rfc.size() == biflows.size());
  CHECK(got_rfc == biflows);
}
