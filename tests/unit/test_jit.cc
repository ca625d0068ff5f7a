// The JIT (engine/jit/segment_jit.hh): what the fused loops contain
// (`sluice plan --emit-ir`), the checks on element bitcode (stale, thread-
// local storage), the options, and fused loops compiled again after a
// handler write and after a hot reload. test_jit_equivalence.cc checks that
// fused loops and the interpreter give the same records and counters.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "dsl/frontend.hh"
#include "engine/control/probe_control.hh"
#include "engine/jit/segment_jit.hh"
#include "engine/driver/lanes.hh"
#include "engine/runtime/runtime.hh"
#include "graph_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;

namespace {

// The IR of each segment, as --emit-ir prints it: "; <label>, compiled in
// N ms" then the module.
std::vector<std::string> split_modules(const std::string &out) {
  std::vector<std::string> mods;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("; ", 0) == 0 && line.find(", compiled in ") != std::string::npos) mods.emplace_back();
    if (!mods.empty()) mods.back() += line + "\n";
  }
  return mods;
}

// Calls in the IR to what stands for an element's processing: the JIT's
// entries, its per-instance copies, and any element class's push method.
std::vector<std::string> element_calls(const std::string &ir) {
  static const std::regex call(R"((call|invoke) [^\n]*@("?)(sluice_jit_push_\w+|push\.[\w.]+|deliver\.[\w.]+|emit\.[\w.]+|_ZN6sluice8elements\w+4push\w*))");
  std::vector<std::string> found;
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), call); it != std::sregex_iterator(); ++it)
    found.push_back((*it)[3]);
  return found;
}

std::shared_ptr<CompiledPipe> compile_text(const std::string &text) {
  std::string diags;
  auto c = test::compile_graph(text, &diags);
  INFO(diags);
  REQUIRE(c);
  return c;
}

// A graph running in this process with fused loops.
struct FusedProbe {
  std::shared_ptr<CompiledPipe> graph;
  std::unique_ptr<Runtime> rt;
  std::thread runner;

  // background_nice: what a background compilation runs at. The tests of
  // what a compilation does pass 0: at the default, 19, a machine whose cpus
  // other tests keep busy (CI runs two at a time, under ASan too) leaves it
  // next to nothing, for minutes.
  explicit FusedProbe(const std::string &text, int background_nice = 0, const JitSettings &settings = {})
      : graph(compile_text(text)) {
    RunOptions opts;
    opts.eal_args = {"--no-huge"};
    opts.status_line = false;
    opts.jit = true;
    rt = std::make_unique<Runtime>(graph, opts);
    std::string err;
    REQUIRE(rt->setup(&err));
    std::shared_ptr<ProgramCompiler> jit = make_segment_jit(settings, &err);
    INFO(err);
    REQUIRE(jit);
    rt->set_compiler(jit, -1, background_nice);
    REQUIRE(rt->compile_programs(&err));
    runner = std::thread([this] { rt->run(); });
  }
  ~FusedProbe() {
    if (runner.joinable()) rt->request_abort(), runner.join();
  }
  // Waits until every segment runs a fused loop compiled `n` times (or
  // more), up to a minute (ASan on a loaded machine).
  bool wait_fused(unsigned n) {
    for (int i = 0; i < 6000; ++i) {
      bool all = true;
      {
        auto lock = rt->structure_lock();
        for (const auto &s : rt->segments())
          all = all && s->program() && std::string(s->program()->kind()) == "jit" &&
                rt->compiled_loop(*s).compilations >= n;
      }
      if (all) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }
  uint64_t count_of(const std::string &name) {
    auto lock = rt->structure_lock();
    RuntimeElement *e = rt->find(name);
    REQUIRE(e);
    return e->counters.in.get();
  }
};

}  // namespace

