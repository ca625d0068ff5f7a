// Placement: host profiles (YAML, sysfs `auto`), the planner on simulated
// machines (golden plans in tests/golden/placement/), its rules checked
// directly, `sluice plan` as text, JSON and SVG, and `sluice run` applying a
// plan on this machine: every segment thread on its planned cpu.
// SLUICE_UPDATE_GOLDEN=1 rewrites the .expected files.
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "engine/placement/host_profile.hh"
#include "engine/placement/placement.hh"
#include "frontend_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;
namespace fs = std::filesystem;

namespace {

// ---- a small JSON reader, enough for `sluice plan --format json` and --stats-json ----
struct Json {
  enum class Type { Null, Bool, Number, String, Array, Object } type = Type::Null;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<Json> items;
  std::vector<std::string> keys;  // an object's keys, and their values in `items`

  const Json &operator[](const std::string &key) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == key) return items[i];
    FAIL("no key '" << key << "' in a JSON object");
    static Json none;
    return none;
  }
  bool has(const std::string &key) const {
    for (const std::string &k : keys)
      if (k == key) return true;
    return false;
  }
  int integer() const { return int(number); }
};

class JsonReader {
 public:
  explicit JsonReader(const std::string &text) : s_(text) {}
  Json document() {
    Json v = value();
    space();
    if (pos_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  void fail(const std::string &what) { FAIL("JSON: " << what << " at byte " << pos_); }
  void space() {
    while (pos_ < s_.size() && isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    space();
    if (pos_ >= s_.size() || s_[pos_] != c) fail(std::string("expected '") + c + "'");
    ++pos_;
  }
  bool next_is(char c) {
    space();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c == '\\') {
        char e = s_[pos_++];
        if (e == 'u') out += char(std::stoi(s_.substr(pos_, 4), nullptr, 16)), pos_ += 4;
        else out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
      } else {
        out += c;
      }
    }
    expect('"');
    return out;
  }
  Json value() {
    space();
    Json v;
    if (next_is('{')) {
      v.type = Json::Type::Object;
      expect('{');
      while (!next_is('}')) {
        std::string k = string();
        expect(':');
        v.keys.push_back(k);
        v.items.push_back(value());
        if (!next_is('}')) expect(',');
      }
      expect('}');
    } else if (next_is('[')) {
      v.type = Json::Type::Array;
      expect('[');
      while (!next_is(']')) {
        v.items.push_back(value());
        if (!next_is(']')) expect(',');
      }
      expect(']');
    } else if (next_is('"')) {
      v.type = Json::Type::String;
      v.string = string();
    } else if (s_.compare(pos_, 4, "true") == 0 || s_.compare(pos_, 5, "false") == 0) {
      v.type = Json::Type::Bool;
      v.boolean = s_[pos_] == 't';
      pos_ += v.boolean ? 4 : 5;
    } else if (s_.compare(pos_, 4, "null") == 0) {
      pos_ += 4;
    } else {
      size_t used = 0;
      v.type = Json::Type::Number;
      v.number = std::stod(s_.substr(pos_, 32), &used);
      if (!used) fail("expected a value");
      pos_ += used;
    }
    return v;
  }
  const std::string &s_;
  size_t pos_ = 0;
};

Json parse_json(const std::string &text) { return JsonReader(text).document(); }

// ---- fixtures ----

HostProfile profile_text(const std::string &yaml, const HostEnvironment &env = {}) {
  HostProfile p;
  std::string err;
  INFO(yaml);
  REQUIRE(parse_host_profile("test.yaml", yaml, env, p, &err));
  return p;
}

// The error for a profile that must not load.
std::string profile_error(const std::string &yaml, const HostEnvironment &env = {}) {
  HostProfile p;
  std::string err;
  CHECK_FALSE(parse_host_profile("bad.yaml", yaml, env, p, &err));
  return err;
}

// A fake sysfs tree: the online cpus, each node's cpu list (none: a kernel
// without NUMA), SMT sibling groups, and devices' numa_node files.
struct FakeSysfs {
  std::string root;
  explicit FakeSysfs(const std::string &name) : root(scratch("placement", name)) {}
  void file(const std::string &path, const std::string &text) {
    fs::create_directories(fs::path(root + "/" + path).parent_path());
    write_file(root + "/" + path, text + "\n");
  }
  void cpus(const std::string &online, const std::vector<std::string> &sibling_groups) {
    file("devices/system/cpu/online", online);
    for (const std::string &g : sibling_groups) {
      std::vector<int> members;
      REQUIRE(parse_cpu_list(g, members));
      for (int c : members) file("devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list", g);
    }
  }
  void node(int n, const std::string &cpulist) { file("devices/system/node/node" + std::to_string(n) + "/cpulist", cpulist); }
};

// One line per decision, as the golden files hold them.
std::string describe(const LaneGraph &lg, const Placement &p) {
  std::string out = "host " + p.host + ": " + std::to_string(p.topology.node_count) + " node" +
                    (p.topology.node_count == 1 ? "" : "s") + ", usable cpus " + format_cpu_list(p.usable_cpus) + "\n";
  auto segment_line = [&](int id) {
    const SegmentPlacement &s = p.segments[size_t(id)];
    out += "  segment " + std::to_string(id) + " " + segment_role_name(lg.segments[size_t(id)].role) + ": " +
           segment_cpus_text(s) + " (node " + std::to_string(s.node) + "): " + s.reason + "\n";
  };
  for (const Lane &l : lg.lanes) {
    const LanePlacement &lp = p.lanes[size_t(l.id)];
    out += "lane " + std::to_string(l.id) + " (" + lg.graph->elements[size_t(l.source)].name + " queue " +
           std::to_string(l.queue) + "): node " + std::to_string(lp.node) + ": " + lp.reason + "\n";
    for (int s : l.segments) segment_line(s);
  }
  bool shared = false;
  for (const Segment &s : lg.segments)
    if (s.lane < 0) {
      if (!shared) out += "shared\n";
      shared = true;
      segment_line(s.id);
    }
  for (const std::string &n : p.notes) out += "note: " + n + "\n";
  return out;
}

struct Planned {
  std::unique_ptr<Compiled> c;
  HostProfile host;
  Placement placement;
  bool ok = false;
  std::string error;
};

Planned plan(const std::string &pipe, const HostProfile &host) {
  Planned p{compile_text(pipe), host, {}, false, {}};
  INFO(p.c->printed);
  REQUIRE(p.c->ok);
  p.ok = place_lanes(p.c->lanes, p.host, p.placement, &p.error);
  return p;
}

const char *kTwoLanes =
    "src :: RSSSource(device \"0000:17:00.0\", queues 2);\n"
    "log :: shared FlowLog(\"/dev/null\");\n"
    "src -> Timestamp -> Ring(capacity 1K) -> ft :: FlowTable(capacity 1K) -> GCSlicer(table ft) -> log;\n";

}  // namespace

