// Options templates and records (engine/export/options_records.hh): the
// exporter statistics and sampling records byte by byte for IPFIX and
// NetFlow v9, as the encoders frame them; `sluice check` on flows sampled at
// different rates; and end to end: tshark decodes a run's options records
// with no expert info and the statistics equal what went out before them
// and what the exporter reports; nfcapd scales the volumes of a Sample(1/10)
// run by 10 against FlowLog's counts, for IPFIX and NetFlow v9.
#include <arpa/inet.h>
#include <pcap/pcap.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collector_fixture.hh"
#include "engine/export/ipfix_encoder.hh"
#include "engine/export/netflow_v9_encoder.hh"
#include "engine/export/options_records.hh"
#include "flow_csv_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;
using Bytes = std::vector<uint8_t>;

namespace {

std::string scratch(const std::string &name) { return test::scratch("options", name); }

Bytes hex(const std::string &h) {
  Bytes b;
  std::string digits;
  for (char c : h)
    if (isxdigit(uint8_t(c))) digits += c;
  for (size_t i = 0; i + 1 < digits.size(); i += 2) b.push_back(uint8_t(std::stoul(digits.substr(i, 2), nullptr, 16)));
  return b;
}

uint64_t be(const uint8_t *p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = v << 8 | p[i];
  return v;
}

const flow_export::ExporterStats kStats{7, 3, 1000, 50, 2};

}  // namespace

TEST_CASE("options: the sampling interval is 1/rate rounded, none for rate 1", "[options]") {
  CHECK(flow_export::sampling_interval(0.1) == 10);
  CHECK(flow_export::sampling_interval(1.0 / 3) == 3);
  CHECK(flow_export::sampling_interval(0.3) == 3);    // 3.33: 3, the exact rate goes in samplingProbability
  CHECK(flow_export::sampling_interval(0.4) == 3);    // 2.5 rounds up
  CHECK(flow_export::sampling_interval(0.001) == 1000);
  CHECK(flow_export::sampling_interval(1.0) == 0);
  CHECK(flow_export::sampling_interval(0.0) == 0);  // nothing reaches the table: no record
}

TEST_CASE("options: IPFIX options template records and data records, byte by byte", "[options]") {
  using namespace flow_export;
  auto t = options_templates(Protocol::Ipfix, true);
  REQUIRE(t.size() == 2);
  for (const auto &r : t) {
    CHECK(r.set_id == 3);
    CHECK(r.own_set);
    CHECK_FALSE(r.data);
  }
  // id 65280, 5 fields, 1 scope: exportingProcessId 144 (4), exportedMessageTotalCount 41,
  // exportedOctetTotalCount 40, exportedFlowRecordTotalCount 42, notSentFlowTotalCount 166 (8 each)
  CHECK(t[0].bytes == hex("ff00 0005 0001  0090 0004  0029 0008  0028 0008  002a 0008  00a6 0008"));
  // id 65281, 4 fields, 1 scope: observationDomainId 149 (4), samplingInterval 34 (4),
  // selectorAlgorithm 304 (1), samplingProbability 311 (8)
  CHECK(t[1].bytes == hex("ff01 0004 0001  0095 0004  0022 0004  0130 0001  0137 0008"));
  CHECK(options_templates(Protocol::Ipfix, false).size() == 1);

  auto d = options_data(Protocol::Ipfix, 9, kStats, 0.1);
  REQUIRE(d.size() == 2);
  CHECK(d[0].set_id == 65280);
  CHECK(d[0].data);
  CHECK(d[0].bytes == hex("00000007 0000000000000003 00000000000003e8 0000000000000032 0000000000000002"));
  CHECK(d[1].set_id == 65281);
  // domain 9, interval 10, algorithm 4 (uniform probabilistic), 0.1 as float64
  CHECK(d[1].bytes == hex("00000009 0000000a 04 3fb999999999999a"));
  CHECK(options_data(Protocol::Ipfix, 9, kStats, 1.0).size() == 1);  // not sampled: statistics only
}

