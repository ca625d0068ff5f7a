// The server side of a probe's control socket (control_socket.hh has the
// location and the protocol): threads of their own, never data-plane ones,
// answer requests from a registry of named commands.
//
// Adding a command is one call, before or after start(); the function runs
// on a control thread and its Reply goes back to `sluice ctl`, which prints
// the text and exits 0, or prints the error and exits 1. Hot reload plugs in
// this way:
//
//   server.add_command("reload", "reload FILE [--dry-run]",
//                      "check FILE and switch the running graph to it", ControlServer::Access::None,
//                      [&](const ControlArgs &args) {
//                        ...  // args: what follows the command name
//                        return ok ? ControlServer::Reply::done(plan_text)
//                                  : ControlServer::Reply::error(diagnostics);
//                      });
//
// A command declares what it needs of the running graph (probe_lock.hh), and
// holds that while it runs: Read (many at once, with metrics scrapes),
// Change (one at a time, alongside reads), or None (it takes what it needs
// itself: reload compiles the new file under no lock at all and takes
// ProbeLock::replace() only for the switch).
//
// Up to kMaxClients requests are answered at once, each on a worker thread
// of its own; one more is refused at once with "busy". A client has
// kClientTimeoutMs to send its request and as long to take the answer, so
// one that connects and sends nothing, or reads slowly, holds a worker for
// that long at most and never the others.
#pragma once
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "engine/control/probe_lock.hh"

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
  // What a command holds of the probe's lock while it runs.
  enum class Access { None, Read, Change };

  static constexpr int kMaxClients = 8;
  static constexpr int kClientTimeoutMs = 5000;
  static constexpr size_t kMaxRequest = 1 << 20;  // bytes, newline included

  explicit ControlServer(ProbeLock &probe_lock);
  ~ControlServer();  // stop()
  ControlServer(const ControlServer &) = delete;
  ControlServer &operator=(const ControlServer &) = delete;

  // Registers (or replaces) command `name`. usage and brief are for `help`:
  // "read ELEMENT.HANDLER", "print a handler's value".
  void add_command(const std::string &name, const std::string &usage, const std::string &brief, Access access,
                   Command fn);

  // Binds the socket at `path` with mode 0600. A stale socket there (its
  // probe is gone) is replaced; a live one, or another kind of file, is an
  // error. False with *error.
  bool listen(const std::string &path, std::string *error);
  // Serves requests on threads of their own until stop().
  void start();
  // Stops the threads (after the commands under way) and removes the socket.
  void stop();
  const std::string &path() const { return path_; }

  // One request (the decoded array), as a worker answers it.
  Reply handle(const ControlArgs &request);

 private:
  struct Entry {
    std::string usage, brief;
    Access access;
    Command fn;
  };
  void accept_loop();
  void work();
  // Hands a connection to a worker, or answers "busy" when all are taken.
  void dispatch(int fd);
  // Out of file descriptors: the reserve is given up for a moment to accept
  // one waiting client and tell it so. False when there was no reserve.
  bool refuse_for_lack_of_descriptors();
  void answer(int fd);
  Reply help() const;

  ProbeLock &probe_lock_;
  mutable std::mutex registry_mutex_;  // add_command from any thread
  std::map<std::string, Entry> commands_;
  std::string path_;
  int listen_fd_ = -1, wake_fd_ = -1;  // wake_fd_: readable from stop() on
  int reserve_fd_ = -1;                // /dev/null, held for when descriptors run out
  unsigned long socket_inode_ = 0;     // ours: removed at stop() only if still there
  std::thread acceptor_;
  std::vector<std::thread> workers_;
  std::mutex queue_mutex_;
  std::condition_variable queue_cv_;
  std::deque<int> queue_;  // accepted, waiting for a worker
  int taken_ = 0;          // connections queued or being answered
  bool stopping_ = false;
};

}  // namespace sluice
