#include "engine/probe/probe_reload.hh"

#include <systemd/sd-daemon.h>

#include <cstdio>
#include <exception>

#include "engine/runtime/log.hh"

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

ControlServer::Reply ProbeReloads::reload(const std::string &file, bool dry_run) {
  std::lock_guard one_at_a_time(one_at_a_time_);
  std::string why;
  std::shared_ptr<CompiledPipe> next = compile_for_reload(settings_, file, &why);
  if (!next) return ControlServer::Reply::error(why + kReloadRefused);
  ReloadOutcome o;
  {
    ProbeLock::Replace lock = lock_.replace();
    o = rt_.reload(next, dry_run);
    if (o.applied) probe_.set_config(file);
  }
  if (!o.error.empty()) return ControlServer::Reply::error(o.error + kReloadRefused);
  return ControlServer::Reply::done(reload_answer(o, dry_run));
}

void ProbeReloads::add_command(ControlServer &control) {
  control.add_command("reload", "reload FILE [--dry-run]",
                      "check FILE and switch the running graph to it; flows and queued packets are kept",
                      ControlServer::Access::None, [this](const ControlArgs &a) {
                        bool dry = a.size() == 2 && a[1] == "--dry-run";
                        if (a.empty() || a.size() > 2 || (a.size() == 2 && !dry))
                          return ControlServer::Reply::error("usage: reload FILE [--dry-run]");
                        return reload(a[0], dry);
                      });
}

void ProbeReloads::on_tick(std::atomic<bool> &requested) {
  if (sighup_busy_.load() || !requested.exchange(false)) return;
  if (sighup_thread_.joinable()) sighup_thread_.join();
  sighup_busy_ = true;
  sighup_thread_ = std::thread([this] { sighup_reload(); });
}

void ProbeReloads::sighup_reload() {
  sd_notify(0, "RELOADING=1\nSTATUS=reloading");  // systemd (Type=notify): `systemctl reload` in progress
  ControlServer::Reply r = ControlServer::Reply::error("");
  try {
    r = reload(started_with_, false);
  } catch (const std::exception &e) {  // nothing a reload meets may end the probe
    r = ControlServer::Reply::error(std::string(e.what()) + "\n" + kReloadRefused);
  } catch (...) {
    r = ControlServer::Reply::error(std::string("unexpected failure\n") + kReloadRefused);
  }
  std::string said = "SIGHUP: reload " + started_with_ + ": " + r.text;
  while (!said.empty() && said.back() == '\n') said.pop_back();
  if (r.ok) log::info(said);
  else log::error(said);
  std::string status = r.text.substr(0, r.text.find('\n'));
  sd_notify(0, ("READY=1\nSTATUS=" + std::string(r.ok ? "reloaded: " : "reload refused: ") + status).c_str());
  sighup_busy_ = false;
}

void ProbeReloads::finish() {
  if (sighup_thread_.joinable()) sighup_thread_.join();
}

}  // namespace sluice
