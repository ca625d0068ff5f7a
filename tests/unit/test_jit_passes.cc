// The JIT's pass pipeline (engine/jit/jit_pipeline.hh): `sluice plan
// --emit-ir-after PASS` prints the module after each run of a pass, with
// what the pass did; each specialization does what it says (seen in the IR
// before and after it); and printing changes nothing in the code made.
#include <catch2/catch.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "engine/jit/jit_module.hh"
#include "engine/jit/segment_jit.hh"
#include "engine/runtime/runtime.hh"
#include "graph_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;

namespace {

// One module printed by --emit-ir-after: "; segment S, after PASS (round N)",
// "; PASS: report", then the module.
struct Dump {
  int segment = -1;
  std::string pass;
  int round = 0;  // 0: a pass that runs once
  std::string report, module;
};

std::vector<Dump> split_dumps(const std::string &out) {
  static const std::regex head(R"(; segment (\d+), after (\w+)(?: \(round (\d+)\))?\n; (\w+): ([^\n]*)\n)");
  // `sluice plan` heads each segment with "; <label>, compiled in N ms"
  static const std::regex segment_head(R"(\n; [^\n]*, compiled in [^\n]*\n)");
  std::vector<Dump> dumps;
  std::vector<size_t> starts;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), head); it != std::sregex_iterator(); ++it) {
    const std::smatch &m = *it;
    INFO(m.str());
    CHECK(m[4] == m[2]);  // the report names its pass
    Dump d;
    d.segment = std::stoi(m[1]);
    d.pass = m[2];
    d.round = m[3].matched ? std::stoi(m[3]) : 0;
    d.report = m[5];
    dumps.push_back(d);
    starts.push_back(size_t(m.position(0) + m.length(0)));
  }
  for (size_t i = 0; i < dumps.size(); ++i) {
    size_t end = i + 1 < dumps.size() ? out.rfind("; segment ", starts[i + 1]) : out.size();
    std::string text = out.substr(starts[i], end - starts[i]);
    std::smatch next_segment;
    if (std::regex_search(text, next_segment, segment_head))
      text = text.substr(0, size_t(next_segment.position(0)) + 1);
    dumps[i].module = text;
  }
  return dumps;
}

const Dump *find(const std::vector<Dump> &dumps, int segment, const std::string &pass, int round) {
  for (const Dump &d : dumps)
    if (d.segment == segment && d.pass == pass && d.round == round) return &d;
  return nullptr;
}

// The dump printed just before `d`, of the same segment.
const Dump *before(const std::vector<Dump> &dumps, const Dump *d) {
  const Dump *prev = nullptr;
  for (const Dump &x : dumps) {
    if (&x == d) return prev;
    if (x.segment == d->segment) prev = &x;
  }
  return nullptr;
}

size_t count(const std::string &text, const std::regex &re) {
  return size_t(std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator()));
}

// The number at the start of a report ("37 loads folded").
int leading_number(const std::string &report) { return std::stoi(report.substr(0, report.find(' '))); }

}  // namespace

// The command line lists the passes (plan --emit-ir-after's help) without
// loading the JIT module: its list is the pipeline's own.
TEST_CASE("jit passes: the list the command line shows is the pipeline's", "[jit]") {
  CHECK(jit_pass_names_listed() == jit_pass_names());
}

TEST_CASE("jit passes: --emit-ir-after all prints every pass of every segment, in order, with what it did", "[jit]") {
  test::Run r = test::run_sluice("plan examples/filter_count.pipe --emit-ir-after all");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.status == 0);
  std::vector<Dump> dumps = split_dumps(r.out);
  for (int segment : {0, 1}) {  // one per lane
    INFO("segment " << segment);
    std::vector<std::string> order;
    for (const Dump &d : dumps)
      if (d.segment == segment) {
        order.push_back(d.pass);
        CHECK_THAT(d.module, Catch::StartsWith("; ModuleID = 'segment_" + std::to_string(segment) + "'"));
      }
    // every pass, the first ones and the last ones in their place
    std::set<std::string> named(order.begin(), order.end());
    for (const std::string &p : jit_pass_names()) CHECK(named.count(p));
    REQUIRE(order.size() > 4);
    CHECK(order[0] == "CheckThreadLocals");
    CHECK(order[1] == "InlineLoop");
    CHECK(order[2] == "FoldConstantLoads");
    CHECK(order[order.size() - 2] == "O3");
    CHECK(order.back() == "CheckFileLocals");
    // rounds of the specializations until one changes nothing
    CHECK(find(dumps, segment, "FoldConstantLoads", 1));
    CHECK(find(dumps, segment, "SpecializeConstantThis", 2));

    // InlineFilterPrograms: the call of PcapFilter::matches becomes the
    // program of "tcp and port 443", a function of the module.
    const Dump *filters = find(dumps, segment, "InlineFilterPrograms", 1);
    REQUIRE(filters);
    const Dump *prev = before(dumps, filters);
    REQUIRE(prev);
    std::regex call_matches(R"(call [^\n]*@_ZNK6sluice10PcapFilter7matches)");
    std::regex program(R"(define internal i32 @filter\.tcp_and_port_443\(ptr)");
    std::regex call_program(R"(call i32 @filter\.tcp_and_port_443\()");
    CHECK(count(prev->module, call_matches) == 1);
    CHECK(count(prev->module, program) == 0);
    CHECK(count(filters->module, call_matches) == 0);
    CHECK(count(filters->module, program) == 1);
    CHECK(count(filters->module, call_program) == 1);
    CHECK(filters->report == "1 call of PcapFilter::matches replaced; the program of 'tcp and port 443' emitted as IR");
  }

  // One pass alone: its runs only.
  test::Run one = test::run_sluice("plan examples/filter_count.pipe --emit-ir-after SpecializeConstantThis");
  REQUIRE(one.status == 0);
  std::vector<Dump> only = split_dumps(one.out);
  REQUIRE(only.size() >= 2);
  for (const Dump &d : only) CHECK(d.pass == "SpecializeConstantThis");
  CHECK_THAT(only[0].report,
             Catch::Matches(R"([1-9]\d* calls on a constant `this` redirected, [1-9]\d* functions cloned)"));

  test::Run bad = test::run_sluice("plan examples/filter_count.pipe --emit-ir-after FoldConstants");
  CHECK(bad.status != 0);
  CHECK_THAT(bad.out, Catch::Contains("no pass named 'FoldConstants'") && Catch::Contains("FoldConstantLoads") &&
                          Catch::Contains("or all"));
}