TEST_CASE("options: NetFlow v9 options template records and data records, byte by byte", "[options]") {
  using namespace flow_export;
  auto t = options_templates(Protocol::NetFlowV9, true);
  REQUIRE(t.size() == 2);
  for (const auto &r : t) CHECK(r.set_id == 1);
  // id 65280, scope length 4 (System 1, 4 octets), options length 16:
  // TOTAL_BYTES_EXP 40, TOTAL_PKTS_EXP 41, TOTAL_FLOWS_EXP 42, notSentFlowTotalCount 166
  CHECK(t[0].bytes == hex("ff00 0004 0010  0001 0004  0028 0008  0029 0008  002a 0008  00a6 0008"));
  // id 65281: System; SAMPLING_INTERVAL 34 (4), selectorAlgorithm 304 (1), samplingProbability 311 (8)
  CHECK(t[1].bytes == hex("ff01 0004 000c  0001 0004  0022 0004  0130 0001  0137 0008"));

  auto d = options_data(Protocol::NetFlowV9, 9, kStats, 0.3);
  REQUIRE(d.size() == 2);
  // scope: the source id, then octets, export packets, flows, not sent
  CHECK(d[0].bytes == hex("00000009 00000000000003e8 0000000000000003 0000000000000032 0000000000000002"));
  CHECK(d[1].bytes == hex("00000009 00000003 04 3fd3333333333333"));
}

TEST_CASE("options: the IPFIX encoder frames options records in sets of their own, counted in the sequence", "[options]") {
  using namespace flow_export;
  ipfix::IpfixEncoder enc({5, 1472, {}, false});
  auto recs = options_templates(Protocol::Ipfix, true);
  for (auto &r : options_data(Protocol::Ipfix, 5, kStats, 0.1)) recs.push_back(r);
  Messages out;
  enc.encode_options(recs, 1700000000, out);
  REQUIRE(out.size() == 1);
  Bytes want = hex("000a 0085 6553f100 00000000 00000005");  // version 10, 133 octets, time, sequence 0, domain 5
  for (const auto &[set, rec] : std::vector<std::pair<uint16_t, size_t>>{{3, 0}, {3, 1}, {65280, 2}, {65281, 3}}) {
    Bytes h = {uint8_t(set >> 8), uint8_t(set), 0, uint8_t(4 + recs[rec].bytes.size())};
    want.insert(want.end(), h.begin(), h.end());
    want.insert(want.end(), recs[rec].bytes.begin(), recs[rec].bytes.end());
  }
  CHECK(out[0] == want);
  // RFC 7011 §3.1: the sequence number counts data records, options ones too
  CHECK(enc.sequence() == 2);
  Messages next;
  enc.encode(nullptr, 0, 1700000000, true, next);
  REQUIRE(next.size() == 1);
  CHECK(be(next[0].data() + 8, 4) == 2);
}

TEST_CASE("options: the NetFlow v9 encoder pads options FlowSets and counts every record", "[options]") {
  using namespace flow_export;
  netflow_v9::NetFlowV9Encoder enc({9, 1472, true});
  auto recs = options_templates(Protocol::NetFlowV9, true);
  for (auto &r : options_data(Protocol::NetFlowV9, 9, kStats, 0.1)) recs.push_back(r);
  Messages out;
  enc.encode_options(recs, 1700000000, out);
  REQUIRE(out.size() == 1);
  const Bytes &m = out[0];
  CHECK(be(m.data(), 2) == 9);
  CHECK(be(m.data() + 2, 2) == 4);                   // two options templates, two options data records
  CHECK(be(m.data() + 4, 4) == netflow_v9::kBootLeadMs);  // sysUptime: the export time is an hour after boot
  CHECK(be(m.data() + 12, 4) == 0);                  // packet sequence
  CHECK(be(m.data() + 16, 4) == 9);                  // source id
  size_t off = 20;
  for (const auto &[set, rec] : std::vector<std::pair<uint16_t, size_t>>{{1, 0}, {1, 1}, {65280, 2}, {65281, 3}}) {
    REQUIRE(off + 4 <= m.size());
    size_t body = recs[rec].bytes.size(), padded = (4 + body + 3) / 4 * 4;
    CHECK(be(m.data() + off, 2) == set);
    CHECK(be(m.data() + off + 2, 2) == padded);
    CHECK(Bytes(m.begin() + long(off) + 4, m.begin() + long(off + 4 + body)) == recs[rec].bytes);
    for (size_t i = off + 4 + body; i < off + padded; ++i) CHECK(m[i] == 0);
    off += padded;
  }
  CHECK(off == m.size());
  CHECK(enc.sequence() == 1);
}

