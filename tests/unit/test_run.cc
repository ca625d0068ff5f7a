// `sluice run` end to end, as a user runs it: generated traces written and
// read back by the pcap device, software RSS over lanes, every packet
// element, accounting, errors, --duration and Ctrl-C. Each test runs the
// real binary (EAL initializes once per process) and checks its output
// files with libpcap and its counters with --stats-json.
#include <pcap/pcap.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/packet/parse.hh"
#include "engine/packet/pcap_filter.hh"
#include "engine/packet/rss_hash.hh"
#include "engine/traffic/traffic_model.hh"
#include "pcap_fixture.hh"
#include "netns_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;
namespace fs = std::filesystem;

namespace {

std::string scratch(const std::string &name) { return test::scratch("run", name); }

// A counter of one element from --stats-json: "in", "out", "absorbed", "copies", or a drop reason.
uint64_t stat(const std::string &json, const std::string &element, const std::string &field) {
  std::regex line("\\{\"name\": \"" + std::regex_replace(element, std::regex("[#@/]"), "\\$&") + "\".*");
  std::smatch m;
  REQUIRE(std::regex_search(json, m, line));
  std::string l = m.str();
  l = l.substr(0, l.find('\n'));
  std::smatch v;
  INFO(element << "." << field << " in " << l);
  REQUIRE(std::regex_search(l, v, std::regex("\"" + field + "\": ([0-9]+)")));
  return std::stoull(v[1].str());
}
uint64_t total(const std::string &json, const std::string &field) {
  std::smatch v;
  REQUIRE(std::regex_search(json, v, std::regex("^\\{[^\\n]*\"" + field + "\": ([0-9]+)")));
  return std::stoull(v[1].str());
}

struct Packet {
  uint64_t ns;
  uint32_t len;
  std::vector<uint8_t> data;
  bool operator==(const Packet &) const = default;
};

std::vector<Packet> read_pcap(const std::string &path, int *linktype = nullptr) {
  char err[PCAP_ERRBUF_SIZE];
  pcap_t *p = pcap_open_offline_with_tstamp_precision(path.c_str(), PCAP_TSTAMP_PRECISION_NANO, err);
  INFO(path << ": " << err);
  REQUIRE(p);
  if (linktype) *linktype = pcap_datalink(p);
  std::vector<Packet> out;
  pcap_pkthdr *h;
  const u_char *d;
  while (pcap_next_ex(p, &h, &d) == 1)
    out.push_back({record_ns(*h), h->len, std::vector<uint8_t>(d, d + h->caplen)});
  pcap_close(p);
  return out;
}

// The trace examples/make_trace.pipe makes, with a smaller configuration.
constexpr const char *kTraceGen =
    "TrafficGen(flows 500, new_flows_per_s 400, duration 4s, seed 11, ipv6 0.3, udp 0.3, vlan 7)";

TrafficConfig trace_config() {
  TrafficConfig c;
  c.flows = 500, c.new_flows_per_s = 400, c.duration_ns = 4'000'000'000ull, c.seed = 11;
  c.ipv6 = 0.3, c.udp = 0.3, c.vlan = 7;
  return c;
}

std::string make_trace(const std::string &dir) {
  std::string out = dir + "/trace.pcap";
  std::string cfg = write_file(dir + "/make.pipe", std::string(kTraceGen) + " -> PcapSink(\"" + out + "\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  return out;
}

}  // namespace

TEST_CASE("run: TrafficGen -> PcapSink writes exactly the generated traffic", "[run]") {
  std::string dir = scratch("make_trace");
  std::string trace = make_trace(dir);
  GeneratedTraffic truth = generate_traffic(trace_config());
  std::vector<Packet> pkts = read_pcap(trace);
  const GeneratedLane &lane = truth.lanes[0];
  REQUIRE(pkts.size() == lane.size());
  REQUIRE(pkts.size() > 1000);
  for (size_t i = 0; i < pkts.size(); ++i) {
    INFO("packet " << i);
    REQUIRE(pkts[i].ns == lane.packets[i].ts_ns);
    REQUIRE(pkts[i].len == lane.packets[i].length);
    REQUIRE(pkts[i].data == std::vector<uint8_t>(lane.frame(i), lane.frame(i) + lane.packets[i].length));
  }
  // tcpdump, tshark and capinfos read it (when installed).
  if (have_tool("capinfos")) {
    Run r = run_cmd("capinfos -c -M " + trace);
    CHECK(r.status == 0);
    CHECK(r.out.find("Number of packets:   " + std::to_string(pkts.size())) != std::string::npos);
  } else {
    WARN("capinfos is not installed: the trace was checked with libpcap only");
  }
  if (have_tool("tcpdump")) {
    Run r = run_cmd("tcpdump -n -r " + trace + " 2>/dev/null | wc -l");
    CHECK(r.status == 0);
    CHECK(std::stoull(r.out) == pkts.size());
  } else {
    WARN("tcpdump is not installed: not checked with it");
  }
}

TEST_CASE("run: TrafficGen with repeat replays its traffic that many times, each pass a duration later", "[run]") {
  std::string dir = scratch("repeat");
  std::string out = dir + "/trace.pcap";
  std::string gen = kTraceGen;
  gen.insert(gen.size() - 1, ", repeat 3");
  std::string cfg = write_file(dir + "/make.pipe", gen + " -> PcapSink(\"" + out + "\");\n");
  Run r = run_sluice("run " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  GeneratedTraffic truth = generate_traffic(trace_config());
  const GeneratedLane &lane = truth.lanes[0];
  CHECK(r.out.find("replayed " + std::to_string(3 * lane.size()) + " of " + std::to_string(3 * lane.size()) +
                   " packets of this lane (3 of 3 passes)") != std::string::npos);
  std::vector<Packet> pkts = read_pcap(out);
  REQUIRE(pkts.size() == 3 * lane.size());
  for (size_t i = 0; i < pkts.size(); ++i) {
    INFO("packet " << i);
    const size_t k = i % lane.size(), pass = i / lane.size();
    REQUIRE(pkts[i].ns == lane.packets[k].ts_ns + pass * trace_config().duration_ns);
    REQUIRE(pkts[i].data == std::vector<uint8_t>(lane.frame(k), lane.frame(k) + lane.packets[k].length));
    if (i) REQUIRE(pkts[i].ns >= pkts[i - 1].ns);
  }
}

TEST_CASE("run: a trace read by the pcap device and written back is byte-identical", "[run]") {
  std::string dir = scratch("roundtrip");
  std::string trace = make_trace(dir);
  std::string cfg = write_file(dir + "/rt.pipe", "src :: RSSSource(device \"pcap:" + trace +
                                                     "\");\nsrc -> Timestamp(clock pcap) -> Ring(capacity 1K) -> PcapSink(\"" +
                                                     dir + "/out.pcap\");\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(read_file(trace) == read_file(dir + "/out.pcap"));  // nanoseconds and all
  std::string json = read_file(dir + "/stats.json");
  CHECK(stat(json, "src#0", "in") == read_pcap(trace).size());
  CHECK(json.find("\"balanced\": true") != std::string::npos);
}

// libpcap 1.10 reads a record's 32-bit seconds as signed: from 2038 on (2^31
// s) they come negative, and the reader that checked what DPDK's net_pcap
// read took every such record for one net_pcap lost.
TEST_CASE("run: capture times from 2038 on, in micro- and nanosecond files, lose nothing and keep their time", "[run]") {
  std::string dir = scratch("y2038");
  std::vector<PcapRecord> trace = read_records(make_trace(dir));
  constexpr uint64_t k2040 = 2'208'988'800ull * 1'000'000'000ull;  // past 2^31 s
  std::vector<PcapRecord> later = trace, one = trace;  // the whole trace in 2040, or one packet of it
  for (PcapRecord &r : later) r.ns = r.ns - trace[0].ns + k2040 + 123'456'789;
  one[one.size() / 2].ns = k2040 + 987'654'321;
  struct Case {
    const char *name;
    const std::vector<PcapRecord> *records;
    bool nano;
  };
  for (Case c : {Case{"2040, ns", &later, true}, Case{"2040, us", &later, false}, Case{"one in 2040, ns", &one, true},
                 Case{"one in 2040, us", &one, false}}) {
    DYNAMIC_SECTION(c.name) {
      std::string in = dir + "/in.pcap", out = dir + "/out.pcap";
      write_records(in, *c.records, c.nano);
      std::vector<PcapRecord> want = read_records(in);  // microsecond files: times to the microsecond
      REQUIRE(want.size() == trace.size());
      std::string cfg = write_file(dir + "/y.pipe", "src :: RSSSource(device \"pcap:" + in +
                                                        "\");\nsrc -> Timestamp(clock pcap) -> PcapSink(\"" + out + "\");\n");
      Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
      INFO(r.out);
      REQUIRE(r.status == 0);
      std::string json = read_file(dir + "/stats.json");
      CHECK(stat(json, "src#0", "rx no buffer") == 0);
      CHECK(stat(json, "src#0", "in") == want.size());
      std::vector<PcapRecord> got = read_records(out);
      REQUIRE(got.size() == want.size());
      for (size_t i = 0; i < got.size(); ++i) {
        INFO("packet " << i);
        REQUIRE(got[i].ns == want[i].ns);
        REQUIRE(got[i] == want[i]);
      }
    }
  }
}

TEST_CASE("run: a FlowTable that packets of a live device reach without a Timestamp is refused, at file:line:column", "[run]") {
  std::string dir = scratch("no_time");
  std::string trace = make_trace(dir);
  std::string cfg = write_file(dir + "/p.pipe", "define $DEVICE \"pcap:" + trace + "\";\n"
                                                "src :: RSSSource(device $DEVICE);\n"
                                                "src -> ft :: FlowTable(idle 1s) -> GCSlicer(table ft) -> FlowLog(\"" +
                                                    dir + "/flows.csv\");\n");
  // a trace has capture times: no Timestamp needed
  Run ok = run_sluice("check " + cfg);
  INFO(ok.out);
  CHECK(ok.status == 0);
  // a live device given at run time has none: packet time would stay 0, flows dated 1970 never expire
  std::string located = cfg + ":3:8: error: 'ft' (FlowTable) meters packets by their time, but packets from 'src' "
                              "(RSSSource) reach it without one";
  std::string hint = "hint: put a Timestamp right after the source: `src -> Timestamp -> ...`";
  for (const char *command : {"check ", "run --duration 200ms "}) {
    Run bad = run_sluice(command + cfg + " -D DEVICE=null");
    INFO(bad.out);
    CHECK(bad.status == 1);
    CHECK(bad.out.find(located) != std::string::npos);
    CHECK(bad.out.find(hint) != std::string::npos);
    CHECK(bad.out.find("run summary") == std::string::npos);
  }
  // with a Timestamp on the way it runs
  std::string timed = write_file(dir + "/t.pipe", "src :: RSSSource(device null);\n"
                                                  "src -> Timestamp -> ft :: FlowTable(idle 1s) -> GCSlicer(table ft) -> "
                                                  "FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r = run_sluice("run -q " + timed + " --duration 200ms");
  INFO(r.out);
  CHECK(r.status == 0);
}

TEST_CASE("run: software RSS keeps both directions of a flow in one lane, in order", "[run]") {
  std::string dir = scratch("lanes");
  std::string trace = make_trace(dir);
  std::vector<Packet> in = read_pcap(trace);
  const ToeplitzHash microsoft(ToeplitzHash::kMicrosoftKey);
  for (int lanes : {2, 3}) {
    for (bool symmetric : {true, false}) {
      std::string cfg = write_file(dir + "/lanes.pipe",
                                   "src :: RSSSource(device \"pcap:" + trace + "\", queues " + std::to_string(lanes) +
                                       ", symmetric " + (symmetric ? "true" : "false") +
                                       ");\nsrc -> Timestamp(clock pcap) -> Ring(capacity 512) -> PcapSink(\"" + dir +
                                       "/lane-$queue.pcap\");\n");
      Run r = run_sluice("run -q " + cfg);
      INFO(r.out);
      REQUIRE(r.status == 0);
      // Expected: the input split by lane_for(hash), order kept; the
      // symmetric key keeps a connection's two directions together, the
      // default one (symmetric false) does not.
      std::vector<std::vector<Packet>> expect(lanes);
      for (const Packet &p : in) {
        PacketMeta m;
        parse_packet(p.data.data(), uint32_t(p.data.size()), LinkType::Ethernet, m);
        expect[lane_for(symmetric ? symmetric_hash(m) : rss_hash(m, microsoft), lanes)].push_back(p);
      }
      for (int l = 0; l < lanes; ++l) {
        INFO("lanes " << lanes << ", lane " << l << ", symmetric " << symmetric);
        std::vector<Packet> got = read_pcap(dir + "/lane-" + std::to_string(l) + ".pcap");
        CHECK(got.size() > in.size() / (lanes * 4));  // every lane has a share
        CHECK(got == expect[l]);
      }
    }
  }
}

// A trace over several lanes is read by each lane, whole, each keeping the
// records the symmetric hash gives it (EthDevice::keep_lane_share): every
// record must land in exactly one lane, in order, also those longer than a
// packet buffer (the lane decides on the first buffer's bytes), those that
// are not IP and those whose headers are broken.
// Each lane walks the trace and keeps the records the hash gives it, in the
// file's order: in place where the file is mapped, copied where libpcap
// reads it (pcapng).
TEST_CASE("run: a trace over 2 or 3 lanes, pcap or pcapng: each record in one lane, jumbo, non-IP and broken ones too", "[run]") {
  std::string dir = scratch("share");
  std::vector<test::PcapRecord> recs = test::read_records(make_trace(dir));
  REQUIRE(recs.size() > 100);
  const uint64_t t = recs.back().ns;
  auto add = [&](std::vector<uint8_t> frame) {
    uint32_t len = uint32_t(frame.size());
    recs.push_back({t + recs.size(), len, std::move(frame)});
  };
  for (int i = 0; i < 12; ++i) {  // jumbo TCP frames of 6 connections, both directions: several buffers each
    std::vector<uint8_t> f(9000, uint8_t(i));
    const uint8_t eth[14] = {2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00};
    std::copy(eth, eth + 14, f.begin());
    uint8_t ip[20] = {0x45, 0, 0x23, 0x1a, 0, 0, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 1, uint8_t(i / 2)};
    if (i % 2) std::swap_ranges(ip + 12, ip + 16, ip + 16);
    std::copy(ip, ip + 20, f.begin() + 14);
    uint8_t tcp[20] = {0x30, 0x39, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x10, 0xff, 0xff, 0, 0, 0, 0};
    if (i % 2) std::swap_ranges(tcp, tcp + 2, tcp + 2);
    std::copy(tcp, tcp + 20, f.begin() + 34);
    add(std::move(f));
  }
  for (int i = 0; i < 8; ++i) {
    std::vector<uint8_t> arp(60, 0xff);  // not IP
    arp[12] = 0x08, arp[13] = 0x06, arp[20] = uint8_t(i);
    add(arp);
    std::vector<uint8_t> bad = recs[size_t(i) * 7].data;  // a bad IP version where the trace has IP
    if (bad.size() > 14 && bad[12] == 0x08 && bad[13] == 0x00) bad[14] = uint8_t(0x75 + i);
    add(bad);
    add(std::vector<uint8_t>(recs[size_t(i) * 5].data.begin(), recs[size_t(i) * 5].data.begin() + 20));  // cut short
  }
  const std::string pcap = dir + "/mixed.pcap", pcapng = dir + "/mixed.pcapng";
  test::write_records(pcap, recs);
  Run ng = run_cmd("editcap -F pcapng " + pcap + " " + pcapng);
  REQUIRE(ng.status == 0);
  for (auto [trace, lanes] : {std::pair{pcap, 2u}, std::pair{pcap, 3u}, std::pair{pcapng, 2u}}) {
    INFO(trace << ", " << lanes << " lanes");
    std::string cfg = write_file(dir + "/share.pipe", "src :: RSSSource(device \"pcap:" + trace + "\", queues " +
                                                          std::to_string(lanes) + ");\nsrc -> PcapSink(\"" + dir +
                                                          "/lane-$queue.pcap\");\n");
    Run r = run_sluice("run " + cfg);
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::vector<std::vector<test::PcapRecord>> expect(lanes);
    for (const test::PcapRecord &p : recs) {
      PacketMeta m;
      parse_packet(p.data.data(), uint32_t(p.data.size()), LinkType::Ethernet, m, p.len);
      expect[lane_for(symmetric_hash(m), lanes)].push_back(p);
    }
    CHECK(r.out.find("read by each of " + std::to_string(lanes) + " lanes, each keeping its share") != std::string::npos);
    size_t got_all = 0;
    for (unsigned l = 0; l < lanes; ++l) {
      INFO("lane " << l);
      std::vector<test::PcapRecord> got = test::read_records(dir + "/lane-" + std::to_string(l) + ".pcap");
      CHECK(got.size() > recs.size() / (2 * lanes));
      CHECK(got == expect[l]);
      got_all += got.size();
    }
    CHECK(got_all == recs.size());
  }
}

TEST_CASE("run: Filter accepts exactly what libpcap accepts, reject and accounting", "[run]") {
  std::string dir = scratch("filter");
  std::string trace = make_trace(dir);
  std::vector<Packet> in = read_pcap(trace);
  // Every packet of the trace is tagged (VLAN 7): as in tcpdump, `tcp`
  // alone matches none of them; `vlan and tcp` looks past the tag.
  for (std::string expr : {"tcp and port 443", "vlan and tcp and port 443", "vlan 7 and ip6",
                           "vlan and (udp or tcp[tcpflags] & tcp-syn != 0)", "not (vlan and net 172.16.0.0/20)"}) {
    std::string cfg = write_file(dir + "/f.pipe", "src :: RSSSource(device \"pcap:" + trace + "\", queues 2);\n"
                                                  "f :: Filter(\"" + expr + "\");\n"
                                                  "src -> f -> PcapSink(\"" + dir + "/match-$queue.pcap\");\n"
                                                  "f[reject] -> c :: Counter -> Discard;\n");
    Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
    INFO(expr << "\n" << r.out);
    REQUIRE(r.status == 0);
    PcapFilter pf = *PcapFilter::compile(expr, LinkType::Ethernet);
    uint64_t match = 0;
    for (const Packet &p : in) match += pf.matches(p.data.data(), uint32_t(p.data.size()), p.len);
    std::string json = read_file(dir + "/stats.json");
    uint64_t got = read_pcap(dir + "/match-0.pcap").size() + read_pcap(dir + "/match-1.pcap").size();
    CHECK(got == match);
    if (expr != "tcp and port 443") CHECK(match > 0);
    CHECK(stat(json, "c#0", "in") + stat(json, "c#1", "in") == in.size() - match);
    CHECK(total(json, "received") == in.size());
  }
  // With reject unconnected, the others are dropped and counted as "filtered".
  std::string cfg = write_file(dir + "/g.pipe", "src :: RSSSource(device \"pcap:" + trace + "\");\n"
                                                "src -> f :: Filter(\"vlan and udp\") -> Discard;\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string json = read_file(dir + "/stats.json");
  CHECK(stat(json, "f#0", "filtered") + stat(json, "f#0", "out") == in.size());
  CHECK(stat(json, "f#0", "filtered") > 0);
  CHECK(r.out.find("dropped, filtered: " + std::to_string(stat(json, "f#0", "filtered"))) != std::string::npos);
}

TEST_CASE("run: Tee, Sample, Counter, Discard and the accounting of every packet", "[run]") {
  std::string dir = scratch("small");
  std::string cfg = write_file(dir + "/s.pipe",
                               std::string(kTraceGen) + " -> t :: Tee;\n"
                               "t[0] -> c :: Counter -> Discard;\n"
                               "t[1] -> s :: Sample(1/4) -> Discard;\n"
                               "t[2] -> Sample(0.5) -> cs :: Counter -> d :: Discard;\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string json = read_file(dir + "/stats.json");
  uint64_t n = generate_traffic(trace_config()).packets;
  CHECK(total(json, "received") == n);
  CHECK(stat(json, "t#0", "copies") == 2 * n);
  CHECK(stat(json, "c#0", "in") == n);
  uint64_t kept = stat(json, "s#0", "out"), dropped = stat(json, "s#0", "not sampled");
  CHECK(kept + dropped == n);
  CHECK(double(kept) / double(n) == Approx(0.25).margin(0.02));
  CHECK(double(stat(json, "cs#0", "in")) / double(n) == Approx(0.5).margin(0.02));
  CHECK(total(json, "absorbed") + total(json, "dropped") == 3 * n);
  CHECK(json.find("\"balanced\": true") != std::string::npos);
  CHECK(r.out.find("every packet accounted for") != std::string::npos);
  // The same run twice samples the same packets (seeded per lane).
  Run again = run_sluice("run -q " + cfg + " --stats-json " + dir + "/again.json");
  CHECK(stat(read_file(dir + "/again.json"), "s#0", "out") == kept);
}

TEST_CASE("run: several pcap files are read one after the other", "[run]") {
  std::string dir = scratch("files");
  std::string trace = make_trace(dir);
  std::string cfg = write_file(dir + "/m.pipe", "RSSSource(device \"pcap:" + trace + "," + trace +
                                                    "\") -> PcapSink(\"" + dir + "/both.pcap\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::vector<Packet> once = read_pcap(trace), twice = read_pcap(dir + "/both.pcap");
  REQUIRE(twice.size() == 2 * once.size());
  CHECK(std::equal(once.begin(), once.end(), twice.begin()));
  CHECK(std::equal(once.begin(), once.end(), twice.begin() + long(once.size())));
}

TEST_CASE("run: other link types pass through with their link type", "[run]") {
  fs::path sll = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces/linktypes";
  if (!fs::exists(sll)) {
    WARN("../shared/traces/linktypes is absent: skipped");
    return;
  }
  std::string dir = scratch("linktypes");
  int tested = 0;
  for (const auto &f : fs::directory_iterator(sll)) {
    if (f.path().extension() != ".pcap") continue;
    int in_link = -1, out_link = -2;
    std::vector<Packet> in = read_pcap(f.path().string(), &in_link);
    std::string cfg = write_file(dir + "/l.pipe", "RSSSource(device \"pcap:" + f.path().string() +
                                                      "\") -> PcapSink(\"" + dir + "/out.pcap\");\n");
    Run r = run_sluice("run -q " + cfg);
    INFO(f.path() << "\n" << r.out);
    REQUIRE(r.status == 0);
    std::vector<Packet> out = read_pcap(dir + "/out.pcap", &out_link);
    CHECK(out_link == in_link);
    CHECK(out == in);
    ++tested;
  }
  CHECK(tested > 0);
}

TEST_CASE("run: a device that cannot be opened is an error naming it", "[run]") {
  std::string dir = scratch("bad_device");
  std::string cfg = write_file(dir + "/b.pipe", "RSSSource(device \"pcap:" + dir + "/missing.pcap\") -> Discard;\n");
  Run r = run_sluice("run -q " + cfg);
  CHECK(r.status == 1);
  CHECK(r.out.find("device 'pcap:" + dir + "/missing.pcap' of 'RSSSource@1': cannot read '" + dir + "/missing.pcap'") !=
        std::string::npos);
  cfg = write_file(dir + "/c.pipe", "RSSSource(device \"af_packet:sluice-none0\") -> Discard;\n");
  r = run_sluice("run -q " + cfg);
  CHECK(r.status == 1);
  CHECK(r.out.find("cannot open device 'af_packet:sluice-none0' of 'RSSSource@1'") != std::string::npos);
  cfg = write_file(dir + "/d.pipe", "RSSSource(device \"tap0\") -> Discard;\n");
  r = run_sluice("run -q " + cfg);
  CHECK(r.status == 1);
  CHECK(r.out.find("device 'tap0' is not one Sluice knows") != std::string::npos);
  cfg = write_file(dir + "/e.pipe", "RSSSource(device \"null\") -> Timestamp(clock pcap) -> Discard;\n");
  r = run_sluice("run -q " + cfg);
  CHECK(r.status == 1);
  CHECK(r.out.find("clock pcap needs capture times") != std::string::npos);
}

TEST_CASE("run: --duration stops a paced source, the status line comes once a second with --status, not in a log",
          "[run]") {
  std::string dir = scratch("duration");
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(flows 1K, new_flows_per_s 100, duration 60s, rate 2Kpps, queues 2) -> "
                               "Timestamp(clock tsc) -> Ring(capacity 1K) -> Counter -> Discard;\n");
  Run r = run_sluice("run --status " + cfg + " --duration 2500ms --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string json = read_file(dir + "/stats.json");
  uint64_t n = total(json, "received");
  CHECK(n > 3000);  // 2.5 s at 2 Kpps: about 5000
  CHECK(n < 7000);
  CHECK(json.find("\"balanced\": true") != std::string::npos);
  std::smatch m;
  std::regex status("\\[ +[0-9.]+s\\] lane 0: [0-9.]+ [KM]?pps [0-9.]+ [KM]?bit/s drops 0 \\| lane 1:");
  size_t lines = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), status), end; it != end; ++it) ++lines;
  CHECK(lines >= 2);
  CHECK(run_sluice("run " + cfg + " --duration 5parsecs").status == 2);
  // stderr is a file here, as under a service manager: no status line
  // (a journal would get one a second), the summary all the same.
  r = run_sluice("run " + cfg + " --duration 1500ms");
  CHECK(r.status == 0);
  CHECK(r.out.find("every packet accounted for") != std::string::npos);
  CHECK(!std::regex_search(r.out, m, status));
}

// `lossless true` keeps a paced replay a trace (the reload tests need
// traffic that lasts a known time and records they can compare): a small
// ring holds the source back instead of dropping, the records are those of
// the unpaced replay, and the pace still holds.
TEST_CASE("run: a lossless paced TrafficGen gives the records of an unpaced one, at its pace", "[run]") {
  std::string dir = scratch("lossless");
  auto probe = [&](const std::string &pace, const std::string &log) {
    return write_file(dir + "/" + log + ".pipe",
                      "log :: shared FlowLog(\"" + dir + "/" + log + ".csv\");\n"
                      "TrafficGen(flows 2K, new_flows_per_s 4K, duration 3s, sizes [64B, 1500B], seed 3, queues 2" +
                          pace + ") -> Timestamp(clock pcap) -> Ring(capacity 64) -> ft :: FlowTable(capacity 8K) "
                          "-> GCSlicer(table ft) -> log;\n");
  };
  Run unpaced = run_sluice("run -q " + probe("", "unpaced") + " --stats-json " + dir + "/unpaced.json");
  INFO(unpaced.out);
  REQUIRE(unpaced.status == 0);
  uint64_t n = total(read_file(dir + "/unpaced.json"), "received");
  REQUIRE(n > 10000);
  uint64_t pps = n * 2 / 3;  // 1.5 s of replay
  auto started = std::chrono::steady_clock::now();
  Run paced = run_sluice("run -q " + probe(", rate " + std::to_string(pps) + "pps, lossless true", "paced") +
                         " --stats-json " + dir + "/paced.json");
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO(paced.out);
  REQUIRE(paced.status == 0);
  std::string json = read_file(dir + "/paced.json");
  CHECK(total(json, "received") == n);
  CHECK(total(json, "dropped") == 0);
  CHECK(took >= 1.4);  // the pace holds: no faster than the rate (a lower bound only)
  auto lines = [&](const std::string &name) {
    std::vector<std::string> v;
    std::istringstream in(read_file(dir + "/" + name + ".csv"));
    for (std::string l; std::getline(in, l);) v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  };
  auto want = lines("unpaced"), got = lines("paced");
  CHECK(want.size() > 1000);
  CHECK(got == want);
}

TEST_CASE("run: Ctrl-C stops the sources, drains the rings and prints the summary", "[run]") {
  std::string dir = scratch("sigint");
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(duration 60s, rate 5Kpps) -> Timestamp(clock tsc) -> Ring(capacity 1K) -> "
                               "c :: Counter -> Discard;\n");
  std::string out = dir + "/out.txt";
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string cmd = std::string(SLUICE_BINARY) + " run -q " + cfg + " --stats-json " + dir + "/stats.json --control " +
                      dir + "/ctl.sock > " + out + " 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), nullptr);
    _exit(127);
  }
  // Ctrl-C once packets flow (the control socket answers with a count),
  // not after a fixed time: a loaded machine may still be starting.
  for (int i = 0; i < 400; ++i) {
    Run r = run_sluice("ctl --socket " + dir + "/ctl.sock stats --json");
    std::smatch m;
    if (r.status == 0 && std::regex_search(r.out, m, std::regex("\"received\": ([0-9]+)")) && std::stoull(m[1]) > 100)
      break;
    usleep(50 * 1000);
  }
  kill(pid, SIGINT);
  int st = 0;
  waitpid(pid, &st, 0);
  INFO(read_file(out));
  REQUIRE(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  std::string json = read_file(dir + "/stats.json");
  CHECK(total(json, "received") > 100);
  CHECK(stat(json, "c#0", "in") == total(json, "received"));
  CHECK(read_file(out).find("every packet accounted for") != std::string::npos);
}


// Sends a generated trace from one end of a veth pair and captures it with
// `device` on the other; returns false (after WARN) when the device cannot
// be opened here.
static bool capture_through_kernel(const std::string &kind, int veth_queues) {
  VethNamespace ns(veth_queues);
  if (!ns.ok) {
    WARN(kind << " test skipped: " << ns.why);
    return false;
  }
  std::string dir = scratch(kind);
  std::string trace = dir + "/small.pcap";
  std::string make = write_file(dir + "/make.pipe", "TrafficGen(flows 100, new_flows_per_s 100, duration 2s, seed 3, "
                                                    "ipv6 0.3) -> PcapSink(\"" + trace + "\");\n");
  REQUIRE(run_sluice("run -q " + make).status == 0);
  std::vector<Packet> sent = read_pcap(trace);
  REQUIRE(sent.size() > 300);

  std::string cfg = write_file(dir + "/probe.pipe", "src :: RSSSource(device \"" + kind + ":vb\", queues 2);\n"
                                                    "src -> Timestamp(clock tsc) -> Ring(capacity 4K) -> PcapSink(\"" +
                                                        dir + "/lane-$queue.pcap\");\n");
  std::string out = dir + "/out.txt";
  std::string probe = "ip netns exec " + ns.name + " " + SLUICE_BINARY + " run -q " + cfg +
                      " --duration 4s --stats-json " + dir + "/stats.json --control " + dir + "/ctl.sock > " + out +
                      " 2>&1 &";
  REQUIRE(system(probe.c_str()) == 0);
  // The control socket answers once the device is open and the loops run
  // (a fixed wait was too short on a loaded machine: packets went unseen).
  for (int i = 0; i < 200 && run_sluice("ctl --socket " + dir + "/ctl.sock help").status != 0; ++i) {
    if (read_file(out).find("cannot open device") != std::string::npos) break;
    usleep(100 * 1000);
  }
  std::string early = read_file(out);
  if (kind == "af_xdp" && early.find("cannot open device") != std::string::npos) {
    WARN("af_xdp test skipped: " << early);
    return false;
  }
  std::string send = "ip netns exec " + ns.name + " " SLUICE_AFP_SEND " va " + trace + " 5000 > /dev/null";
  REQUIRE(system(send.c_str()) == 0);
  for (int i = 0; i < 100 && read_file(out).find("accounting:") == std::string::npos; ++i) usleep(100 * 1000);
  std::string text = read_file(out);
  INFO(text);
  REQUIRE(text.find("every packet accounted for") != std::string::npos);

  // Every packet sent arrived exactly once; each 5-tuple in one lane only.
  std::map<std::vector<uint8_t>, int> arrived;
  std::map<std::string, std::set<int>> lanes_of_flow;
  size_t per_lane[2] = {0, 0};
  for (int l = 0; l < 2; ++l)
    for (const Packet &p : read_pcap(dir + "/lane-" + std::to_string(l) + ".pcap")) {
      ++arrived[p.data];
      ++per_lane[l];
      PacketMeta m;
      parse_packet(p.data.data(), uint32_t(p.data.size()), LinkType::Ethernet, m);
      if (!m.is_ip()) continue;
      // the key of both directions alike: the smaller endpoint first
      std::string a(reinterpret_cast<char *>(m.src_addr), 16), b(reinterpret_cast<char *>(m.dst_addr), 16);
      a += std::to_string(m.src_port), b += std::to_string(m.dst_port);
      lanes_of_flow[std::min(a, b) + "|" + std::max(a, b) + "|" + std::to_string(m.ip_proto)].insert(l);
    }
  size_t missing = 0;
  for (const Packet &p : sent) missing += arrived[p.data]-- <= 0;
  CHECK(missing == 0);
  CHECK(per_lane[0] > 0);
  CHECK(per_lane[1] > 0);
  size_t split = 0;
  for (auto &[k, l] : lanes_of_flow) split += l.size() > 1;
  CHECK(split == 0);
  CHECK(lanes_of_flow.size() >= 100);
  return true;
}

TEST_CASE("run: af_packet with two queues: the kernel spreads flows, both directions in one lane", "[run][af_packet]") {
  capture_through_kernel("af_packet", 2);
}

TEST_CASE("run: af_xdp on one queue, spread over two lanes by software RSS", "[run][af_xdp]") {
  // veth gives XDP one queue: the lanes share it
  capture_through_kernel("af_xdp", 1);
}

TEST_CASE("run: Timestamp(clock tsc) stamps wall-clock time, non-decreasing, per batch interpolated", "[run]") {
  std::string dir = scratch("tsc");
  std::string cfg = write_file(dir + "/t.pipe", std::string(kTraceGen) + " -> Timestamp(clock tsc) -> PcapSink(\"" +
                                                    dir + "/tsc.pcap\");\n");
  timespec t0, t1;
  clock_gettime(CLOCK_REALTIME, &t0);
  Run r = run_sluice("run -q " + cfg);
  clock_gettime(CLOCK_REALTIME, &t1);
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::vector<Packet> pkts = read_pcap(dir + "/tsc.pcap");
  REQUIRE(pkts.size() == generate_traffic(trace_config()).packets);
  uint64_t lo = uint64_t(t0.tv_sec) * 1000000000ull + uint64_t(t0.tv_nsec);
  uint64_t hi = uint64_t(t1.tv_sec) * 1000000000ull + uint64_t(t1.tv_nsec);
  std::set<uint64_t> distinct;
  for (size_t i = 0; i < pkts.size(); ++i) {
    INFO("packet " << i);
    REQUIRE(pkts[i].ns >= lo);
    REQUIRE(pkts[i].ns <= hi);
    if (i) REQUIRE(pkts[i].ns >= pkts[i - 1].ns);
    distinct.insert(pkts[i].ns);
  }
  CHECK(distinct.size() > pkts.size() / 2);  // interpolated within batches, not one time per batch
}

TEST_CASE("run: the null device receives nothing until --duration ends the run", "[run]") {
  std::string dir = scratch("null");
  std::string cfg = write_file(dir + "/n.pipe", "RSSSource(device null, queues 2) -> Timestamp(clock tsc) -> "
                                                "Ring(capacity 1K) -> Discard;\n");
  Run r = run_sluice("run -q " + cfg + " --duration 300ms --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::string json = read_file(dir + "/stats.json");
  CHECK(total(json, "received") == 0);
  CHECK(r.out.find("lane 1: received 0 packets") != std::string::npos);
}

TEST_CASE("run: host profile errors point at file:line:column", "[run]") {
  std::string dir = scratch("profile");
  std::string cfg = write_file(dir + "/n.pipe", "RSSSource(device null) -> Discard;\n");
  std::string bad = write_file(dir + "/bad.yaml", "name: x\nmemory:\n  hugepages: maybe\n");
  Run r = run_sluice("run -q " + cfg + " --duration 100ms --host " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":3:14: error: hugepages: expected true or false, not 'maybe'") != std::string::npos);
  bad = write_file(dir + "/bad2.yaml", "name: x\neal:\n  argz: []\n");
  r = run_sluice("run -q " + cfg + " --duration 100ms --host " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":3:3: error: unknown key 'argz' in eal (known: args)") != std::string::npos);
  bad = write_file(dir + "/bad3.yaml", "name: [x\n");
  r = run_sluice("run -q " + cfg + " --duration 100ms --host " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":2:1: error: ") != std::string::npos);
  r = run_sluice("run -q " + cfg + " --duration 100ms --host configs/laptop.yaml");
  CHECK(r.status == 0);
}

TEST_CASE("run: on an idle live lane time still advances and flows expire", "[run][af_packet][flows]") {
  VethNamespace ns(1);
  if (!ns.ok) {
    WARN("skipped: " << ns.why);
    return;
  }
  std::string dir = scratch("idle_lane");
  std::string trace = dir + "/few.pcap";
  std::string make = write_file(dir + "/make.pipe", "TrafficGen(flows 20, new_flows_per_s 100, duration 100ms, seed 4, udp 1)"
                                                    " -> PcapSink(\"" + trace + "\");\n");
  REQUIRE(run_sluice("run -q " + make).status == 0);
  // A live probe: a few packets, then nothing for seconds. With idle 300ms
  // the flows must leave as idle timeouts while the lane is idle, long
  // before --duration ends the run (which would give "forced end").
  std::string cfg = write_file(dir + "/probe.pipe",
                               "RSSSource(device \"af_packet:vb\") -> Timestamp(clock tsc)"
                               " -> ft :: FlowTable(capacity 4K, idle 300ms, direction bi)"
                               " -> GCSlicer(table ft, period 100ms, slices 10) -> FlowLog(\"" + dir + "/flows.csv\");\n");
  std::string out = dir + "/out.txt";
  REQUIRE(system(("ip netns exec " + ns.name + " " + SLUICE_BINARY + " run -q " + cfg + " --duration 4s > " + out +
                  " 2>&1 &").c_str()) == 0);
  usleep(1500 * 1000);
  REQUIRE(system(("ip netns exec " + ns.name + " " SLUICE_AFP_SEND " va " + trace + " 2000 > /dev/null").c_str()) == 0);
  for (int i = 0; i < 60 && read_file(out).find("accounting:") == std::string::npos; ++i) usleep(100 * 1000);
  std::string text = read_file(out);
  INFO(text);
  REQUIRE(text.find("every packet accounted for") != std::string::npos);
  std::ifstream f(dir + "/flows.csv");
  std::string line;
  int idle = 0, forced = 0;
  while (std::getline(f, line)) {
    idle += line.find(",idle timeout,") != std::string::npos;
    forced += line.find(",forced end,") != std::string::npos;
  }
  CHECK(idle >= 20);  // every UDP flow (a few lines more: both directions)
  CHECK(forced == 0);
}

// A PcapSink whose writes fail (a full device): its packets are dropped as
// "write error" rather than counted written, the error is printed once, and
// the run exits with the data-loss status (3).
TEST_CASE("run: PcapSink to a full device drops its packets as write error, exit status 3", "[run][write-errors]") {
  std::string dir = scratch("pcap_full");
  std::string cfg = write_file(dir + "/p.pipe", std::string(kTraceGen) + " -> sink :: PcapSink(\"/dev/full\");\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/s.json");
  INFO(r.out);
  CHECK(r.status == 3);
  std::string json = read_file(dir + "/s.json");
  uint64_t received = total(json, "received");
  CHECK(received > 1000);
  CHECK(stat(json, "sink#0", "absorbed") == 0);
  CHECK(stat(json, "sink#0", "write error") == received);
  CHECK(stat(json, "sink#0", "write_errors") >= 1);
  CHECK(json.find("\"data_lost\": true") != std::string::npos);
  CHECK(json.find("\"packets_unwritten\": " + std::to_string(received)) != std::string::npos);
  CHECK(r.out.find("dropped, write error: " + std::to_string(received) + "\n") != std::string::npos);
  CHECK(r.out.find("wrote 0 packets to /dev/full; ") != std::string::npos);
  CHECK(r.out.find("every packet accounted for") != std::string::npos);
  std::string message = "sluice: error: 'sink#0': cannot write '/dev/full': No space left on device";
  size_t first = r.out.find(message);
  CHECK(first != std::string::npos);
  CHECK(r.out.find(message, first + 1) == std::string::npos);
}

// A file that stops growing in the middle of a write (the file size limit,
// `ulimit -f`; a full disk does the same): the packet it cut comes off
// again, so the file holds whole packets, exactly those the sink counts as
// written (absorbed); the others are dropped as "write error".
TEST_CASE("run: PcapSink cut off by a full file keeps whole packets, the ones it counts", "[run][write-errors]") {
  std::string dir = scratch("pcap_fsize");
  std::string trace = dir + "/out.pcap";
  std::string cfg = write_file(dir + "/p.pipe", std::string(kTraceGen) + " -> sink :: PcapSink(\"" + trace + "\");\n");
  // SIGXFSZ ignored: a write past the limit then fails with EFBIG
  Run r = run_cmd("cd " SLUICE_SOURCE_DIR " && bash -c \"trap '' XFSZ; ulimit -f 256; exec " SLUICE_BINARY " run -q " +
                  cfg + " --stats-json " + dir + "/s.json\"");
  INFO(r.out);
  CHECK(r.status == 3);
  std::string json = read_file(dir + "/s.json");
  uint64_t absorbed = stat(json, "sink#0", "absorbed"), lost = stat(json, "sink#0", "write error");
  CHECK(absorbed + lost == total(json, "received"));
  CHECK(absorbed > 100);
  CHECK(lost > 1000);
  std::vector<Packet> pkts = read_pcap(trace);
  CHECK(pkts.size() == absorbed);
  // whole records only: the file ends where its last packet ends
  uint64_t bytes = 24;
  for (const Packet &p : pkts) bytes += 16 + p.data.size();
  CHECK(fs::file_size(trace) == bytes);
  CHECK(bytes <= 256 * 1024);
}
