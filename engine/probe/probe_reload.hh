// A running probe's hot reload, as `sluice ctl reload FILE [--dry-run]` and
// SIGHUP ask for it: the file compiled with the run's --define values and
// placed on the run's host profile (no lock needed: nothing running is
// touched), then the switch (Runtime::reload, under whatever lock keeps
// readers of the running graph out), then the answer for the operator.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/driver/compile_pipe.hh"
#include "engine/runtime/runtime.hh"

namespace sluice {

// What a reload of this run compiles with: the run's -D values and host profile.
struct ReloadSettings {
  std::vector<std::pair<std::string, std::string>> defines;
  std::string host;  // empty: the default profile
};

// The file compiled and placed; null with *error (diagnostics with
// locations, or the placement problem) when it cannot be.
std::shared_ptr<CompiledPipe> compile_for_reload(const ReloadSettings &settings, const std::string &file,
                                                 std::string *error);

// The operator's answer: the plan and each lane's pause, or why nothing changed.
std::string reload_answer(const ReloadOutcome &o, bool dry_run);

// Said after every refusal: the probe goes on as it was.
inline constexpr const char *kReloadRefused = "the running graph goes on unchanged\n";

}  // namespace sluice