namespace {

// A UDP collector on loopback that keeps every message, in arrival order.
struct MessageSink {
  int fd = -1, port = 0;
  std::atomic<bool> stopping{false};
  std::mutex mu;
  std::vector<Bytes> messages;
  std::thread thread;
  MessageSink() {
    fd = bind_loopback(SOCK_DGRAM, &port);
    int rcvbuf = 8 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    timeval tv{0, 100000};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    thread = std::thread([this] {
      Bytes buf(65536);
      while (!stopping) {
        ssize_t n = recv(fd, buf.data(), buf.size(), 0);
        if (n <= 0) continue;
        std::lock_guard<std::mutex> l(mu);
        messages.emplace_back(buf.begin(), buf.begin() + n);
      }
    });
  }
  void stop() {
    stopping = true;
    if (thread.joinable()) thread.join();
  }
  ~MessageSink() {
    stop();
    close(fd);
  }
};

// Each message as the UDP payload of one Ethernet/IPv4 packet to `dport`.
void write_messages_pcap(const std::string &path, const std::vector<Bytes> &msgs, uint16_t dport) {
  pcap_t *pd = pcap_open_dead(DLT_EN10MB, 65535);
  REQUIRE(pd);
  pcap_dumper_t *d = pcap_dump_open(pd, path.c_str());
  REQUIRE(d);
  for (size_t i = 0; i < msgs.size(); ++i) {
    Bytes f(14 + 20 + 8 + msgs[i].size(), 0);
    static const uint8_t eth[14] = {2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00};
    std::memcpy(f.data(), eth, 14);
    uint8_t *ip = f.data() + 14, *udp = ip + 20;
    size_t tl = 20 + 8 + msgs[i].size();
    ip[0] = 0x45, ip[2] = uint8_t(tl >> 8), ip[3] = uint8_t(tl), ip[8] = 64, ip[9] = 17;
    ip[12] = 127, ip[15] = 1, ip[16] = 127, ip[19] = 1;
    uint32_t s = 0;
    for (int k = 0; k < 20; k += 2) s += uint32_t(ip[k] << 8 | ip[k + 1]);
    while (s >> 16) s = (s & 0xffff) + (s >> 16);
    ip[10] = uint8_t(~s >> 8), ip[11] = uint8_t(~s);
    udp[0] = 0x9c, udp[1] = 0x40, udp[2] = uint8_t(dport >> 8), udp[3] = uint8_t(dport);
    udp[4] = uint8_t((tl - 20) >> 8), udp[5] = uint8_t(tl - 20);
    std::memcpy(udp + 8, msgs[i].data(), msgs[i].size());
    pcap_pkthdr h{};
    h.ts.tv_sec = long(1700000000 + i);
    h.caplen = h.len = uint32_t(f.size());
    pcap_dump(reinterpret_cast<u_char *>(d), &h, f.data());
  }
  pcap_dump_close(d);
  pcap_close(pd);
}

// The sets of a message: (set id, body) after a header of `header` octets.
std::vector<std::pair<uint16_t, Bytes>> sets_of(const Bytes &m, size_t header) {
  std::vector<std::pair<uint16_t, Bytes>> out;
  for (size_t off = header; off + 4 <= m.size();) {
    size_t len = be(m.data() + off + 2, 2);
    if (len < 4 || off + len > m.size()) break;
    out.emplace_back(uint16_t(be(m.data() + off, 2)), Bytes(m.begin() + long(off) + 4, m.begin() + long(off + len)));
    off += len;
  }
  return out;
}

std::vector<std::string> fields(const std::string &line) {
  std::vector<std::string> out;
  std::stringstream ss(line);
  std::string c;
  while (std::getline(ss, c, '\t')) out.push_back(c);
  return out;
}

// A run exporting (direction uni: one data record per flow record in both
// protocols) to an in-process collector, decoded by tshark: no expert info,
// and each statistics record equal to the messages, octets and flow records
// that went before it; the last one after every record, equal to what the
// exporter counted.
void check_statistics_in_tshark(bool ipfix) {
  if (!have_tool("tshark")) {
    WARN("skipped: tshark is not installed");
    return;
  }
  std::string dir = scratch(ipfix ? "tshark_ipfix" : "tshark_v9");
  MessageSink sink;
  std::string exporter = ipfix ? "IPFIXExporter" : "NetFlowV9Exporter";
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, ipv6 0.3, udp 0.3, queues 2)\n"
                               "  -> Timestamp(clock pcap) -> Sample(1/4)\n"
                               "  -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction uni) -> GCSlicer(table ft) -> exp;\n"
                               "exp :: shared " + exporter + "(127.0.0.1:" + std::to_string(sink.port) + ");\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  usleep(300 * 1000);
  sink.stop();
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::smatch m;
  std::string json = read_file(dir + "/stats.json");
  REQUIRE(std::regex_search(json, m, std::regex("\"name\": \"exp\"[^\n]*\"records_absorbed\": ([0-9]+)")));
  uint64_t absorbed = std::stoull(m[1]);
  REQUIRE(absorbed > 0);

