#include "engine/control/control_server.hh"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "engine/control/control_socket.hh"

namespace sluice {

namespace {

constexpr size_t kMaxRequest = 1 << 20;
constexpr int kClientTimeoutMs = 5000;  // a client that sends nothing cannot hold the server

}  // namespace

ControlServer::ControlServer(std::mutex &probe_lock) : probe_lock_(probe_lock) {
  add_command("help", "help", "list the commands", [this](const ControlArgs &) { return help(); });
}

ControlServer::~ControlServer() { stop(); }

void ControlServer::add_command(const std::string &name, const std::string &usage, const std::string &brief,
                                Command fn) {
  std::lock_guard lock(registry_mutex_);
  commands_[name] = {usage, brief, std::move(fn)};
}

ControlServer::Reply ControlServer::help() const {
  std::lock_guard lock(registry_mutex_);
  size_t w = 0;
  for (const auto &[name, e] : commands_) w = std::max(w, e.usage.size());
  std::string text;
  for (const auto &[name, e] : commands_) text += "  " + e.usage + std::string(w + 2 - e.usage.size(), ' ') + e.brief + "\n";
  return Reply::done(text);
}

ControlServer::Reply ControlServer::handle(const ControlArgs &request) {
  if (request.empty()) return Reply::error("empty request: send [\"help\"] for the commands");
  Command fn;
  {
    std::lock_guard lock(registry_mutex_);
    auto it = commands_.find(request[0]);
    if (it == commands_.end()) {
      std::string names;
      for (const auto &[name, e] : commands_) names += (names.empty() ? "" : ", ") + name;
      return Reply::error("unknown command '" + request[0] + "'; commands: " + names);
    }
    fn = it->second.fn;
  }
  std::lock_guard lock(probe_lock_);
  try {
    return fn(ControlArgs(request.begin() + 1, request.end()));
  } catch (const std::exception &e) {
    return Reply::error(e.what());
  }
}

bool ControlServer::listen(const std::string &path, std::string *error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = path + ": path too long for a Unix socket (" + std::to_string(sizeof addr.sun_path - 1) + " bytes at most)";
    return false;
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      *error = path + " exists and is not a socket";
      return false;
    }
    if (unix_socket_listening(path)) {
      *error = "another process listens on " + path;
      return false;
    }
    unlink(path.c_str());  // stale: its probe is gone
  }
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return false;
  }
  // Created 0600 rather than changed after: no moment where others may connect.
  mode_t old_mask = umask(0177);
  int rc = bind(listen_fd_, reinterpret_cast<sockaddr *>(&addr), sizeof addr);
  umask(old_mask);
  if (rc != 0 || ::listen(listen_fd_, 16) != 0 || lstat(path.c_str(), &st) != 0) {
    *error = "cannot listen on " + path + ": " + strerror(errno);
    close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  socket_inode_ = st.st_ino;
  path_ = path;
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  return true;
}

void ControlServer::start() {
  thread_ = std::thread([this] { serve(); });
}

void ControlServer::stop() {
  if (thread_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);
    thread_.join();
  }
  if (listen_fd_ >= 0) {
    struct stat st;
    if (lstat(path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) unlink(path_.c_str());
    close(listen_fd_);
    listen_fd_ = -1;
  }
  if (wake_fd_ >= 0) close(wake_fd_), wake_fd_ = -1;
}

void ControlServer::serve() {
  pthread_setname_np(pthread_self(), "sl-control");
  for (;;) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    answer(fd);
    close(fd);
  }
}

void ControlServer::answer(int fd) {
  auto send_all = [fd](const std::string &s) {
    for (size_t off = 0; off < s.size();) {
      ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return;
      off += size_t(n);
    }
  };
  auto reply = [&](const Reply &r) { send_all((r.ok ? "ok\n" : "error\n") + r.text); };
  timeval tv{kClientTimeoutMs / 1000, 0};
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string line;
  char buf[4096];
  while (line.find('\n') == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, kClientTimeoutMs) <= 0) return;
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    line.append(buf, size_t(n));
    if (line.size() > kMaxRequest) return reply(Reply::error("request too long"));
  }
  // Only this user (or root) may talk to the probe, wherever the socket is.
  // Checked once the request is read: closing on unread data would reset
  // the connection before the refusal arrives.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || (peer.uid != geteuid() && peer.uid != 0))
    return reply(Reply::error("permission denied: the probe belongs to uid " + std::to_string(geteuid())));
  line = line.substr(0, line.find('\n'));
  ControlArgs args;
  std::string err;
  if (!decode_control_request(line, args, &err)) return reply(Reply::error(err));
  reply(handle(args));
}

}  // namespace sluice
