// The sluice command line as a user runs it: exit statuses, output formats.
#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <regex>
#include <string>
#include <thread>

#include "engine/core/element_spec.hh"
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
  Run empty = run_sluice("check " + write_config("empty.pipe", ""));
  CHECK(empty.status == 0);
  CHECK(empty.out.find("warning: the configuration has no source") != std::string::npos);
  Run device = run_sluice("check /dev/null");  // not a regular file: refused, as /dev/zero would be
  CHECK(device.status == 1);
  CHECK(device.out.find("cannot read '/dev/null': it is not a regular file") != std::string::npos);
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

// LLVM is in the JIT module (sluice-jit.so, engine/jit/jit_module.hh),
// which the executable opens when a run first compiles: never for
// --version, check or a --no-jit run (loading LLVM was 15 of the 25 ms each
// command took to start), nor for a --jit run that ends before it would
// compile (it made such a run 20 ms slower than --no-jit: a short trace);
// at the start with --jit-wait, in the background for a --jit run that
// compiles while it runs. Where the module is missing (a copy of the
// executable alone), a run with the JIT fails at once saying so, and
// --no-jit runs.
TEST_CASE("the JIT module is loaded by runs that compile only, and its absence is a clear error", "[cli][jit]") {
  std::string dir = scratch("cli", "jit-module");
  std::string pipe = write_file(dir + "/filter.pipe",
                                "TrafficGen(flows 10, duration 10ms) -> Filter(\"tcp\") -> c :: Counter -> Discard;\n");
  auto loaded = [](const std::string &binary, const std::string &args, Run *out = nullptr) {
    Run r = run_cmd("cd " SLUICE_SOURCE_DIR " && LD_DEBUG=files " + binary + " " + args);
    if (out) *out = r;
    struct Loaded {
      bool module, llvm;
    };
    return Loaded{r.out.find("sluice-jit.so") != std::string::npos, r.out.find("libLLVM") != std::string::npos};
  };
  for (std::string args : {std::string("--version"), "check " + pipe, "run -q --no-jit " + pipe, "run --jit " + pipe}) {
    INFO(args);
    Run r;
    auto l = loaded(SLUICE_BINARY, args, &r);
    CHECK(r.status == 0);
    CHECK_FALSE(l.module);
    CHECK_FALSE(l.llvm);
    if (args.find("--jit ") != std::string::npos) {
      CHECK(r.out.find("loop fused") == std::string::npos);
      CHECK_THAT(r.out, Catch::Contains("filter: part of its segment's fused loop once compiled"));
    }
  }
  Run jit;
  auto l = loaded(SLUICE_BINARY, "run --jit-wait " + pipe, &jit);
  CHECK(jit.status == 0);
  CHECK(l.module);
  CHECK(l.llvm);
  CHECK(jit.out.find("loop fused by the JIT") != std::string::npos);
  // Traffic without an end, run for 2.5 s: the loop is compiled 0.1 s in,
  // the module loaded then, on the compiling thread.
  std::string endless = write_file(dir + "/endless.pipe", "TrafficGen(flows 10, rate 2Kpps) -> Filter(\"tcp\") -> "
                                                          "c :: Counter -> Discard;\n");
  Run background;
  auto lb = loaded(SLUICE_BINARY, "run --jit --duration 2500ms " + endless, &background);
  INFO(background.out);
  CHECK(background.status == 0);
  CHECK(lb.module);
  CHECK(background.out.find("loop fused by the JIT") != std::string::npos);

  std::filesystem::copy_file(SLUICE_BINARY, dir + "/sluice", std::filesystem::copy_options::overwrite_existing);
  std::string alone = dir + "/sluice";
  Run missing = run_cmd("cd " SLUICE_SOURCE_DIR " && " + alone + " run -q --jit " + pipe);
  CHECK(missing.status == 1);
  CHECK_THAT(missing.out, Catch::Contains("the JIT module sluice-jit.so is not installed") &&
                              Catch::Contains(dir + "/sluice-jit.so") && Catch::Contains("--no-jit"));
  Run interp = run_cmd("cd " SLUICE_SOURCE_DIR " && " + alone + " run --no-jit " + pipe);
  CHECK(interp.status == 0);
  CHECK(interp.out.find("every packet accounted for") != std::string::npos);
}

