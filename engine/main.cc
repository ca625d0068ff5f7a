// The `sluice` command line. Exit status: 0 clean, 1 errors in the
// configuration, 2 usage errors.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>

#include "dsl/frontend.hh"
#include "engine/element_docs.hh"
#include "engine/lanes.hh"
#include "engine/plan_format.hh"

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
