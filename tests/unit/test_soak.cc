// The hot-reload soak test (issue 13): a probe runs live traffic while an
// operator reloads it 200 times with `sluice ctl reload`, alternating the
// flow table's capacity, the filter, the collector's port and the FlowLog's
// format, with files it must refuse in between. The probe must stay alive
// and answer throughout; its memory and open descriptors must stay flat
// once warm; every record the tables made must be in the log or at a
// collector (nfdump's nfcapd) or counted lost, and none is lost here.
// Every tenth graph runs its fused loops (`ctl stats --json`) before the
// next reload replaces it; the others are replaced while being compiled.
//
// SLUICE_SOAK_RELOADS sets the number of reloads (sanitizer runs use fewer).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "collector_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;

namespace {

// The probe as a child process, stopped with SIGINT (drains, then exits).
struct Probe {
  pid_t pid = -1;
  std::string log;
  Probe(const std::string &args, const std::string &log_path) : log(log_path) {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::string cmd = "cd " SLUICE_SOURCE_DIR " && exec " SLUICE_BINARY " run --jit-wait " + args + " > " + log + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
  }
  ~Probe() {
    if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
  }
  bool alive() const { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }
  int stop() {
    kill(pid, SIGINT);
    int st = 0;
    waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
};

Run ctl(const std::string &socket, const std::string &args) { return run_sluice("ctl --socket " + socket + " " + args); }

// Where every thread of the probe is (gdb, where installed): said when a
// reload does not answer, so that a rare stall can be told from a slow one.
std::string thread_stacks(pid_t pid) {
  if (!have_tool("gdb")) return "(no gdb to show the probe's threads)";
  return run_cmd("timeout 60 gdb -p " + std::to_string(pid) + " -batch -ex 'thread apply all bt 16' 2>&1 | grep -E '^(Thread|#)'").out;
}

// The resident memory and the open descriptors of a process.
uint64_t resident_kib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
  return 0;
}
size_t open_fds(pid_t pid) {
  size_t n = 0;
  for ([[maybe_unused]] auto &e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) ++n;
  return n;
}

// Sums of --stats-json counters over every instance of a class (replaced ones too).
uint64_t class_sum(const std::string &json, const std::string &cls, const std::string &field) {
  std::regex row("\\{\"name\": \"[^\"]*\", \"class\": \"" + cls + "\"[^\n]*\"" + field + "\": ([0-9]+)");
  uint64_t sum = 0;
  for (auto it = std::sregex_iterator(json.begin(), json.end(), row); it != std::sregex_iterator(); ++it)
    sum += std::stoull((*it)[1]);
  return sum;
}

// Packets in the FlowLog's lines, CSV (its `packets` column) and JSON lines
// alike; `lines` gets how many records' lines there were.
uint64_t packets_in_log(const std::string &path, uint64_t *lines) {
  std::ifstream in(path);
  uint64_t packets = 0;
  *lines = 0;
  std::regex json_packets("\"packets\": ([0-9]+)");
  std::smatch m;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("start_ms,", 0) == 0) continue;  // the CSV header
    ++*lines;
    if (line[0] == '{') {
      REQUIRE(std::regex_search(line, m, json_packets));
      packets += std::stoull(m[1]);
      continue;
    }
    std::istringstream f(line);
    std::string field;
    for (int col = 0; col < 8; ++col) std::getline(f, field, ',');  // start end proto src sport dst dport packets
    packets += std::stoull(field);
  }
  return packets;
}

}  // namespace

