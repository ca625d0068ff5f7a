// The hot-reload plan: elements matched by name and class, and what a
// reload does to each; changes a running probe cannot make are refused with
// their place in the new file.
#include <catch2/catch.hpp>
#include <memory>
#include <sstream>

#include "engine/reload/reload_plan.hh"
#include "frontend_fixture.hh"

using namespace sluice;
using test::Compiled;

namespace {

std::unique_ptr<Compiled> compile(const std::string &name, const std::string &text) {
  auto c = test::compile_text(text, {}, name);
  INFO(c->printed);
  REQUIRE(c->ok);
  return c;
}

// The default probe's shape, with the parts a test varies.
std::string probe(const std::string &table_args, const std::string &filter = "ip or ip6",
                  const std::string &extra = "") {
  return "src :: RSSSource(device \"pcap:/tmp/x.pcap\", queues 2);\n"
         "exp :: shared IPFIXExporter(127.0.0.1:4739);\n"
         "src -> Timestamp(clock pcap) -> Ring(capacity 64K) -> f :: Filter(\"" + filter + "\")\n"
         "    -> ft :: FlowTable(" + table_args + ") -> gc :: GCSlicer(table ft) -> exp;\n" + extra;
}

struct Planned {
  bool ok;
  ReloadPlan plan;
  std::string errors;
};

Planned plan(const Compiled &running, const Compiled &next) {
  Planned p;
  Diagnostics diags(const_cast<SourceManager &>(next.sm));
  p.ok = plan_reload(running.lanes, next.lanes, diags, p.plan);
  std::ostringstream os;
  diags.print(os);
  p.errors = os.str();
  return p;
}

ReloadAction action_of(const Planned &p, const std::string &element) {
  const ReloadStep *s = p.plan.find(element);
  INFO(element << " not in the plan:\n" << p.plan.text());
  REQUIRE(s);
  return s->action;
}

}  // namespace

TEST_CASE("reload plan: the same graph keeps everything", "[reload]") {
  auto a = compile("a.pipe", probe("capacity 1M")), b = compile("b.pipe", probe("capacity 1M"));
  Planned p = plan(*a, *b);
  REQUIRE(p.ok);
  CHECK(p.plan.changes_nothing());
  CHECK(p.plan.count(ReloadAction::Keep) == a->graph.elements.size());
  CHECK(p.plan.text().find("reload plan: " + std::to_string(a->graph.elements.size()) + " kept, 0 reconfigured") == 0);
}

TEST_CASE("reload plan: new timeouts and a new filter reconfigure in place, a new capacity migrates", "[reload]") {
  auto a = compile("a.pipe", probe("capacity 1M, idle 15s"));
  auto timeouts = compile("b.pipe", probe("capacity 1M, idle 30s, active 5min", "tcp"));
  Planned p = plan(*a, *timeouts);
  REQUIRE(p.ok);
  CHECK(action_of(p, "ft") == ReloadAction::Reconfigure);
  CHECK(p.plan.find("ft")->reason == "idle 15s -> 30s, active 30min -> 5min");
  CHECK(action_of(p, "f") == ReloadAction::Reconfigure);
  CHECK(action_of(p, "gc") == ReloadAction::Keep);
  CHECK(action_of(p, "exp") == ReloadAction::Keep);
  CHECK(action_of(p, "src") == ReloadAction::Keep);

  auto bigger = compile("c.pipe", probe("capacity 2M, idle 15s"));
  Planned m = plan(*a, *bigger);
  REQUIRE(m.ok);
  CHECK(action_of(m, "ft") == ReloadAction::Migrate);
  CHECK(m.plan.find("ft")->reason == "capacity 1M -> 2M: a new instance; its state moves into it");
  auto uni = compile("d.pipe", probe("capacity 1M, idle 15s, direction uni"));
  CHECK(action_of(plan(*a, *uni), "ft") == ReloadAction::Migrate);
}