// ---- the planner on simulated machines ----

TEST_CASE("placement: golden plans on simulated hosts with 1, 2 and 4 nodes, SMT on and off, errors", "[placement]") {
  fs::current_path(SLUICE_SOURCE_DIR);
  std::vector<fs::path> cases;
  for (auto &e : fs::directory_iterator("tests/golden/placement"))
    if (e.path().extension() == ".pipe") cases.push_back(e.path());
  std::sort(cases.begin(), cases.end());
  REQUIRE(cases.size() >= 8);
  bool update = std::getenv("SLUICE_UPDATE_GOLDEN") != nullptr;
  for (const fs::path &pipe : cases) {
    DYNAMIC_SECTION(pipe.stem().string()) {
      auto c = compile_file(pipe.string());
      INFO(c->printed);
      REQUIRE(c->ok);
      HostProfile host;
      std::string err;
      fs::path yaml = fs::path(pipe).replace_extension(".yaml");
      REQUIRE(load_host_profile(yaml.string(), HostEnvironment{}, host, &err));
      Placement placement;
      std::string got = place_lanes(c->lanes, host, placement, &err) ? describe(c->lanes, placement)
                                                                     : "error: " + err + "\n";
      fs::path expected_path = fs::path(pipe).replace_extension(".expected");
      if (update) std::ofstream(expected_path) << got;
      std::string expected = read_file(expected_path.string());
      REQUIRE(!expected.empty());
      CHECK(got == expected);
    }
  }
}

TEST_CASE("placement: lanes stay on their device's node, acquisition gets a dedicated cpu", "[placement]") {
  // Two sockets of 4 cores x 2 threads: node 0 = cpus 0-3,8-11, node 1 = 4-7,12-15.
  HostProfile host = profile_text(
      "topology: {nodes: 2, cores_per_node: 4, threads_per_core: 2}\n"
      "cpus: {reserve: '0,8'}\n"
      "devices:\n  - {name: '0000:17:00.0', node: 1}\n  - {name: '0000:03:00.0', node: 0}\n");
  Planned p = plan(std::string(kTwoLanes) +
                       "b :: RSSSource(device \"03:00.0\", queues 1);\nb -> Ring(capacity 1K) -> Discard;\n",
                   host);
  INFO(p.error);
  REQUIRE(p.ok);
  const LaneGraph &lg = p.c->lanes;
  std::set<int> acquisition_cpus;
  for (const Segment &s : lg.segments) {
    const SegmentPlacement &sp = p.placement.segments[size_t(s.id)];
    INFO("segment " << s.id << ": " << sp.reason);
    CHECK(host.topology.cpu(sp.cpu)->node == sp.node);
    CHECK(sp.cpu != 0);  // reserved, and avoided
    CHECK(sp.cpu != 8);  // reserved
    CHECK_FALSE(sp.reason.empty());
    if (s.lane >= 0) CHECK(sp.node == p.placement.lanes[size_t(s.lane)].node);
    if (s.role == Segment::Role::Acquisition) {
      CHECK_FALSE(sp.shares_cpu);
      CHECK(acquisition_cpus.insert(sp.cpu).second);
    }
  }
  // src's lanes on node 1 (its NIC), b's on node 0 (a short PCI address matches the profile's long one)
  CHECK(p.placement.lanes[0].node == 1);
  CHECK(p.placement.lanes[1].node == 1);
  CHECK(p.placement.lanes[2].node == 0);
  // processing on the acquisition core's SMT sibling
  for (const Lane &l : lg.lanes) {
    if (l.segments.size() < 2) continue;
    int acq = p.placement.segments[size_t(l.segments[0])].cpu, proc = p.placement.segments[size_t(l.segments[1])].cpu;
    CHECK(host.topology.siblings(acq) == std::vector<int>{proc});
  }
  // shared elements on one housekeeping cpu, on the node with the most lanes
  CHECK(p.placement.housekeeping_cpu >= 0);
  CHECK(host.topology.cpu(p.placement.housekeeping_cpu)->node == 1);
}

TEST_CASE("placement: SMT off, cpu 0 last, housekeeping as the profile says", "[placement]") {
  // smt: separate: no two segments on one core; siblings of used cores stay idle
  HostProfile separate = profile_text(
      "topology: {nodes: 1, cores_per_node: 6, threads_per_core: 2}\n"
      "cpus: {smt: separate, housekeeping: 0}\n"
      "devices: [{name: '0000:17:00.0', node: 0}]\n");
  Planned p = plan(kTwoLanes, separate);
  INFO(p.error);
  REQUIRE(p.ok);
  std::set<int> cores;
  for (const SegmentPlacement &s : p.placement.segments) {
    if (s.lane < 0) continue;
    CHECK(cores.insert(separate.topology.cpu(s.cpu)->core).second);
    CHECK(s.cpu != 0);  // the housekeeping cpu, not for lanes
  }
  CHECK(p.placement.housekeeping_cpu == 0);
  CHECK(p.placement.segments.back().reason.find("as the profile sets it (cpus.housekeeping)") != std::string::npos);

  // cpu 0 is taken only when nothing else is left, and the reason says so
  HostProfile tiny = profile_text("topology: {nodes: 1, cores_per_node: 2, threads_per_core: 1}\ncpus: {oversubscribe: true}\n");
  Planned t = plan("TrafficGen(queues 2) -> Discard;", tiny);
  REQUIRE(t.ok);
  CHECK(t.placement.segments[0].cpu == 1);
  CHECK(t.placement.segments[1].cpu == 0);
  CHECK(t.placement.segments[1].reason.find("cpu 0 is otherwise avoided") != std::string::npos);
  CHECK_FALSE(t.placement.segments[0].shares_cpu);
}

