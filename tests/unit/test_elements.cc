// The element library's metadata: every element of DESIGN §7 is registered
// with consistent ports and arguments, units format and read back, and the
// generated reference docs/elements.md is up to date.
#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "dsl/literals.hh"
#include "engine/core/element_docs.hh"
#include "graph_fixture.hh"

using namespace sluice;

static const std::vector<std::string> kDesignElements = {
    "RSSSource", "TrafficGen", "Timestamp", "Ring",    "Filter", "FlowTable", "GCSlicer", "IPFIXExporter",
    "NetFlowV9Exporter", "FlowLog", "PcapSink", "Counter", "Tee", "Discard", "Sample"};

// The number a value's range applies to, in base units; false for other types.
static bool numeric(const Value &v, double &x) {
  switch (v.type) {
    case ArgType::Count: case ArgType::Bytes: case ArgType::Duration: x = static_cast<double>(v.integer); return true;
    case ArgType::Rate: case ArgType::Fraction: x = v.real; return true;
    default: return false;
  }
}

TEST_CASE("every element of the design is registered and documented", "[elements]") {
  auto &reg = ElementRegistry::global();
  for (const auto &name : kDesignElements) {
    INFO(name);
    const ElementSpec *s = reg.find(name);
    REQUIRE(s);
    CHECK(s->name == name);
    CHECK(std::set<std::string>{"source", "packet", "flow", "export"}.count(s->group) == 1);
    CHECK_FALSE(s->summary.empty());
    CHECK_FALSE(s->doc.empty());
    for (const auto &p : s->inputs) CHECK_FALSE(p.doc.empty());
    for (const auto &p : s->outputs) CHECK_FALSE(p.doc.empty());
    for (const auto &a : s->args) CHECK_FALSE(a.doc.empty());
  }
  CHECK(reg.names().size() >= kDesignElements.size());
}

TEST_CASE("element specs are consistent", "[elements]") {
  for (const ElementSpec *s : ElementRegistry::global().all()) {
    INFO(s->name);
    for (const auto *ports : {&s->inputs, &s->outputs}) {
      std::set<std::string> names;
      for (size_t i = 0; i < ports->size(); ++i) {
        const PortSpec &p = (*ports)[i];
        INFO("port " << p.name);
        CHECK_FALSE(p.name.empty());
        CHECK(names.insert(p.name).second);
        if (p.variadic) CHECK(i + 1 == ports->size());  // only the last port can repeat
      }
    }
    if (s->is_source()) {
      CHECK(s->inputs.empty());
      CHECK(s->find_arg("queues"));
    }

    std::set<std::string> arg_names;
    bool keyword_only_seen = false;
    for (const ArgSpec &a : s->args) {
      INFO("argument " << a.name);
      CHECK(arg_names.insert(a.name).second);
      if (a.positional) CHECK_FALSE(keyword_only_seen);
      else keyword_only_seen = true;
      if (a.required) CHECK(a.default_text.empty());
      if (a.type == ArgType::Element) {
        CHECK(ElementRegistry::global().find(a.element_class));
      }
      if (a.has_min && a.has_max) CHECK(a.min <= a.max);
      if (a.default_text.empty()) continue;

      std::string err;
      auto v = parse_value_text(a.default_text, a, &err);
      INFO("default " << a.default_text << ": " << err);
      REQUIRE(v.has_value());
      for (const Value &item : v->is_list ? v->items : std::vector<Value>{*v}) {
        double x;
        if (item.is_symbol || !numeric(item, x)) continue;
        if (a.has_min) CHECK(x >= a.min);
        if (a.has_max) CHECK(x <= a.max);
      }
      // the canonical text reads back as the same value
      if (a.type != ArgType::String) {
        auto again = parse_value_text(v->to_string(), a, &err);
        REQUIRE(again.has_value());
        CHECK(again->to_string() == v->to_string());
      }
    }
  }
}