TEST_CASE("jit: the default probe's fused loops call no element's push, one loop per segment", "[jit]") {
  // A trace of its own: the probe's default one is made by `build.sh demo`.
  std::string dir = test::scratch("jit", "default_probe");
  test::Run gen = test::run_sluice("run -q " + test::write_file(dir + "/make.pipe", "TrafficGen(flows 100, duration 1s) -> "
                                                                                     "PcapSink(\"" + dir + "/t.pcap\");\n"));
  REQUIRE(gen.status == 0);
  // A live device (`null`: DPDK's net_null) keeps each lane's Ring between
  // two segments on any machine, its own cpu for each or not.
  test::Run r = test::run_sluice("plan configs/flowprobe.pipe --emit-ir -D DEVICE=null");
  INFO(r.out.substr(0, 4000));
  REQUIRE(r.status == 0);
  std::vector<std::string> mods = split_modules(r.out);
  REQUIRE(mods.size() == 6);  // 2 lanes x (acquisition, processing) + 2 shared exporters
  for (size_t i = 0; i < mods.size(); ++i) {
    INFO(mods[i].substr(0, mods[i].find('\n')));
    CHECK(std::regex_search(mods[i], std::regex("define [^\n]*@segment_" + std::to_string(i) + "_step\\(\\)")));
    CHECK(element_calls(mods[i]).empty());
  }
  // The processing segments did meter: the flow cache's batch code is there,
  // specialized for the lane's table (its address a constant).
  CHECK(std::regex_search(mods[1], std::regex(R"(define internal [^\n]*FlowCache13account_batch\w*\.at\()")));
  // "ip or ip6": the EtherTypes, byte-swapped, are immediates of the loop;
  // libpcap's filter is not called.
  CHECK(std::regex_search(mods[1], std::regex(R"(i16 -8826)")));  // 0x86dd
  CHECK(mods[1].find("PcapFilter7matches") == std::string::npos);
  CHECK(mods[1].find("bpf_filter") == std::string::npos);

  // On two cpus each lane's segments would share one: the trace's lanes run
  // their Rings in their thread, one loop a lane that reads, meters and
  // passes through the Ring without a call.
  std::string two_cpus = test::write_file(dir + "/two.yaml", "name: two\n"
                                                             "topology: {nodes: 1, cores_per_node: 2, threads_per_core: 1}\n"
                                                             "cpus: {oversubscribe: true}\n");
  test::Run f = test::run_sluice("plan configs/flowprobe.pipe --host " + two_cpus + " --emit-ir -D DEVICE=pcap:" + dir +
                                 "/t.pcap");
  INFO(f.out.substr(0, 4000));
  REQUIRE(f.status == 0);
  std::vector<std::string> folded = split_modules(f.out);
  REQUIRE(folded.size() == 4);  // 2 lanes x 1 + 2 shared exporters
  for (size_t i = 0; i < 2; ++i) {
    CHECK(element_calls(folded[i]).empty());
    CHECK(std::regex_search(folded[i], std::regex(R"(define internal [^\n]*FlowCache13account_batch\w*\.at\()")));
    CHECK(folded[i].find("Channel") == std::string::npos);  // no hand-over inside the lane
  }
}

TEST_CASE("jit: a Filter's port and a Sample's rate are immediates of the fused loop", "[jit]") {
  std::string dir = test::scratch("jit", "constants");
  test::write_file(dir + "/p.pipe",
                   "TrafficGen(flows 100, duration 1s) -> Filter(\"tcp port 8443\") -> Sample(0.25) -> Head(1M) -> Counter -> "
                   "Discard;\n");
  test::Run r = test::run_sluice("plan " + dir + "/p.pipe --emit-ir");
  INFO(r.out.substr(0, 4000));
  REQUIRE(r.status == 0);
  std::vector<std::string> mods = split_modules(r.out);
  REQUIRE(mods.size() == 1);
  // 8443 = 0x20fb, compared with the packet's bytes as loaded: 0xfb20
  CHECK(std::regex_search(mods[0], std::regex(R"(icmp eq i16 %\w+, -1248)")));
  // rate 0.25 of 2^64: the sampling threshold
  CHECK(mods[0].find("4611686018427387904") != std::string::npos);
  CHECK(element_calls(mods[0]).empty());
  CHECK(mods[0].find("PcapFilter7matches") == std::string::npos);
  // Filter, Sample, Head and Counter are packet stages: one loop over the
  // batch takes each packet through all four (the generated loop's block).
  std::regex pass_loop(R"(\npacket[\w.]*:)");
  CHECK(std::distance(std::sregex_iterator(mods[0].begin(), mods[0].end(), pass_loop), std::sregex_iterator()) == 1);
}

