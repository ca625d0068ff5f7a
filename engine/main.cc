// The `sluice` command line. Exit status: 0 clean, 1 errors in the
// configuration, 2 usage errors.
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <fstream>
#include <iostream>

#include "dsl/frontend.hh"
#include "dsl/literals.hh"
#include "engine/element_docs.hh"
#include "engine/lanes.hh"
#include "engine/plan_format.hh"
#include "engine/runtime/host_profile.hh"
#include "engine/runtime/runtime.hh"

using namespace sluice;

namespace {

constexpr int kExitClean = 0, kExitErrors = 1, kExitUsage = 2;

struct ConfigArgs {
  std::string file;
  std::vector<std::string> defines;

  void add_to(CLI::App *cmd) {
    cmd->add_option("file", file, "the .pipe configuration")->required();
    cmd->add_option("-D,--define", defines, "set (or override) a variable: NAME=VALUE")->type_name("NAME=VALUE");
  }
};

// Parses NAME=VALUE pairs; false (with a message) on a malformed one.
bool parse_defines(const std::vector<std::string> &in, FrontendOptions &opts) {
  for (const std::string &d : in) {
    size_t eq = d.find('=');
    std::string name = d.substr(0, eq);
    if (!name.empty() && name[0] == '$') name.erase(0, 1);
    if (eq == std::string::npos || name.empty()) {
      std::cerr << "sluice: --define wants NAME=VALUE, not '" << d << "'\n";
      return false;
    }
    opts.defines.emplace_back(name, d.substr(eq + 1));
  }
  return true;
}

// Front end plus lane replication; diagnostics printed. Returns the exit status.
int compile(const ConfigArgs &args, SourceManager &sm, ElementGraph &g, LaneGraph &lg) {
  FrontendOptions opts;
  if (!parse_defines(args.defines, opts)) return kExitUsage;
  Diagnostics diags(sm);
  bool ok = load_pipe_file(args.file, opts, sm, diags, g);
  if (ok) ok = build_lanes(g, diags, lg);
  diags.print(std::cerr, isatty(2));
  if (diags.error_count() || diags.warning_count())
    std::cerr << diags.error_count() << " error" << (diags.error_count() == 1 ? "" : "s") << ", "
              << diags.warning_count() << " warning" << (diags.warning_count() == 1 ? "" : "s") << "\n";
  return ok ? kExitClean : kExitErrors;
}

// Ctrl-C (or SIGTERM) once: sources stop and the run drains; twice: stop
// waiting for full rings too.
Runtime *g_running = nullptr;
std::atomic<int> g_interrupts{0};  // lock-free: safe in a signal handler
void on_interrupt(int) {
  int n = ++g_interrupts;
  if (!g_running) return;  // still setting up: the run stops as soon as it starts
  if (n == 1) g_running->request_stop();
  else g_running->request_abort();
}

int run_config(const ConfigArgs &args, const std::string &host, const std::string &duration, bool quiet,
               const std::string &stats_json) {
  SourceManager sm;
  ElementGraph graph;
  LaneGraph lanes;
  int rc = compile(args, sm, graph, lanes);
  if (rc != kExitClean) return rc;

  RunOptions opts;
  if (!duration.empty()) {
    // The same literal syntax and units as in a .pipe file.
    Value v;
    ast::Literal lit;
    LiteralProblem problem;
    ArgSpec spec = ArgSpec::duration("duration").at_least(1);
    if (!lex_single_literal(duration, lit) || !convert_literal(lit, spec, v, problem)) {
      std::cerr << "sluice: --duration: '" << duration << "' is not a duration"
                << (problem.message.empty() ? "" : ": " + problem.message) << " (e.g. 30s, 5min)\n";
      return kExitUsage;
    }
    opts.duration_ns = uint64_t(v.integer);
  }
  HostProfile profile;
  std::string err;
  std::string host_file = host.empty() ? default_host_profile_path() : host;
  if (!host_file.empty() && !load_host_profile(host_file, profile, &err)) {
    std::cerr << err << "\n";
    return kExitErrors;
  }
  if (host_file.empty()) profile.eal_args = {"--no-huge"};  // the laptop profile's default
  opts.eal_args = profile.eal_args;
  opts.status_line = !quiet;

  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  Runtime rt(lanes, opts);
  if (!rt.setup(&err)) {
    std::cerr << "sluice: error: " << err << "\n";
    return kExitErrors;
  }
  g_running = &rt;
  if (g_interrupts) rt.request_stop();
  if (!quiet)
    std::cerr << "sluice: running " << args.file << " (" << lanes.lanes.size() << " lane"
              << (lanes.lanes.size() == 1 ? "" : "s") << ", " << lanes.segments.size() << " segments, interpreter"
              << (host_file.empty() ? "" : ", host " + host_file) << "); Ctrl-C stops\n";
  rt.run();
  g_running = nullptr;
  std::cout << rt.summary() << std::flush;
  if (!stats_json.empty()) {
    std::ofstream f(stats_json);
    f << rt.summary_json();
    if (!f) std::cerr << "sluice: cannot write " << stats_json << "\n";
  }
  return rt.totals().balanced() ? kExitClean : kExitErrors;
}

}  // namespace