TEST_CASE("placement: more lanes than a node holds is an error that says what is missing", "[placement]") {
  // node 0 of 4 cores x 2 threads, core 0 reserved: 3 cores, 6 threads
  std::string topo = "topology: {nodes: 2, cores_per_node: 4, threads_per_core: 2}\n"
                     "devices: [{name: '0000:17:00.0', node: 0}]\n";
  std::string pipe = "src :: RSSSource(device \"0000:17:00.0\", queues 5);\nsrc -> Ring(capacity 1K) -> Discard;\n";
  Planned shared = plan(pipe, profile_text(topo + "cpus: {reserve: '0,8', smt: share}\n"));
  CHECK_FALSE(shared.ok);
  INFO(shared.error);
  CHECK(shared.error.find("cannot hold this graph: 4 cpus missing") != std::string::npos);
  CHECK(shared.error.find("node 0: 5 lanes with 10 segments, 6 usable cpus (1-3,9-11): 4 missing") != std::string::npos);
  CHECK(shared.error.find("fewer queues: 3 lanes of 'src' fit on node 0 (queues 3)") != std::string::npos);
  CHECK(shared.error.find("another node: node 1 has 8 free cpus") != std::string::npos);
  CHECK(shared.error.find("cpus.oversubscribe: true") != std::string::npos);

  Planned separate = plan(pipe, profile_text(topo + "cpus: {reserve: '0,8', smt: separate}\n"));
  CHECK_FALSE(separate.ok);
  INFO(separate.error);
  CHECK(separate.error.find("7 cpus missing") != std::string::npos);
  CHECK(separate.error.find("allow SMT sharing (cpus.smt: share): 4 would still be missing") != std::string::npos);
  CHECK(separate.error.find("fewer reserved cpus (cpus.reserve)") != std::string::npos);

  // the same graph runs when segments may share cpus, and the plan says so
  Planned over = plan(pipe, profile_text(topo + "cpus: {reserve: '0,8', oversubscribe: true}\n"));
  INFO(over.error);
  REQUIRE(over.ok);
  int squeezed = 0;
  for (const SegmentPlacement &s : over.placement.segments) {
    CHECK(s.node == 0);
    squeezed += s.reason.find("(oversubscribe: true)") != std::string::npos;
  }
  CHECK(squeezed == 4);
}

// ---- host profiles ----

TEST_CASE("host profile: the shipped profiles load", "[placement][profile]") {
  fs::current_path(SLUICE_SOURCE_DIR);
  HostProfile server;
  std::string err;
  REQUIRE(load_host_profile("configs/server-4s.yaml", HostEnvironment{}, server, &err));
  CHECK(server.name == "server-4s");
  CHECK_FALSE(server.this_machine);
  CHECK(server.topology.cpus.size() == 160);
  CHECK(server.topology.node_count == 4);
  CHECK(format_cpu_list(server.topology.node_cpus(0)) == "0-19,80-99");
  CHECK(server.topology.siblings(1) == std::vector<int>{81});
  CHECK(server.reserved_cpus == std::vector<int>{0, 80});
  REQUIRE(server.devices.size() == 3);
  for (int n = 0; n < 3; ++n) CHECK(server.devices[size_t(n)].node == n);
  CHECK(server.hugepages);
  CHECK(server.eal_args == std::vector<std::string>{"--socket-mem", "8192,8192,8192,2048"});
  CHECK_FALSE(server.oversubscribe);

  HostProfile laptop;
  REQUIRE(load_host_profile("configs/laptop.yaml", HostEnvironment::this_process(), laptop, &err));
  CHECK(laptop.this_machine);
  CHECK(laptop.oversubscribe);
  CHECK(laptop.eal_args == std::vector<std::string>{"--no-huge"});
  CHECK_FALSE(laptop.usable_cpus.empty());
  HostProfile builtin;
  REQUIRE(builtin_host_profile(HostEnvironment::this_process(), builtin, &err));
  CHECK(builtin.oversubscribe == laptop.oversubscribe);
  CHECK(builtin.usable_cpus == laptop.usable_cpus);
}

