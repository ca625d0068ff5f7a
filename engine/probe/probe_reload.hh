// A running probe's hot reload, as `sluice ctl reload FILE [--dry-run]` and
// SIGHUP ask for it: the file compiled with the run's --define values and
// placed on the run's host profile (no lock needed: nothing running is
// touched), then the switch (Runtime::reload, under whatever lock keeps
// readers of the running graph out), then the answer for the operator.
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "engine/control/control_server.hh"
#include "engine/control/probe_control.hh"
#include "engine/control/probe_lock.hh"
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

// The reloads of one running probe: the `reload` control command, and
// SIGHUP for the file the run started with. One at a time (the front end is
// not reentrant: a plugin's `require` registers elements). Compiling and
// placing the file take no lock (a big Filter takes libpcap seconds); only
// the switch holds the probe lock alone.
class ProbeReloads {
 public:
  ProbeReloads(Runtime &rt, ProbeLock &lock, ProbeControl &probe, ReloadSettings settings, std::string started_with)
      : rt_(rt), lock_(lock), probe_(probe), settings_(std::move(settings)), started_with_(std::move(started_with)) {}
  ~ProbeReloads() { finish(); }

  // `reload FILE [--dry-run]` on the control socket.
  void add_command(ControlServer &control);
  // Called by the run loop's tick: when `requested` (set by the SIGHUP
  // handler) and no SIGHUP reload is under way, reloads the file the run
  // started with on a thread of its own, so that the run loop (status line,
  // --duration, replaced instances) goes on while the file compiles. A
  // SIGHUP meanwhile is taken after it. Tells systemd (Type=notify).
  void on_tick(std::atomic<bool> &requested);
  // Waits for a SIGHUP reload under way.
  void finish();

  ControlServer::Reply reload(const std::string &file, bool dry_run);

 private:
  void sighup_reload();

  Runtime &rt_;
  ProbeLock &lock_;
  ProbeControl &probe_;
  ReloadSettings settings_;
  std::string started_with_;
  std::mutex one_at_a_time_;
  std::thread sighup_thread_;
  std::atomic<bool> sighup_busy_{false};
};

}  // namespace sluice
