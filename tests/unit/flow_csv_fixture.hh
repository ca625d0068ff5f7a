// Flow records as tests read them: FlowLog's CSV lines, and per-5-tuple
// packet totals counted by tshark on a pcap, with one key for both so the
// two can be compared (ports only for TCP, UDP and SCTP; both directions of
// a flow under one key).
#pragma once
#include <arpa/inet.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "run_fixture.hh"

namespace sluice::test {

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
  // Extension columns after `lane` (fields elements add), by column name.
  std::map<std::string, std::string> ext;
  std::string key() const {
    return std::to_string(proto) + " " + src + " " + std::to_string(sport) + " " + dst + " " + std::to_string(dport);
  }
};

inline std::vector<Line> read_csv(const std::string &path) {
  std::ifstream f(path);
  std::string header, l;
  REQUIRE(std::getline(f, header));
  const std::string base = "start_ms,end_ms,proto,src,sport,dst,dport,packets,bytes,tcp_flags,end_reason,vlan,lane";
  REQUIRE(header.substr(0, base.size()) == base);
  auto cells = [](const std::string &text) {
    std::vector<std::string> c;
    size_t start = 0;
    for (size_t i = 0; i <= text.size(); ++i)
      if (i == text.size() || text[i] == ',') c.push_back(text.substr(start, i - start)), start = i + 1;
    return c;
  };
  std::vector<std::string> names = cells(header);
  std::vector<Line> out;
  while (std::getline(f, l)) {
    std::vector<std::string> c = cells(l);
    REQUIRE(c.size() == names.size());
    out.push_back({std::stoull(c[0]), std::stoull(c[1]), unsigned(std::stoul(c[2])), c[3], unsigned(std::stoul(c[4])), c[5],
                   unsigned(std::stoul(c[6])), std::stoull(c[7]), std::stoull(c[8]), unsigned(std::stoul(c[9])), c[10],
                   unsigned(std::stoul(c[11])), unsigned(std::stoul(c[12])), {}});
    for (size_t i = 13; i < c.size(); ++i) out.back().ext[names[i]] = c[i];
  }
  return out;
}

// An address as inet_ntop writes it (tshark and FlowLog may differ in form).
inline std::string canonical_addr(std::string a) {
  a.erase(std::remove(a.begin(), a.end(), ' '), a.end());
  unsigned char buf[16];
  char out[INET6_ADDRSTRLEN];
  if (inet_pton(AF_INET, a.c_str(), buf) == 1) return inet_ntop(AF_INET, buf, out, sizeof out);
  if (inet_pton(AF_INET6, a.c_str(), buf) == 1) return inet_ntop(AF_INET6, buf, out, sizeof out);
  return a;
}

// A protocol as collectors print it (nfdump's "TCP", goflow2's "IPv6-ICMP")
// as its number; a number stays as it is.
inline std::string proto_number(const std::string &p) {
  return p == "TCP" ? "6" : p == "UDP" ? "17" : p == "ICMP" ? "1" : p == "IPv6-ICMP" ? "58" : p;
}

// The key both count by: protocol and the two endpoints, unordered; ports
// only for TCP, UDP and SCTP (ICMP's type and code are not ports to tshark).
inline std::string biflow_key(const std::string &proto, const std::string &a, std::string ap, const std::string &b,
                              std::string bp) {
  if (proto != "6" && proto != "17" && proto != "132") ap = bp = "0";
  std::string x = canonical_addr(a) + "/" + ap, y = canonical_addr(b) + "/" + bp;
  return proto + " " + std::min(x, y) + " " + std::max(x, y);
}

// Packets per biflow_key in FlowLog's lines; *total gets their sum.
inline std::map<std::string, uint64_t> flowlog_packets(const std::vector<Line> &lines, uint64_t *total) {
  std::map<std::string, uint64_t> out;
  *total = 0;
  for (const Line &l : lines) {
    out[biflow_key(std::to_string(l.proto), l.src, std::to_string(l.sport), l.dst, std::to_string(l.dport))] += l.packets;
    *total += l.packets;
  }
  return out;
}

// Packets per biflow_key of the IP packets tshark dissects in `pcap` (the
// outer header of tunnels and of ICMP errors, as a meter on the link sees
// them); *total gets their sum. Fails the test when tshark fails.
inline std::map<std::string, uint64_t> tshark_packets(const std::string &pcap, uint64_t *total) {
  Run t = run_cmd("tshark -r " + pcap +
                  " -T fields -E separator='|' -e ip.src -e ip.dst -e ipv6.src -e ipv6.dst -e ip.proto -e ipv6.nxt"
                  " -e tcp.srcport -e tcp.dstport -e udp.srcport -e udp.dstport 2>/dev/null");
  REQUIRE(t.status == 0);
  std::map<std::string, uint64_t> out;
  *total = 0;
  std::stringstream ss(t.out);
  std::string row;
  auto first = [](const std::string &s) { return s.substr(0, s.find(',')); };
  while (std::getline(ss, row)) {
    std::vector<std::string> c;
    size_t start = 0;
    for (size_t i = 0; i <= row.size(); ++i)
      if (i == row.size() || row[i] == '|') c.push_back(row.substr(start, i - start)), start = i + 1;
    if (c.size() != 10) continue;
    std::string src = first(c[0].empty() ? c[2] : c[0]), dst = first(c[1].empty() ? c[3] : c[1]);
    if (src.empty()) continue;  // not IP
    std::string proto = first(c[4].empty() ? c[5] : c[4]);
    std::string sp = first(c[6].empty() ? c[8] : c[6]), dp = first(c[7].empty() ? c[9] : c[7]);
    out[biflow_key(proto, src, sp.empty() ? "0" : sp, dst, dp.empty() ? "0" : dp)]++;
    ++*total;
  }
  return out;
}

}  // namespace sluice::test
