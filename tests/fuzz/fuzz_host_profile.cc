// libFuzzer target: any byte string as a host profile (YAML), then, when it
// loads, the placement of small lane graphs on it and the plan printed as
// text, dot and JSON. Errors are messages, never a crash, hang or sanitizer
// report. `topology: auto` reads a fake sysfs tree made once (2 NUMA nodes,
// 4 cores of 2 threads, a NIC on node 1), not this machine's.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dsl/frontend.hh"
#include "engine/driver/lanes.hh"
#include "engine/placement/host_profile.hh"
#include "engine/placement/placement.hh"
#include "engine/placement/plan_format.hh"

namespace {

using namespace sluice;

struct Compiled {
  SourceManager sm;
  ElementGraph graph;
  LaneGraph lanes;
};

// Graphs with a NIC on node 1, a device without NUMA node, a generator, and
// shared elements (a housekeeping cpu).
const char *const kGraphs[] = {
    "src :: RSSSource(device \"0000:81:00.0\", queues 2);\n"
    "log :: shared FlowLog(\"/dev/null\");\n"
    "src -> Timestamp(clock tsc) -> Ring(capacity 1K) -> ft :: FlowTable(capacity 1K) -> GCSlicer(table ft) -> log;\n",
    "src :: RSSSource(device \"af_packet:eth0\", queues 3);\nsrc -> Timestamp(clock tsc) -> Discard;\n",
    "TrafficGen(queues 2) -> Ring(capacity 1K) -> Counter -> Discard;\n",
};

std::string g_sysfs;
std::vector<std::unique_ptr<Compiled>> g_graphs;

void write(const std::string &path, const std::string &text) {
  std::filesystem::create_directories(std::filesystem::path(g_sysfs + "/" + path).parent_path());
  std::ofstream(g_sysfs + "/" + path) << text << "\n";
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  char dir[] = "/tmp/sluice-fuzz-sysfs-XXXXXX";
  if (!mkdtemp(dir)) std::abort();
  g_sysfs = dir;
  write("devices/system/cpu/online", "0-7");
  for (int c = 0; c < 8; ++c)
    write("devices/system/cpu/cpu" + std::to_string(c) + "/topology/thread_siblings_list",
          std::to_string(c % 4) + "," + std::to_string(c % 4 + 4));
  write("devices/system/node/node0/cpulist", "0-1,4-5");
  write("devices/system/node/node1/cpulist", "2-3,6-7");
  write("bus/pci/devices/0000:81:00.0/numa_node", "1");
  write("class/net/eth0/device/numa_node", "0");
  for (const char *text : kGraphs) {
    auto c = std::make_unique<Compiled>();
    Diagnostics diags(c->sm);
    if (!load_pipe_text("fuzz.pipe", text, FrontendOptions{}, c->sm, diags, c->graph) ||
        !build_lanes(c->graph, diags, c->lanes)) {
      diags.print(std::cerr);
      std::abort();  // the graphs are fixed: they must compile
    }
    g_graphs.push_back(std::move(c));
  }
  std::atexit([] { std::filesystem::remove_all(g_sysfs); });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  HostEnvironment env;
  env.sysfs_root = g_sysfs;
  HostProfile profile;
  std::string error;
  std::string yaml(reinterpret_cast<const char *>(data), size);
  if (!parse_host_profile("fuzz.yaml", yaml, env, profile, &error)) {
    if (error.rfind("fuzz.yaml", 0) != 0) __builtin_trap();  // every error names the file
    return 0;
  }
  std::ostringstream sink;
  for (const auto &g : g_graphs) {
    Placement placement;
    if (!place_lanes(g->lanes, profile, placement, &error)) continue;
    print_plan_text(sink, "fuzz.pipe", g->lanes, &placement);
    print_plan_dot(sink, "fuzz.pipe", g->lanes, &placement);
    print_plan_json(sink, "fuzz.pipe", g->lanes, placement);
  }
  return 0;
}