TEST_CASE("soak: 200 reloads under traffic: memory and descriptors flat, every record accounted for, the probe alive",
          "[soak][reload]") {
  if (!have_nfdump()) return;
  int reloads = 200;
  if (const char *n = std::getenv("SLUICE_SOAK_RELOADS")) reloads = std::atoi(n);
  REQUIRE(reloads >= 30);
  std::string dir = scratch("soak", "reloads");
  int ports[2] = {test_port(31), test_port(32)};
  Collector a = nfcapd_at(dir + "/a", ports[0]), b = nfcapd_at(dir + "/b", ports[1]);
  const std::string flows = dir + "/flows.log";

  // Two live lanes (paced): 3.6M packets at 6 Kpps, 600 s, outlast the
  // reloads (the probe is stopped after them). 300 s did not on a loaded
  // machine: each reload waits for the previous one's compilation.
  auto graph = [&](int i) {
    std::string capacity = i % 2 ? "512K" : "1M";
    std::string filter = (i / 2) % 2 ? "not arp" : "ip or ip6";
    std::string port = std::to_string(ports[(i / 4) % 2]);
    std::string format = (i / 8) % 2 ? "jsonl" : "csv";
    return "src :: TrafficGen(flows 20K, new_flows_per_s 2K, duration 120s, sizes [64B], seed 11, ipv6 0.2, "
           "queues 2, rate 6Kpps);\n"
           "exp :: shared IPFIXExporter(127.0.0.1:" + port + ");\n"
           "log :: shared FlowLog(\"" + flows + "\", format " + format + ");\n"
           "src -> Timestamp(clock pcap) -> Ring(capacity 16K) -> f :: Filter(\"" + filter + "\")\n"
           "    -> ft :: FlowTable(capacity " + capacity + ", idle 5s, active 60s) -> gc :: GCSlicer(table ft)"
           " -> exp, log;\n";
  };
  // Files the probe must refuse, each with what it says.
  auto bad = [&](int k) -> std::pair<std::string, std::string> {
    std::string g = graph(0);
    switch (k % 6) {
      case 0: return {g + "src -> -> Discard;\n", "error: "};
      case 1: return {std::regex_replace(g, std::regex("seed 11"), "seed 12"), "source 'src' changed"};
      case 2: return {"", "the new graph has no source"};
      case 3: return {std::regex_replace(g, std::regex(flows), "/nonexistent/dir/flows.log"), "reload abandoned"};
      case 4:
        return {std::regex_replace(g, std::regex("Ring\\(capacity 16K\\)"), "Ring(capacity 16M) -> Ring(capacity 16M)"),
                "cannot create the ring"};
      default: return {std::regex_replace(g, std::regex("capacity 1M"), "capacity 0xg"), "malformed number '0xg'"};
    }
  };

  std::string socket = dir + "/ctl.sock";
  // --jit-nice 0: the loops it waits for compile beside CI's other tests
  Probe probe(write_file(dir + "/start.pipe", graph(0)) + " -q --jit-nice 0 --control " + socket + " --stats-json " + dir +
                  "/stats.json",
              dir + "/probe.log");
  for (int i = 0; i < 200 && ctl(socket, "help").status != 0; ++i) {
    INFO(read_file(probe.log));
    REQUIRE(probe.alive());
    usleep(100 * 1000);
  }
  uint64_t rss_warm = 0, rss_middle = 0;
  const int middle = 20 + (reloads - 20) / 2;  // 110 of 200
  size_t fds_warm = 0;
  int refused = 0;
  for (int i = 1; i <= reloads; ++i) {
    if (i % 10 == 5) {  // a bad file: refused, located, and the probe goes on
      auto [text, says] = bad(refused++);
      std::string file = write_file(dir + "/bad.pipe", text);
      Run r = ctl(socket, "reload " + file);
      INFO("bad file " << refused << ":\n" << text << r.out);
      CHECK(r.status == 1);
      CHECK(r.out.find(says) != std::string::npos);
      CHECK(r.out.find("the running graph goes on unchanged") != std::string::npos);
      Run stats = ctl(socket, "stats");
      CHECK(stats.status == 0);
    }
    std::string file = write_file(dir + "/next.pipe", graph(i));
    Run r = ctl(socket, "reload " + file);
    INFO("reload " << i << ": " << r.out << read_file(probe.log));
    if (r.status != 0 && r.out.find("no answer") != std::string::npos) FAIL_CHECK(thread_stacks(probe.pid));
    REQUIRE(r.status == 0);
    REQUIRE(r.out.find("applied") != std::string::npos);
    if (i % 10 == 0) {
      // A reload cancels the loops still being compiled for the one before
      // (docs/jit.md): here every tenth graph gets its fused loops before
      // the next reload replaces them.
      std::string json;
      for (int k = 0; k < 600; ++k) {
        json = ctl(socket, "stats --json").out;
        if (json.find("\"program\": \"jit\"") != std::string::npos &&
            json.find("\"program\": \"interpreter\"") == std::string::npos)
          break;
        usleep(100 * 1000);
      }
      size_t segments = json.find("\"segments\"");
      INFO("reload " << i << ": the segments' loops 60 s after it: " << (segments == std::string::npos ? json : json.substr(segments)));
      REQUIRE(json.find("\"program\": \"interpreter\"") == std::string::npos);
    }
    if (i == 20) {  // warm: every kind of replacement has happened at least twice
      usleep(500 * 1000);
      rss_warm = resident_kib(probe.pid), fds_warm = open_fds(probe.pid);
    }
    if (i == middle) {
      usleep(500 * 1000);
      rss_middle = resident_kib(probe.pid);
    }
  }
  usleep(500 * 1000);  // replaced instances released (they are within milliseconds)
  uint64_t rss_end = resident_kib(probe.pid);
  size_t fds_end = open_fds(probe.pid);
  Run stats = ctl(socket, "stats");
  CHECK(stats.status == 0);
  REQUIRE(probe.alive());
  int status = probe.stop();
  a.stop(), b.stop();
  std::string out = read_file(probe.log);
  INFO(out);
  WARN(reloads << " reloads: resident " << rss_warm / 1024 << " -> " << rss_middle / 1024 << " -> " << rss_end / 1024
               << " MiB, open fds " << fds_warm << " -> " << fds_end << " (after reload 20, " << middle
               << ", at the end)");
  // Flat, within a stated tolerance: descriptors exactly (a leaked exporter
  // socket or log file each reload would add 2 per reload); memory within
  // 128 MiB of reload 20's. The allocator's caches grow for a couple of
  // hundred reloads and level off near +70 MiB (by hand: 685-690 MiB from
  // reload 240 to 400); a leaked 1M-flow table is 144 MiB per lane, a leak
  // of 0.7 MiB a reload over 180 reloads is 128.
  CHECK(fds_end <= fds_warm);
  CHECK(rss_end <= rss_warm + 128 * 1024);
  CHECK(refused == reloads / 10);

  CHECK(status == 0);  // nothing lost, every packet and record accounted for
  std::string json = read_file(dir + "/stats.json");
  CHECK(json.find("\"data_lost\": false") != std::string::npos);
  CHECK(out.find("every record accounted for") != std::string::npos);
  // Independent of the probe's counting: the log holds every packet the
  // tables metered, and the collectors every record the exporters sent.
  uint64_t lines = 0, packets = packets_in_log(flows, &lines);
  CHECK(packets == class_sum(json, "FlowTable", "absorbed"));
  CHECK(lines >= class_sum(json, "FlowLog", "records_absorbed"));  // a biflow may be two lines
  uint64_t collected = nfdump_summary(dir + "/a")["Flows"] + nfdump_summary(dir + "/b")["Flows"];
  CHECK(collected == class_sum(json, "IPFIXExporter", "records_absorbed"));
  CHECK(class_sum(json, "IPFIXExporter", "records_absorbed") == class_sum(json, "FlowLog", "records_absorbed"));
}