TEST_CASE("ports by name and index, variadic ports repeat", "[elements]") {
  const ElementSpec *ft = ElementRegistry::global().find("FlowTable");
  REQUIRE(ft);
  CHECK(ft->output_index("flows") == 0);
  CHECK(ft->output_index("packets") == 1);
  CHECK(ft->output_index("nope") == -1);
  CHECK(ft->input_index("in") == 0);
  CHECK(ft->output_port(1)->type == StreamType::Packets);
  CHECK(ft->output_port(2) == nullptr);
  CHECK(ft->input_port(-1) == nullptr);

  const ElementSpec *tee = ElementRegistry::global().find("Tee");
  REQUIRE(tee);
  CHECK(tee->output_port(0) == tee->output_port(7));
  CHECK(tee->output_port(7)->variadic);

  const ElementSpec *discard = ElementRegistry::global().find("Discard");
  REQUIRE(discard);
  CHECK(discard->outputs.empty());
  CHECK(discard->output_port(0) == nullptr);
  CHECK(discard->input_port(0)->multi);
}

TEST_CASE("the registry refuses duplicates and lists by name", "[elements]") {
  ElementRegistry reg;
  ElementSpec b("Beta"), a("Alpha"), b2("Beta");
  CHECK(reg.add(&b));
  CHECK(reg.add(&a));
  CHECK_FALSE(reg.add(&b2));
  CHECK(reg.find("Beta") == &b);
  CHECK(reg.find("Gamma") == nullptr);
  CHECK(reg.names() == std::vector<std::string>{"Alpha", "Beta"});
  REQUIRE(reg.all().size() == 2);
  CHECK(reg.all()[0] == &a);
  // the built-in library is registered once each
  CHECK_FALSE(ElementRegistry::global().add(ElementRegistry::global().find("Counter")));
}

TEST_CASE("elements answer what the runtime and the planner need from their own arguments", "[elements]") {
  std::string diags;
  auto c = test::compile_graph("RSSSource(\"0000:3b:00.0\", rx_desc 512, burst 64) -> r :: Ring(capacity 2K) -> Discard;\n"
                               "TrafficGen(sizes [64B, 9000B, 1500B]) -> Discard;\nTrafficGen -> Discard;\n",
                               &diags);
  INFO(diags);
  REQUIRE(c);
  std::map<std::string, const Node *> by_class;
  for (const Node &n : c->lanes.nodes) by_class.emplace(n.spec->name, &n);  // the first of each class
  const Node &rss = *by_class.at("RSSSource"), &ring = *by_class.at("Ring"), &gen = *by_class.at("TrafficGen");
  CHECK(rss.spec->needs.device(rss) == "0000:3b:00.0");
  CHECK(rss.spec->needs.lane_mbufs(rss) == 512);
  CHECK(rss.spec->needs.burst(rss) == 64);
  CHECK(ring.spec->needs.channel_capacity(ring) == 2048);
  CHECK(gen.spec->needs.frame_room(gen) == 9000);
  for (const Node &n : c->lanes.nodes)  // imix: nothing above the default room
    if (n.spec->name == "TrafficGen" && &n != &gen) CHECK(n.spec->needs.frame_room(n) == 0);
  // elements that need nothing of a kind leave it unset
  CHECK_FALSE(ring.spec->needs.device);
  CHECK_FALSE(by_class.at("Discard")->spec->needs.lane_mbufs);
}

