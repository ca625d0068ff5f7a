// The compile driver: the one way a .pipe becomes a graph that can be
// planned and run. parse -> expand -> check (dsl/) -> lanes and segments
// (engine/lanes) -> placement on a host profile (engine/placement). The CLI
// (check, plan, run), hot reload, the tests and the fuzzers all go through
// here, so they all see the same graph and the same diagnostics.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/diagnostics.hh"
#include "engine/base/source.hh"
#include "engine/core/graph.hh"
#include "engine/placement/host_profile.hh"
#include "engine/placement/placement.hh"

namespace sluice {

struct CompileOptions {
  std::vector<std::pair<std::string, std::string>> defines;  // -D NAME=VALUE, in order
  bool allow_require = true;  // off for fuzzers: `require` must not open arbitrary files
};

// `-D NAME=VALUE` (a leading `$` on NAME is allowed). False with *error for
// anything else.
bool parse_define(const std::string &text, std::pair<std::string, std::string> &out, std::string *error);

// A compiled .pipe: the files it read, its graphs, its diagnostics and,
// once placed, its placement. A running graph's instances point into it,
// so a probe keeps it as long as they live; it is never copied.
struct CompiledPipe {
  CompiledPipe() : diagnostics(sources) {}
  CompiledPipe(const CompiledPipe &) = delete;
  CompiledPipe &operator=(const CompiledPipe &) = delete;

  SourceManager sources;
  Diagnostics diagnostics;
  ElementGraph graph;
  LaneGraph lanes;
  bool ok = false;  // no errors: lanes is complete
  // Set by place_pipe(); null: threads anywhere (tests).
  std::shared_ptr<const Placement> placement;
  HostProfile profile;

  // The diagnostics as a compiler prints them (carets, hints, notes).
  std::string printed(bool color = false) const;
  // "N errors, M warnings\n" after them, or nothing when there were none.
  std::string count_line() const;
};

// Compiles a file (`path`), or text already in memory named `name` in
// diagnostics. Never throws for bad input: problems are in diagnostics.
std::shared_ptr<CompiledPipe> compile_pipe_file(const std::string &path, const CompileOptions &opts = {});
std::shared_ptr<CompiledPipe> compile_pipe_text(const std::string &name, const std::string &text,
                                                const CompileOptions &opts = {});

// Reads the host profile (`host`, or the default one when empty) and places
// the lanes on it. False with *error ("file:line:column: error: ..." for a
// profile's mistakes, or why the lanes do not fit).
//
// A lane fed by an offline source (a trace file, unpaced TrafficGen: it waits
// for room, so a Ring has no burst to absorb) whose segments the plan puts on
// one cpu runs as one segment, its Rings passing batches on in the lane's
// thread (Lane::rings_folded): two threads taking turns on a cpu, with a
// hand-over between them, were only slower.
bool place_pipe(CompiledPipe &pipe, const std::string &host, std::string *error);

}  // namespace sluice
