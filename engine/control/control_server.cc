#include "engine/control/control_server.hh"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "engine/control/control_socket.hh"

namespace sluice {

namespace {

using Clock = std::chrono::steady_clock;

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left > 0 ? int(left) : 0;
}

std::string status_text(const ControlServer::Reply &r) { return (r.ok ? "ok\n" : "error\n") + r.text; }

// An answer sent without waiting (a refusal from the accepting thread): it
// fits in the socket's buffer, or the client gets what fits.
void send_now(int fd, const ControlServer::Reply &r) {
  std::string s = status_text(r);
  (void)!send(fd, s.data(), s.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  shutdown(fd, SHUT_WR);
}

}  // namespace

ControlServer::ControlServer(ProbeLock &probe_lock) : probe_lock_(probe_lock) {
  add_command("help", "help", "list the commands", Access::None, [this](const ControlArgs &) { return help(); });
}

ControlServer::~ControlServer() { stop(); }

void ControlServer::add_command(const std::string &name, const std::string &usage, const std::string &brief,
                                Access access, Command fn) {
  std::lock_guard lock(registry_mutex_);
  commands_[name] = {usage, brief, access, std::move(fn)};
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
  Entry entry;
  {
    std::lock_guard lock(registry_mutex_);
    auto it = commands_.find(request[0]);
    if (it == commands_.end()) {
      std::string names;
      for (const auto &[name, e] : commands_) names += (names.empty() ? "" : ", ") + name;
      std::string shown = request[0].size() > 64 ? request[0].substr(0, 64) + "..." : request[0];
      return Reply::error("unknown command '" + shown + "'; commands: " + names);
    }
    entry = it->second;
  }
  ControlArgs args(request.begin() + 1, request.end());
  try {
    switch (entry.access) {
      case Access::Read: {
        ProbeLock::Read lock = probe_lock_.read();
        return entry.fn(args);
      }
      case Access::Change: {
        ProbeLock::Change lock = probe_lock_.change();
        return entry.fn(args);
      }
      case Access::None: break;
    }
    return entry.fn(args);
  } catch (const std::exception &e) {
    return Reply::error(e.what());
  } catch (...) {  // nothing a request meets may end the probe
    return Reply::error("the command failed unexpectedly");
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
  wake_fd_ = eventfd(0, EFD_CLOEXEC);
  if (wake_fd_ < 0) {
    *error = std::string("eventfd: ") + strerror(errno);
    unlink(path.c_str());
    close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  socket_inode_ = st.st_ino;
  path_ = path;
  return true;
}

void ControlServer::start() {
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  for (int i = 0; i < kMaxClients; ++i) workers_.emplace_back([this] { work(); });
  acceptor_ = std::thread([this] { accept_loop(); });
}

void ControlServer::stop() {
  if (acceptor_.joinable()) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof one);  // never read: every poll on it returns from now on
    acceptor_.join();
    {
      std::lock_guard lock(queue_mutex_);
      stopping_ = true;
    }
    queue_cv_.notify_all();
    for (std::thread &t : workers_) t.join();
    workers_.clear();
    for (int fd : queue_) close(fd);
    queue_.clear();
  }
  if (listen_fd_ >= 0) {
    struct stat st;
    if (lstat(path_.c_str(), &st) == 0 && st.st_ino == socket_inode_) unlink(path_.c_str());
    close(listen_fd_);
    listen_fd_ = -1;
  }
  if (wake_fd_ >= 0) close(wake_fd_), wake_fd_ = -1;
  if (reserve_fd_ >= 0) close(reserve_fd_), reserve_fd_ = -1;
}

void ControlServer::accept_loop() {
  pthread_setname_np(pthread_self(), "sl-control");
  // Waiting clients stay in the listen backlog while accept() fails for
  // want of descriptors or memory, and poll() would report them again at
  // once: between attempts the loop waits, 10 ms at first, up to 1 s.
  int backoff_ms = 0;
  auto back_off = [&] { backoff_ms = std::clamp(backoff_ms * 2, 10, 1000); };
  for (;;) {
    pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (poll(fds, backoff_ms ? 1 : 2, backoff_ms ? backoff_ms : -1) < 0) {
      if (errno == EINTR) continue;
      back_off();  // poll() itself is short of memory: wait without it
      std::this_thread::sleep_for(std::chrono::milliseconds(backoff_ms));
      continue;
    }
    if (fds[0].revents) return;
    if (reserve_fd_ < 0) reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) {
      backoff_ms = 0;
      dispatch(fd);
      continue;
    }
    if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;  // the next one may be fine
    if ((errno == EMFILE || errno == ENFILE) && refuse_for_lack_of_descriptors()) continue;
    back_off();
  }
}

