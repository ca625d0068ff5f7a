// The JIT against the interpreter, end to end: every configuration of
// configs/ and examples/, run with `--jit` and with `--no-jit` on the same
// input, in 1 and 2 lanes, must write the same records (FlowLog lines, pcap
// files, JSON lines on standard output) and end with the same counters in
// every element of --stats-json, with one exception explained at
// compare_counters(). The inputs: a trace generated here (TrafficGen ->
// PcapSink), ../shared/traces/ndpi_merged.pcap when it is present (the test
// says so and skips when it is not), and, for the configurations that make
// their own traffic with TrafficGen, that traffic.
//
// Each run gets a directory of its own as its working directory: the
// relative output paths the configurations name (flows-$queue.csv,
// sampled.pcap, ...) land there, and the two directories are compared file
// by file. A configuration whose input or lane count is not a `define` is
// run from an edited copy (edit() insists each replaced text is there once,
// so a changed configuration fails here rather than being half tested).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "run_fixture.hh"

using namespace sluice::test;
namespace fs = std::filesystem;

namespace {

const std::string kSource = SLUICE_SOURCE_DIR;
const fs::path kNdpi = fs::path(SLUICE_SOURCE_DIR) / "../shared/traces/ndpi_merged.pcap";
constexpr int kManyLanes = 2;  // the N of "1 and N lanes": as many as a 2-core machine has cpus

// Every configuration this file runs, from the repository root. The test
// "every configuration is covered" fails when configs/ or examples/ gains a
// .pipe not in this list. examples/lib/meters.pipe holds element classes
// only; it runs as part of examples/tee_meter.pipe.
const std::vector<std::string> kConfigs = {
    "configs/flowprobe.pipe",       "examples/filter_count.pipe", "examples/make_trace.pipe",
    "examples/packet_stats.pipe",   "examples/sampled_capture.pipe", "examples/tee_meter.pipe",
    "examples/two_exporters.pipe",
};

std::string quote(const std::string &s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A configuration's text with `from` replaced by `to`; `from` must occur
// exactly once.
std::string edit(const std::string &text, const std::string &from, const std::string &to) {
  size_t at = text.find(from);
  INFO("the configuration no longer contains `" << from << "` exactly once: update this test");
  REQUIRE(at != std::string::npos);
  REQUIRE(text.find(from, at + 1) == std::string::npos);
  return text.substr(0, at) + to + text.substr(at + from.size());
}

// A UDP socket on 127.0.0.1 that nobody reads: the exporters' datagrams
// are all sent (the kernel drops what overflows its buffer, silently), so
// their counters do not depend on timing. With no socket bound, which
// sends fail as "collector unreachable" depends on when the ICMP errors
// come back.
struct UdpSink {
  int fd = -1, port = 0;
  UdpSink() { fd = bind_loopback(SOCK_DGRAM, &port); }
  ~UdpSink() { close(fd); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

// A TCP collector that accepts every connection and reads (and forgets)
// everything sent on it, for IPFIX over TCP.
struct TcpDrain {
  int listen_fd = -1, port = 0;
  std::atomic<bool> stop{false};
  std::thread thread;
  TcpDrain() {
    listen_fd = bind_loopback(SOCK_STREAM, &port);
    REQUIRE(listen(listen_fd, 16) == 0);
    thread = std::thread([this] {
      std::vector<pollfd> fds{{listen_fd, POLLIN, 0}};
      std::vector<char> buf(1 << 16);
      while (!stop) {
        if (poll(fds.data(), fds.size(), 50) <= 0) continue;
        if (fds[0].revents & POLLIN)
          if (int c = accept(listen_fd, nullptr, nullptr); c >= 0) fds.push_back({c, POLLIN, 0});
        for (size_t i = 1; i < fds.size();) {
          if (fds[i].revents && read(fds[i].fd, buf.data(), buf.size()) <= 0) {
            close(fds[i].fd);
            fds.erase(fds.begin() + long(i));
            continue;
          }
          ++i;
        }
      }
      for (size_t i = 1; i < fds.size(); ++i) close(fds[i].fd);
    });
  }
  ~TcpDrain() {
    stop = true;
    thread.join();
    close(listen_fd);
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(port); }
};

// The generated trace: IPv4 and IPv6, TCP and UDP, 40 s of trace time so
// that flows end by idle timeout (15 s in flowprobe.pipe, 30 s in
// two_exporters.pipe) as well as by FIN and at the end of input; about
// 30K packets.
std::string make_trace(const std::string &dir) {
  std::string out = dir + "/gen.pcap";
  std::string cfg = write_file(dir + "/make.pipe",
                               "TrafficGen(flows 2K, new_flows_per_s 40, duration 40s, seed 3, ipv6 0.3, udp 0.4)"
                               " -> PcapSink(\"" + out + "\");\n");
  Run r = run_sluice("run -q --no-jit " + quote(cfg) + " --control " + quote(dir + "/make.sock"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  return out;
}

// How to run one configuration on one input in one lane count.
struct Setup {
  std::string config;                // the .pipe file to run
  std::vector<std::string> defines;  // NAME=VALUE
  bool tsc_stamps = false;           // its pcap timestamps come from the TSC: compared without them
  bool writes_records = true;        // false: counters only (no FlowLog, no PcapSink)
};

struct Collectors {
  UdpSink udp;
  TcpDrain tcp;
};

// `trace` is empty for the configurations that make their own traffic.
// `dir` is where an edited copy goes (not a run's working directory).
Setup setup_for(const std::string &config, const std::string &trace, int lanes, const std::string &dir,
                const Collectors &c) {
  const std::string original = kSource + "/" + config, n = std::to_string(lanes);
  std::string text = read_file(original);
  auto copy = [&](const std::string &t) { return write_file(dir + "/" + fs::path(config).filename().string(), t); };
  if (config == "configs/flowprobe.pipe")
    return {original,
            {"DEVICE=pcap:" + trace, "QUEUES=" + n, "FLOWS=flows.csv", "COLLECTOR=" + c.udp.address()}};
  if (config == "examples/packet_stats.pipe") return {original, {"DEVICE=pcap:" + trace, "QUEUES=" + n}, false, false};
  if (config == "examples/two_exporters.pipe") {
    // its device, lane count and NetFlow v9 collector are written in the file
    text = edit(text, "\"pcap:examples/traces/demo.pcap\", queues 2", "\"pcap:" + trace + "\", queues " + n);
    text = edit(text, "NetFlowV9Exporter(127.0.0.1:2055)", "NetFlowV9Exporter(" + c.udp.address() + ")");
    return {copy(text), {"COLLECTOR=" + c.tcp.address()}};
  }
  if (config == "examples/sampled_capture.pipe") {
    // A trace instead of the null device: an endless live source, whose
    // packet count (and ring drops) depends on time. It keeps Timestamp(tsc).
    text = edit(text, "device null, queues 1", "device \"pcap:" + trace + "\", queues " + n);
    if (lanes > 1) text = edit(text, "\"sampled.pcap\"", "\"sampled-$queue.pcap\"");
    return {copy(text), {}, true};
  }
  if (config == "examples/filter_count.pipe") {
    if (lanes != 2) text = edit(text, "queues 2)", "queues " + n + ")");
    return {copy(text), {}, false, false};
  }
  if (config == "examples/make_trace.pipe") {
    if (lanes == 1) return {original, {"OUT=out.pcap"}};
    text = edit(text, "ipv6 0.2)", "ipv6 0.2, queues " + n + ")");
    text = edit(text, "PcapSink($OUT)", "PcapSink(\"out-$queue.pcap\")");
    return {copy(text), {}};
  }
  if (config == "examples/tee_meter.pipe") {
    if (lanes == 1) return {original, {}};
    text = edit(text, "vlan 100);", "vlan 100, queues " + n + ");");
    text = edit(text, "require \"lib/meters.pipe\"", "require \"" + kSource + "/examples/lib/meters.pipe\"");
    return {copy(text), {}};
  }
  FAIL("no setup for " << config);
  return {};
}

// One element of --stats-json: its class, and every number of its line
// ("lane", "in", ..., "records_out", and "drops/REASON").
struct Element {
  std::string cls;
  std::map<std::string, int64_t> n;
};

struct Summary {
  std::map<std::string, int64_t> totals;  // received, copies, absorbed, dropped
  std::string balanced, lanes;
  std::map<std::string, Element> elements;
  std::vector<std::pair<std::string, double>> segments;  // program, compile_ms
};

std::map<std::string, int64_t> numbers(const std::string &text, const std::string &prefix = "") {
  std::map<std::string, int64_t> out;
  static const std::regex pair("\"([^\"]+)\": (-?[0-9]+)[,}\\]]");
  for (std::sregex_iterator i(text.begin(), text.end(), pair), e; i != e; ++i)
    out[prefix + (*i)[1].str()] = std::stoll((*i)[2].str());
  return out;
}

Summary parse_summary(const std::string &json) {
  Summary s;
  std::stringstream ss(json);
  std::string line;
  std::smatch m;
  REQUIRE(std::getline(ss, line));
  s.totals = numbers(line);
  s.totals.erase("elapsed_s");
  if (std::regex_search(line, m, std::regex("\"balanced\": (\\w+)"))) s.balanced = m[1];
  while (std::getline(ss, line)) {
    if (line.rfind(" \"lanes\": ", 0) == 0) s.lanes = line;
    if (std::regex_search(line, m, std::regex("^  \\{\"name\": \"([^\"]+)\", \"class\": \"([^\"]+)\""))) {
      std::string name = m[1], cls = m[2];
      size_t drops = line.find("\"drops\": {");
      REQUIRE(drops != std::string::npos);
      Element e{cls, numbers(line.substr(0, drops))};
      for (auto &[k, v] : numbers(line.substr(drops + 10), "drops/")) e.n[k] = v;
      REQUIRE(s.elements.count(name) == 0);
      s.elements[name] = e;
    }
    if (line.rfind("  {\"segment\": ", 0) == 0) {
      std::smatch p, c;
      REQUIRE(std::regex_search(line, p, std::regex("\"program\": \"(\\w+)\"")));
      REQUIRE(std::regex_search(line, c, std::regex("\"compile_ms\": (-?[0-9.e+]+)")));
      s.segments.emplace_back(p[1], std::stod(c[1]));
    }
  }
  REQUIRE(!s.elements.empty());
  REQUIRE(!s.segments.empty());
  return s;
}

// What one run left: its summary and its records.
struct Outcome {
  Summary summary;
  std::map<std::string, std::string> files;  // every file the run wrote in its directory
  std::vector<std::string> stdout_records;   // lines of FlowLog("-", format jsonl)
};

std::string describe(const Setup &s) {
  std::string d = s.config;
  for (const std::string &v : s.defines) d += " -D " + v;
  return d;
}

Outcome run_one(const Setup &setup, const std::string &dir, bool jit) {
  const std::string mode = jit ? "jit" : "interp", cwd = dir + "/" + mode;
  fs::create_directories(cwd);
  std::string cmd = "cd " + quote(cwd) + " && " SLUICE_BINARY " run -q " + (jit ? "--jit-wait " : "--no-jit ") +
                    quote(setup.config);
  for (const std::string &d : setup.defines) cmd += " -D " + quote(d);
  cmd += " --stats-json " + quote(dir + "/" + mode + ".json") + " --control " + quote(dir + "/" + mode + ".sock");
  Run r = run_cmd(cmd);
  INFO(cmd << "\n" << r.out);
  REQUIRE(r.status == 0);
  Outcome o;
  o.summary = parse_summary(read_file(dir + "/" + mode + ".json"));
  for (const auto &f : fs::directory_iterator(cwd)) o.files[f.path().filename().string()] = read_file(f.path().string());
  std::stringstream ss(r.out);
  std::string line;
  while (std::getline(ss, line))
    if (line.rfind("{", 0) == 0) o.stdout_records.push_back(line);
  std::sort(o.stdout_records.begin(), o.stdout_records.end());
  return o;
}

std::vector<std::string> sorted_lines(const std::string &text) {
  std::vector<std::string> v;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) v.push_back(l);
  std::sort(v.begin(), v.end());
  return v;
}

// Where two sorted line lists first differ, for the failure message.
std::string first_difference(const std::vector<std::string> &a, const std::vector<std::string> &b) {
  if (a == b) return "";
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::ostringstream o;
  o << a.size() << " lines with --jit, " << b.size() << " with --no-jit; first difference at sorted line " << i
    << ":\n  jit:    " << (i < a.size() ? a[i] : "(none)") << "\n  interp: " << (i < b.size() ? b[i] : "(none)");
  return o.str();
}

// A pcap file with every record's timestamp zeroed (the file is written on
// this host: native byte order).
std::string without_timestamps(std::string pcap) {
  REQUIRE(pcap.size() >= 24);
  size_t at = 24;
  while (at + 16 <= pcap.size()) {
    uint32_t caplen;
    memcpy(&caplen, pcap.data() + at + 8, 4);
    std::fill(pcap.begin() + long(at), pcap.begin() + long(at) + 8, '\0');
    at += 16 + caplen;
  }
  REQUIRE(at == pcap.size());
  return pcap;
}

// Records: the same files, FlowLog CSV and JSON lines equal as sorted
// lines (lanes write a shared log in an order that depends on timing),
// pcap files byte for byte (each lane writes its own, in order).
void compare_records(const Setup &setup, const Outcome &jit, const Outcome &interp) {
  std::set<std::string> jit_names, interp_names;
  for (auto &[name, text] : jit.files) jit_names.insert(name);
  for (auto &[name, text] : interp.files) interp_names.insert(name);
  CHECK(jit_names == interp_names);
  for (auto &[name, text] : jit.files) {
    auto other = interp.files.find(name);
    if (other == interp.files.end()) continue;
    INFO("output file " << name);
    CHECK(!text.empty());
    if (name.ends_with(".pcap")) {
      if (setup.tsc_stamps) CHECK((without_timestamps(text) == without_timestamps(other->second)));
      else CHECK((text == other->second));
    } else {
      std::string diff = first_difference(sorted_lines(text), sorted_lines(other->second));
      INFO(diff);
      CHECK(diff.empty());
    }
  }
  std::string diff = first_difference(jit.stdout_records, interp.stdout_records);
  INFO("records on standard output: " << diff);
  CHECK(diff.empty());
}

// Counters: every number of every element equal, but one pair. A flow
// that times out ends in one of two places: in the FlowTable, when the
// flow's next packet finds it expired (FlowTable records_out), or in the
// GCSlicer's expiry scan (its records_out without a records_in). Which one
// comes first depends on where the batch boundaries fall on the way to the
// table (between the Ring and the processing segment, or between the trace
// reader and the lanes' queues where there is no Ring), that is on thread
// timing: two interpreter runs of the same input differ there too
// (flowprobe.pipe on the generated trace: FlowTable records_out 324 in one
// run, 326 in another; two_exporters.pipe on ndpi_merged.pcap: 438 to 478).
// The table's records all go through its GCSlicer, so per lane
// FlowTable.records_out == GCSlicer.records_in in each run, and what
// leaves the GCSlicer (records_out) is the same in both. So is the pair of
// records_made: the table made the first kind, the GCSlicer the second.
std::vector<std::string> compare_counters(const Summary &jit, const Summary &interp) {
  std::vector<std::string> bad;
  auto split_by_timing = [](const std::string &cls, const std::string &counter) {
    return (cls == "FlowTable" && counter == "records_out") || (cls == "GCSlicer" && counter == "records_in") ||
           ((cls == "FlowTable" || cls == "GCSlicer") && counter == "records_made");
  };
  for (auto &[k, v] : jit.totals)
    if (interp.totals.count(k) == 0 || interp.totals.at(k) != v)
      bad.push_back("total " + k + ": jit " + std::to_string(v) + ", interpreter " +
                    (interp.totals.count(k) ? std::to_string(interp.totals.at(k)) : "(absent)"));
  if (jit.balanced != "true" || interp.balanced != "true")
    bad.push_back("balanced: jit " + jit.balanced + ", interpreter " + interp.balanced);
  if (jit.lanes != interp.lanes) bad.push_back("lanes: jit" + jit.lanes + "\n  interpreter" + interp.lanes);
  for (auto &[name, e] : jit.elements) {
    auto o = interp.elements.find(name);
    if (o == interp.elements.end()) {
      bad.push_back("element " + name + " only in the jit run");
      continue;
    }
    std::set<std::string> keys;
    for (auto &[k, v] : e.n) keys.insert(k);
    for (auto &[k, v] : o->second.n) keys.insert(k);
    for (const std::string &k : keys) {
      if (split_by_timing(e.cls, k)) continue;
      auto a = e.n.find(k), b = o->second.n.find(k);
      if (a == e.n.end() || b == o->second.n.end() || a->second != b->second)
        bad.push_back(name + " (" + e.cls + ") " + k + ": jit " +
                      (a == e.n.end() ? "(absent)" : std::to_string(a->second)) + ", interpreter " +
                      (b == o->second.n.end() ? "(absent)" : std::to_string(b->second)));
    }
  }
  for (auto &[name, e] : interp.elements)
    if (jit.elements.count(name) == 0) bad.push_back("element " + name + " only in the interpreter run");
  // The split pair, per lane: what the table ended, its GCSlicer received.
  for (const Summary *s : {&jit, &interp}) {
    std::map<int64_t, std::pair<int64_t, int64_t>> per_lane;  // table records_out, slicer records_in
    std::set<int64_t> slicer_lanes;
    for (auto &[name, e] : s->elements) {
      if (e.cls == "FlowTable") per_lane[e.n.at("lane")].first += e.n.at("records_out");
      if (e.cls == "GCSlicer") {
        per_lane[e.n.at("lane")].second += e.n.at("records_in");
        slicer_lanes.insert(e.n.at("lane"));
      }
    }
    for (auto &[lane, p] : per_lane)
      if (p.first != p.second)
        bad.push_back(std::string(s == &jit ? "jit" : "interpreter") + " run, lane " + std::to_string(lane) +
                      ": FlowTable records_out " + std::to_string(p.first) + " != GCSlicer records_in " +
                      std::to_string(p.second));
    // a table with no GCSlicer in its lane is compared exactly
    if (s == &jit)
      for (auto &[name, e] : jit.elements)
        if (e.cls == "FlowTable" && !slicer_lanes.count(e.n.at("lane")) && interp.elements.count(name) &&
            interp.elements.at(name).n.at("records_out") != e.n.at("records_out"))
          bad.push_back(name + " (FlowTable, no GCSlicer) records_out differs");
  }
  return bad;
}

// One configuration on one input in 1 and kManyLanes lanes, --jit against
// --no-jit. `trace_label` names the input in messages and directories.
void check_equivalence(const std::string &config, const std::string &trace, const std::string &trace_label,
                       const std::string &dir) {
  Collectors collectors;
  for (int lanes : {1, kManyLanes}) {
    std::string sub = dir + "/" + trace_label + "-" + std::to_string(lanes);
    fs::create_directories(sub);
    Setup setup = setup_for(config, trace, lanes, sub, collectors);
    INFO(config << " on " << trace_label << ", " << lanes << " lane" << (lanes == 1 ? "" : "s") << ": "
                << describe(setup) << " (outputs in " << sub << ")");
    Outcome jit = run_one(setup, sub, true), interp = run_one(setup, sub, false);
    // the two runs ran what they say
    for (auto &[program, ms] : jit.summary.segments) {
      CHECK(program == "jit");
      CHECK(ms > 0);
    }
    for (auto &[program, ms] : interp.summary.segments) CHECK(program == "interpreter");
    CHECK(jit.summary.segments.size() == interp.summary.segments.size());
    // the runs did something: packets came in, and every lane exists
    CHECK(jit.summary.totals["received"] > 0);
    int lanes_seen = 0;
    for (auto &[name, e] : jit.summary.elements) lanes_seen = std::max<int>(lanes_seen, int(e.n.at("lane")) + 1);
    CHECK(lanes_seen == lanes);

    if (setup.writes_records) CHECK(jit.files.size() + jit.stdout_records.size() > 0);
    compare_records(setup, jit, interp);
    std::vector<std::string> bad = compare_counters(jit.summary, interp.summary);
    std::string text;
    for (const std::string &b : bad) text += "\n  " + b;
    INFO("counters that differ between --jit and --no-jit:" << text);
    CHECK(bad.empty());
  }
}

// A configuration that reads a trace: on the generated one.
void on_generated_trace(const std::string &config, const std::string &name) {
  std::string dir = scratch("jit_eq", name + "-gen");
  check_equivalence(config, make_trace(dir), "gen", dir);
}

// ... and on ndpi_merged.pcap, when it is there.
void on_ndpi_trace(const std::string &config, const std::string &name) {
  if (!fs::exists(kNdpi)) {
    WARN("skipped: " << kNdpi.string() << " is absent (the shared traces are not beside the project)");
    return;
  }
  std::string dir = scratch("jit_eq", name + "-ndpi");
  check_equivalence(config, fs::canonical(kNdpi).string(), "ndpi", dir);
}

}  // namespace

TEST_CASE("jit: every configuration in configs and examples has an equivalence test", "[jit]") {
  std::set<std::string> found;
  for (const char *d : {"configs", "examples"})
    for (const auto &f : fs::directory_iterator(kSource + "/" + d))
      if (f.path().extension() == ".pipe") found.insert(std::string(d) + "/" + f.path().filename().string());
  CHECK(found == std::set<std::string>(kConfigs.begin(), kConfigs.end()));
}

TEST_CASE("jit: configs/flowprobe.pipe, same records and counters as the interpreter, generated trace", "[jit]") {
  on_generated_trace("configs/flowprobe.pipe", "flowprobe");
}
TEST_CASE("jit: configs/flowprobe.pipe, same records and counters as the interpreter, ndpi_merged.pcap", "[jit]") {
  on_ndpi_trace("configs/flowprobe.pipe", "flowprobe");
}
TEST_CASE("jit: examples/packet_stats.pipe, same counters as the interpreter, generated trace", "[jit]") {
  on_generated_trace("examples/packet_stats.pipe", "packet_stats");
}
TEST_CASE("jit: examples/packet_stats.pipe, same counters as the interpreter, ndpi_merged.pcap", "[jit]") {
  on_ndpi_trace("examples/packet_stats.pipe", "packet_stats");
}
TEST_CASE("jit: examples/two_exporters.pipe, same records and counters as the interpreter, generated trace", "[jit]") {
  on_generated_trace("examples/two_exporters.pipe", "two_exporters");
}
TEST_CASE("jit: examples/two_exporters.pipe, same records and counters as the interpreter, ndpi_merged.pcap", "[jit]") {
  on_ndpi_trace("examples/two_exporters.pipe", "two_exporters");
}
TEST_CASE("jit: examples/sampled_capture.pipe, same capture and counters as the interpreter, generated trace", "[jit]") {
  on_generated_trace("examples/sampled_capture.pipe", "sampled_capture");
}
TEST_CASE("jit: examples/sampled_capture.pipe, same capture and counters as the interpreter, ndpi_merged.pcap",
          "[jit]") {
  on_ndpi_trace("examples/sampled_capture.pipe", "sampled_capture");
}
TEST_CASE("jit: examples/filter_count.pipe, same counters as the interpreter, its own traffic", "[jit]") {
  std::string dir = scratch("jit_eq", "filter_count");
  check_equivalence("examples/filter_count.pipe", "", "own", dir);
}
TEST_CASE("jit: examples/make_trace.pipe, the same trace as the interpreter writes", "[jit]") {
  std::string dir = scratch("jit_eq", "make_trace");
  check_equivalence("examples/make_trace.pipe", "", "own", dir);
}
TEST_CASE("jit: examples/tee_meter.pipe, same records and counters as the interpreter, its own traffic", "[jit]") {
  std::string dir = scratch("jit_eq", "tee_meter");
  check_equivalence("examples/tee_meter.pipe", "", "own", dir);
}

TEST_CASE("jit: a --jit run says each segment's loop was fused and how long it took to compile", "[jit]") {
  std::string dir = scratch("jit_eq", "summary");
  for (bool jit : {true, false}) {
    Run r = run_sluice(std::string("run -q ") + (jit ? "--jit-wait" : "--no-jit") + " examples/filter_count.pipe" +
                       " --stats-json " + quote(dir + "/stats.json") + " --control " + quote(dir + "/ctl.sock"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    size_t segments = parse_summary(read_file(dir + "/stats.json")).segments.size();
    CHECK(segments == 2);  // one acquisition segment per lane
    // the placement lines of the text summary, one per segment
    std::regex placed("\n  lane [0-9]+ segment [0-9]+ \\([a-z]+\\): [^\n]*");
    std::regex fused("loop fused by the JIT \\([^)]*\\), compiled in [0-9]+\\.[0-9] ms$");
    size_t lines = 0;
    for (std::sregex_iterator i(r.out.begin(), r.out.end(), placed), e; i != e; ++i, ++lines) {
      std::string l = i->str();
      INFO(l);
      if (jit) CHECK(std::regex_search(l, fused));
      else CHECK((l.ends_with("; interpreter") && l.find("JIT") == std::string::npos));
    }
    CHECK(lines == segments);
  }
}

namespace {
// The packets a --no-jit run of `pipe` received (its summary as JSON at
// `json`): to pace a replay of the same traffic to a chosen length.
uint64_t received_without_jit(const std::string &pipe, const std::string &json) {
  Run r = run_sluice("run -q --no-jit " + quote(pipe) + " --stats-json " + quote(json));
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::smatch m;
  std::string text = read_file(json);
  REQUIRE(std::regex_search(text, m, std::regex("\"received\": ([0-9]+)")));
  return std::stoull(m[1].str());
}
}  // namespace

// `sluice run` (--jit, the default) does not wait for the compiler: the
// segments start on the interpreter and each switches to its fused loop
// between two batches when it is ready. The switch must not change a
// record: a paced run long enough for the loops to be compiled gives the
// records of a --no-jit run, and its summary says when each loop took over.
// The table is far from full: at 7K flows in 8K slots, which flow a full
// bucket evicts depends on the table's random hash key and on where the
// batches (paced or not) end, and a CI run once had one flow evicted
// ("lack of resources") in one run and not in the other.
TEST_CASE("jit: by default the segments start on the interpreter and switch to their fused loops while running, "
          "with the records of the interpreter", "[jit]") {
  std::string dir = scratch("jit_eq", "switch");
  auto probe = [&](const std::string &name, const std::string &pace) {
    return write_file(dir + "/" + name + ".pipe",
                      "TrafficGen(flows 2K, new_flows_per_s 4K, duration 3s, sizes [64B, 1500B], seed 3" + pace +
                          ") -> Timestamp(clock pcap) -> Ring(capacity 64) -> Filter(\"ip or ip6\")"
                          " -> ft :: FlowTable(capacity 64K) -> GCSlicer(table ft) -> FlowLog(\"" + dir + "/" + name +
                          ".csv\");\n");
  };
  uint64_t n = received_without_jit(probe("interp", ""), dir + "/interp.json");
  REQUIRE(n > 10000);
  // 8 s of replay: time for both loops to compile on a loaded machine, at
  // nice 0: at 19 the other tests CI runs beside this one can leave them no cpu.
  Run jit = run_sluice("run -q --jit-nice 0 " + probe("jit", ", rate " + std::to_string(n / 8) + "pps, lossless true") +
                       " --stats-json " + quote(dir + "/jit.json"));
  INFO(jit.out);
  REQUIRE(jit.status == 0);
  std::regex placed("\n  lane 0 segment [0-9]+ \\([a-z]+\\): [^\n]*");
  std::regex switched("loop fused by the JIT \\([^)]*\\), compiled in [0-9.]+ ms, running from [0-9.]+ ms "
                      "\\(the interpreter before\\)$");
  size_t lines = 0;
  for (std::sregex_iterator i(jit.out.begin(), jit.out.end(), placed), e; i != e; ++i, ++lines) {
    INFO(i->str());
    CHECK(std::regex_search(i->str(), switched));
  }
  CHECK(lines == 2);  // acquisition, processing
  auto sorted_lines = [&](const std::string &name) {
    std::vector<std::string> v;
    std::istringstream in(read_file(dir + "/" + name + ".csv"));
    for (std::string l; std::getline(in, l);) v.push_back(l);
    std::sort(v.begin(), v.end());
    return v;
  };
  std::vector<std::string> want = sorted_lines("interp"), got = sorted_lines("jit");
  CHECK(want.size() > 1000);
  // The lines of one run only (the two vectors whole took Catch 90 s to print).
  std::vector<std::string> only_jit, only_interp;
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(only_jit));
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(only_interp));
  CHECK(only_jit == std::vector<std::string>{});
  CHECK(only_interp == std::vector<std::string>{});
}

// A run over before its loops could be compiled does not wait for the
// compiler: the compilation under way is cancelled (ProgramCompiler's
// `cancel`), so none completes; the summary says the segment ran the
// interpreter. Without the cancellation the run waited for the whole
// compilation (about 0.7 s for the default probe's chain) and counted it.
// The input is 50 s of paced traffic (its loops are worth compiling: the
// compilation starts 0.2 s in, CompileDecision), stopped by Ctrl-C at 0.25 s.
TEST_CASE("jit: a run that ends before its loops are compiled cancels the compilation, and says so", "[jit]") {
  std::string dir = scratch("jit_eq", "cancel");
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(flows 10, duration 8s, rate 1Kpps, lossless true, seed 1) -> Timestamp(clock pcap)"
                               " -> ft :: FlowTable(capacity 1K) -> GCSlicer(table ft) -> FlowLog(\"" + dir +
                                   "/flows.csv\");\n");
  Run r = run_cmd("cd " SLUICE_SOURCE_DIR " && timeout --preserve-status -s INT 0.25 " SLUICE_BINARY " run -q " +
                  quote(cfg) + " --stats-json " + quote(dir + "/stats.json"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK_THAT(r.out, Catch::Contains("; interpreter (no fused loop was ready before it ended)"));
  std::string json = read_file(dir + "/stats.json");
  INFO(json);
  CHECK(json.find("\"program\": \"interpreter\", \"compile_ms\": -1, \"compilations\": 0}") != std::string::npos);
  CHECK(json.find("\"compilations\": 1") == std::string::npos);
}

// A run whose end can be told (a trace, generated traffic, --duration)
// compiles its loops only if, at looks every 0.1 s, it is to go on for 2 s
// more (CompileDecision): a compilation costs 0.3-0.45 s of a cpu
// that a shorter run cannot win back, and made --jit slower than --no-jit
// on a 0.6 s trace. The summary says why the segments stayed on the
// interpreter; --jit-wait compiles them all the same. A source without an
// end (live traffic) and no --duration compiles at once.
TEST_CASE("jit: a run to end within 2 s compiles nothing and says why, --jit-wait compiles anyway", "[jit]") {
  std::string dir = scratch("jit_eq", "too-short");
  // About 0.5 s: the packets of the traffic at twice their number per
  // second, held back rather than dropped (an offline input)
  auto traffic = [&](const std::string &pace) {
    return write_file(dir + "/finite.pipe", "TrafficGen(flows 100, duration 2s, seed 2" + pace +
                                                ") -> c :: Counter -> Discard;\n");
  };
  uint64_t n = received_without_jit(traffic(""), dir + "/count.json");
  REQUIRE(n > 1000);
  std::string finite = traffic(", rate " + std::to_string(2 * n) + "pps, lossless true");
  // 50 s of live traffic, run for 0.5 s
  std::string live = write_file(dir + "/live.pipe",
                                "TrafficGen(flows 10, duration 50s, rate 1Kpps, seed 2) -> c :: Counter -> Discard;\n");
  std::regex declined("interpreter \\(the run was to end [0-9.]+ s after it began: too soon for a fused loop to repay "
                      "its compilation; --jit-wait fuses anyway\\)");
  for (std::string run : {"run -q " + quote(finite), "run -q --duration 500ms " + quote(live)}) {
    INFO(run);
    Run r = run_sluice(run + " --stats-json " + quote(dir + "/stats.json"));
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(std::regex_search(r.out, declined));
    CHECK(read_file(dir + "/stats.json").find("\"compilations\": 1") == std::string::npos);
  }
  Run wait = run_sluice("run -q --jit-wait " + quote(finite));
  INFO(wait.out);
  REQUIRE(wait.status == 0);
  CHECK_THAT(wait.out, Catch::Contains("loop fused by the JIT"));
}