TEST_CASE("reload plan: removed, added and rewired elements", "[reload]") {
  auto a = compile("a.pipe", probe("capacity 1M", "ip or ip6", "log :: shared FlowLog(\"/tmp/f.csv\");\ngc -> log;\n"));
  // The log gone; a Counter added between the filter and the table.
  auto c = compile("c.pipe",
                   "src :: RSSSource(device \"pcap:/tmp/x.pcap\", queues 2);\n"
                   "exp :: shared IPFIXExporter(127.0.0.1:4739);\n"
                   "src -> Timestamp(clock pcap) -> Ring(capacity 64K) -> f :: Filter(\"ip or ip6\")\n"
                   "    -> n :: Counter -> ft :: FlowTable(capacity 1M) -> gc :: GCSlicer(table ft) -> exp;\n");
  Planned p = plan(*a, *c);
  REQUIRE(p.ok);
  CHECK(action_of(p, "log") == ReloadAction::Remove);
  CHECK(action_of(p, "n") == ReloadAction::Add);
  CHECK(p.plan.count(ReloadAction::Add) == 1);
  CHECK(p.plan.connected.size() == 2);      // f -> n, n -> ft
  CHECK(p.plan.disconnected.size() == 2);   // f -> ft, gc -> log
  CHECK(p.plan.text().find("  remove      log") != std::string::npos);
  CHECK(p.plan.text().find("  connect     f[0] -> [0]n") != std::string::npos);

  // A flow table that goes away exports its flows.
  auto no_table = compile("d.pipe",
                          "src :: RSSSource(device \"pcap:/tmp/x.pcap\", queues 2);\n"
                          "src -> Timestamp(clock pcap) -> Discard;\n");
  Planned r = plan(*a, *no_table);
  REQUIRE(r.ok);
  CHECK(action_of(r, "ft") == ReloadAction::Remove);
  CHECK(r.plan.find("ft")->reason == "its flows are exported with reason forced end");

  // The same name for another class: removed, then added.
  std::string text = probe("capacity 1M");
  text.replace(text.find("f :: Filter(\"ip or ip6\")"), 24, "f :: Counter");
  Planned o = plan(*a, *compile("e.pipe", text));
  REQUIRE(o.ok);
  REQUIRE(o.plan.steps.size() == a->graph.elements.size() + 1);
  CHECK(o.plan.steps[a->graph.find("f")].action == ReloadAction::Remove);
  CHECK(o.plan.steps.back().element == "f");
  CHECK(o.plan.steps.back().class_name == "Counter");
  CHECK(o.plan.steps.back().action == ReloadAction::Add);
}

TEST_CASE("reload plan: sharing an element or not migrates it", "[reload]") {
  auto a = compile("a.pipe", probe("capacity 1M"));
  std::string text = probe("capacity 1M");
  text.replace(text.find("exp :: shared"), 13, "exp ::");
  text.replace(text.find("-> exp;"), 7, "-> exp;");
  auto b = compile("b.pipe", text);
  Planned p = plan(*a, *b);
  REQUIRE(p.ok);
  CHECK(action_of(p, "exp") == ReloadAction::Migrate);
  CHECK(p.plan.find("exp")->reason == "no longer shared: a new instance");
}

TEST_CASE("reload plan: a changed source or lane count is refused at its place in the new file", "[reload]") {
  auto a = compile("a.pipe", probe("capacity 1M"));
  std::string other_device = probe("capacity 1M");
  other_device.replace(other_device.find("/tmp/x.pcap"), 11, "/tmp/y.pcap");
  auto b = compile("b.pipe", other_device);
  Planned p = plan(*a, *b);
  CHECK_FALSE(p.ok);
  INFO(p.errors);
  CHECK(p.errors.find("b.pipe:1:1: error: source 'src' changed: device pcap:/tmp/x.pcap -> pcap:/tmp/y.pcap") !=
        std::string::npos);
  CHECK(p.errors.find("restart it to change them") != std::string::npos);

  std::string three = probe("capacity 1M");
  three.replace(three.find("queues 2"), 8, "queues 3");
  Planned q = plan(*a, *compile("c.pipe", three));
  CHECK_FALSE(q.ok);
  CHECK(q.errors.find("source 'src' changed: queues 2 -> 3") != std::string::npos);
}