TEST_CASE("host profile: errors point at file:line:column", "[placement][profile]") {
  std::string topo = "topology: {nodes: 2, cores_per_node: 4, threads_per_core: 2}\n";
  // unknown keys, at every level
  CHECK(profile_error("name: x\ncpu:\n  use: auto\n") ==
        "bad.yaml:2:1: error: unknown key 'cpu' (known: name, topology, memory, eal, cpus, devices, acquisition)");
  CHECK(profile_error(topo + "cpus:\n  resrve: 0\n") ==
        "bad.yaml:3:3: error: unknown key 'resrve' in cpus (known: use, reserve, housekeeping, smt, oversubscribe)");
  CHECK(profile_error(topo + "devices:\n  - name: eth0\n    nod: 1\n") ==
        "bad.yaml:4:5: error: unknown key 'nod' in a device (known: name, node)");
  // wrong types
  CHECK(profile_error("topology: {nodes: two, cores_per_node: 4}\n") ==
        "bad.yaml:1:19: error: nodes: expected a number, not 'two'");
  CHECK(profile_error(topo + "cpus:\n  oversubscribe: sometimes\n") ==
        "bad.yaml:3:18: error: oversubscribe: expected true or false, not 'sometimes'");
  CHECK(profile_error(topo + "cpus: {smt: maybe}\n") == "bad.yaml:2:13: error: smt: expected share or separate, not 'maybe'");
  CHECK(profile_error(topo + "cpus: {use: 'a-b'}\n") ==
        "bad.yaml:2:13: error: use: expected a cpu list like \"2-19,22\" or [2, 3] (cpus below 4096), not 'a-b'");
  CHECK(profile_error(topo + "acquisition: {mode: periodic, period: soon, runtime: 10us}\n") ==
        "bad.yaml:2:39: error: period: expected a duration (e.g. 100us, 1ms), not 'soon'");
  CHECK(profile_error(topo + "devices: {name: eth0}\n") ==
        "bad.yaml:2:10: error: expected a list of devices (- name: ..., node: ...)");
  // impossible values
  CHECK(profile_error(topo + "cpus:\n  use: 1-20\n") ==
        "bad.yaml:3:8: error: use: cpu 16 does not exist on the machine described (cpus 0-15)");
  CHECK(profile_error(topo + "cpus: {reserve: 0-15}\n") ==
        "bad.yaml:2:17: error: no cpu is left to use: every usable cpu (0-15) is reserved");
  CHECK(profile_error(topo + "devices:\n  - {name: eth0, node: 2}\n") ==
        "bad.yaml:3:24: error: node: 2 does not exist (the machine has 2 nodes)");
  CHECK(profile_error(topo + "devices:\n  - {name: eth0, node: auto}\n") ==
        "bad.yaml:3:24: error: node: auto asks this machine's sysfs, but the profile describes another machine "
        "(topology is not auto): give the node number");
  CHECK(profile_error(topo + "devices:\n  - {name: eth0, node: 0}\n  - {name: eth0, node: 1}\n") ==
        "bad.yaml:4:12: error: device 'eth0' is listed twice");
  CHECK(profile_error(topo + "acquisition:\n  mode: periodic\n  period: 50us\n  runtime: 80us\n") ==
        "bad.yaml:5:12: error: runtime: 80us is longer than the period (50us)");
  CHECK(profile_error(topo + "acquisition:\n  mode: periodic\n") ==
        "bad.yaml:3:9: error: mode: periodic needs a period and a runtime (e.g. period: 100us, runtime: 30us)");
  CHECK(profile_error(topo + "memory:\n  mb: [1024, 1024]\n") ==
        "bad.yaml:3:7: error: mb: a list per NUMA node needs hugepages: true (DPDK reserves per-node memory only "
        "from hugepages); give one number for the total");
  CHECK(profile_error(topo + "memory:\n  hugepages: true\n  mb: [1024, 1024, 1024]\n") ==
        "bad.yaml:4:7: error: mb: 3 values for 2 NUMA nodes: give one per node");
  CHECK(profile_error("topology: {nodes: 64, cores_per_node: 64, threads_per_core: 2}\n") ==
        "bad.yaml:1:11: error: topology: 8192 cpus, more than 4096 (the most Sluice can pin)");
  // malformed YAML
  CHECK(profile_error("cpus: [1, 2\n").rfind("bad.yaml:2:1: error: ", 0) == 0);
}

TEST_CASE("host profile errors from the command line name the file", "[placement][profile][cli]") {
  std::string dir = scratch("placement", "cli_profile");
  std::string bad = write_file(dir + "/bad.yaml", "name: x\ncpus:\n  smt: both\n");
  Run r = run_sluice("plan configs/flowprobe.pipe --host " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":3:8: error: smt: expected share or separate, not 'both'") != std::string::npos);
  r = run_sluice("run -q configs/flowprobe.pipe --host " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":3:8: error: smt:") != std::string::npos);
}

TEST_CASE("host topology: discovered from a sysfs tree", "[placement][sysfs]") {
  // Two nodes, 4 cores x 2 threads, numbered as Linux does: siblings 0/4, 1/5, ...
  FakeSysfs two("sysfs-2node-smt");
  two.cpus("0-7", {"0,4", "1,5", "2,6", "3,7"});
  two.node(0, "0-1,4-5");
  two.node(1, "2-3,6-7");
  two.file("bus/pci/devices/0000:81:00.0/numa_node", "1");
  two.file("bus/pci/devices/0000:00:03.0/numa_node", "-1");
  two.file("class/net/ens1f0/device/numa_node", "1");
  HostTopology t;
  std::string err;
  REQUIRE(discover_topology(two.root, t, &err));
  CHECK(t.node_count == 2);
  CHECK(t.cpus.size() == 8);
  CHECK(format_cpu_list(t.node_cpus(1)) == "2-3,6-7");
  CHECK(t.siblings(1) == std::vector<int>{5});
  CHECK(t.siblings(6) == std::vector<int>{2});
  CHECK(t.has_smt());
  std::string why;
  CHECK(device_numa_node(two.root, "81:00.0", &why) == 1);
  CHECK(why == two.root + "/bus/pci/devices/0000:81:00.0/numa_node");
  CHECK(device_numa_node(two.root, "af_packet:ens1f0", &why) == 1);
  CHECK(device_numa_node(two.root, "0000:00:03.0", &why) == -1);
  CHECK(device_numa_node(two.root, "pcap:x.pcap", &why) == -1);

  // `auto` in a profile reads that tree; cpus this process may not use are left out
  HostEnvironment env{two.root, {1, 2, 3, 5, 6, 7}};
  HostProfile p = profile_text("topology: auto\ndevices: [{name: 'af_packet:ens1f0', node: auto}]\n", env);
  CHECK(p.this_machine);
  CHECK(p.usable_cpus == std::vector<int>{1, 2, 3, 5, 6, 7});
  REQUIRE(p.devices.size() == 1);
  CHECK(p.devices[0].node == 1);
  CHECK(p.devices[0].node_source == two.root + "/class/net/ens1f0/device/numa_node");
  // a device the profile does not list is looked up in sysfs too
  CHECK(p.device_node("0000:81:00.0", &why) == 1);
  CHECK(profile_error("cpus: {use: 0-3}\n", env) ==
        "bad.yaml:1:13: error: use: cpu 0 is not available to this process (cpus 1-3,5-7; see taskset, cgroups)");

  // the plan on it: the NIC's lanes on node 1, processing on siblings
  Planned planned = plan(
      "src :: RSSSource(device \"0000:81:00.0\", queues 1);\nsrc -> Ring(capacity 1K) -> Discard;\n", p);
  INFO(planned.error);
  REQUIRE(planned.ok);
  CHECK(planned.placement.lanes[0].node == 1);
  CHECK(planned.placement.lanes[0].reason == "device 0000:81:00.0 is on node 1 (" + two.root +
                                                 "/bus/pci/devices/0000:81:00.0/numa_node)");
  CHECK(planned.placement.segments[0].cpu == 2);
  CHECK(planned.placement.segments[1].cpu == 6);
  // a NIC whose numa_node is -1: the node with the most usable cpus (node 1: 2,3,6,7)
  Planned unknown = plan("src :: RSSSource(device \"0000:00:03.0\");\nsrc -> Discard;\n", p);
  REQUIRE(unknown.ok);
  CHECK(unknown.placement.lanes[0].reason == "the NUMA node of device 0000:00:03.0 is unknown (none in " + two.root +
                                                "/bus/pci/devices/0000:00:03.0/numa_node): node 1, the one with the most "
                                                "free cpus");

  // a kernel without NUMA: no node directories, one node
  FakeSysfs flat("sysfs-flat");
  flat.cpus("0-3", {"0", "1", "2", "3"});
  REQUIRE(discover_topology(flat.root, t, &err));
  CHECK(t.node_count == 1);
  CHECK(t.node_cpus(0).size() == 4);
  CHECK_FALSE(t.has_smt());

  FakeSysfs none("sysfs-empty");
  CHECK_FALSE(discover_topology(none.root, t, &err));
  CHECK(err == "cannot read the online cpus from " + none.root + "/devices/system/cpu/online");
}