  // What went before each message, counted here.
  size_t header = ipfix ? 16 : 20;
  std::vector<uint64_t> msgs_before, octets_before, flows_before;
  uint64_t msgs = 0, octets = 0, flows = 0;
  netflow_v9::NetFlowV9Encoder v9({1, 1472, true});
  for (const Bytes &msg : sink.messages) {
    msgs_before.push_back(msgs);
    octets_before.push_back(octets);
    flows_before.push_back(flows);
    ++msgs;
    octets += msg.size();
    for (auto &[id, body] : sets_of(msg, header)) {
      if (id < 256 || id == flow_export::kStatsTemplateId || id == flow_export::kSamplingTemplateId) continue;
      size_t len = ipfix ? ipfix::record_length(id) : v9.record_length(id);
      flows += body.size() / len;  // (v9 padding is shorter than a record)
    }
  }
  CHECK(flows == absorbed);

  uint16_t port = 4739;
  write_messages_pcap(dir + "/export.pcap", sink.messages, port);
  // (tshark's "Running as root" on stderr left out)
  Run expert = run_cmd("(tshark -n -r " + dir + "/export.pcap -d udp.port==4739,cflow -T fields -e _ws.expert "
                       "-e _ws.malformed 2>/dev/null)");
  REQUIRE(expert.status == 0);
  CHECK(expert.out.find_first_not_of("\t\n") == std::string::npos);  // not one expert item, nothing malformed