TEST_CASE("sluice plan prints lanes and segments as text and dot", "[cli]") {
  // On the 4-socket server's profile each lane has a core for its acquisition
  // and its sibling for its processing: the Ring splits the lane.
  Run t = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml");
  INFO(t.out);
  REQUIRE(t.status == 0);
  CHECK(t.out.find("Meter@1/ft") != std::string::npos);
  CHECK(t.out.find("lane 1: src queue 1") != std::string::npos);
  CHECK(t.out.find("segment 0 (acquisition): src#0, Timestamp@1#0, Ring@1#0\n") != std::string::npos);
  CHECK(t.out.find("feeds segment 1 (through Ring@1#0)") != std::string::npos);
  CHECK(t.out.find("merge into exp") != std::string::npos);
  CHECK(t.out.find("capacity 1M") != std::string::npos);
  CHECK(std::regex_search(t.out, std::regex("Ring@1#0\n      cpu [0-9]+ \\(node 1\\): dedicated core on node 1")));
  CHECK(t.out.find("Rings in the lane's thread") == std::string::npos);
  // Placed on the default (laptop) profile, this machine: a node per lane, a
  // cpu and a reason per segment.
  Run l = run_sluice("plan configs/flowprobe.pipe");
  INFO(l.out);
  REQUIRE(l.status == 0);
  CHECK(l.out.find("    node 0: device pcap:examples/traces/demo.pcap is not a NIC (no NUMA node)") != std::string::npos);
  CHECK(std::regex_search(l.out, std::regex("segment 0 \\(acquisition\\): src#0, Timestamp@1#0, Ring@1#0.*\n      cpu [0-9]+ \\(node 0\\): dedicated (cpu|core) on node 0")));
  CHECK(l.out.find("placement on host laptop: ") != std::string::npos);
  CHECK(l.out.find("note: acquisition: busy polling") != std::string::npos);
  Run d = run_sluice("plan configs/flowprobe.pipe --host configs/server-4s.yaml --format dot");
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
  CHECK(old.out.find("was built for ABI -1, this sluice has ABI " + std::to_string(sluice::kPluginAbi)) != std::string::npos);
  // A plugin whose element has a built-in's name is refused, not silently
  // shadowed (nor does it replace the built-in's runtime).
  Run clash = run_sluice("check " + write("uses_clash_plugin.pipe", "sample_plugin_clash.so"));
  INFO(clash.out);
  CHECK(clash.status == 1);
  CHECK(clash.out.find("uses_clash_plugin.pipe:1:9: error: plugin '") != std::string::npos);
  CHECK(clash.out.find("sample_plugin_clash.so' defines element 'Counter', a name taken already") != std::string::npos);
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

// Issue 13, finding 3: `capacity 0xg` threw out of std::stoull and aborted
// `sluice check` (exit 134, no message).
TEST_CASE("a malformed number is a located error, in a file or a --define", "[cli]") {
  std::string path = write_config("hex.pipe", "define $CAP 1K;\nTrafficGen -> Ring(capacity 0xg) -> Ring(capacity $CAP) -> Discard;\n");
  Run r = run_sluice("check " + path);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find(path + ":2:29: error: malformed number '0xg'") != std::string::npos);
  std::string defined = write_config("hex_define.pipe", "define $CAP 1K;\nTrafficGen -> Ring(capacity $CAP) -> Discard;\n");
  Run d = run_sluice("check " + defined + " -D CAP=0xg");
  INFO(d.out);
  CHECK(d.status == 1);
  CHECK(d.out.find("<command line>:1:5: error: malformed number '0xg'") != std::string::npos);
}