bool ControlServer::refuse_for_lack_of_descriptors() {
  if (reserve_fd_ < 0) return false;
  close(reserve_fd_);
  int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd >= 0) {
    send_now(fd, Reply::error("the probe is out of file descriptors (RLIMIT_NOFILE); try again later"));
    close(fd);
  }
  reserve_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return fd >= 0 && reserve_fd_ >= 0;
}

void ControlServer::dispatch(int fd) {
  {
    std::lock_guard lock(queue_mutex_);
    if (taken_ < kMaxClients) {
      ++taken_;
      queue_.push_back(fd);
      queue_cv_.notify_one();
      return;
    }
  }
  send_now(fd, Reply::error("busy: " + std::to_string(kMaxClients) +
                            " requests are being answered, the most at once; try again"));
  close(fd);
}

void ControlServer::work() {
  pthread_setname_np(pthread_self(), "sl-control");
  for (;;) {
    int fd;
    {
      std::unique_lock lock(queue_mutex_);
      queue_cv_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      fd = queue_.front();
      queue_.pop_front();
    }
    answer(fd);
    close(fd);
    std::lock_guard lock(queue_mutex_);
    --taken_;
  }
}

void ControlServer::answer(int fd) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  // Waits until fd is ready for `events` (1), the deadline passes (0), or
  // stop() (-1).
  auto ready = [&](short events, Clock::time_point deadline) {
    for (;;) {
      pollfd p[2] = {{fd, events, 0}, {wake_fd_, POLLIN, 0}};
      int n = poll(p, 2, ms_left(deadline));
      if (n < 0 && errno == EINTR) continue;
      if (n > 0 && p[1].revents) return -1;
      return n > 0 ? 1 : 0;
    }
  };
  auto reply = [&](const Reply &r) {
    std::string s = status_text(r);
    auto deadline = Clock::now() + std::chrono::milliseconds(kClientTimeoutMs);
    for (size_t off = 0; off < s.size();) {
      ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n > 0) off += size_t(n);
      else if (n < 0 && errno == EINTR) continue;
      else if (n < 0 && errno == EAGAIN && ready(POLLOUT, deadline) > 0) continue;
      else return;  // gone, or too slow to read its answer
    }
  };
  std::string line;
  size_t eol = std::string::npos;
  auto deadline = Clock::now() + std::chrono::milliseconds(kClientTimeoutMs);
  while (eol == std::string::npos) {
    if (int r = ready(POLLIN, deadline); r <= 0)
      return reply(Reply::error(r < 0 ? "the probe is stopping"
                                      : "no complete request within " + std::to_string(kClientTimeoutMs / 1000) +
                                            " s: send a JSON array of strings and a newline"));
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return;
    if (n == 0) break;  // closed after what it sent: that is the request
    size_t scanned = line.size();
    line.append(buf, size_t(n));
    eol = line.find('\n', scanned);
    if ((eol == std::string::npos ? line.size() : eol + 1) > kMaxRequest)
      return reply(Reply::error("request too long: at most " + std::to_string(kMaxRequest) + " bytes"));
  }
  // Only this user (or root) may talk to the probe, wherever the socket is.
  // Checked once the request is read: closing on unread data would reset
  // the connection before the refusal arrives.
  ucred peer{};
  socklen_t len = sizeof peer;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0 || (peer.uid != geteuid() && peer.uid != 0))
    return reply(Reply::error("permission denied: the probe belongs to uid " + std::to_string(geteuid())));
  if (eol != std::string::npos) line.resize(eol);
  ControlArgs args;
  std::string err;
  if (!decode_control_request(line, args, &err)) return reply(Reply::error(err));
  reply(handle(args));
}

}  // namespace sluice
