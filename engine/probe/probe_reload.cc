#include "engine/probe/probe_reload.hh"

#include <cstdio>

namespace sluice {

std::shared_ptr<CompiledPipe> compile_for_reload(const ReloadSettings &settings, const std::string &file,
                                                 std::string *error) {
  CompileOptions opts;
  opts.defines = settings.defines;
  std::shared_ptr<CompiledPipe> next = compile_pipe_file(file, opts);
  if (!next->ok) {
    *error = next->printed() + next->count_line();
    return nullptr;
  }
  std::string place_error;
  if (!place_pipe(*next, settings.host, &place_error)) {
    *error = place_error + "\n";
    return nullptr;
  }
  return next;
}

std::string reload_answer(const ReloadOutcome &o, bool dry_run) {
  std::string text = o.plan.text();
  if (dry_run) return text + "dry run: nothing changed\n";
  text += "applied; pause per lane:";
  for (size_t l = 0; l < o.lane_pause_ns.size(); ++l) {
    char b[64];
    snprintf(b, sizeof b, " %zu: %.0f us", l, double(o.lane_pause_ns[l]) / 1e3);
    text += b;
  }
  return text + "\n";
}

}  // namespace sluice