TEST_CASE("jit passes: FoldConstantLoads turns a Sample's rate into an immediate, and says how many loads it folded",
          "[jit]") {
  std::string dir = test::scratch("jit_passes", "fold");
  std::string pipe = test::write_file(dir + "/p.pipe",
                                      "TrafficGen(flows 100, duration 1s) -> Sample(0.25) -> Counter -> Discard;\n");
  test::Run r = test::run_sluice("plan " + pipe + " --emit-ir-after all");
  INFO(r.out.substr(0, 2000));
  REQUIRE(r.status == 0);
  std::vector<Dump> dumps = split_dumps(r.out);
  const Dump *fold = find(dumps, 0, "FoldConstantLoads", 1);
  REQUIRE(fold);
  const Dump *prev = before(dumps, fold);
  REQUIRE(prev);
  CHECK(prev->pass == "InlineLoop");
  INFO(fold->report);
  int folded = leading_number(fold->report);
  CHECK(folded > 0);
  // The pass only takes loads away: as many as it says.
  std::regex load(R"(= load )");
  CHECK(count(prev->module, load) == count(fold->module, load) + size_t(folded));
  // rate 0.25 of 2^64: the sampling threshold, read from the Sample
  const std::string threshold = "4611686018427387904";
  CHECK(prev->module.find(threshold) == std::string::npos);
  CHECK(fold->module.find(threshold) != std::string::npos);
}

TEST_CASE("jit passes: printing the module after every pass leaves the code as --emit-ir makes it", "[jit]") {
  // In one process, so that the elements' addresses (constants of the IR)
  // are the same for both compilations.
  std::string diags;
  auto graph = test::compile_graph(
      "gen :: TrafficGen(flows 1K, duration 1s);\n"
      "gen -> f :: Filter(\"tcp and port 443\") -> Sample(0.5) -> Counter -> Discard;\n"
      "f[reject] -> Discard;\n",
      &diags);
  INFO(diags);
  REQUIRE(graph);
  RunOptions opts;
  opts.eal_args = {"--no-huge"};
  opts.status_line = false;
  opts.jit = true;
  Runtime rt(graph, opts);
  std::string err;
  REQUIRE(rt.setup(&err));
  std::shared_ptr<ProgramCompiler> plain = make_segment_jit({}, &err);
  std::shared_ptr<ProgramCompiler> printing = make_segment_jit({"", "all"}, &err);
  INFO(err);
  REQUIRE(plain);
  REQUIRE(printing);
  REQUIRE(rt.segments().size() == 1);
  SegmentRunner &seg = *rt.segments()[0];
  ProgramCompiler::Result final_ir = plain->compile(seg, true);
  ProgramCompiler::Result per_pass = printing->compile(seg, true);
  INFO(final_ir.error << per_pass.error);
  REQUIRE(final_ir.program);
  REQUIRE(per_pass.program);
  std::vector<Dump> dumps = split_dumps(per_pass.ir);
  REQUIRE(dumps.size() > 8);
  CHECK(dumps.back().pass == "CheckFileLocals");
  CHECK(dumps.back().module == final_ir.ir);
  const Dump *o3 = find(dumps, int(seg.segment().id), "O3", 0);
  REQUIRE(o3);
  CHECK(o3->module == final_ir.ir);  // the checks after O3 change nothing
  // and the specializations were there to see
  CHECK(final_ir.ir.find("PcapFilter7matches") == std::string::npos);
}
