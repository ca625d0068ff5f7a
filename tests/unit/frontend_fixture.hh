// Helpers for front-end tests: compile text or a file, get the diagnostics
// as "file:line:column: severity: message" lines.
#pragma once
#include <sstream>
#include <string>
#include <vector>

#include "dsl/frontend.hh"
#include "engine/lanes.hh"

namespace sluice::test {

struct Compiled {
  SourceManager sm;
  ElementGraph graph;
  LaneGraph lanes;
  bool ok = false;
  std::vector<std::string> lines;  // brief diagnostics, in print order
  std::string printed;             // full diagnostics with carets and hints
  std::vector<const Diagnostic *> errors;

  bool has(const std::string &needle) const {
    for (auto &l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

inline void finish(Compiled &c, Diagnostics &diags, bool loaded) {
  c.ok = loaded && build_lanes(c.graph, diags, c.lanes);
  std::ostringstream os;
  diags.print(os);
  c.printed = os.str();
  // brief lines, in the order print() uses (sorted by location, deduplicated)
  std::istringstream in(c.printed);
  std::string line;
  while (std::getline(in, line))
    if (line.find(": error: ") != std::string::npos || line.find(": warning: ") != std::string::npos)
      c.lines.push_back(line);
}

inline std::unique_ptr<Compiled> compile_text(const std::string &text, FrontendOptions opts = {},
                                              const std::string &name = "test.pipe") {
  auto c = std::make_unique<Compiled>();
  Diagnostics diags(c->sm);
  bool loaded = load_pipe_text(name, text, opts, c->sm, diags, c->graph);
  finish(*c, diags, loaded);
  return c;
}

inline std::unique_ptr<Compiled> compile_file(const std::string &path, FrontendOptions opts = {}) {
  auto c = std::make_unique<Compiled>();
  Diagnostics diags(c->sm);
  bool loaded = load_pipe_file(path, opts, c->sm, diags, c->graph);
  finish(*c, diags, loaded);
  return c;
}

}  // namespace sluice::test
