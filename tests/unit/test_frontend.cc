// Expansion, lanes and segments on small configurations, and each check of
// the front end on the smallest input that triggers it.
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "frontend_fixture.hh"

using namespace sluice;
using test::compile_text;

static std::vector<std::string> element_names(const ElementGraph &g) {
  std::vector<std::string> n;
  for (auto &e : g.elements) n.push_back(e.name);
  return n;
}

static const char *kProbe = R"(
define $COLLECTOR "127.0.0.1:4739";
elementclass Meter {
    $idle, $active |
    input -> ft :: FlowTable(capacity 1M, idle $idle, active $active, direction bi)
          -> GCSlicer(table ft, period 1s, slices 1000) -> output;
}
src :: RSSSource(device "pcap:x.pcap", queues 2);
exp :: shared IPFIXExporter(collector $COLLECTOR, transport udp, template_refresh 1min);
src -> Timestamp(clock pcap) -> Ring(capacity 64K)
    -> Filter("ip or ip6") -> Meter(15s, 30min) -> exp;
)";

TEST_CASE("the default probe expands into named elements", "[frontend]") {
  auto c = compile_text(kProbe);
  INFO(c->printed);
  REQUIRE(c->ok);
  CHECK(element_names(c->graph) == std::vector<std::string>{"src", "exp", "Timestamp@1", "Ring@1", "Filter@1",
                                                            "Meter@1/ft", "Meter@1/GCSlicer@1"});
  // compound parameters reach the inner element, in nanoseconds
  int ft = c->graph.find("Meter@1/ft");
  REQUIRE(ft >= 0);
  const Node *node = nullptr;
  for (auto &n : c->lanes.nodes)
    if (n.element == ft && n.lane == 0) node = &n;
  REQUIRE(node);
  CHECK(node->name == "Meter@1/ft#0");
  CHECK(node->arg("idle")->value.integer == 15000000000LL);
  CHECK(node->arg("active")->value.integer == 1800000000000LL);
  CHECK(node->arg("capacity")->value.integer == 1048576);
  CHECK(node->arg("on_full")->from_default);
  // the GC slicer's table reference resolves to the compound's own flow table
  int gc = c->graph.find("Meter@1/GCSlicer@1");
  CHECK(c->graph.elements[gc].args[0].element_ref == ft);
}

TEST_CASE("lanes and segments of the default probe", "[frontend]") {
  auto c = compile_text(kProbe);
  REQUIRE(c->ok);
  const LaneGraph &lg = c->lanes;
  REQUIRE(lg.lanes.size() == 2);
  // each lane: acquisition up to the Ring, processing after it; one shared exporter
  REQUIRE(lg.segments.size() == 5);
  for (const Lane &lane : lg.lanes) {
    REQUIRE(lane.segments.size() == 2);
    const Segment &acq = lg.segments[lane.segments[0]];
    const Segment &proc = lg.segments[lane.segments[1]];
    CHECK(acq.role == Segment::Role::Acquisition);
    CHECK(proc.role == Segment::Role::Processing);
    REQUIRE(acq.nodes.size() == 3);
    CHECK(lg.nodes[acq.nodes.back()].name == "Ring@1#" + std::to_string(lane.id));
    REQUIRE(proc.nodes.size() == 3);
    CHECK(lg.nodes[proc.nodes[0]].name == "Filter@1#" + std::to_string(lane.id));
    CHECK(acq.feeds == std::vector<int>{proc.id});
    REQUIRE(proc.feeds.size() == 1);
    CHECK(lg.segments[proc.feeds[0]].role == Segment::Role::Shared);
  }
  const Segment &shared = lg.segments.back();
  CHECK(shared.lane == -1);
  REQUIRE(shared.nodes.size() == 1);
  CHECK(lg.nodes[shared.nodes[0]].name == "exp");
  // 3 + 3 instances per lane, plus the one exporter
  CHECK(lg.nodes.size() == 13);
}

