#include "engine/driver/compile_pipe.hh"

#include <exception>
#include <set>
#include <sstream>

#include "dsl/frontend.hh"
#include "engine/driver/lanes.hh"

namespace sluice {

bool parse_define(const std::string &text, std::pair<std::string, std::string> &out, std::string *error) {
  size_t eq = text.find('=');
  std::string name = text.substr(0, eq);
  if (!name.empty() && name[0] == '$') name.erase(0, 1);
  if (eq == std::string::npos || name.empty()) {
    *error = "--define wants NAME=VALUE, not '" + text + "'";
    return false;
  }
  out = {name, text.substr(eq + 1)};
  return true;
}

std::string CompiledPipe::printed(bool color) const {
  std::ostringstream os;
  diagnostics.print(os, color);
  return os.str();
}

std::string CompiledPipe::count_line() const {
  int e = diagnostics.error_count(), w = diagnostics.warning_count();
  if (!e && !w) return "";
  return std::to_string(e) + " error" + (e == 1 ? "" : "s") + ", " + std::to_string(w) + " warning" +
         (w == 1 ? "" : "s") + "\n";
}

namespace {

FrontendOptions frontend_options(const CompileOptions &opts) {
  FrontendOptions f;
  f.defines = opts.defines;
  f.allow_require = opts.allow_require;
  return f;
}

// Lanes and segments once the front end is content.
void finish(CompiledPipe &p, bool loaded) { p.ok = loaded && build_lanes(p.graph, p.diagnostics, p.lanes); }

}  // namespace

std::shared_ptr<CompiledPipe> compile_pipe_file(const std::string &path, const CompileOptions &opts) {
  auto p = std::make_shared<CompiledPipe>();
  finish(*p, load_pipe_file(path, frontend_options(opts), p->sources, p->diagnostics, p->graph));
  return p;
}

std::shared_ptr<CompiledPipe> compile_pipe_text(const std::string &name, const std::string &text,
                                                const CompileOptions &opts) {
  auto p = std::make_shared<CompiledPipe>();
  finish(*p, load_pipe_text(name, text, frontend_options(opts), p->sources, p->diagnostics, p->graph));
  return p;
}

namespace {

// The lanes place_pipe folds: an offline source, every segment on one cpu.
std::set<int> lanes_to_fold(const LaneGraph &lanes, const Placement &placement) {
  std::set<int> fold;
  for (const Lane &lane : lanes.lanes) {
    if (lane.segments.size() < 2) continue;
    const Node *source = nullptr;
    for (const Node &n : lanes.nodes)
      if (n.element == lane.source && n.lane == lane.id) source = &n;
    if (!source || !source->spec->needs.offline_input || !source->spec->needs.offline_input(*source)) continue;
    int cpu = placement.segments[size_t(lane.segments.front())].cpu;
    bool one_cpu = cpu >= 0;
    for (int s : lane.segments) one_cpu = one_cpu && placement.segments[size_t(s)].cpu == cpu;
    if (one_cpu) fold.insert(lane.id);
  }
  return fold;
}

}  // namespace

bool place_pipe(CompiledPipe &pipe, const std::string &host, std::string *error) {
  std::string host_file = host.empty() ? default_host_profile_path() : host;
  HostEnvironment env = HostEnvironment::this_process();
  if (!(host_file.empty() ? builtin_host_profile(env, pipe.profile, error)
                          : load_host_profile(host_file, env, pipe.profile, error)))
    return false;
  auto placement = std::make_shared<Placement>();
  if (!place_lanes(pipe.lanes, pipe.profile, *placement, error)) {
    *error = "sluice: error: " + *error;
    return false;
  }
  // Lanes whose Rings would only hand batches between two threads taking
  // turns on one cpu: built again with the Rings inside the lane's thread,
  // and placed again (fewer threads may find cpus of their own).
  if (std::set<int> fold = lanes_to_fold(pipe.lanes, *placement); !fold.empty()) {
    LaneGraph folded;
    Diagnostics again(pipe.sources);  // the graph was built once: nothing new to say
    auto refolded = std::make_shared<Placement>();
    std::string ignored;
    if (build_lanes(pipe.graph, again, folded, fold) && place_lanes(folded, pipe.profile, *refolded, &ignored)) {
      pipe.lanes = std::move(folded);
      placement = std::move(refolded);
    }
  }
  pipe.placement = std::move(placement);
  return true;
}

}  // namespace sluice
