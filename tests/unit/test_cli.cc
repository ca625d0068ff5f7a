// The sluice command line as a user runs it: exit statuses, output formats.
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "run_fixture.hh"

using namespace sluice::test;

// Writes a configuration into the build tree (beside the test plugins); returns its path.
static std::string write_config(const std::string &name, const std::string &text) {
  return write_file(std::string(SLUICE_TEST_PLUGIN_DIR) + "/" + name, text);
}

TEST_CASE("sluice check: 0 when clean, 1 on errors, 2 on usage errors", "[cli]") {
  Run clean = run_sluice("check configs/flowprobe.pipe");
  INFO(clean.out);
  CHECK(clean.status == 0);
  CHECK(clean.out.find("configs/flowprobe.pipe: ok (8 elements, 2 lanes, 6 segments)") != std::string::npos);

  Run bad = run_sluice("check tests/dsl/invalid/arguments.pipe");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("tests/dsl/invalid/arguments.pipe:3:24: error: unknown argument 'capcity' for FlowTable") != std::string::npos);
  CHECK(bad.out.find("hint: did you mean 'capacity'?") != std::string::npos);
  CHECK(bad.out.find(" errors, ") != std::string::npos);

  CHECK(run_sluice("check").status == 2);
  CHECK(run_sluice("check configs/flowprobe.pipe --bogus").status == 2);
  CHECK(run_sluice("frobnicate").status == 2);
  Run missing = run_sluice("check no/such.pipe");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("cannot open 'no/such.pipe'") != std::string::npos);
  Run dir = run_sluice("check configs");
  CHECK(dir.status == 1);
  CHECK(dir.out.find("cannot read 'configs': it is a directory") != std::string::npos);
  Run empty = run_sluice("check /dev/null");
  CHECK(empty.status == 0);
  CHECK(empty.out.find("warning: the configuration has no source") != std::string::npos);
}

TEST_CASE("sluice check --define", "[cli]") {
  Run r = run_sluice("check configs/flowprobe.pipe --define QUEUES=4 -D COLLECTOR=[::1]:4739");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("4 lanes, 10 segments") != std::string::npos);
  Run bad = run_sluice("check configs/flowprobe.pipe --define QUEUES=0");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("<command line>") != std::string::npos);
  CHECK(run_sluice("check configs/flowprobe.pipe --define QUEUES").status == 2);
}

TEST_CASE("sluice --help, --version, COMMAND --help", "[cli]") {
  Run help = run_sluice("--help");
  CHECK(help.status == 0);
  for (const char *cmd : {"check", "plan", "elements"}) CHECK(help.out.find(cmd) != std::string::npos);
  Run v = run_sluice("--version");
  CHECK(v.status == 0);
  CHECK(v.out.rfind("sluice ", 0) == 0);
  Run ph = run_sluice("plan --help");
  CHECK(ph.status == 0);
  CHECK(ph.out.find("--format") != std::string::npos);
  CHECK(ph.out.find("--host") != std::string::npos);
}

TEST_CASE("sluice plan prints lanes and segments as text and dot", "[cli]") {
  Run t = run_sluice("plan configs/flowprobe.pipe");
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("Meter@1/ft") != std::string::npos);
  CHECK(t.out.find("lane 1: src queue 1") != std::string::npos);
  CHECK(t.out.find("segment 0 (acquisition): src#0, Timestamp@1#0, Ring@1#0") != std::string::npos);
  CHECK(t.out.find("feeds segment 1 (through Ring@1#0)") != std::string::npos);
  CHECK(t.out.find("merge into exp") != std::string::npos);
  CHECK(t.out.find("capacity 1M") != std::string::npos);
  // placed on the default (laptop) profile: a node per lane, a cpu and a reason per segment
  CHECK(t.out.find("    node 0: device pcap:examples/traces/demo.pcap is not a NIC (no NUMA node)") != std::string::npos);
  CHECK(std::regex_search(t.out, std::regex("Ring@1#0\n      cpu [0-9]+ \\(node 0\\): dedicated (cpu|core) on node 0")));
  CHECK(t.out.find("placement on host laptop: ") != std::string::npos);
  CHECK(t.out.find("note: acquisition: busy polling") != std::string::npos);
  Run d = run_sluice("plan configs/flowprobe.pipe --format dot");
  REQUIRE(d.status == 0);
  CHECK(d.out.rfind("digraph sluice {", 0) == 0);
  CHECK(d.out.find("subgraph cluster_segment_4") != std::string::npos);
  CHECK(d.out.find("subgraph cluster_node_0") != std::string::npos);
  CHECK(d.out.find("subgraph cluster_cpu_") != std::string::npos);
  CHECK(d.out.find("style=dashed") != std::string::npos);
  CHECK(run_sluice("plan configs/flowprobe.pipe --format svgz").status == 2);
}