TEST_CASE("$queue is bound per lane, also inside strings", "[frontend]") {
  auto c = compile_text(R"(
    g :: TrafficGen(queues 3, seed $queue);
    g -> PcapSink("out-$queue.pcap");
  )");
  INFO(c->printed);
  REQUIRE(c->ok);
  std::vector<std::string> files;
  std::vector<int64_t> seeds;
  for (auto &n : c->lanes.nodes) {
    if (auto *a = n.arg("file")) files.push_back(a->value.text);
    if (auto *a = n.arg("seed")) seeds.push_back(a->value.integer);
  }
  CHECK(files == std::vector<std::string>{"out-0.pcap", "out-1.pcap", "out-2.pcap"});
  CHECK(seeds == std::vector<int64_t>{0, 1, 2});
}

TEST_CASE("a command-line define overrides a define and may add new variables", "[frontend]") {
  FrontendOptions opts;
  opts.defines = {{"Q", "4"}, {"DEV", "pcap:y.pcap"}};
  auto c = compile_text("define $Q 2;\nsrc :: RSSSource(device $DEV, queues $Q) -> Discard;", opts);
  INFO(c->printed);
  REQUIRE(c->ok);
  CHECK(c->lanes.lanes.size() == 4);
  CHECK(c->lanes.nodes[0].arg("device")->value.text == "pcap:y.pcap");

  opts.defines = {{"Q", "lots"}};
  auto bad = compile_text("define $Q 2;\nsrc :: RSSSource(device null, queues $Q) -> Discard;", opts);
  CHECK_FALSE(bad->ok);
  CHECK(bad->has("<command line>:1:3: error: 'queues' expects count"));
}

TEST_CASE("fan-out copies flows to every destination, fan-in merges packets", "[frontend]") {
  auto c = compile_text(R"(
    a :: TrafficGen; b :: TrafficGen;
    a, b -> d :: shared Discard;
    a2 :: TrafficGen -> ft :: FlowTable -> GCSlicer(table ft) -> FlowLog("a.csv"), FlowLog("b.csv", format jsonl);
  )");
  INFO(c->printed);
  REQUIRE(c->ok);
  int gc = c->graph.find("GCSlicer@1");
  int outs = 0;
  for (auto &k : c->graph.connections) outs += k.from == gc;
  CHECK(outs == 2);
  CHECK(c->graph.find("FlowLog@2") >= 0);
}

TEST_CASE("compound keyword parameters, defaults and nesting", "[frontend]") {
  auto c = compile_text(R"(
    elementclass M {
      $idle = 15s, active $act = 1h |
      elementclass Inner { $i | input -> t :: FlowTable(idle $i) -> GCSlicer(table t) -> output; }
      input -> Inner($idle) -> output;
    }
    g :: TrafficGen;
    g -> M(active 2h) -> FlowLog;
    g2 :: TrafficGen -> M(1s) -> FlowLog;
  )");
  INFO(c->printed);
  REQUIRE(c->ok);
  CHECK(c->graph.find("M@1/Inner@1/t") >= 0);
  CHECK(c->graph.find("M@2/Inner@1/GCSlicer@1") >= 0);
  auto idle_of = [&](const std::string &name) {
    int e = c->graph.find(name);
    for (auto &n : c->lanes.nodes)
      if (n.element == e) return n.arg("idle")->value.integer;
    return int64_t(-1);
  };
  CHECK(idle_of("M@1/Inner@1/t") == 15000000000LL);
  CHECK(idle_of("M@2/Inner@1/t") == 1000000000LL);
}

TEST_CASE("elements may be used before they are declared", "[frontend]") {
  auto c = compile_text("g -> GCSlicer(table ft) -> FlowLog;\ng :: TrafficGen -> ft :: FlowTable;");
  INFO(c->printed);
  // g -> GCSlicer would connect packets to flows: the declaration order is not the problem
  CHECK(c->has("stream type mismatch"));
  auto ok = compile_text("src :: TrafficGen -> ft;\nft -> GCSlicer(table ft) -> FlowLog;\nft :: FlowTable;");
  INFO(ok->printed);
  CHECK(ok->ok);
}

