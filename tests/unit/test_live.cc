// The live path as the README documents it: the default probe
// (configs/flowprobe.pipe) on a port, `-D DEVICE=af_packet:IFACE`, with
// nothing else changed in the file. Traffic goes through the kernel over a
// veth pair in a network namespace the test creates (root only; skipped with
// the reason otherwise), dumpcap captures it on the probe's side, and the
// flows the probe writes and exports must be what tshark dissects there.
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "collector_fixture.hh"
#include "flow_csv_fixture.hh"
#include "netns_fixture.hh"
#include "run_fixture.hh"

using namespace sluice::test;

namespace {
uint64_t wall_ms() {
  timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return uint64_t(t.tv_sec) * 1000 + uint64_t(t.tv_nsec) / 1000000;
}
}  // namespace

TEST_CASE("live: the default probe on a port, as documented, meters the flows tshark sees on the wire",
          "[live][af_packet][flows]") {
  if (!have_tool("dumpcap") || !have_tool("tshark")) {
    WARN("skipped: tshark and dumpcap are not installed (apt-get install tshark)");
    return;
  }
  VethNamespace ns(2);
  if (!ns.ok) {
    WARN("skipped: " << ns.why);
    return;
  }
  std::string dir = scratch("live", "default_probe");
  std::string trace = dir + "/sent.pcap";
  std::string make = write_file(dir + "/make.pipe", "TrafficGen(flows 150, new_flows_per_s 150, duration 2s, seed 9, "
                                                    "ipv6 0.3, udp 0.4) -> PcapSink(\"" + trace + "\");\n");
  REQUIRE(run_sluice("run -q " + make).status == 0);

  int port = test_port(41);
  bool nfdump = have_tool("nfcapd") && have_tool("nfdump");
  Collector collector = nfdump ? nfcapd_at(dir + "/nfcapd", port, ns.name) : Collector({"true"});
  std::string wire = dir + "/wire.pcapng";
  Collector capture({"ip", "netns", "exec", ns.name, "dumpcap", "-q", "-i", "vb", "-w", wire});
  struct stat st;
  for (int i = 0; i < 100 && (stat(wire.c_str(), &st) != 0 || st.st_size == 0); ++i) usleep(100 * 1000);
  REQUIRE(stat(wire.c_str(), &st) == 0);

  // The README's command, with the port and where the records go.
  std::string out = dir + "/out.txt", sock = dir + "/ctl.sock";
  uint64_t t0 = wall_ms();
  std::string probe = ns.exec() + SLUICE_BINARY + " run " SLUICE_SOURCE_DIR "/configs/flowprobe.pipe" +
                      " -D DEVICE=af_packet:vb -D QUEUES=2 -D COLLECTOR=127.0.0.1:" + std::to_string(port) +
                      " -D FLOWS=" + dir + "/flows.csv --duration 5s --control " + sock + " > " + out + " 2>&1 &";
  REQUIRE(system(probe.c_str()) == 0);
  for (int i = 0; i < 200 && run_sluice("ctl --socket " + sock + " help").status != 0; ++i) {
    if (read_file(out).find("error") != std::string::npos) break;
    usleep(100 * 1000);
  }
  REQUIRE(system((ns.exec() + SLUICE_AFP_SEND " va " + trace + " 5000 > /dev/null").c_str()) == 0);
  for (int i = 0; i < 150 && read_file(out).find("records:") == std::string::npos; ++i) usleep(100 * 1000);
  uint64_t t1 = wall_ms();
  capture.stop();
  std::string text = read_file(out);
  INFO(text);
  REQUIRE(text.find("every packet accounted for") != std::string::npos);
  CHECK(text.find("data lost") == std::string::npos);

  // Per flow (both directions, one key), the packets tshark dissects on the
  // probe's side equal those the probe metered; none missing, none extra.
  std::vector<Line> lines = read_csv(dir + "/flows.csv");
  uint64_t ours_total = 0, theirs_total = 0;
  auto ours = flowlog_packets(lines, &ours_total);
  auto theirs = tshark_packets(wire, &theirs_total);
  CHECK(theirs.size() >= 150);
  CHECK(ours_total == theirs_total);
  CHECK(ours == theirs);

  // Dated on the wall clock (the default Timestamp uses the TSC on a live
  // port), not 1970: every record within the run.
  size_t undated = 0;
  for (const Line &l : lines) undated += l.start_ms < t0 || l.end_ms > t1 || l.start_ms > l.end_ms;
  CHECK(undated == 0);

  if (nfdump) {  // and the collector got every record the tables made (biflows: a line per direction)
    collector.stop();
    std::smatch made;
    REQUIRE(std::regex_search(text, made, std::regex("records: made ([0-9]+) ")));
    CHECK(std::stoull(made[1]) >= theirs.size());
    auto sum = nfdump_summary(dir + "/nfcapd");
    CHECK(sum["Flows"] == std::stoull(made[1]));
    CHECK(sum["Sequence failures"] == 0);
  } else {
    WARN("nfdump is not installed: the IPFIX half of the check is skipped");
  }
}