  Run t = run_cmd("(tshark -n -r " + dir + "/export.pcap -d udp.port==4739,cflow -Y 'cflow.packetsexp || cflow.sampling_interval'"
                  " -T fields -E occurrence=f -e frame.number -e cflow.packetsexp -e cflow.octetsexp -e cflow.flowsexp"
                  " -e cflow.notsent_flows -e cflow.sampling_interval -e cflow.selector_algorithm -e cflow.sampling_probability 2>/dev/null)");
  REQUIRE(t.status == 0);
  INFO(t.out);
  std::stringstream lines(t.out);
  std::string line;
  size_t stats = 0, samplings = 0, last_stats_frame = 0;
  uint64_t last_flows = 0;
  while (std::getline(lines, line)) {
    auto f = fields(line);
    REQUIRE(f.size() >= 6);
    size_t i = std::stoul(f[0]) - 1;
    REQUIRE(i < sink.messages.size());
    if (!f[1].empty()) {
      ++stats;
      CHECK(std::stoull(f[1]) == msgs_before[i]);
      CHECK(std::stoull(f[2]) == octets_before[i]);
      CHECK(std::stoull(f[3]) == flows_before[i]);
      CHECK(std::stoull(f[4]) == 0);
      last_stats_frame = i;
      last_flows = std::stoull(f[3]);
    }
    if (!f[5].empty()) {
      ++samplings;
      CHECK(f[5] == "4");
      CHECK(f[6] == "4");
      CHECK(std::stod(f[7]) == 0.25);
    }
  }
  CHECK(stats >= 2);  // at the start and at the end
  CHECK(samplings == stats);
  // The last statistics follow every flow record: the exporter's count.
  CHECK(last_flows == absorbed);
  CHECK(last_stats_frame == sink.messages.size() - 1);
}

// nfdump -I totals of a collector's directory.
std::map<std::string, uint64_t> nfdump_totals(const std::string &dir) {
  Run n = run_cmd("nfdump -R " + dir + " -I");
  REQUIRE(n.status == 0);
  std::map<std::string, uint64_t> out;
  std::smatch m;
  for (const char *key : {"Flows", "Packets", "Bytes", "Sequence failures"}) {
    INFO(n.out);
    REQUIRE(std::regex_search(n.out, m, std::regex(std::string("\n") + key + ": ([0-9]+)")));
    out[key] = std::stoull(m[1]);
  }
  return out;
}

}  // namespace

TEST_CASE("options: tshark decodes IPFIX options templates and records with no expert info, and the statistics are right",
          "[options][collectors]") {
  check_statistics_in_tshark(true);
}

TEST_CASE("options: tshark decodes NetFlow v9 options templates and records with no expert info, and the statistics are right",
          "[options][collectors]") {
  check_statistics_in_tshark(false);
}

TEST_CASE("options: nfcapd scales the packets and octets of a Sample(1/10) run by 10, IPFIX and NetFlow v9",
          "[options][collectors]") {
  if (!have_nfdump()) return;
  std::string dir = scratch("nfcapd");
  int ipfix_port = test_port(11), v9_port = test_port(12);
  Collector a = nfcapd_at(dir + "/ipfix", ipfix_port), b = nfcapd_at(dir + "/v9", v9_port);
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, ipv6 0.3, udp 0.3, queues 2)\n"
      "  -> Timestamp(clock pcap) -> Sample(1/10)\n"
      "  -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction bi) -> GCSlicer(table ft) -> ipfix, v9, log;\n"
      "ipfix :: shared IPFIXExporter(127.0.0.1:" + std::to_string(ipfix_port) + ");\n"
      "v9 :: shared NetFlowV9Exporter(127.0.0.1:" + std::to_string(v9_port) + ");\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r = run_sluice("run -q " + cfg);
  usleep(300 * 1000);
  a.stop();
  b.stop();
  INFO(r.out);
  REQUIRE(r.status == 0);
  uint64_t packets = 0, bytes = 0;
  std::vector<Line> log = read_csv(dir + "/flows.csv");
  for (const Line &l : log) packets += l.packets, bytes += l.bytes;
  REQUIRE(packets > 0);
  for (const char *protocol : {"ipfix", "v9"}) {
    INFO(protocol);
    auto got = nfdump_totals(dir + "/" + protocol);
    CHECK(got["Packets"] == 10 * packets);
    CHECK(got["Bytes"] == 10 * bytes);
    CHECK(got["Sequence failures"] == 0);
  }
  // Flows are not scaled: v9 has one record per direction, as FlowLog's lines.
  CHECK(nfdump_totals(dir + "/v9")["Flows"] == log.size());
}

