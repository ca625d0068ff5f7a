// The plugin library (elements/plugins) run by sluice, end to end: its
// elements in a probe on the real trace, their fields in the flow records,
// checked against tshark; the JIT and the interpreter give the same records.
#include <catch2/catch.hpp>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "flow_csv_fixture.hh"
#include "run_fixture.hh"

using namespace sluice::test;
namespace fs = std::filesystem;

namespace {

const fs::path kNdpi = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces/ndpi_merged.pcap";

bool have_trace_and_tshark() {
  if (!fs::exists(kNdpi)) {
    WARN("skipped: " << kNdpi << " is absent (the shared traces are not beside the project)");
    return false;
  }
  if (!have_tool("tshark")) {
    WARN("skipped: tshark is not installed");
    return false;
  }
  return true;
}

// The probe with the plugins before its flow table, one lane, timeouts long
// enough that a flow is one record; its FlowLog.
std::vector<Line> run_probe(const std::string &dir, const std::string &mode, std::string *csv_text) {
  std::string cfg = write_file(
      dir + "/p.pipe",
      "require \"" SLUICE_TEST_PLUGIN_LIBRARY "\";\n"
      "RSSSource(device \"pcap:" + kNdpi.string() + "\", queues 1) -> Timestamp -> TunnelDecap -> ServerNames"
      " -> ft :: FlowTable(capacity 256K, idle 1d, active 7d, direction bi) -> GCSlicer(table ft)"
      " -> FlowLog(\"" + dir + "/flows-" + mode + ".csv\", existing replace);\n");
  // --jit-wait: every packet through the fused loop, which this test proves
  Run r = run_sluice("run --" + (mode == "jit" ? std::string("jit-wait") : mode) + " " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("every packet accounted for") != std::string::npos);
  if (mode == "jit") CHECK(r.out.find("loop fused by the JIT") != std::string::npos);
  *csv_text = read_file(dir + "/flows-" + mode + ".csv");
  return read_csv(dir + "/flows-" + mode + ".csv");
}

std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i)
    if (i == s.size() || s[i] == sep) out.push_back(s.substr(start, i - start)), start = i + 1;
  return out;
}
std::string last(const std::string &list) { return list.substr(list.rfind(',') == std::string::npos ? 0 : list.rfind(',') + 1); }
std::string first(const std::string &list) { return list.substr(0, list.find(',')); }

std::string sorted_lines(const std::string &text) {
  std::vector<std::string> l = split(text, '\n');
  std::sort(l.begin(), l.end());
  std::string out;
  for (const std::string &x : l) out += x + "\n";
  return out;
}

// The fields every tshark query here starts with: the layers, then the
// addresses, protocols and ports of every IP layer.
const char *const kKeyFields =
    " -e frame.protocols -e ip.src -e ip.dst -e ipv6.src -e ipv6.dst -e ip.proto -e ipv6.nxt"
    " -e tcp.srcport -e tcp.dstport -e udp.srcport -e udp.dstport";

// The biflow key of a packet's innermost IP layer (the last "ip" or "ipv6"
// in frame.protocols; of repeated fields the last is the innermost) from a
// row starting with kKeyFields; empty for a packet without IP.
std::string inner_key(const std::vector<std::string> &c) {
  std::vector<std::string> layers = split(c[0], ':');
  auto inner = std::find_if(layers.rbegin(), layers.rend(), [](const std::string &l) { return l == "ip" || l == "ipv6"; });
  if (inner == layers.rend()) return "";
  bool v6 = *inner == "ipv6";
  std::string proto = last(v6 ? c[6] : c[5]);
  std::string sp = proto == "6" ? last(c[7]) : proto == "17" ? last(c[9]) : "0";
  std::string dp = proto == "6" ? last(c[8]) : proto == "17" ? last(c[10]) : "0";
  return biflow_key(proto, last(v6 ? c[3] : c[1]), sp, last(v6 ? c[4] : c[2]), dp);
}

// tshark's view of the tunnelled packets: per inner biflow key, the packets
// and the tunnel id of the first one.
struct TunnelFlow {
  uint64_t packets = 0;
  std::string first_id;
};
std::map<std::string, TunnelFlow> tshark_tunnel_flows() {
  Run t = run_cmd("tshark -r " + kNdpi.string() +
                  " -Y 'vxlan || (gtp.message == 0xff && udp.port == 2152) || (gre && gre.flags.version == 0)'"
                  " -T fields -E separator='|'" + kKeyFields + " -e vxlan.vni -e gtp.teid -e gre.key 2>/dev/null | cat");
  REQUIRE(t.status == 0);
  std::map<std::string, TunnelFlow> out;
  std::stringstream ss(t.out);
  std::string row;
  while (std::getline(ss, row)) {
    std::vector<std::string> c = split(row, '|');
    REQUIRE(c.size() == 14);
    std::string key = inner_key(c);
    REQUIRE(!key.empty());
    TunnelFlow &f = out[key];
    if (f.packets++ == 0) f.first_id = first(!c[11].empty() ? c[11] : !c[12].empty() ? c[12] : c[13]);
  }
  return out;
}

uint64_t number(const std::string &text) {  // tshark writes TEIDs in hex
  return text.rfind("0x", 0) == 0 ? std::stoull(text.substr(2), nullptr, 16) : std::stoull(text);
}

}  // namespace

