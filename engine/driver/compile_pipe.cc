#include "engine/driver/compile_pipe.hh"

#include <exception>
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
  pipe.placement = std::move(placement);
  return true;
}

}  // namespace sluice
