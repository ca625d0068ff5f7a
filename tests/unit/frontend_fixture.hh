// Helpers for front-end tests: compile text or a file through the compile
// driver, get the diagnostics as "file:line:column: severity: message" lines.
#pragma once
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "dsl/frontend.hh"
#include "engine/driver/compile_pipe.hh"

namespace sluice::test {

struct Compiled {
  explicit Compiled(std::shared_ptr<CompiledPipe> p)
      : pipe(std::move(p)), sm(pipe->sources), graph(pipe->graph), lanes(pipe->lanes), ok(pipe->ok) {
    printed = pipe->printed();
    // brief lines, in the order print() uses (sorted by location, deduplicated)
    std::istringstream in(printed);
    std::string line;
    while (std::getline(in, line))
      if (line.find(": error: ") != std::string::npos || line.find(": warning: ") != std::string::npos)
        lines.push_back(line);
  }
  std::shared_ptr<CompiledPipe> pipe;  // what a Runtime runs
  const SourceManager &sm;
  ElementGraph &graph;
  LaneGraph &lanes;
  bool ok = false;
  std::vector<std::string> lines;  // brief diagnostics, in print order
  std::string printed;             // full diagnostics with carets and hints

  bool has(const std::string &needle) const {
    for (auto &l : lines)
      if (l.find(needle) != std::string::npos) return true;
    return false;
  }
};

inline CompileOptions compile_options(const FrontendOptions &f) {
  CompileOptions o;
  o.defines = f.defines;
  o.allow_require = f.allow_require;
  return o;
}

inline std::unique_ptr<Compiled> compile_text(const std::string &text, FrontendOptions opts = {},
                                              const std::string &name = "test.pipe") {
  return std::make_unique<Compiled>(compile_pipe_text(name, text, compile_options(opts)));
}

inline std::unique_ptr<Compiled> compile_file(const std::string &path, FrontendOptions opts = {}) {
  return std::make_unique<Compiled>(compile_pipe_file(path, compile_options(opts)));
}

}  // namespace sluice::test
