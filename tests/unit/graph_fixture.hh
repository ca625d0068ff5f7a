// A .pipe text compiled into the graph a Runtime runs or a hot reload
// switches to (CompiledGraph), for tests that run graphs in this process.
#pragma once
#include <memory>
#include <sstream>
#include <string>

#include "dsl/frontend.hh"
#include "engine/lanes.hh"
#include "engine/runtime/runtime.hh"

namespace sluice::test {

// Null when it does not compile; *diagnostics gets what was printed, with
// `name` as the file's name.
inline std::shared_ptr<CompiledGraph> compile_graph(const std::string &text, std::string *diagnostics,
                                                   const std::string &name = "test.pipe") {
  auto c = std::make_shared<CompiledGraph>();
  Diagnostics diags(c->sources);
  bool ok = load_pipe_text(name, text, FrontendOptions{}, c->sources, diags, c->graph) &&
            build_lanes(c->graph, diags, c->lanes);
  std::ostringstream os;
  diags.print(os);
  *diagnostics = os.str();
  return ok ? c : nullptr;
}

}  // namespace sluice::test
