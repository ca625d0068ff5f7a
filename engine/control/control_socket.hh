// The control socket of a running probe: where it lives, what goes over it,
// and the client side (`sluice ctl`). docs/control.md describes it for users.
//
// Location. `sluice run` listens on DIR/PID.sock, DIR being
// $XDG_RUNTIME_DIR/sluice when XDG_RUNTIME_DIR is set, else /tmp/sluice-UID;
// `--control PATH` puts it elsewhere. DIR is made with mode 0700 and is
// refused unless it is a real directory of this user that nobody else can
// enter; the socket itself is 0600, and the server also checks each peer's
// uid (SO_PEERCRED), so a socket put in a shared directory is still the
// owner's alone. `sluice ctl` without --socket looks in the same DIR.
//
// Protocol. One request per connection: the client sends the command and
// its arguments as a JSON array of strings on one line,
//   ["write","f.expr","tcp and port 443"]
// and the server answers with a status line, `ok` or `error`, then the
// answer's text (or the error message), and closes the connection. Any
// client can speak it: printf '["stats"]\n' | socat - UNIX-CONNECT:PATH
#pragma once
#include <string>

#include "engine/base/json_text.hh"
#include <vector>

namespace sluice {

// DIR above, and DIR/PID.sock for this process.
std::string default_control_dir();
std::string default_control_path();

// Makes `dir` (mode 0700) if it is missing. False, with *error, when it is
// not a directory (a symbolic link is refused), belongs to another user, or
// others may use it.
bool prepare_control_dir(const std::string &dir, std::string *error);

// Whether something accepts connections on the Unix socket at `path`.
bool unix_socket_listening(const std::string &path);

// The sockets in default_control_dir() that accept a connection: the
// running probes of this user. Stale sockets (a probe that was killed) are
// left out.
std::vector<std::string> running_probe_sockets();

// "pid 1234: sluice run configs/flowprobe.pipe" for a socket named PID.sock
// whose process is alive; "" otherwise.
std::string describe_probe_socket(const std::string &path);

// The request line (without its newline), and back. decode fails, with
// *error, on anything but an array of strings.
std::string encode_control_request(const std::vector<std::string> &args);
bool decode_control_request(const std::string &line, std::vector<std::string> &args, std::string *error);

struct ControlReply {
  bool ok = false;
  std::string text;
};
// Sends one request to the socket at `path` and reads the answer. False,
// with *error, when the probe cannot be reached or answers nonsense;
// timeout_s bounds the wait for the answer.
bool control_request(const std::string &path, const std::vector<std::string> &args, ControlReply &reply,
                     std::string *error, int timeout_s = 60);

}  // namespace sluice