// ---- the command line ----

TEST_CASE("sluice plan --format json: every segment with lane, elements, node, cpu and reason", "[placement][cli]") {
  Run r = run_sluice("plan configs/flowprobe.pipe --format json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  Json plan = parse_json(r.out);
  CHECK(plan["host"].string == "laptop");
  CHECK(plan["this_machine"].boolean);
  const Json &segments = plan["segments"];
  // A machine with a cpu for each of the 6 segments keeps the Rings; one
  // with fewer (as 2-cpu CI runners) runs each lane's Ring in its thread:
  // 4 segments.
  REQUIRE(plan["lanes"].items.size() == 2);
  const bool folded = plan["lanes"].items[0]["rings_folded"].boolean;
  CHECK(plan["lanes"].items[1]["rings_folded"].boolean == folded);
  const size_t exp_segment = folded ? 2 : 4;
  REQUIRE(segments.items.size() == exp_segment + 2);
  std::set<int> usable;
  for (const Json &n : plan["nodes"].items)
    for (const Json &c : n["usable"].items) usable.insert(c.integer());
  for (const Json &s : segments.items) {
    for (const char *key : {"lane", "segment", "elements", "node", "cpu", "reason"}) CHECK(s.has(key));
    CHECK(usable.count(s["cpu"].integer()));
    CHECK_FALSE(s["reason"].string.empty());
    CHECK_FALSE(s["elements"].items.empty());
  }
  CHECK(segments.items[0]["role"].string == "acquisition");
  CHECK(segments.items[0]["lane"].integer() == 0);
  CHECK(segments.items[0]["elements"].items[0].string == "src#0");
  CHECK(segments.items[exp_segment]["lane"].type == Json::Type::Null);
  CHECK(segments.items[exp_segment]["elements"].items[0].string == "exp");
  CHECK(segments.items[exp_segment]["cpu"].integer() == plan["housekeeping_cpu"].integer());
  CHECK(plan["lanes"].items[1]["source"].string == "src");

  // a described machine: the NIC's node
  r = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml -D DEVICE=0000:af:00.0 -D QUEUES=4 "
                 "--format json");
  REQUIRE(r.status == 0);
  Json server = parse_json(r.out);
  CHECK_FALSE(server["this_machine"].boolean);
  for (const Json &s : server["segments"].items) {
    CHECK(s["node"].integer() == 2);
    CHECK(s["cpu"].integer() != 0);
    CHECK(s["cpu"].integer() != 80);
  }
  REQUIRE(server["lanes"].items.size() == 4);
  for (const Json &l : server["lanes"].items) CHECK_FALSE(l["rings_folded"].boolean);  // a NIC: live
}

TEST_CASE("sluice plan: text shows node, cpu and reason, impossible plans are errors", "[placement][cli]") {
  Run t = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml -D DEVICE=0000:5e:00.0");
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("    node 1: device 0000:5e:00.0 is on node 1 (the profile)") != std::string::npos);
  CHECK(t.out.find("      cpu 21 (node 1): dedicated core on node 1 (the lane's node); its SMT sibling cpu 101 is "
                   "kept for the lane's processing") != std::string::npos);
  CHECK(t.out.find("      cpu 101 (node 1): SMT sibling of the acquisition cpu 21") != std::string::npos);
  CHECK(t.out.find("placement on host server-4s: 4 NUMA nodes, 160 cpus, usable 1-79,81-159, reserved 0,80") !=
        std::string::npos);
  CHECK(t.out.find("note: the profile describes another machine") != std::string::npos);

  Run e = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml -D DEVICE=0000:17:00.0 -D QUEUES=24");
  INFO(e.out);
  CHECK(e.status == 1);
  CHECK(e.out.find("sluice: error: host profile 'server-4s' cannot hold this graph: 10 cpus missing") != std::string::npos);
  CHECK(e.out.find("node 0: 24 lanes with 48 segments, 38 usable cpus (1-19,81-99): 10 missing") != std::string::npos);
  CHECK(e.out.find("fewer queues: 19 lanes of 'src' fit on node 0 (queues 19)") != std::string::npos);
}

TEST_CASE("sluice plan --format svg draws NUMA nodes with their cpus and lanes", "[placement][cli]") {
  if (!have_tool("dot")) {
    WARN("skipped: Graphviz `dot` is not installed (./build.sh deps installs it)");
    return;
  }
  Run r = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml -D DEVICE=0000:17:00.0 --format svg");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.status == 0);
  CHECK(r.out.find("<svg") != std::string::npos);
  CHECK(r.out.find("</svg>") != std::string::npos);
  for (const char *text : {"node 0: cpus 0&#45;19,80&#45;99", "node 3: cpus 60&#45;79,140&#45;159", "cpu 1 (SMT sibling 81)",
                           "lane 0: segment 0 (acquisition)", "lane 1: segment 3 (processing)", "reserved: 0,80"})
    CHECK(r.out.find(text) != std::string::npos);
}

// ---- sluice run applies the plan ----

