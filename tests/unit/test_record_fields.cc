// The optional flow record fields (FlowTable `fields`) end to end: a trace
// of frames built here with known MAC addresses, VLAN tags (QinQ), an MPLS
// label, ToS, TTLs and ICMP types, read from a pcap by RSSSource with an
// interface index and a direction. FlowLog's columns must say what the
// frames carried; nfdump's nfcapd (IPFIX biflows and NetFlow v9) and
// pmacct's nfacctd (IPFIX uniflows), collectors nobody here wrote, must
// collect the same values as FlowLog's. The IPFIX and NetFlow v9 templates
// and records themselves are checked field by field, tshark included, in
// test_export_encoders.cc.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "bytes_fixture.hh"
#include "collector_fixture.hh"
#include "flow_csv_fixture.hh"
#include "pcap_fixture.hh"
#include "run_fixture.hh"

using namespace sluice::test;
using bytes::be16;
using bytes::be32;
using bytes::Bytes;
using bytes::cat;
using bytes::zeros;

namespace {

Bytes mac(uint8_t last) { return {0x02, 0, 0, 0, 0x0a, last}; }
std::string mac_text(uint8_t last) {
  char buf[18];
  snprintf(buf, sizeof buf, "02:00:00:00:0a:%02x", last);
  return buf;
}

// An Ethernet frame: 802.1Q tags (outer first), an MPLS label when `label`
// (traffic class 5, bottom of stack, TTL 9), then the IP packet.
Bytes frame(uint8_t dst, uint8_t src, std::vector<uint16_t> vlans, uint32_t label, uint16_t ethertype,
            const Bytes &ip) {
  Bytes f = cat({mac(dst), mac(src)});
  for (uint16_t v : vlans) f = cat({f, be16(0x8100), be16(v)});
  if (label) return cat({f, be16(0x8847), be32(label << 12 | 5 << 9 | 1 << 8 | 9), ip});
  return cat({f, be16(ethertype), ip});
}
Bytes ipv4(uint8_t src, uint8_t dst, uint8_t tos, uint8_t ttl, uint8_t proto, const Bytes &l4) {
  return cat({{0x45, tos}, be16(uint16_t(20 + l4.size())), be16(1), be16(0x4000), {ttl, proto, 0, 0},
              {10, 0, 0, src}, {10, 0, 0, dst}, l4});
}
Bytes ipv6(uint8_t src, uint8_t dst, uint8_t tclass, uint8_t hops, uint8_t next, const Bytes &l4) {
  Bytes s = zeros(16), d = zeros(16);
  s[0] = d[0] = 0x20, s[1] = d[1] = 0x01, s[2] = d[2] = 0x0d, s[3] = d[3] = 0xb8, s[15] = src, d[15] = dst;
  return cat({{uint8_t(0x60 | tclass >> 4), uint8_t(tclass << 4), 0, 0}, be16(uint16_t(l4.size())), {next, hops}, s, d,
              l4});
}
Bytes tcp(uint16_t sport, uint16_t dport, uint8_t flags) {
  return cat({be16(sport), be16(dport), zeros(8), {0x50, flags}, zeros(6), Bytes(20, 'x')});
}
Bytes udp(uint16_t sport, uint16_t dport) { return cat({be16(sport), be16(dport), be16(8 + 12), zeros(2), Bytes(12, 'u')}); }
Bytes icmp(uint8_t type, uint8_t code) { return cat({{type, code, 0, 0}, zeros(4), Bytes(16, 'i')}); }

// The trace. Interface 7, seen as egress (RSSSource arguments below).
std::vector<PcapRecord> trace() {
  std::vector<PcapRecord> recs;
  uint64_t t = 1'700'000'000'000'000'000ull;
  auto add = [&](const Bytes &f) { recs.push_back({t += 1'000'000, uint32_t(f.size()), f}); };
  // 1. TCP over QinQ (outer 100, inner 200): 10.0.0.1 (MAC ..:11) -> 10.0.0.2
  //    (..:22), ToS 0x28, TTL 64, 63, 62; the answers ToS 0, TTL 128 and 120.
  for (uint8_t ttl : {64, 63, 62}) add(frame(0x22, 0x11, {100, 200}, 0, 0x0800, ipv4(1, 2, 0x28, ttl, 6, tcp(1000, 80, 0x18))));
  for (uint8_t ttl : {128, 120}) add(frame(0x11, 0x22, {100, 200}, 0, 0x0800, ipv4(2, 1, 0x00, ttl, 6, tcp(80, 1000, 0x10))));
  // 2. UDP over MPLS label 1234, ToS 0xb8 (EF), TTL 10; no answer.
  for (int i = 0; i < 2; ++i) add(frame(0x44, 0x33, {}, 1234, 0, ipv4(3, 4, 0xb8, 10, 17, udp(5000, 5004))));
  // 3. ICMP echo request (8/0) and its reply (0/0): two flows, keyed by type and code.
  add(frame(0x66, 0x55, {}, 0, 0x0800, ipv4(5, 6, 0, 255, 1, icmp(8, 0))));
  add(frame(0x55, 0x66, {}, 0, 0x0800, ipv4(6, 5, 0, 50, 1, icmp(0, 0))));
  // 4. IPv6: UDP with traffic class 0x20, hop limit 255, and an ICMPv6
  //    destination unreachable (1/4).
  add(frame(0x88, 0x77, {}, 0, 0x86dd, ipv6(7, 8, 0x20, 255, 17, udp(53, 53000))));
  add(frame(0x88, 0x77, {}, 0, 0x86dd, ipv6(7, 8, 0x00, 64, 58, icmp(1, 4))));
  return recs;
}

// What FlowLog must write for each line (its key: proto src sport dst dport).
// Columns: in_if out_if direction src_mac dst_mac tos min_ttl max_ttl
// inner_vlan icmp_type icmp_code mpls_label.
std::map<std::string, std::map<std::string, std::string>> expected_lines() {
  auto line = [](std::string out_if, uint8_t src, uint8_t dst, int tos, int min_ttl, int max_ttl, int cvlan,
                 int icmp_type, int icmp_code, int label) {
    return std::map<std::string, std::string>{
        {"in_if", "7"}, {"out_if", out_if}, {"direction", "1"}, {"src_mac", mac_text(src)},
        {"dst_mac", mac_text(dst)}, {"tos", std::to_string(tos)}, {"min_ttl", std::to_string(min_ttl)},
        {"max_ttl", std::to_string(max_ttl)}, {"inner_vlan", std::to_string(cvlan)},
        {"icmp_type", std::to_string(icmp_type)}, {"icmp_code", std::to_string(icmp_code)},
        {"mpls_label", std::to_string(label)}};
  };
  return {
      {"6 10.0.0.1 1000 10.0.0.2 80", line("7", 0x11, 0x22, 0x28, 62, 64, 200, 0, 0, 0)},
      {"6 10.0.0.2 80 10.0.0.1 1000", line("7", 0x22, 0x11, 0x00, 120, 128, 200, 0, 0, 0)},
      {"17 10.0.0.3 5000 10.0.0.4 5004", line("0", 0x33, 0x44, 0xb8, 10, 10, 0, 0, 0, 1234)},
      {"1 10.0.0.5 0 10.0.0.6 2048", line("0", 0x55, 0x66, 0, 255, 255, 0, 8, 0, 0)},
      {"1 10.0.0.6 0 10.0.0.5 0", line("0", 0x66, 0x55, 0, 50, 50, 0, 0, 0, 0)},
      {"17 2001:db8::7 53 2001:db8::8 53000", line("0", 0x77, 0x88, 0x20, 255, 255, 0, 0, 0, 0)},
      {"58 2001:db8::7 0 2001:db8::8 260", line("0", 0x77, 0x88, 0x00, 64, 64, 0, 1, 4, 0)},
  };
}

std::vector<std::vector<std::string>> nfdump_rows(const std::string &dir, const std::string &fmt) {
  Run n = run_cmd("nfdump -R " + dir + " -q -6 -N -o 'fmt:" + fmt + "'");
  REQUIRE(n.status == 0);
  std::vector<std::vector<std::string>> rows;
  std::stringstream ss(n.out);
  std::string row;
  while (std::getline(ss, row)) {
    if (row.empty()) continue;
    std::vector<std::string> cells;
    std::stringstream cs(row);
    for (std::string c; std::getline(cs, c, '|');) {
      c.erase(0, c.find_first_not_of(' '));
      c.erase(c.find_last_not_of(' ') + 1);
      cells.push_back(c);
    }
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace

TEST_CASE("record fields: FlowLog, nfcapd (IPFIX, NetFlow v9) and nfacctd agree on interfaces, direction, MACs, "
          "ToS, TTLs, inner VLAN, ICMP and MPLS",
          "[flows][collectors][record-fields]") {
  std::string dir = scratch("record_fields", "all");
  write_records(dir + "/fields.pcap", trace());
  int p_ipfix = test_port(11), p_v9 = test_port(12), p_uni = test_port(13);
  bool nfdump = have_nfdump(), pmacct = have_tool("nfacctd");
  if (!pmacct) WARN("nfacctd part skipped: pmacct is not installed (apt-get install pmacct)");
  std::vector<Collector> collectors;
  if (nfdump) {
    collectors.push_back(nfcapd_at(dir + "/ipfix", p_ipfix));
    collectors.push_back(nfcapd_at(dir + "/v9", p_v9));
  }
  if (pmacct) {
    // pmacct 1.7 has no primitive of its own for the inner VLAN, the TTLs and
    // the direction: custom ones read them by IPFIX element id.
    write_file(dir + "/primitives.lst",
               "name=cvlan field_type=245 len=2 semantics=u_int\n"
               "name=min_ttl field_type=52 len=1 semantics=u_int\n"
               "name=max_ttl field_type=53 len=1 semantics=u_int\n"
               "name=flow_dir field_type=61 len=1 semantics=u_int\n");
    write_file(dir + "/nfacctd.conf",
               "daemonize: false\nnfacctd_ip: 127.0.0.1\nnfacctd_port: " + std::to_string(p_uni) +
                   "\naggregate_primitives: " + dir + "/primitives.lst\nplugins: print\n"
                   "aggregate: src_host, dst_host, src_port, dst_port, proto, in_iface, out_iface, src_mac, dst_mac, "
                   "vlan, tos, mpls_label_top, cvlan, min_ttl, max_ttl, flow_dir\nprint_output: csv\n"
                   "print_output_file: " + dir + "/nfacctd.csv\nprint_refresh_time: 1\nprint_output_file_append: true\n");
    collectors.push_back(Collector({"nfacctd", "-f", dir + "/nfacctd.conf"}, p_uni));
  }
  std::string cfg = write_file(
      dir + "/p.pipe",
      "RSSSource(\"pcap:" + dir + "/fields.pcap\", ifindex 7, direction egress)"
      " -> ft :: FlowTable(idle 1d, active 7d, direction bi) -> GCSlicer(table ft) -> ipfix, v9, uni, log;\n"
      "ipfix :: IPFIXExporter(127.0.0.1:" + std::to_string(p_ipfix) + ");\n"
      "v9 :: NetFlowV9Exporter(127.0.0.1:" + std::to_string(p_v9) + ");\n"
      "uni :: IPFIXExporter(127.0.0.1:" + std::to_string(p_uni) + ", biflow uniflows);\n"
      "log :: FlowLog(\"" + dir + "/flows.csv\");\n");
  for (const char *mode : {"--jit-wait", "--no-jit"}) {
    INFO(mode);
    std::filesystem::remove(dir + "/flows.csv");
    Run r = run_sluice(std::string("run -q ") + mode + " " + cfg);
    INFO(r.out);
    REQUIRE(r.status == 0);
    // FlowLog: what the frames carried.
    std::map<std::string, std::map<std::string, std::string>> got;
    for (const Line &l : read_csv(dir + "/flows.csv")) got[l.key()] = l.ext;
    CHECK(got == expected_lines());
  }
  if (!nfdump && !pmacct) return;
  sleep(1);
  for (Collector &c : collectors) c.stop();
  std::map<std::string, std::map<std::string, std::string>> want = expected_lines();

  if (nfdump) {
    // nfdump: input and output interface, direction, MACs as received, source
    // ToS, outer VLAN, the top MPLS label (label-exp-bos), ICMP type and code.
    const std::string fmt = "%pr|%sa|%sp|%da|%dp|%in|%out|%dir|%ismc|%idmc|%stos|%mpls1|%it|%ic";
    auto compare = [&](const std::string &where, bool biflows) {
      INFO(where);
      size_t rows = 0;
      for (auto &c : nfdump_rows(dir + "/" + where, fmt)) {
        REQUIRE(c.size() == 14);
        std::string dport = c[4];
        if (size_t dot = dport.find('.'); dot != std::string::npos)  // ICMP: type.code
          dport = std::to_string(std::stoul(dport.substr(0, dot)) * 256 + std::stoul(dport.substr(dot + 1)));
        std::string key = proto_number(c[0]) + " " + canonical_addr(c[1]) + " " + c[2] + " " + canonical_addr(c[3]) +
                          " " + dport;
        INFO(key);
        REQUIRE(want.count(key));
        const auto &w = want[key];
        ++rows;
        CHECK(c[5] == w.at("in_if"));
        CHECK(c[6] == w.at("out_if"));
        CHECK(c[7] == "E");  // egress
        CHECK(c[8] == w.at("src_mac"));
        CHECK(c[9] == w.at("dst_mac"));
        CHECK(c[10] == w.at("tos"));
        CHECK(c[11] == (w.at("mpls_label") == "0" ? "0-0-0" : w.at("mpls_label") + "-5-1"));
        if (key.rfind("1 ", 0) == 0 || key.rfind("58 ", 0) == 0) {
          CHECK(c[12] == w.at("icmp_type"));
          CHECK(c[13] == w.at("icmp_code"));
        }
      }
      CHECK(rows == 2 * (biflows ? 6u : 7u));  // two runs; the TCP biflow is one IPFIX record
    };
    compare("ipfix", true);
    compare("v9", false);
  }
  if (pmacct) {
    // nfacctd's print plugin: one line per aggregate, a header per purge
    // (both runs' records aggregate into the same lines: counts are not compared).
    std::map<std::string, std::map<std::string, std::string>> seen;
    std::ifstream f(dir + "/nfacctd.csv");
    std::string row, header;
    std::vector<std::string> names;
    while (std::getline(f, row)) {
      std::vector<std::string> cells;
      std::stringstream cs(row);
      for (std::string c; std::getline(cs, c, ',');) cells.push_back(c);
      if (std::find(cells.begin(), cells.end(), "PACKETS") != cells.end()) {
        names = cells;
        continue;
      }
      if (names.empty() || cells.size() != names.size()) continue;
      std::map<std::string, std::string> v;
      for (size_t i = 0; i < cells.size(); ++i) v[names[i]] = cells[i];
      std::string proto = v["PROTOCOL"] == "tcp" ? "6" : v["PROTOCOL"] == "udp" ? "17" : v["PROTOCOL"] == "icmp" ? "1"
                          : v["PROTOCOL"] == "ipv6-icmp" ? "58" : v["PROTOCOL"];
      seen[proto + " " + canonical_addr(v["SRC_IP"]) + " " + v["SRC_PORT"] + " " + canonical_addr(v["DST_IP"]) + " " +
           v["DST_PORT"]] = v;
    }
    CHECK(seen.size() == want.size());
    for (auto &[key, v] : seen) {
      INFO(key);
      REQUIRE(want.count(key));
      const auto &w = want[key];
      CHECK(v["IN_IFACE"] == w.at("in_if"));
      CHECK(v["OUT_IFACE"] == w.at("out_if"));
      CHECK(v["SRC_MAC"] == w.at("src_mac"));
      CHECK(v["DST_MAC"] == w.at("dst_mac"));
      CHECK(v["TOS"] == w.at("tos"));
      CHECK(v["MPLS_LABEL_TOP"] == w.at("mpls_label"));
      CHECK(v["cvlan"] == w.at("inner_vlan"));
      CHECK(v["min_ttl"] == w.at("min_ttl"));
      CHECK(v["max_ttl"] == w.at("max_ttl"));
      CHECK(v["flow_dir"] == w.at("direction"));
    }
  }
}