TEST_CASE("jit: bitcode that does not match the binary is refused as stale, naming the element", "[jit]") {
  const JitEntry *filter = RuntimeRegistry::global().find_jit("Filter");
  REQUIRE(filter);
  CHECK(check_bitcode_stamp_for_tests("Filter", *filter->stamp) == "");
  JitStamp bigger = *filter->stamp;
  bigger.object_size += 8;
  std::string e = check_bitcode_stamp_for_tests("Filter", bigger);
  CHECK_THAT(e, Catch::Contains("stale") && Catch::Contains("elements/packet/filter.cc") &&
                    Catch::Contains("class Filter") && Catch::Contains("--no-jit"));
  JitStamp older = *filter->stamp;
  std::snprintf(older.source_time, sizeof older.source_time, "Thu Jan  1 00:00:00 1970");
  CHECK_THAT(check_bitcode_stamp_for_tests("Filter", older), Catch::Contains("stale") && Catch::Contains("1970"));
  // Every class that can run has bitcode of its own, and it is this binary's.
  for (const char *cls : {"RSSSource", "TrafficGen", "Timestamp", "Ring", "Filter", "Counter", "Sample", "Tee",
                          "Discard", "PcapSink", "FlowTable", "GCSlicer", "IPFIXExporter", "NetFlowV9Exporter",
                          "FlowLog"}) {
    INFO(cls);
    const JitEntry *entry = RuntimeRegistry::global().find_jit(cls);
    REQUIRE(entry);
    CHECK(check_bitcode_stamp_for_tests(cls, *entry->stamp) == "");
  }
}

TEST_CASE("jit: bitcode that uses thread-local storage is refused, naming the element", "[jit]") {
  const char *tls = R"(
@per_lcore__lcore_id = external thread_local global i32
declare ptr @llvm.threadlocal.address.p0(ptr)
define internal i32 @mempool_cache_index() {
  %p = call ptr @llvm.threadlocal.address.p0(ptr @per_lcore__lcore_id)
  %v = load i32, ptr %p
  ret i32 %v
}
define void @sluice_jit_push_X(ptr %e, i32 %port, ptr %b) {
  %i = call i32 @mempool_cache_index()
  ret void
}
)";
  std::string e = check_thread_locals_for_tests(tls, "sluice_jit_push_X", "'x' (class Leaky)");
  CHECK_THAT(e, Catch::Contains("'x' (class Leaky)") && Catch::Contains("thread-local storage") &&
                    Catch::Contains("per_lcore__lcore_id") && Catch::Contains("mempool_cache_index") &&
                    Catch::Contains("--no-jit"));
  const char *clean = R"(
@counter = external global i64
define void @sluice_jit_push_Y(ptr %e, i32 %port, ptr %b) {
  %v = load i64, ptr @counter
  ret void
}
)";
  CHECK(check_thread_locals_for_tests(clean, "sluice_jit_push_Y", "'y'") == "");
}