TEST_CASE("sluice run: every segment thread runs on the cpu the plan gives it", "[placement][run]") {
  std::string dir = scratch("placement", "run_pinned");
  std::string cfg = write_file(dir + "/p.pipe",
                               "src :: TrafficGen(flows 2K, duration 2s, queues 2);\n"
                               "log :: shared FlowLog(\"/dev/null\");\n"
                               "src -> Ring(capacity 4K) -> ft :: FlowTable(capacity 16K) -> GCSlicer(table ft) -> log;\n");
  Run p = run_sluice("plan " + cfg + " --format json");
  INFO(p.out);
  REQUIRE(p.status == 0);
  Json plan = parse_json(p.out);
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("placement (host laptop):") != std::string::npos);
  Json stats = parse_json(read_file(dir + "/stats.json"));
  const Json &ran = stats["segments"];
  REQUIRE(ran.items.size() == plan["segments"].items.size());
  // 2 lanes of 2 segments and the log's; on fewer cpus than that (a 2-cpu
  // runner) each lane's Ring runs in its thread: 2 lanes of 1 and the log's.
  REQUIRE(ran.items.size() == (plan["lanes"].items[0]["rings_folded"].boolean ? 3u : 5u));
  for (size_t i = 0; i < ran.items.size(); ++i) {
    const Json &planned = plan["segments"].items[i], &actual = ran.items[i];
    INFO("segment " << i << ": " << planned["reason"].string << "; note: " << actual["note"].string);
    CHECK(actual["segment"].integer() == planned["segment"].integer());
    CHECK(actual["planned_cpu"].integer() == planned["cpu"].integer());
    CHECK(actual["pinned"].boolean == planned["pinned"].boolean);
    if (planned["pinned"].boolean) {
      REQUIRE(actual["ran_on"].items.size() == 1);  // sampled at start, every 1024 passes and at the end
      CHECK(actual["ran_on"].items[0].integer() == planned["cpu"].integer());
    } else {  // a shared segment with no cpu of its own: anywhere among its cpus
      std::set<int64_t> may;
      for (const Json &c : planned["cpus"].items) may.insert(c.integer());
      CHECK(may.size() > 1);
      for (const Json &c : actual["ran_on"].items) CHECK(may.count(c.integer()));
    }
    CHECK(actual["node"].integer() == planned["node"].integer());
    // cpu time the thread used: some (each polled or drained), no more than the run lasted
    CHECK(actual["cpu_s"].number > 0);
    CHECK(actual["cpu_s"].number <= stats["elapsed_s"].number + 0.05);
    std::string line = "segment " + std::to_string(i) + " (";
    CHECK(r.out.find(line) != std::string::npos);
  }
  CHECK(r.out.find("planned cpu " + std::to_string(plan["segments"].items[0]["cpu"].integer()) + ", ran on cpu " +
                   std::to_string(plan["segments"].items[0]["cpu"].integer())) != std::string::npos);
}