TEST_CASE("plugins: TunnelDecap meters tunnelled flows on the inner 5-tuples tshark sees, the tunnel id kept, "
          "JIT and interpreter alike",
          "[plugins][tunnel][ndpi]") {
  if (!have_trace_and_tshark()) return;
  std::string dir = scratch("plugins", "tunnels");
  std::string jit_csv, interp_csv;
  std::vector<Line> lines = run_probe(dir, "jit", &jit_csv);
  run_probe(dir, "no-jit", &interp_csv);
  CHECK(sorted_lines(jit_csv) == sorted_lines(interp_csv));

  // Ours: the lines of flows that came through a tunnel.
  std::map<std::string, uint64_t> ours;
  std::map<std::string, std::pair<uint64_t, std::string>> ours_id;  // key: start_ms of its first line, tunnel id
  std::set<std::string> types;
  for (const Line &l : lines) {
    if (l.ext.at("tunnel_type").empty()) continue;
    std::string key = biflow_key(std::to_string(l.proto), l.src, std::to_string(l.sport), l.dst, std::to_string(l.dport));
    ours[key] += l.packets;
    types.insert(l.ext.at("tunnel_type"));
    auto [it, fresh] = ours_id.try_emplace(key, l.start_ms, l.ext.at("tunnel_id"));
    if (!fresh && l.start_ms < it->second.first) it->second = {l.start_ms, l.ext.at("tunnel_id")};
  }
  std::map<std::string, TunnelFlow> theirs = tshark_tunnel_flows();
  uint64_t their_packets = 0;
  for (auto &[key, f] : theirs) {
    CAPTURE(key);
    their_packets += f.packets;
    CHECK(ours[key] == f.packets);
    CHECK(number(ours_id[key].second) == number(f.first_id));
  }
  CHECK(ours.size() == theirs.size());
  CHECK(their_packets >= 256);  // VXLAN 127 and GTP-U 129 packets in the trace
  CHECK(types == std::set<std::string>{"1", "2"});  // VXLAN, GTP-U (its one GRE packet is PPTP's, version 1)
}

namespace {

// tshark's names per inner biflow key: TLS/QUIC server names of ClientHellos
// and the names of DNS queries.
struct Names {
  std::map<std::string, std::set<std::string>> server, dns;
};
Names tshark_names() {
  Run t = run_cmd("tshark -r " + kNdpi.string() +
                  " -Y 'tls.handshake.type == 1 || dns.flags.response == 0'"
                  " -T fields -E separator='|'" + kKeyFields + " -e tls.handshake.extensions_server_name -e dns.qry.name 2>/dev/null | cat");
  REQUIRE(t.status == 0);
  Names out;
  std::stringstream ss(t.out);
  std::string row;
  while (std::getline(ss, row)) {
    std::vector<std::string> c = split(row, '|');
    REQUIRE(c.size() == 13);
    std::string key = inner_key(c);
    if (key.empty()) continue;
    for (const std::string &n : split(c[11], ',')) if (!n.empty()) out.server[key].insert(n);
    for (const std::string &n : split(c[12], ','))  // "<Root>" and the like are not names
      if (!n.empty() && n[0] != '<') out.dns[key].insert(n);
  }
  return out;
}

}  // namespace

TEST_CASE("plugins: ServerNames puts the server name and the DNS query name tshark sees into each flow's record",
          "[plugins][server_names][ndpi]") {
  if (!have_trace_and_tshark()) return;
  std::string dir = scratch("plugins", "names");
  std::string csv;
  std::vector<Line> lines = run_probe(dir, "jit", &csv);
  Names theirs = tshark_names();
  // Ours, per key: the names of its records (printable ones: FlowLog
  // escapes the others, tshark writes them its own way).
  std::map<std::string, std::set<std::string>> server, dns;
  for (const Line &l : lines) {
    std::string key = biflow_key(std::to_string(l.proto), l.src, std::to_string(l.sport), l.dst, std::to_string(l.dport));
    for (auto [column, names] : {std::pair{"server_name", &server}, std::pair{"dns_query_name", &dns}}) {
      const std::string &n = l.ext.at(column);
      if (n.empty()) continue;
      std::set<std::string> &of_key = (*names)[key];  // named, whatever the text
      if (n.find("\\x") == std::string::npos) of_key.insert(n);
    }
  }
  // Every name we give a flow is one tshark sees in it (cut ones: the start
  // of one), and nearly every flow tshark names gets a name from us.
  auto check = [](const char *what, const std::map<std::string, std::set<std::string>> &ours,
                  const std::map<std::string, std::set<std::string>> &tshark, size_t size, double coverage) {
    size_t wrong = 0, named = 0, only_ours = 0;
    for (const auto &[key, names] : ours) {
      auto it = tshark.find(key);
      if (it == tshark.end()) {
        ++only_ours;
        continue;
      }
      for (const std::string &n : names) {
        bool known = false;
        for (const std::string &t : it->second) known |= t == n || (n.size() == size && t.rfind(n, 0) == 0);
        if (!known) {
          ++wrong;
          UNSCOPED_INFO(what << " " << key << ": ours " << n);
        }
      }
    }
    for (const auto &[key, names] : tshark) named += ours.count(key);
    INFO(what << ": tshark names " << tshark.size() << " flows, we name " << named << " of them, " << ours.size()
              << " in all, " << only_ours << " that tshark does not, " << wrong << " with another name");
    CHECK(wrong == 0);
    CHECK(double(named) >= coverage * double(tshark.size()));
    CHECK(only_ours <= tshark.size() / 50);
  };
  check("server name", server, theirs.server, 80, 0.99);  // 576 of 580 (IP in IP, CAPWAP: not opened)
  check("dns query", dns, theirs.dns, 96, 0.98);  // 359 of 365 (IP in IP, bogus IP lengths, fuzzed ports)
  CHECK(theirs.server.size() >= 300);
  CHECK(theirs.dns.size() >= 300);
}