int main(int argc, char **argv) {
  CLI::App app{"Sluice: a declarative packet-pipeline engine and flow probe"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("sluice ") + SLUICE_VERSION);
  app.footer("Run `sluice COMMAND --help` for the options of a command. Docs: docs/language.md, docs/elements.md");

  ConfigArgs check_args;
  auto *check = app.add_subcommand("check", "parse, expand and check a configuration; errors as file:line:column");
  check_args.add_to(check);

  ConfigArgs plan_args;
  std::string plan_format = "text";
  auto *plan = app.add_subcommand("plan", "print the checked graph: elements, connections, lanes and segments");
  plan_args.add_to(plan);
  plan->add_option("--format", plan_format, "text or dot")->check(CLI::IsMember({"text", "dot"}));

  ConfigArgs run_args;
  std::string run_host, run_duration, run_stats;
  bool run_quiet = false;
  auto *run = app.add_subcommand("run", "run a configuration on DPDK: live status, then a summary of every packet");
  run_args.add_to(run);
  run->add_option("--host", run_host, "host profile (YAML); default configs/laptop.yaml")->type_name("PROFILE.yaml");
  run->add_option("--duration", run_duration, "stop after this long (e.g. 30s, 5min); default: end of input or Ctrl-C")
      ->type_name("T");
  run->add_flag("-q,--quiet", run_quiet, "no status line");
  run->add_option("--stats-json", run_stats, "also write the run summary as JSON to this file")->type_name("FILE");

  std::string element_name;
  bool markdown = false;
  auto *elements = app.add_subcommand("elements", "list the element library, or describe one element");
  elements->add_option("name", element_name, "the element to describe");
  elements->add_flag("--markdown", markdown, "print the whole reference as Markdown (docs/elements.md)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int rc = app.exit(e);
    return rc == 0 ? kExitClean : kExitUsage;
  }

  if (*elements) {
    if (markdown) {
      write_elements_markdown(std::cout);
      return kExitClean;
    }
    if (element_name.empty()) {
      print_element_list(std::cout);
      return kExitClean;
    }
    const ElementSpec *spec = ElementRegistry::global().find(element_name);
    if (!spec) {
      std::string m = closest_match(element_name, ElementRegistry::global().names());
      std::cerr << "sluice: no element named '" << element_name << "'"
                << (m.empty() ? "" : "; did you mean '" + m + "'?") << "\n";
      return kExitUsage;
    }
    print_element_help(std::cout, *spec);
    return kExitClean;
  }

  if (*run) return run_config(run_args, run_host, run_duration, run_quiet, run_stats);

  SourceManager sm;
  ElementGraph graph;
  LaneGraph lanes;
  if (*check) {
    int rc = compile(check_args, sm, graph, lanes);
    if (rc == kExitClean)
      std::cout << check_args.file << ": ok (" << graph.elements.size() << " elements, " << lanes.lanes.size()
                << " lane" << (lanes.lanes.size() == 1 ? "" : "s") << ", " << lanes.segments.size() << " segment"
                << (lanes.segments.size() == 1 ? "" : "s") << ")\n";
    return rc;
  }
  if (*plan) {
    int rc = compile(plan_args, sm, graph, lanes);
    if (rc != kExitClean) return rc;
    if (plan_format == "dot") print_plan_dot(std::cout, plan_args.file, lanes);
    else print_plan_text(std::cout, plan_args.file, lanes);
    return kExitClean;
  }
  return kExitUsage;
}