TEST_CASE("units format as the language writes them", "[elements][units]") {
  CHECK(format_count(65536) == "64K");
  CHECK(format_count(1048576) == "1M");
  CHECK(format_count(1073741824) == "1G");
  CHECK(format_count(1000) == "1000");
  CHECK(format_count(1536) == "1536");
  CHECK(format_count(0) == "0");

  CHECK(format_bytes(65536) == "64KB");
  CHECK(format_bytes(1073741824) == "1GB");
  CHECK(format_bytes(1500) == "1500B");
  CHECK(format_bytes(9216) == "9KB");

  CHECK(format_duration_ns(15000000000LL) == "15s");
  CHECK(format_duration_ns(900000000000LL) == "15min");
  CHECK(format_duration_ns(1500000000) == "1500ms");
  CHECK(format_duration_ns(1800000000000LL) == "30min");
  CHECK(format_duration_ns(3600000000000LL) == "1h");
  CHECK(format_duration_ns(86400000000000LL) == "1d");
  CHECK(format_duration_ns(100000) == "100us");
  CHECK(format_duration_ns(1) == "1ns");
  CHECK(format_duration_ns(0) == "0s");

  CHECK(format_rate(10e9, RateUnit::Bits) == "10Gbps");
  CHECK(format_rate(14.88e6, RateUnit::Packets) == "14.88Mpps");
  CHECK(format_rate(1.5e3, RateUnit::Bits) == "1.5Kbps");
  CHECK(format_rate(400, RateUnit::Bits) == "400bps");
  CHECK(format_rate(2e12, RateUnit::Packets) == "2000Gpps");

  // each formatted value reads back as the number it came from
  auto dur = ArgSpec::duration("d");
  for (int64_t ns : {1LL, 999LL, 1500000000LL, 900000000000LL, 86400000000000LL}) {
    auto v = parse_value_text(format_duration_ns(ns), dur);
    REQUIRE(v.has_value());
    CHECK(v->integer == ns);
  }
  auto rate = ArgSpec::any_rate("r");
  auto v = parse_value_text(format_rate(14.88e6, RateUnit::Packets), rate);
  REQUIRE(v.has_value());
  CHECK(v->real == Approx(14.88e6));
  CHECK(v->rate_unit == RateUnit::Packets);
}

TEST_CASE("values print in canonical form", "[elements][units]") {
  auto text = [](const std::string &literal, const ArgSpec &spec) {
    std::string err;
    auto v = parse_value_text(literal, spec, &err);
    INFO(literal << ": " << err);
    REQUIRE(v.has_value());
    return v->to_string();
  };
  CHECK(text("65536", ArgSpec::count("n")) == "64K");
  CHECK(text("0.5min", ArgSpec::duration("d")) == "30s");
  CHECK(text("10000Mbps", ArgSpec::rate("r", RateUnit::Bits)) == "10Gbps");
  CHECK(text("on", ArgSpec::boolean("b")) == "true");
  CHECK(text("10.0.0.0/8", ArgSpec::prefix("p")) == "10.0.0.0/8");
  CHECK(text("2001:db8::1", ArgSpec::address("a")) == "2001:db8::1");
  CHECK(text("[::1]:4739", ArgSpec::host_port("c")) == "[::1]:4739");
  CHECK(text("localhost:2055", ArgSpec::host_port("c")) == "localhost:2055");
  CHECK(text("1/100", ArgSpec::fraction("f")) == "0.01");
  CHECK(text("1/3", ArgSpec::fraction("f")) == "1/3");
  CHECK(text("[64B, 576, 1500B]", ArgSpec::bytes("s").lists()) == "[64B, 576B, 1500B]");
  CHECK(text("imix", ArgSpec::bytes("s").or_words({"imix"})) == "imix");
  CHECK(text("[src, dst]", ArgSpec::symbol("k", {"src", "dst"}).lists()) == "[src, dst]");
}

TEST_CASE("argument types and ranges are described with units", "[elements][units]") {
  const ElementSpec *ft = ElementRegistry::global().find("FlowTable");
  REQUIRE(ft);
  CHECK(ft->find_arg("capacity")->type_text() == "count");
  CHECK(ft->find_arg("capacity")->range_text() == "1K..1G");
  CHECK(ft->find_arg("idle")->range_text() == "1ms..1d");
  CHECK(ft->find_arg("active")->range_text() == "1s..7d");
  CHECK(ft->find_arg("direction")->type_text() == "one of: uni, bi");
  CHECK(ft->find_arg("key")->type_text() == "one of: src, dst, proto, sport, dport, vlan (or a list)");
  CHECK(ft->find_arg("nope") == nullptr);

  const ElementSpec *gen = ElementRegistry::global().find("TrafficGen");
  REQUIRE(gen);
  CHECK(gen->find_arg("sizes")->type_text() == "bytes (or a list), or imix");
  CHECK(gen->find_arg("sizes")->range_text() == "60B..9KB");
  CHECK(gen->find_arg("rate")->type_text() == "rate (bits/s or packets/s)");
  CHECK(gen->find_arg("rate")->range_text().empty());

  CHECK(ElementRegistry::global().find("GCSlicer")->find_arg("table")->type_text() == "element (FlowTable)");
  CHECK(ElementRegistry::global().find("IPFIXExporter")->find_arg("collector")->type_text() == "host:port");
  CHECK(ArgSpec::rate("r", RateUnit::Packets).at_least(1e3).range_text() == ">= 1Kpps");
  CHECK(ArgSpec::bytes("b").at_most(1500).range_text() == "<= 1500B");
}

