// The server side of a probe's control socket (control_socket.hh has the
// location and the protocol): a thread of its own, never a data-plane one,
// answers one request at a time from a registry of named commands.
//
// Adding a command is one call, before or after start(); the function runs
// on the control thread and its Reply goes back to `sluice ctl`, which
// prints the text and exits 0, or prints the error and exits 1. Hot reload
// plugs in this way:
//
//   server.add_command("reload", "reload FILE [--dry-run]",
//                      "check FILE and switch the running graph to it", [&](const ControlArgs &args) {
//                        ...  // args: what follows the command name
//                        return ok ? ControlServer::Reply::done(plan_text)
//                                  : ControlServer::Reply::error(diagnostics);
//                      });
//
// Commands hold the probe's control lock (the mutex given to the
// constructor) while they run, and so does the metrics endpoint while it
// reads the probe: a command that changes the graph (reload) never runs
// while metrics are collected.
#pragma once
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sluice {

using ControlArgs = std::vector<std::string>;

class ControlServer {
 public:
  struct Reply {
    bool ok = true;
    std::string text;
    static Reply done(std::string text) { return {true, std::move(text)}; }
    static Reply error(std::string text) { return {false, std::move(text)}; }
  };
  using Command = std::function<Reply(const ControlArgs &args)>;

  explicit ControlServer(std::mutex &probe_lock);
  ~ControlServer();  // stop()
  ControlServer(const ControlServer &) = delete;
  ControlServer &operator=(const ControlServer &) = delete;

  // Registers (or replaces) command `name`. usage and brief are for `help`:
  // "read ELEMENT.HANDLER", "print a handler's value".
  void add_command(const std::string &name, const std::string &usage, const std::string &brief, Command fn);

  // Binds the socket at `path` with mode 0600. A stale socket there (its
  // probe is gone) is replaced; a live one, or another kind of file, is an
  // error. False with *error.
  bool listen(const std::string &path, std::string *error);
  // Serves requests on a thread of its own until stop().
  void start();
  // Stops the thread and removes the socket.
  void stop();
  const std::string &path() const { return path_; }

  // One request (the decoded array), as the control thread answers it.
  Reply handle(const ControlArgs &request);

 private:
  struct Entry {
    std::string usage, brief;
    Command fn;
  };
  void serve();
  void answer(int fd);
  Reply help() const;

  std::mutex &probe_lock_;
  mutable std::mutex registry_mutex_;  // add_command from any thread
  std::map<std::string, Entry> commands_;
  std::string path_;
  int listen_fd_ = -1, wake_fd_ = -1;
  unsigned long socket_inode_ = 0;  // ours: removed at stop() only if still there
  std::thread thread_;
};

}  // namespace sluice