TEST_CASE("options: Samples in series multiply, and flows sampled at different rates into one exporter are an error at its position",
          "[options]") {
  std::string dir = scratch("check");
  // Two Samples in series: 1 in 10. Reported by the exporter (its summary line).
  MessageSink sink;
  std::string series = write_file(dir + "/series.pipe",
                                   "TrafficGen(flows 50, duration 1s, seed 3) -> Timestamp(clock pcap)\n"
                                   "  -> Sample(1/2) -> Sample(1/5) -> ft :: FlowTable -> GCSlicer(table ft) -> exp;\n"
                                   "exp :: IPFIXExporter(127.0.0.1:" + std::to_string(sink.port) + ");\n");
  Run r = run_sluice("run " + series);
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("options: sampling 1 in 10;") != std::string::npos);

  // One exporter fed by a sampled table and an unsampled one.
  std::string mixed = write_file(dir + "/mixed.pipe",
                                 "src :: TrafficGen(flows 50, duration 1s, seed 3) -> Timestamp(clock pcap) -> t :: Tee;\n"
                                 "t[0] -> Sample(1/10) -> a :: FlowTable -> GCSlicer(table a) -> exp;\n"
                                 "t[1] -> b :: FlowTable -> GCSlicer(table b) -> exp;\n"
                                 "exp :: shared IPFIXExporter(127.0.0.1:9);\n");
  Run c = run_sluice("check " + mixed);
  INFO(c.out);
  CHECK(c.status != 0);
  CHECK(c.out.find("mixed.pipe:4:1: error") != std::string::npos);  // where `exp` is declared
  CHECK(c.out.find("sampled at different rates (0.1, 1)") != std::string::npos);
  Run run = run_sluice("run " + mixed);
  CHECK(run.status != 0);
  CHECK(run.out.find("sampled at different rates") != std::string::npos);
}

TEST_CASE("options: pmacct's nfacctd with nfacctd_renormalize scales a Sample(1/10) run's IPFIX volumes by 10",
          "[options][collectors]") {
  if (!have_tool("nfacctd")) {
    WARN("skipped: pmacct is not installed (apt-get install pmacct)");
    return;
  }
  std::string dir = scratch("nfacctd");
  int port = test_port(13);
  write_file(dir + "/nfacctd.conf", "daemonize: false\nnfacctd_ip: 127.0.0.1\nnfacctd_port: " + std::to_string(port) +
                                        "\nnfacctd_renormalize: true\nplugins: print\naggregate: proto\n"
                                        "print_output: csv\nprint_output_file: " + dir + "/out.csv\n"
                                        "print_refresh_time: 1\nprint_output_file_append: true\n");
  Collector c({"nfacctd", "-f", dir + "/nfacctd.conf"});
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, ipv6 0.3, udp 0.3, queues 2)\n"
      "  -> Timestamp(clock pcap) -> Sample(1/10)\n"
      "  -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction uni) -> GCSlicer(table ft) -> exp, log;\n"
      "exp :: shared IPFIXExporter(127.0.0.1:" + std::to_string(port) + ");\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  uint64_t want_packets = 0, want_bytes = 0;
  for (const Line &l : read_csv(dir + "/flows.csv")) want_packets += l.packets, want_bytes += l.bytes;
  REQUIRE(want_packets > 0);
  // nfacctd writes its cache every second, appended (a header per purge): wait for all of it.
  uint64_t packets = 0, bytes = 0;
  for (int tries = 0; tries < 80 && packets < 10 * want_packets; ++tries) {
    usleep(250 * 1000);
    packets = bytes = 0;
    std::ifstream f(dir + "/out.csv");
    std::string row;
    while (std::getline(f, row)) {  // PROTOCOL,PACKETS,BYTES
      std::vector<std::string> col;
      std::stringstream ss(row);
      for (std::string x; std::getline(ss, x, ',');) col.push_back(x);
      if (col.size() != 3 || col[1] == "PACKETS") continue;
      packets += std::stoull(col[1]);
      bytes += std::stoull(col[2]);
    }
  }
  c.stop();
  CHECK(packets == 10 * want_packets);
  CHECK(bytes == 10 * want_bytes);
}