TEST_CASE("sluice elements output: list and help", "[elements]") {
  std::ostringstream list;
  print_element_list(list);
  for (const auto &name : kDesignElements) CHECK(list.str().find(name) != std::string::npos);
  // sources first, exporters last
  CHECK(list.str().find("RSSSource") < list.str().find("Counter"));
  CHECK(list.str().find("GCSlicer") < list.str().find("IPFIXExporter"));

  std::ostringstream help;
  print_element_help(help, *ElementRegistry::global().find("FlowTable"));
  std::string h = help.str();
  CHECK(h.rfind("FlowTable (flow): ", 0) == 0);
  CHECK(h.find("  0    flows    flows, required, many") != std::string::npos);
  CHECK(h.find("capacity   count; default 1M; range 1K..1G") != std::string::npos);
  CHECK(h.find("active     duration; default 30min; range 1s..7d") != std::string::npos);

  // everything fits a terminal
  std::string all = list.str();
  for (const ElementSpec *s : ElementRegistry::global().all()) {
    std::ostringstream os;
    print_element_help(os, *s);
    all += os.str();
  }
  std::istringstream lines(all);
  for (std::string line; std::getline(lines, line);) {
    INFO(line);
    CHECK(line.size() <= 80);
  }

  std::ostringstream filter;
  print_element_help(filter, *ElementRegistry::global().find("Filter"));
  CHECK(filter.str().find("expr  string; required; positional") != std::string::npos);
  CHECK(filter.str().find("`expr` may be given without its keyword.") != std::string::npos);
}

TEST_CASE("docs/elements.md is the generated reference", "[elements][docs]") {
  std::ostringstream generated;
  write_elements_markdown(generated);
  std::ifstream in(SLUICE_SOURCE_DIR "/docs/elements.md");
  const char *regenerate = "regenerate it with `build/engine/sluice elements --markdown > docs/elements.md`";
  if (!in.is_open()) FAIL("docs/elements.md is missing; " << regenerate);
  std::string committed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (committed == generated.str()) return;
  // name the first line that differs rather than printing both files
  std::istringstream a(committed), b(generated.str());
  std::string la, lb;
  int line = 1;
  while (std::getline(a, la) && std::getline(b, lb) && la == lb) ++line;
  FAIL("docs/elements.md is stale (first difference at line " << line << ": '" << la << "' instead of '" << lb
                                                               << "'); " << regenerate);
}

TEST_CASE("a source says which argument counts its lanes: the engine reads none by name", "[elements][lanes]") {
  // A source of a plugin's whose lane count is called `rings`.
  static const ElementSpec spec = ElementSpec("RingsTestSource")
                                      .in_group("source")
                                      .with_flags(kSource)
                                      .brief("test")
                                      .arg(ArgSpec::count("rings").counts_lanes().def("1"))
                                      .output(PortSpec::packets("out"));
  ElementRegistry::global().add(&spec);
  std::string diags;
  auto c = test::compile_graph("RingsTestSource(rings 3) -> Counter -> Discard;\n", &diags);
  INFO(diags);
  REQUIRE(c);
  CHECK(c->lanes.lanes.size() == 3);
  size_t counters = 0;
  for (const Node &n : c->lanes.nodes) counters += n.spec->name == "Counter";
  CHECK(counters == 3);
}
