// Head (elements/packet/head.cc): the first packets of each lane, in
// order; the later ones to `rest` or dropped; the same in fused loops.
#include <catch2/catch.hpp>
#include <string>

#include "engine/runtime/runtime.hh"
#include "frontend_fixture.hh"
#include "pcap_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;

TEST_CASE("Head passes the first count packets, drops the later ones as past the head", "[elements][head]") {
  auto c = test::compile_text("TrafficGen(flows 50, duration 1s, seed 3) -> h :: Head(100) -> c :: Counter -> Discard;");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  o.status_line = false;
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  rt.run();
  RuntimeElement *h = rt.find("h#0");
  REQUIRE(h);
  uint64_t in = h->counters.in.get();
  REQUIRE(in > 100);
  CHECK(h->read_handler("passed") == "100");
  CHECK(rt.find("c#0")->counters.in.get() == 100);
  CHECK(h->read_handler("drops") == "past the head: " + std::to_string(in - 100));
}

TEST_CASE("Head keeps the first packets of a trace in order, fused and interpreted alike", "[run][head]") {
  std::string dir = test::scratch("head", "first");
  test::Run made = test::run_sluice(
      "run -q " + test::write_file(dir + "/make.pipe", "TrafficGen(flows 50, duration 1s, seed 3) -> PcapSink(\"" +
                                                           dir + "/all.pcap\");\n"));
  REQUIRE(made.status == 0);
  std::vector<test::PcapRecord> all = test::read_records(dir + "/all.pcap");
  REQUIRE(all.size() > 300);
  for (const char *mode : {"--jit-wait", "--no-jit"}) {
    INFO(mode);
    std::string pipe = test::write_file(
        dir + "/head.pipe", "RSSSource(\"pcap:" + dir + "/all.pcap\") -> h :: Head(250) -> PcapSink(\"" + dir +
                                "/first.pcap\");\nh[rest] -> Discard;\n");
    test::Run r = test::run_sluice(std::string("run -q ") + mode + " " + pipe);
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::vector<test::PcapRecord> first = test::read_records(dir + "/first.pcap");
    REQUIRE(first.size() == 250);
    CHECK(std::equal(first.begin(), first.end(), all.begin()));
  }
}