TEST_CASE("jit: --jit-cpu sets the target, --no-jit the interpreter, bad choices are errors", "[jit]") {
  test::Run v2 = test::run_sluice("run -q examples/filter_count.pipe --jit-wait --jit-cpu x86-64-v2");
  INFO(v2.out);
  REQUIRE(v2.status == 0);
  CHECK_THAT(v2.out, Catch::Contains("loop fused by the JIT (LLVM ORC, x86-64-v2), compiled in "));
  test::Run off = test::run_sluice("run -q examples/filter_count.pipe --no-jit");
  REQUIRE(off.status == 0);
  CHECK(off.out.find("loop fused") == std::string::npos);
  CHECK_THAT(off.out, Catch::Contains("; interpreter"));
  CHECK_THAT(off.out, Catch::Contains("filter: libpcap's interpreter (--no-jit)"));  // no LLVM at all
  test::Run bad = test::run_sluice("run -q examples/filter_count.pipe --jit-cpu pentium-z");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("unknown CPU 'pentium-z'"));
  test::Run both = test::run_sluice("run -q examples/filter_count.pipe --jit --no-jit");
  CHECK(both.status != 0);
  CHECK_THAT(both.out, Catch::Contains("exclude each other"));
  test::Run perf = test::run_sluice("run -q examples/filter_count.pipe --jit-perf --no-jit");
  CHECK(perf.status != 0);
  CHECK_THAT(perf.out, Catch::Contains("--jit-perf and --no-jit exclude each other"));
}