TEST_CASE("sluice run: periodic acquisition gets SCHED_DEADLINE, or the run says why not and polls", "[placement][run]") {
  std::string dir = scratch("placement", "run_periodic");
  std::string host = write_file(dir + "/periodic.yaml",
                                "name: periodic\ncpus: {oversubscribe: true}\n"
                                "acquisition: {mode: periodic, period: 200us, runtime: 100us}\n");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(flows 100, duration 200ms, queues 2) -> Ring(capacity 1K) -> Counter -> Discard;\n");
  Run r = run_sluice("run -q " + cfg + " --host " + host + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  Json stats = parse_json(read_file(dir + "/stats.json"));
  CHECK(stats["balanced"].boolean);
  int acquisition = 0;
  for (const Json &s : stats["segments"].items) {
    INFO(s["note"].string);
    if (s["role"].string != "acquisition") {
      CHECK_FALSE(s["deadline"].boolean);
      CHECK(s["pinned"].boolean);
      continue;
    }
    ++acquisition;
    if (s["deadline"].boolean) {
      // granted: pinned only inside an exclusive cpuset, which the note explains otherwise
      if (!s["pinned"].boolean) CHECK(s["note"].string.find("SCHED_DEADLINE in force, not pinned") == 0);
    } else {
      CHECK(s["note"].string.find("periodic acquisition refused by the kernel (SCHED_DEADLINE: ") == 0);
      CHECK(s["note"].string.find("): busy polling instead") != std::string::npos);
      CHECK(s["pinned"].boolean);
    }
  }
  CHECK(acquisition == 2);
  // The same profile in a process pinned to one cpu: the kernel must refuse
  // (a deadline thread's affinity has to span its root domain).
  if (have_tool("taskset")) {
    cpu_set_t set;
    sched_getaffinity(0, sizeof set, &set);
    int cpu = 0;
    while (!CPU_ISSET(cpu, &set)) ++cpu;
    Run one = run_cmd("cd " SLUICE_SOURCE_DIR " && taskset -c " + std::to_string(cpu) + " " SLUICE_BINARY " run -q " +
                      cfg + " --host " + host);
    INFO(one.out);
    CHECK(one.status == 0);
    if (CPU_COUNT(&set) > 1)
      CHECK(one.out.find("periodic acquisition refused by the kernel") != std::string::npos);
  }
}

// A lane fed by a trace or unpaced TrafficGen waits for room: its Ring has no
// burst to absorb. Where the plan gives all of the lane's segments one cpu,
// the lane runs as one segment, the Ring passing batches on in its thread;
// a live source, or a cpu for each segment, keeps the Ring between threads.
TEST_CASE("placement: an offline lane whose segments would share a cpu runs its Ring in its thread", "[placement][cli]") {
  std::string dir = scratch("placement", "fold_rings");
  std::string two = write_file(dir + "/two.yaml", "name: two\ntopology: {nodes: 1, cores_per_node: 2, threads_per_core: 1}\n"
                                                  "cpus: {oversubscribe: true}\n");
  std::string eight = write_file(dir + "/eight.yaml", "name: eight\ntopology: {nodes: 1, cores_per_node: 8, threads_per_core: 1}\n");
  auto graph = [&](const std::string &name, const std::string &source) {
    return write_file(dir + "/" + name + ".pipe", "src :: " + source + ";\nlog :: shared FlowLog(\"/dev/null\");\n"
                      "src -> Timestamp -> Ring(capacity 1K) -> ft :: FlowTable(capacity 1K) -> GCSlicer(table ft) -> log;\n");
  };
  // lanes folded, segments of the plan
  auto planned = [&](const std::string &pipe, const std::string &host) {
    Run r = run_sluice("plan " + pipe + " --host " + host + " --format json");
    INFO(r.out);
    REQUIRE(r.status == 0);
    Json plan = parse_json(r.out);
    unsigned folded = 0;
    for (const Json &l : plan["lanes"].items) folded += l["rings_folded"].boolean ? 1 : 0;
    return std::pair<unsigned, size_t>{folded, plan["segments"].items.size()};
  };
  std::string trace = graph("trace", "RSSSource(device \"pcap:examples/traces/demo.pcap\", queues 2)");
  CHECK(planned(trace, two) == std::pair<unsigned, size_t>{2, 3});    // 2 lanes of 1 segment, the log
  CHECK(planned(trace, eight) == std::pair<unsigned, size_t>{0, 5});  // a cpu for each segment
  CHECK(planned(graph("null", "RSSSource(device \"null\", queues 2)"), two) == std::pair<unsigned, size_t>{0, 5});
  CHECK(planned(graph("gen", "TrafficGen(queues 2)"), two) == std::pair<unsigned, size_t>{2, 3});
  CHECK(planned(graph("paced", "TrafficGen(queues 2, rate 1Mpps)"), two) == std::pair<unsigned, size_t>{0, 5});
  CHECK(planned(graph("lossless", "TrafficGen(queues 2, rate 1Mpps, lossless true)"), two) ==
        std::pair<unsigned, size_t>{2, 3});
  Run text = run_sluice("plan " + trace + " --host " + two);
  INFO(text.out);
  CHECK(text.out.find("    Rings in the lane's thread: its input waits for room") != std::string::npos);
  CHECK(text.out.find("segment 0 (acquisition): src#0, Timestamp@1#0, Ring@1#0, ft#0, GCSlicer@1#0\n") !=
        std::string::npos);
}

// The folded lanes meter what the same lanes without a Ring meter: every
// flow record alike.
TEST_CASE("sluice run: a trace's lanes with their Rings in their threads give the records of lanes without Rings",
          "[placement][run]") {
  std::string dir = scratch("placement", "fold_run");
  std::string two = write_file(dir + "/two.yaml", "name: two\ntopology: {nodes: 1, cores_per_node: 2, threads_per_core: 1}\n"
                                                  "cpus: {oversubscribe: true}\n");
  Run gen = run_sluice("run -q " + write_file(dir + "/make.pipe", "TrafficGen(flows 3K, duration 2s, seed 9) -> PcapSink(\"" +
                                                                       dir + "/t.pcap\");\n"));
  REQUIRE(gen.status == 0);
  auto probe = [&](const std::string &name, const std::string &ring) {
    std::string pipe = write_file(dir + "/" + name + ".pipe",
                                  "src :: RSSSource(device \"pcap:" + dir + "/t.pcap\", queues 2);\n"
                                  "log :: shared FlowLog(\"" + dir + "/" + name + ".csv\");\n"
                                  "src -> Timestamp" + ring + " -> Filter(\"ip or ip6\") -> ft :: FlowTable(capacity 16K) -> "
                                  "GCSlicer(table ft) -> log;\n");
    Run r = run_sluice("run --no-jit " + pipe + " --host " + two);
    INFO(r.out);
    REQUIRE(r.status == 0);
    CHECK(r.out.find("every packet accounted for") != std::string::npos);
    std::vector<std::string> lines;
    std::istringstream in(read_file(dir + "/" + name + ".csv"));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
    std::sort(lines.begin(), lines.end());
    return std::pair<std::string, std::vector<std::string>>{r.out, lines};
  };
  auto [with_out, with_ring] = probe("ring", " -> Ring(capacity 4K)");
  auto [without_out, without_ring] = probe("plain", "");
  CHECK(with_out.find("ring: none, batches passed on in the lane's thread") != std::string::npos);
  CHECK(with_out.find("(2 lanes, 3 segments,") != std::string::npos);
  REQUIRE(with_ring.size() > 1000);
  CHECK(with_ring == without_ring);
}

TEST_CASE("sluice run refuses a plan made for another machine", "[placement][run]") {
  Run r = run_sluice("run -q configs/flowprobe.pipe --host configs/server-4s.yaml -D DEVICE=0000:17:00.0");
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find("sluice: error: the plan puts segment ") != std::string::npos);
  CHECK(r.out.find(", which this process cannot use (cpus ") != std::string::npos);
  CHECK(r.out.find("host profile 'server-4s' describes another machine") != std::string::npos);
}

// ---- input that must give an error, never an exception or a crash (issue 13) ----

TEST_CASE("cpu lists: the kernel's syntax, cpus below 4096, any length", "[placement][profile]") {
  std::vector<int> cpus;
  CHECK(parse_cpu_list("0-3,8,10-11\n", cpus));
  CHECK(cpus == std::vector<int>{0, 1, 2, 3, 8, 10, 11});
  CHECK(parse_cpu_list(" 5 - 6 , 1", cpus));
  CHECK(cpus == std::vector<int>{1, 5, 6});
  CHECK(parse_cpu_list("4095", cpus));
  CHECK(parse_cpu_list("", cpus));
  CHECK(cpus.empty());
  for (const char *bad : {"4096", "1-", "-1", ",", "1,", "3-1", "1-2-3", "a", "1 2", "0x1"}) {
    INFO(bad);
    CHECK_FALSE(parse_cpu_list(bad, cpus));
  }
  // finding 3: std::stol threw out_of_range on a long number
  CHECK_FALSE(parse_cpu_list(std::string(25, '9'), cpus));
  // finding 17: std::regex recursed once per character and overflowed the stack
  CHECK_FALSE(parse_cpu_list(std::string(300000, '1'), cpus));
  // the same range many times costs no memory: the cpus are a bitmap
  std::string repeated;
  for (int i = 0; i < 50000; ++i) repeated += "0-4095,";
  repeated += "7";
  REQUIRE(parse_cpu_list(repeated, cpus));
  CHECK(cpus.size() == 4096);
}