TEST_CASE("each check reports at the right place", "[frontend]") {
  struct Case { const char *text; const char *expect; };
  const Case cases[] = {
    {"x :: Countr;", "test.pipe:1:6: error: unknown element class 'Countr'"},
    {"g :: TrafficGen(flowz 1);", "test.pipe:1:17: error: unknown argument 'flowz' for TrafficGen"},
    {"e :: IPFIXExporter();", "test.pipe:1:19: error: missing argument 'collector' for IPFIXExporter"},
    {"r :: Ring(capacity 1K, capacity 2K);", "test.pipe:1:24: error: duplicate argument 'capacity' for Ring"},
    {"r :: Ring(capacity 1s);", "test.pipe:1:20: error: wrong unit 's' for count 'capacity'"},
    {"r :: Ring(capacity 1G);", "test.pipe:1:20: error: value 1G is out of range for 'capacity'"},
    {"r :: Ring(capacity \"x\");", "test.pipe:1:20: error: 'capacity' expects count"},
    {"g :: TrafficGen -> f :: Filter(\"ip\");\nf[2] -> Discard;", "test.pipe:2:3: error: output port 2 is out of range"},
    {"g :: TrafficGen -> FlowLog;", "test.pipe:1:17: error: stream type mismatch: packets output 0"},
    {"g :: TrafficGen -> Counter;", "test.pipe:1:20: error: output 0 ('out') of 'Counter@1' (Counter) is not connected"},
    {"g :: TrafficGen -> c :: Counter -> Discard;\nc -> Discard;", "test.pipe:2:3: error: output 0 ('out') of 'c' (Counter) is connected 2 times"},
    {"g :: TrafficGen -> a :: Tee -> b :: Counter -> a;\na[1] -> Discard;", "test.pipe:1:45: error: this connection closes a cycle: a -> b -> a"},
    {"g :: TrafficGen(flows $N) -> Discard;", "test.pipe:1:23: error: undefined variable '$N'"},
    {"g :: TrafficGen -> Discard;\ng :: Counter;", "test.pipe:2:1: error: redefinition of element 'g'"},
    {"elementclass A { input -> A -> output; }\ng :: TrafficGen -> A -> Discard;", "test.pipe:1:27: error: recursive elementclass 'A'"},
    {"elementclass A { $x | input -> output; }\ng :: TrafficGen -> A -> Discard;", "test.pipe:2:20: error: too few arguments for 'A': missing '$x'"},
    {"elementclass A { $x | input -> Ring($x) -> output; }\ng :: TrafficGen -> A(1K, 2K) -> Discard;", "test.pipe:2:26: error: too many arguments for 'A'"},
    {"g :: TrafficGen ->", "test.pipe:1:19: error: unexpected end of file"},
  };
  for (const Case &k : cases) {
    DYNAMIC_SECTION(k.text) {
      auto c = compile_text(k.text);
      INFO(c->printed);
      CHECK_FALSE(c->ok);
      CHECK(c->has(k.expect));
    }
  }
}

TEST_CASE("diagnostics show the source line, a caret and a hint", "[frontend]") {
  auto c = compile_text("src :: TrafficGen -> ft :: FlowTable(capcity 1M) -> GCSlicer(table ft) -> FlowLog;");
  CHECK(c->printed ==
        "test.pipe:1:38: error: unknown argument 'capcity' for FlowTable\n"
        "  src :: TrafficGen -> ft :: FlowTable(capcity 1M) -> GCSlicer(table ft) -> FlowLog;\n"
        "                                       ^~~~~~~\n"
        "  hint: did you mean 'capacity'?\n");
}

TEST_CASE("errors inside a compound name the instantiation", "[frontend]") {
  auto c = compile_text("elementclass M { $i | input -> FlowTable(idle $i) -> output; }\n"
                        "g :: TrafficGen -> M(5MB) -> FlowLog;");
  CHECK_FALSE(c->ok);
  CHECK(c->has("test.pipe:2:22: error: wrong unit 'MB' for duration 'idle'"));
  CHECK(c->printed.find("test.pipe:2:20: note: in instantiation of 'M' here") != std::string::npos);
}

TEST_CASE("all errors of a file are reported in one run", "[frontend]") {
  auto c = compile_text("a :: Countr;\nb :: Ring(capacity 1s);\nc :: TrafficGen(seed -1);\nd :: Discard(x 1);\n");
  CHECK(c->lines.size() >= 4);
  CHECK(c->has("test.pipe:1:"));
  CHECK(c->has("test.pipe:2:"));
  CHECK(c->has("test.pipe:3:"));
  CHECK(c->has("test.pipe:4:"));
}