// The dump perf inject reads (engine/jit/perf_jitdump.hh): a header perf
// accepts (its flags zero: LLVM 19's own writer leaves them unset, which
// perf refuses), then a record of each function of each loop, its name and
// the very bytes that run at its address.
TEST_CASE("jit: --jit-perf writes each fused loop's functions, named, with the code that runs, for perf", "[jit]") {
  std::string dir = test::scratch("jit", "perf_dump");
  setenv("JITDUMPDIR", dir.c_str(), 1);
  JitSettings settings;
  settings.perf = true;
  FusedProbe probe("gen :: TrafficGen(flows 1K, duration 30s, rate 50Kpps);\n"
                   "log :: shared FlowLog(\"/dev/null\");\n"
                   "gen -> Filter(\"ip\") -> ft :: FlowTable(capacity 4K) -> GCSlicer(table ft) -> log;\n",
                   0, settings);
  REQUIRE(probe.wait_fused(1));
  const std::string path = dir + "/jit-" + std::to_string(getpid()) + ".dump";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in);
  std::string dump((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  struct Header {
    uint32_t magic, version, total_size, elf_mach, pad1, pid;
    uint64_t timestamp, flags;
  } h;
  REQUIRE(dump.size() > sizeof h);
  std::memcpy(&h, dump.data(), sizeof h);
  CHECK(h.magic == 0x4A695444);
  CHECK(h.version == 1);
  CHECK(h.total_size == sizeof h);
  CHECK(h.elf_mach == 62);  // EM_X86_64
  CHECK(h.pid == uint32_t(getpid()));
  CHECK(h.flags == 0);
  std::set<std::string> names;
  for (size_t at = sizeof h; at < dump.size();) {
    uint32_t id, size;
    uint64_t addr, code_size;
    REQUIRE(at + 56 <= dump.size());
    std::memcpy(&id, dump.data() + at, 4);
    std::memcpy(&size, dump.data() + at + 4, 4);
    std::memcpy(&addr, dump.data() + at + 32, 8);  // code_addr
    std::memcpy(&code_size, dump.data() + at + 40, 8);
    REQUIRE(id == 0);  // JIT_CODE_LOAD
    REQUIRE(at + size <= dump.size());
    std::string name(dump.data() + at + 56);
    INFO(name);
    REQUIRE(size == 56 + name.size() + 1 + code_size);
    CHECK(code_size > 0);
    CHECK(std::memcmp(reinterpret_cast<const void *>(addr), dump.data() + at + 56 + name.size() + 1, code_size) == 0);
    names.insert(name);
    at += size;
  }
  CHECK(names.count("segment_0_step") == 1);
  CHECK(names.count("segment_1_step") == 1);
  // The loop's own copy of the flow cache's batch code, by its name.
  CHECK(std::any_of(names.begin(), names.end(),
                    [](const std::string &n) { return n.find("FlowCache13account_batch") != std::string::npos; }));
  // perf record finds the dump through its mapping in the process.
  std::ifstream maps("/proc/self/maps");
  std::string all((std::istreambuf_iterator<char>(maps)), std::istreambuf_iterator<char>());
  CHECK(all.find(path) != std::string::npos);
}

TEST_CASE("jit: a handler write runs the interpreter until the loop is compiled again with the new value", "[jit]") {
  FusedProbe probe(
      "gen :: TrafficGen(flows 1K, duration 30s, rate 200Kpps);\n"
      "gen -> f :: Filter(\"ip\") -> c :: Counter -> Discard;\n");
  REQUIRE(probe.wait_fused(1));
  while (probe.count_of("c#0") < 1000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ProbeControl control(*probe.rt, "jit.pipe");
  control.write("f.expr", "vlan 4000");  // generated traffic is untagged: nothing passes any more
  // Until it is compiled again the segment interprets, with the new value.
  REQUIRE(probe.wait_fused(2));
  uint64_t before = probe.count_of("c#0"), received = probe.rt->totals().received;
  while (probe.rt->totals().received < received + 20000) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  CHECK(probe.count_of("c#0") == before);  // the recompiled loop filters with the new expression
  CHECK(probe.count_of("f#0") > 20000);
  CHECK(probe.rt->programs_held() == 1);  // the first loop was let go
}

TEST_CASE("jit: after a hot reload the new segments run fused loops again", "[jit]") {
  auto text = [](const std::string &expr) {
    return "gen :: TrafficGen(flows 1K, duration 30s, rate 100Kpps, queues 2);\n"
           "gen -> Timestamp(clock pcap) -> Ring(capacity 4K) -> f :: Filter(\"" + expr + "\") -> c :: Counter -> "
           "Discard;\n";
  };
  FusedProbe probe(text("ip"));
  REQUIRE(probe.wait_fused(1));
  auto next = compile_text(text("not ip"));
  ReloadOutcome o = probe.rt->reload(next, false);
  INFO(o.error);
  REQUIRE(o.applied);
  REQUIRE(probe.wait_fused(1));
  auto lock = probe.rt->structure_lock();
  for (const auto &s : probe.rt->segments()) CHECK(probe.rt->compiled_loop(*s).ms > 0);
  CHECK(probe.rt->programs_held() == probe.rt->segments().size());  // the old graph's loops were let go
}

TEST_CASE("jit: a reload cancels the compilation the reload before it started, and the last graph gets its loops",
          "[jit]") {
  // A flow table makes the processing loops long to compile (about half a
  // second each here): the second reload comes while the first one's are
  // being compiled, and does not wait for them.
  auto text = [](const std::string &capacity) {
    return "gen :: TrafficGen(flows 1K, duration 60s, rate 50Kpps, queues 2);\n"
           "log :: shared FlowLog(\"/dev/null\");\n"
           "gen -> Timestamp(clock pcap) -> Ring(capacity 4K) -> Filter(\"ip\")\n"
           "    -> ft :: FlowTable(capacity " + capacity + ") -> GCSlicer(table ft) -> log;\n";
  };
  FusedProbe probe(text("64K"));
  REQUIRE(probe.wait_fused(1));
  for (const char *capacity : {"32K", "16K"}) {
    ReloadOutcome o = probe.rt->reload(compile_text(text(capacity)), false);
    INFO(o.error);
    REQUIRE(o.applied);
  }
  CHECK(probe.rt->compilations_cancelled() >= 1);
  REQUIRE(probe.wait_fused(1));
  auto lock = probe.rt->structure_lock();
  for (const auto &s : probe.rt->segments()) CHECK(probe.rt->compiled_loop(*s).ms > 0);
  CHECK(probe.rt->programs_held() == probe.rt->segments().size());
}

// A handler write started a compilation of the segment it changed (its
// loop held the old value as a constant); a second write while that
// compilation ran changed the Filter's program under the compiler's thread
// (ThreadSanitizer: a data race, one run in ten of the control test). A
// write now gives up the compilation under way first, and compiles again
// after.
TEST_CASE("ctl: a handler write gives up the JIT compilation under way before it changes what it reads", "[jit][ctl]") {
  FusedProbe probe("gen :: TrafficGen(flows 1K, duration 60s, rate 50Kpps);\n"
                   "gen -> Timestamp(clock pcap) -> Ring(capacity 4K) -> f :: Filter(\"ip\")\n"
                   "    -> ft :: FlowTable(capacity 64K) -> GCSlicer(table ft) -> FlowLog(\"/dev/null\");\n");
  REQUIRE(probe.wait_fused(1));
  ProbeControl control(*probe.rt, "test.pipe");
  control.write("f.expr", "tcp");  // its segment back on the interpreter, compiled again (about half a second)
  control.write("f.expr", "udp");  // while that compilation runs
  CHECK(probe.rt->compilations_cancelled() >= 1);
  CHECK(control.read("f.expr") == "udp\n");
  REQUIRE(probe.wait_fused(1));  // the last value's loop
}

namespace {
// The nice value of the JIT's compiling thread ("sl-jit") among the threads
// of task_dir (/proc/self/task, /proc/PID/task), as soon as one is seen
// (within 10 s); -100 if none is.
int compiling_thread_nice(const std::string &task_dir) {
  for (int i = 0; i < 10000; ++i) {
    std::error_code ec;
    for (const auto &t : std::filesystem::directory_iterator(task_dir, ec)) {
      std::ifstream comm(t.path() / "comm"), stat(t.path() / "stat");
      std::string name, line;
      std::getline(comm, name);
      if (name != "sl-jit" || !std::getline(stat, line)) continue;
      // after "(comm) ": state is field 3, nice field 19
      std::istringstream fields(line.substr(line.rfind(')') + 2));
      std::string f;
      for (int k = 3; k <= 19 && fields >> f; ++k)
        if (k == 19) return std::stoi(f);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return -100;
}
}  // namespace

// A compilation in the background (the run started on the interpreter, a
// reload, a handler write) takes only the cpu the segments leave: its
// thread runs at nice 19. At the default priority it took half of the cpu
// of the segment it shared one with, for as long as it compiled.
TEST_CASE("jit: a compilation in the background runs its thread at nice 19", "[jit]") {
  FusedProbe probe("gen :: TrafficGen(flows 1K, duration 60s, rate 50Kpps);\n"
                   "gen -> Timestamp(clock pcap) -> Ring(capacity 4K) -> f :: Filter(\"ip\")\n"
                   "    -> ft :: FlowTable(capacity 64K) -> GCSlicer(table ft) -> FlowLog(\"/dev/null\");\n",
                   19);  // the default, as `sluice run` sets it
  REQUIRE(probe.wait_fused(1));  // compiled before the start, at the caller's priority
  ProbeControl control(*probe.rt, "test.pipe");
  control.write("f.expr", "tcp");  // its segment compiled again, in the background (about half a second)
  CHECK(compiling_thread_nice("/proc/self/task") == 19);
}

// `sluice run --jit-nice N` sets it for the run's compilations (0 for tests
// that wait for them beside others); out of 0..19 it is a usage error.
TEST_CASE("jit: sluice run --jit-nice sets the nice of the compilations in the background", "[jit]") {
  std::string dir = test::scratch("jit", "nice");
  std::string cfg = test::write_file(dir + "/p.pipe",
                                     "TrafficGen(flows 1K, duration 60s, rate 20Kpps) -> Timestamp(clock pcap)"
                                     " -> Ring(capacity 4K) -> Filter(\"ip\") -> ft :: FlowTable(capacity 64K)"
                                     " -> GCSlicer(table ft) -> FlowLog(\"/dev/null\");\n");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    std::string cmd = "cd " SLUICE_SOURCE_DIR " && exec " SLUICE_BINARY " run -q --jit-nice 7 " + cfg + " > " + dir +
                      "/run.log 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
    _exit(127);
  }
  int nice = compiling_thread_nice("/proc/" + std::to_string(pid) + "/task");
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(test::read_file(dir + "/run.log"));
  CHECK(nice == 7);
  CHECK(WIFEXITED(status));
  test::Run bad = test::run_sluice("run -q --jit-nice 20 " + cfg);
  CHECK(bad.status == 2);
  CHECK_THAT(bad.out, Catch::Contains("--jit-nice"));
}

TEST_CASE("jit: a plugin's element is fused from the bitcode beside it, and refused without it", "[jit]") {
  std::string dir = test::scratch("jit", "plugin");
  std::string plugin = std::string(SLUICE_TEST_PLUGIN_DIR) + "/jit_plugin.so";
  auto pipe = [&](const std::string &so, const std::string &duration = "2s") {
    return test::write_file(dir + "/" + std::filesystem::path(so).stem().string() + ".pipe",
                            "require \"" + so + "\";\n"
                            "gen :: TrafficGen(flows 1K, duration " + duration + ");\n"
                            "gen -> e :: EvenOdd -> Counter -> Discard;\n");
  };
  std::string with_bc = pipe(plugin);
  test::Run ir = test::run_sluice("plan " + with_bc + " --emit-ir");
  INFO(ir.out.substr(0, 3000));
  REQUIRE(ir.status == 0);
  CHECK(element_calls(ir.out).empty());
  CHECK(ir.out.find("EvenOdd") == std::string::npos);  // its push is inlined, nothing of it is called
  test::Run jit = test::run_sluice("run -q " + with_bc + " --jit-wait --stats-json " + dir + "/jit.json");
  test::Run interp = test::run_sluice("run -q " + with_bc + " --no-jit --stats-json " + dir + "/interp.json");
  INFO(jit.out << interp.out);
  REQUIRE(jit.status == 0);
  REQUIRE(interp.status == 0);
  CHECK_THAT(jit.out, Catch::Contains("loop fused by the JIT"));
  CHECK_THAT(jit.out, Catch::Contains("dropped, odd length: "));
  std::string a = test::read_file(dir + "/jit.json"), b = test::read_file(dir + "/interp.json");
  auto elements = [](const std::string &json) { return json.substr(json.find("\"elements\""), json.find("\"segments\"") - json.find("\"elements\"")); };
  CHECK(elements(a) == elements(b));

  // The same plugin without its bitcode: with --jit-wait an error that
  // says what is missing; with --jit (compiling while the run goes) the
  // segment stays on the interpreter, saying why.
  std::filesystem::copy_file(plugin, dir + "/bare_plugin.so", std::filesystem::copy_options::overwrite_existing);
  // 460K packets at 100 Kpps, held back rather than dropped: 4.6 s, long
  // enough for the run to compile (a run to end within 2 s compiles
  // nothing), stopped by Ctrl-C after 1.5 s. Compiling at the segments'
  // priority, for the background compilation to have said why before the
  // end: at nice 19 beside a loaded test run, a run of 40 ms ended first.
  std::string bare = pipe(dir + "/bare_plugin.so", "30s, rate 100Kpps, lossless true");
  test::Run refused = test::run_sluice("run -q " + bare + " --jit-wait");
  CHECK(refused.status != 0);
  CHECK_THAT(refused.out, Catch::Contains("no bitcode for element 'e#0'") && Catch::Contains("bare_plugin.so.bc") &&
                              Catch::Contains("--no-jit"));
  test::Run degraded = test::run_cmd("cd " SLUICE_SOURCE_DIR " && timeout --preserve-status -s INT 1.5 " SLUICE_BINARY
                                     " run -q --jit-nice 0 " + bare);
  INFO(degraded.out);
  CHECK(degraded.status == 0);
  CHECK_THAT(degraded.out, Catch::Contains("; interpreter (JIT: no bitcode for element 'e#0'"));
  CHECK(degraded.out.find("loop fused") == std::string::npos);
  CHECK(test::run_sluice("run -q " + bare + " --no-jit").status == 0);
}