TEST_CASE("host profile: over-long numbers and lists are located errors", "[placement][profile]") {
  std::string topo = "topology: {nodes: 1, cores_per_node: 4}\n";
  CHECK(profile_error(topo + "cpus:\n  use: \"" + std::string(25, '9') + "\"\n") ==
        "bad.yaml:3:8: error: use: expected a cpu list like \"2-19,22\" or [2, 3] (cpus below 4096), not '" +
            std::string(25, '9') + "'");
  CHECK(profile_error(topo + "cpus:\n  use: \"" + std::string(300000, '1') + "\"\n") ==
        "bad.yaml:3:8: error: use: expected a cpu list like \"2-19,22\" or [2, 3] (cpus below 4096), not '" +
            std::string(40, '1') + "...'");
  CHECK(profile_error(topo + "cpus:\n  use: [" + std::string(300000, '9') + "]\n") ==
        "bad.yaml:3:9: error: use: " + std::string(40, '9') + "... is out of range (0..4095)");
  CHECK(profile_error(topo + "cpus:\n  housekeeping: " + std::string(30, '9') + "\n") ==
        "bad.yaml:3:17: error: housekeeping: " + std::string(30, '9') + " is out of range (0..4095)");
}

TEST_CASE("host profile files: only regular files of a bounded size", "[placement][profile]") {
  HostProfile p;
  std::string err;
  CHECK_FALSE(load_host_profile("/dev/zero", HostEnvironment::this_process(), p, &err));
  CHECK(err == "/dev/zero: error: cannot read '/dev/zero': it is not a regular file (a device, a pipe or a socket)");
  std::string dir = scratch("placement", "profile_files");
  std::string big = write_file(dir + "/big.yaml", "# " + std::string(kMaxHostProfileBytes, 'x') + "\n");
  CHECK_FALSE(load_host_profile(big, HostEnvironment::this_process(), p, &err));
  CHECK(err == big + ": error: cannot read '" + big + "': it is larger than 1 MiB, the most that is read");
  CHECK_FALSE(load_host_profile(dir + "/none.yaml", HostEnvironment::this_process(), p, &err));
  CHECK(err == dir + "/none.yaml: error: cannot read host profile: No such file or directory");
}

// Finding 14: the default profile was read from ./configs/laptop.yaml, and
// its EAL options can load any shared object (-d).
TEST_CASE("the default host profile is never taken from the working directory", "[placement][profile][cli]") {
  std::string dir = scratch("placement", "planted_profile");
  fs::create_directories(dir + "/configs");
  write_file(dir + "/configs/laptop.yaml", "name: planted\neal:\n  args: [-d, " + dir + "/evil.so]\n");
  std::string pipe = std::string(SLUICE_SOURCE_DIR) + "/tests/golden/placement/one-node-two-cpus.pipe";
  Run r = run_cmd("cd " + dir + " && " SLUICE_BINARY " plan --format json " + pipe);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("\"host\": \"laptop\"") != std::string::npos);
  CHECK(r.out.find("planted") == std::string::npos);
  // the build tree's executable takes the source tree's profile, a path fixed when it was built
  CHECK(default_host_profile_path() == std::string(SLUICE_SOURCE_DIR) + "/configs/laptop.yaml");
}

// Running as root, a profile others could have written is refused (its EAL
// options load code), as sshd's StrictModes refuses such files.
TEST_CASE("as root, a host profile others can write is refused", "[placement][profile][root]") {
  if (geteuid() != 0) {
    WARN("not root: nothing to refuse");
    return;
  }
  std::string dir = scratch("placement", "writable_profile");
  std::string profile = write_file(dir + "/open.yaml", "name: open\ncpus:\n  oversubscribe: true\n");
  fs::permissions(profile, fs::perms(0666));
  HostProfile p;
  std::string err;
  CHECK_FALSE(load_host_profile(profile, HostEnvironment::this_process(), p, &err));
  CHECK(err == profile + ": error: refusing this host profile as root: '" + profile +
                   "' is writable by others (mode 0666) (its EAL options can load code: the file and its directories "
                   "must be root's and writable only by root)");
  fs::permissions(profile, fs::perms(0644));
  CHECK(load_host_profile(profile, HostEnvironment::this_process(), p, &err));
  REQUIRE(chown(profile.c_str(), 65534, 65534) == 0);  // nobody's
  CHECK_FALSE(load_host_profile(profile, HostEnvironment::this_process(), p, &err));
  CHECK(err.find("belongs to uid 65534, not root") != std::string::npos);
  REQUIRE(chown(profile.c_str(), 0, 0) == 0);
  fs::permissions(dir, fs::perms(0777));  // a directory anyone can write: the file could be swapped
  CHECK_FALSE(load_host_profile(profile, HostEnvironment::this_process(), p, &err));
  CHECK(err.find("'" + dir + "' is writable by others (mode 0777)") != std::string::npos);
  fs::permissions(dir, fs::perms(01777));  // sticky, as /tmp: others cannot replace root's files
  CHECK(load_host_profile(profile, HostEnvironment::this_process(), p, &err));
  fs::permissions(dir, fs::perms(0755));
  Run r = run_sluice("plan configs/flowprobe.pipe --host " + profile);
  CHECK(r.status == 0);
  fs::permissions(profile, fs::perms(0664));
  r = run_sluice("plan configs/flowprobe.pipe --host " + profile);
  CHECK(r.status == 1);
  CHECK(r.out.find(profile + ": error: refusing this host profile as root: '" + profile +
                   "' is writable by its group (mode 0664)") != std::string::npos);
}

// libyaml's scanner spends time in proportion to the nesting depth on every
// token: a profile of 400K '[' kept `sluice plan` (and a reload) busy for hours.
TEST_CASE("host profile: deep nesting is refused before libyaml reads it all", "[placement][profile]") {
  std::string deep = "cpus:\n  use: " + std::string(400000, '[') + std::string(400000, ']') + "\n";
  CHECK(profile_error(deep) == "bad.yaml:2:22: error: lists and mappings nested more than 16 deep (a profile needs 3)");
  CHECK(profile_error("a: " + std::string(20, '{')) == "bad.yaml:1:19: error: lists and mappings nested more than 16 deep (a profile needs 3)");
  // a syntax error before the depth is reached is libyaml's to report
  CHECK(profile_error("cpus: [1, 2\n").rfind("bad.yaml:2:1: error: ", 0) == 0);
}
