// FlowLog's file over a probe's life: kept across restarts (appended to),
// rotated by size and by time with every line in exactly one file, started
// anew when logrotate or an operator moves it away, and written at least
// once a second while the probe runs.
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "flow_csv_fixture.hh"
#include "run_fixture.hh"

using namespace sluice::test;
namespace fs = std::filesystem;

namespace {

// (with the optional fields FlowTable keeps by default)
constexpr const char *kHeader =
    "start_ms,end_ms,proto,src,sport,dst,dport,packets,bytes,tcp_flags,end_reason,vlan,lane"
    ",in_if,out_if,direction,src_mac,dst_mac,tos,min_ttl,max_ttl,inner_vlan,icmp_type,icmp_code,mpls_label";

// gen: more TrafficGen arguments (default: 3 s of traffic, unpaced).
std::string probe(const std::string &dir, const std::string &log_args, const std::string &gen = ", duration 3s") {
  return write_file(dir + "/p.pipe", "TrafficGen(flows 400, new_flows_per_s 400, seed 8, udp 0.3" + gen +
                                         ") -> ft :: FlowTable(capacity 64K, idle 1s) -> GCSlicer(table ft) -> "
                                         "FlowLog(\"" + dir + "/flows.csv\"" + log_args + ");\n");
}

std::vector<std::string> lines_of(const std::string &path) {
  std::ifstream f(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

// "wrote N lines to ..." of the summary.
uint64_t lines_written(const std::string &out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("wrote ([0-9]+) lines to ")));
  return std::stoull(m[1]);
}

// The rotated files of dir/flows.csv, oldest first (by stamp, then -N).
std::vector<std::string> rotated(const std::string &dir) {
  std::vector<std::pair<std::pair<std::string, unsigned long>, std::string>> found;
  std::regex name("flows\\.csv\\.([0-9]{8}T[0-9]{6}Z)(-([0-9]+))?");
  std::smatch m;
  for (const auto &e : fs::directory_iterator(dir)) {
    std::string f = e.path().filename().string();
    if (std::regex_match(f, m, name))
      found.push_back({{m[1].str(), m[3].matched ? std::stoul(m[3].str()) : 0ul}, e.path().string()});
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto &f : found) out.push_back(f.second);
  return out;
}

}  // namespace

TEST_CASE("flow log: a restarted probe appends to its file, existing replace starts it anew", "[flows][flow-log]") {
  std::string dir = scratch("flow_log", "restart");
  std::string cfg = probe(dir, "");
  Run first = run_sluice("run -q " + cfg);
  REQUIRE(first.status == 0);
  uint64_t n = lines_written(first.out);
  REQUIRE(n > 400);
  Run second = run_sluice("run -q " + cfg);
  REQUIRE(second.status == 0);
  std::vector<std::string> lines = lines_of(dir + "/flows.csv");
  CHECK(lines.size() == 1 + 2 * n);  // one header, both runs' lines
  CHECK(std::count(lines.begin(), lines.end(), std::string(kHeader)) == 1);

  REQUIRE(run_sluice("run -q " + probe(dir, ", existing replace")).status == 0);
  CHECK(lines_of(dir + "/flows.csv").size() == 1 + n);
}

TEST_CASE("flow log: rotate_size: no file past the size, whole lines, each line once, keep removes the oldest",
          "[flows][flow-log]") {
  std::string dir = scratch("flow_log", "size");
  Run r = run_sluice("run -q " + probe(dir, ", rotate_size 16KB"));
  INFO(r.out);
  REQUIRE(r.status == 0);
  uint64_t n = lines_written(r.out);
  std::vector<std::string> files = rotated(dir);
  REQUIRE(files.size() >= 3);
  CHECK(r.out.find("rotated " + std::to_string(files.size()) + " times") != std::string::npos);
  files.push_back(dir + "/flows.csv");
  uint64_t total = 0;
  std::vector<Line> all;
  for (const std::string &f : files) {
    INFO(f);
    CHECK(fs::file_size(f) <= 16 * 1024);  // 16KB
    std::vector<std::string> lines = lines_of(f);
    REQUIRE(!lines.empty());
    CHECK(lines[0] == kHeader);  // each file readable on its own
    total += lines.size() - 1;
    for (const Line &l : read_csv(f)) all.push_back(l);  // whole lines: 13 columns each
  }
  CHECK(total == n);

  // keep 2: the newest two rotated files and the current one
  std::string kept = scratch("flow_log", "keep");
  r = run_sluice("run -q " + probe(kept, ", rotate_size 16KB, keep 2"));
  REQUIRE(r.status == 0);
  std::vector<std::string> left = rotated(kept);
  CHECK(left.size() == 2);
  uint64_t tail = lines_of(kept + "/flows.csv").size() - 1;
  for (const std::string &f : left) tail += lines_of(f).size() - 1;
  CHECK(tail < lines_written(r.out));
  // the newest ones: the last line written is in the current file
  CHECK(lines_of(kept + "/flows.csv").back() == lines_of(dir + "/flows.csv").back());
}

TEST_CASE("flow log: a live probe writes within a second, rotates on the clock, and follows a file moved away",
          "[flows][flow-log]") {
  std::string dir = scratch("flow_log", "live");
  // Paced: 4 s of real time, records leaving all along (idle 1s).
  std::string cfg = probe(dir, ", rotate_every 2s", ", rate 2Kpps, duration 5s");
  std::string out = dir + "/out.txt";
  REQUIRE(system((SLUICE_BINARY " run -q " + cfg + " > " + out + " 2>&1 &").c_str()) == 0);
  // Lines arrive while the probe runs, not only at its end.
  size_t early = 0;
  bool ended = false;
  for (int i = 0; i < 100 && early < 2 && !ended; ++i) {
    usleep(100 * 1000);
    ended = read_file(out).find("records:") != std::string::npos;
    early = fs::exists(dir + "/flows.csv") ? lines_of(dir + "/flows.csv").size() : 0;
  }
  CHECK(early >= 2);
  CHECK(!ended);
  // logrotate without copytruncate: the file is moved away; the probe
  // starts a new one at the path with the next write.
  usleep(500 * 1000);
  fs::rename(dir + "/flows.csv", dir + "/moved.csv");
  for (int i = 0; i < 150 && read_file(out).find("records:") == std::string::npos; ++i) usleep(100 * 1000);
  std::string text = read_file(out);
  INFO(text);
  REQUIRE(text.find("every record accounted for") != std::string::npos);
  uint64_t n = lines_written(text);
  std::vector<std::string> files = rotated(dir);
  CHECK(files.size() >= 1);  // 5 s of records: at least one multiple of 2 s passed with records in the file
  files.push_back(dir + "/moved.csv");
  files.push_back(dir + "/flows.csv");
  uint64_t total = 0;
  for (const std::string &f : files) {
    INFO(f);
    REQUIRE(fs::exists(f));
    std::vector<std::string> lines = lines_of(f);
    REQUIRE(!lines.empty());
    CHECK(lines[0] == kHeader);
    total += lines.size() - 1;
  }
  CHECK(total == n);
}