TEST_CASE("unused defines and classes of the main file are warnings, not errors", "[frontend]") {
  auto c = compile_text("define $UNUSED 5s;\ndefine $N 1K;\nelementclass Idle { input -> output; }\n"
                        "g :: TrafficGen(flows $N) -> Discard;");
  INFO(c->printed);
  CHECK(c->ok);
  CHECK(c->lines == std::vector<std::string>{
                        "test.pipe:1:1: warning: variable '$UNUSED' is defined but never used",
                        "test.pipe:3:14: warning: elementclass 'Idle' is defined but never used"});
}

TEST_CASE("large and deep inputs end in a result, not a crash", "[frontend]") {
  // a chain of 20000 elements: checks and lane building walk it without recursion
  std::string chain = "g :: TrafficGen";
  for (int i = 0; i < 20000; ++i) chain += " -> Counter";
  chain += " -> Discard;";
  auto c = compile_text(chain);
  REQUIRE(c->ok);
  CHECK(c->lanes.segments.size() == 1);
  CHECK(c->lanes.nodes.size() == 20002);

  // a cycle at the end of a long chain is still found
  std::string loop = "g :: TrafficGen -> a :: Tee";
  for (int i = 0; i < 5000; ++i) loop += " -> Counter";
  auto cyc = compile_text(loop + " -> b :: Counter -> a;\na[1] -> Discard;");
  CHECK(cyc->has("closes a cycle: a -> Counter@1 -> Counter@2 -> "));
  CHECK(cyc->has(" -> Counter@5000 -> b -> a"));

  // element classes nested deeper than the limit stop the parse with an error
  std::string nested;
  for (int i = 0; i < 200; ++i) nested += "elementclass C" + std::to_string(i) + " { ";
  auto deep = compile_text(nested);
  CHECK(deep->has("error: element classes nested more than 64 deep"));

  // compounds instantiating each other in a long (non-recursive) chain
  std::string classes;
  for (int i = 0; i < 100; ++i)
    classes += "elementclass K" + std::to_string(i) + " { input -> K" + std::to_string(i + 1) + " -> output; }\n";
  classes += "elementclass K100 { input -> Counter -> output; }\ng :: TrafficGen -> K0 -> Discard;";
  auto kc = compile_text(classes);
  CHECK(kc->has("error: compounds instantiated more than 64 deep"));
}

// Issue 13, finding 17: `sluice check /dev/zero` (and `ctl reload /dev/zero`)
// read without end, growing memory; a FIFO blocked the reader.
TEST_CASE(".pipe files: only regular files, of at most 4 MiB, also when required", "[frontend]") {
  auto zero = test::compile_file("/dev/zero");
  CHECK_FALSE(zero->ok);
  CHECK(zero->printed.find("cannot read '/dev/zero': it is not a regular file (a device, a pipe or a socket)") !=
        std::string::npos);

  std::string dir = std::string(SLUICE_TEST_PLUGIN_DIR) + "/frontend_files";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  std::string fifo = dir + "/fifo.pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto from_fifo = test::compile_file(fifo);  // refused at once, without waiting for a writer
  CHECK(from_fifo->printed.find("cannot read '" + fifo + "': it is not a regular file") != std::string::npos);

  std::string big = dir + "/big.pipe";
  std::ofstream(big) << "// " << std::string(kMaxPipeFileBytes, 'x') << "\nTrafficGen -> Discard;\n";
  auto whole = test::compile_file(big);
  CHECK(whole->printed.find("cannot read '" + big + "': it is larger than 4 MiB, the most that is read") !=
        std::string::npos);
  std::ofstream(dir + "/main.pipe") << "require \"big.pipe\";\nTrafficGen -> Discard;\n";
  auto required = test::compile_file(dir + "/main.pipe");
  CHECK(required->has(dir + "/main.pipe:1:9: error: cannot read '" + big +
                      "': it is larger than 4 MiB, the most that is read"));
  // a file of exactly the bound is read
  std::ofstream(big, std::ios::trunc) << "TrafficGen -> Discard;\n//" << std::string(kMaxPipeFileBytes - 26, 'x')
                                      << "\n";
  REQUIRE(std::filesystem::file_size(big) == kMaxPipeFileBytes);
  CHECK(test::compile_file(big)->ok);
}