// Finding 15: `require "p.so"` was checked beside the file but loaded by bare
// name, so dlopen took it from LD_LIBRARY_PATH (or the system's library path).
TEST_CASE("a required plugin is loaded from the path that was checked", "[cli][plugin]") {
  namespace fs = std::filesystem;
  std::string here = scratch("cli", "plugin_here"), elsewhere = scratch("cli", "plugin_elsewhere");
  fs::copy_file(std::string(SLUICE_TEST_PLUGIN_DIR) + "/sample_plugin_good.so", here + "/p.so");
  fs::copy_file(std::string(SLUICE_TEST_PLUGIN_DIR) + "/sample_plugin_old.so", elsewhere + "/p.so");
  write_file(here + "/x.pipe", "require \"p.so\";\nsrc :: TrafficGen -> PluginCounter(5K) -> Discard;\n");
  // run from the file's directory, so that the name checked has no slash
  Run r = run_cmd("cd " + here + " && LD_LIBRARY_PATH=" + elsewhere + " " SLUICE_BINARY " check x.pipe");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(r.out.find("x.pipe: ok (3 elements") != std::string::npos);
  // and the other one, named by its own path, is the one refused
  write_file(here + "/y.pipe", "require \"" + elsewhere + "/p.so\";\nTrafficGen -> Discard;\n");
  Run other = run_cmd("cd " + here + " && " SLUICE_BINARY " check y.pipe");
  CHECK(other.status == 1);
  CHECK(other.out.find("y.pipe:1:9: error: plugin '" + elsewhere + "/p.so' was built for ABI -1") != std::string::npos);
}

// Running as root, a plugin others could have written is refused: it runs as
// the probe (sshd's StrictModes does the same for its files).
TEST_CASE("as root, a plugin others can write is refused", "[cli][plugin][root]") {
  if (geteuid() != 0) {
    WARN("not root: nothing to refuse");
    return;
  }
  namespace fs = std::filesystem;
  std::string dir = scratch("cli", "plugin_writable");
  fs::copy_file(std::string(SLUICE_TEST_PLUGIN_DIR) + "/sample_plugin_good.so", dir + "/p.so");
  std::string pipe = write_file(dir + "/x.pipe", "require \"p.so\";\nTrafficGen -> PluginCounter -> Discard;\n");
  CHECK(run_sluice("check " + pipe).status == 0);
  fs::permissions(dir + "/p.so", fs::perms(0646));
  Run r = run_sluice("check " + pipe);
  INFO(r.out);
  CHECK(r.status == 1);
  CHECK(r.out.find(pipe + ":1:9: error: refusing to load plugin '" + dir + "/p.so' as root: '" + dir +
                   "/p.so' is writable by others (mode 0646)") != std::string::npos);
}

// Finding 3 on a running probe: a reload of a file with a malformed number (by
// `sluice ctl reload` or SIGHUP) or of /dev/zero is refused with the error,
// and the probe goes on to the end of its run.
TEST_CASE("a running probe survives reloads of malformed files", "[cli][reload]") {
  std::string dir = scratch("cli", "bad_reload");
  std::string sock = dir + "/probe.sock";
  std::string graph = "src :: TrafficGen(flows 100, new_flows_per_s 100, duration 20s, sizes [64B], rate 2Kpps);\n"
                      "src -> Ring(capacity 1K) -> Counter -> Discard;\n";
  std::string good = write_file(dir + "/good.pipe", graph);
  std::string hex = graph;
  hex.replace(hex.find("capacity 1K"), 11, "capacity 0xg");
  std::string bad = write_file(dir + "/bad.pipe", hex);
  Run started = run_cmd("(" SLUICE_BINARY " run " + good + " --control " + sock + " --duration 4s > " + dir +
                        "/out.txt 2>&1 & echo $!)");
  int pid = std::stoi(started.out);
  for (int i = 0; i < 200 && !std::filesystem::exists(sock); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  REQUIRE(std::filesystem::exists(sock));
  Run r = run_sluice("ctl --socket " + sock + " reload " + bad);
  CHECK(r.status == 1);
  CHECK(r.out.find(bad + ":2:22: error: malformed number '0xg'") != std::string::npos);
  CHECK(r.out.find("the running graph goes on unchanged") != std::string::npos);
  r = run_sluice("ctl --socket " + sock + " reload /dev/zero");
  CHECK(r.status == 1);
  CHECK(r.out.find("cannot read '/dev/zero': it is not a regular file") != std::string::npos);
  // SIGHUP reloads the file the run started with, now broken
  write_file(good, hex);
  kill(pid, SIGHUP);
  for (int i = 0; i < 200 && kill(pid, 0) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  CHECK(kill(pid, 0) != 0);
  std::string out = read_file(dir + "/out.txt");
  INFO(out);
  CHECK(out.find("every packet accounted for") != std::string::npos);  // the summary of a run that ended cleanly
  CHECK(out.find("sluice: error: SIGHUP: reload " + good + ": " + good + ":2:22: error: malformed number '0xg'") !=
        std::string::npos);
}