TEST_CASE("sluice elements lists and describes the library", "[cli]") {
  Run list = run_sluice("elements");
  REQUIRE(list.status == 0);
  for (const char *e : {"RSSSource", "TrafficGen", "FlowTable", "GCSlicer", "IPFIXExporter", "NetFlowV9Exporter",
                        "FlowLog", "PcapSink", "Ring", "Filter", "Timestamp", "Counter", "Tee", "Discard", "Sample"})
    CHECK(list.out.find(e) != std::string::npos);
  Run ft = run_sluice("elements FlowTable");
  REQUIRE(ft.status == 0);
  CHECK(ft.out.find("capacity") != std::string::npos);
  CHECK(ft.out.find("flows") != std::string::npos);
  CHECK(ft.out.find("30min") != std::string::npos);
  Run typo = run_sluice("elements FlowTabel");
  CHECK(typo.status == 2);
  CHECK(typo.out.find("did you mean 'FlowTable'?") != std::string::npos);
}

TEST_CASE("require loads a plugin's elements, and refuses another ABI", "[cli][plugin]") {
  auto write = [](const std::string &name, const std::string &so) {
    return write_config(name, "require \"" + so + "\";\nsrc :: TrafficGen -> PluginCounter(5K) -> Discard;\n");
  };
  Run good = run_sluice("check " + write("uses_plugin.pipe", "sample_plugin_good.so"));
  INFO(good.out);
  CHECK(good.status == 0);
  Run old = run_sluice("check " + write("uses_old_plugin.pipe", "sample_plugin_old.so"));
  INFO(old.out);
  CHECK(old.status == 1);
  CHECK(old.out.find("uses_old_plugin.pipe:1:9: error: plugin '") != std::string::npos);
  CHECK(old.out.find("was built for ABI -1, this sluice has ABI 1") != std::string::npos);
  Run none = run_sluice("check " + write("uses_no_plugin.pipe", "libc-is-not-here.so"));
  CHECK(none.status == 1);
  CHECK(none.out.find("cannot find required file 'libc-is-not-here.so'") != std::string::npos);
}

TEST_CASE("warnings alone leave the exit status 0", "[cli]") {
  std::string path = write_config("warns.pipe", "define $UNUSED 1;\nTrafficGen -> Discard;\n");
  Run r = run_sluice("check " + path);
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("warns.pipe:1:1: warning: variable '$UNUSED' is defined but never used") != std::string::npos);
  CHECK(r.out.find("0 errors, 1 warning") != std::string::npos);
}

TEST_CASE("Graphviz reads the plan's dot output", "[cli]") {
  if (system("command -v dot >/dev/null 2>&1") != 0) {
    WARN("skipped: Graphviz `dot` is not installed (./build.sh deps installs it)");
    return;
  }
  for (const char *cfg : {"configs/flowprobe.pipe", "examples/two_exporters.pipe", "tests/dsl/valid/ports_and_fanout.pipe"}) {
    Run r = run_sluice(std::string("plan ") + cfg + " --format dot | dot -Tsvg");
    INFO(cfg << "\n" << r.out.substr(0, 2000));
    CHECK(r.status == 0);
    CHECK(r.out.find("<svg") != std::string::npos);
    CHECK(r.out.find("Error") == std::string::npos);
  }
}
