// The front end's entry point: read a .pipe file (and what it requires),
// expand compounds, resolve classes and arguments, check ports and cycles.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "engine/base/diagnostics.hh"
#include "engine/core/graph.hh"

namespace sluice {

struct FrontendOptions {
  std::vector<std::pair<std::string, std::string>> defines;  // --define NAME=VALUE
  bool allow_require = true;  // off for the fuzzer: it must not open arbitrary files
};

// Reads `path` into `sm` and builds `out`. Every problem found goes to `diags`;
// returns false when there were errors (the graph is then incomplete).
bool load_pipe_file(const std::string &path, const FrontendOptions &opts, SourceManager &sm,
                    Diagnostics &diags, ElementGraph &out);
// The same for text already in memory (tests, the fuzzer); `name` is used in diagnostics.
bool load_pipe_text(const std::string &name, const std::string &text, const FrontendOptions &opts,
                    SourceManager &sm, Diagnostics &diags, ElementGraph &out);

}  // namespace sluice
