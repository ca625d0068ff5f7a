#include "engine/control/control_socket.hh"

#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace sluice {

// The user's runtime directory; for root without one (a service, sudo -i)
// /run/sluice, where the systemd unit puts its sockets too; others' under
// /tmp, checked to be theirs alone.
std::string default_control_dir() {
  const char *xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg && *xdg) return std::string(xdg) + "/sluice";
  if (geteuid() == 0) return "/run/sluice";
  return "/tmp/sluice-" + std::to_string(geteuid());
}

std::string default_control_path() { return default_control_dir() + "/" + std::to_string(getpid()) + ".sock"; }

bool prepare_control_dir(const std::string &dir, std::string *error) {
  if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    *error = "cannot make " + dir + ": " + strerror(errno);
    return false;
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) {
    *error = "cannot use " + dir + ": " + strerror(errno);
    return false;
  }
  // Someone else may have made it first (/tmp is shared): it must be ours alone.
  if (!S_ISDIR(st.st_mode)) *error = dir + " is not a directory";
  else if (st.st_uid != geteuid()) *error = dir + " belongs to uid " + std::to_string(st.st_uid) + ", not to this user";
  else if (st.st_mode & 077) {
    char mode[8];
    snprintf(mode, sizeof mode, "%03o", unsigned(st.st_mode & 0777));
    *error = dir + " has mode " + mode + ": others may use it (chmod 700 " + dir + ")";
  }
  else return true;
  *error = "refusing the control directory: " + *error;
  return false;
}

namespace {

// A connected socket to `path`, or -1 with *error.
int connect_to(const std::string &path, std::string *error) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) {
    *error = path + ": path too long for a Unix socket (" + std::to_string(sizeof addr.sun_path - 1) + " bytes at most)";
    return -1;
  }
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + strerror(errno);
    return -1;
  }
  if (connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) != 0) {
    *error = "cannot connect to " + path + ": " + strerror(errno);
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

bool unix_socket_listening(const std::string &path) {
  std::string err;
  int fd = connect_to(path, &err);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

std::vector<std::string> running_probe_sockets() {
  std::vector<std::string> out;
  std::string dir = default_control_dir();
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent *e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) continue;
    std::string path = dir + "/" + name;
    if (unix_socket_listening(path)) out.push_back(path);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::string describe_probe_socket(const std::string &path) {
  size_t slash = path.rfind('/') + 1, dot = path.rfind(".sock");
  if (dot == std::string::npos || dot <= slash) return "";
  std::string pid = path.substr(slash, dot - slash);
  if (pid.find_first_not_of("0123456789") != std::string::npos) return "";
  FILE *f = fopen(("/proc/" + pid + "/cmdline").c_str(), "r");
  if (!f) return "";
  std::string cmd;
  for (int c; (c = fgetc(f)) != EOF;) cmd += c ? char(c) : ' ';
  fclose(f);
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  return "pid " + pid + ": " + cmd;
}


std::string encode_control_request(const std::vector<std::string> &args) {
  std::string line = "[";
  for (size_t i = 0; i < args.size(); ++i) line += (i ? "," : "") + json_string(args[i]);
  return line + "]";
}

namespace {

void put_utf8(std::string &out, uint32_t cp) {
  if (cp < 0x80) out += char(cp);
  else if (cp < 0x800) out += char(0xc0 | cp >> 6), out += char(0x80 | (cp & 0x3f));
  else if (cp < 0x10000)
    out += char(0xe0 | cp >> 12), out += char(0x80 | (cp >> 6 & 0x3f)), out += char(0x80 | (cp & 0x3f));
  else
    out += char(0xf0 | cp >> 18), out += char(0x80 | (cp >> 12 & 0x3f)), out += char(0x80 | (cp >> 6 & 0x3f)),
        out += char(0x80 | (cp & 0x3f));
}

struct JsonReader {
  const std::string &s;
  size_t i = 0;
  std::string error{};

  void skip_space() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')) ++i;
  }
  bool fail(const std::string &what) {
    error = what + " at byte " + std::to_string(i + 1);
    return false;
  }
  bool fail_at(size_t at, const std::string &what) {
    i = at;
    return fail(what);
  }
  bool hex4(uint32_t &v) {
    if (i + 4 > s.size()) return fail("short \\u escape");
    v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s[i++];
      int d = isdigit(c) ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
      if (d < 0) return fail("bad \\u escape");
      v = v << 4 | uint32_t(d);
    }
    return true;
  }
  bool string(std::string &out) {
    if (i >= s.size() || s[i] != '"') return fail("expected a string");
    ++i;
    while (i < s.size() && s[i] != '"') {
      char c = s[i++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) break;
      size_t escape = i - 1;
      switch (char e = s[i++]) {
        case '"': case '\\': case '/': out += e; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t cp, lo = 0;
          if (!hex4(cp)) return false;
          if (cp >= 0xd800 && cp < 0xdc00) {  // a surrogate pair: the low half must follow
            if (s.compare(i, 2, "\\u") != 0) return fail_at(escape, "a high surrogate \\u escape without its low half");
            i += 2;
            if (!hex4(lo)) return false;
            if (lo < 0xdc00 || lo >= 0xe000) return fail_at(escape, "a high surrogate \\u escape without its low half");
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
          } else if (cp >= 0xdc00 && cp < 0xe000) {
            return fail_at(escape, "a low surrogate \\u escape without its high half");
          }
          put_utf8(out, cp);
          break;
        }
        default: return fail_at(escape, "bad escape");
      }
    }
    if (i >= s.size()) return fail("unterminated string");
    ++i;
    return true;
  }
};

}  // namespace

bool decode_control_request(const std::string &line, std::vector<std::string> &args, std::string *error) {
  JsonReader r{line};
  args.clear();
  r.skip_space();
  bool ok = r.i < line.size() && line[r.i] == '[' ? (++r.i, true) : r.fail("expected a JSON array of strings");
  r.skip_space();
  if (ok && r.i < line.size() && line[r.i] == ']') ++r.i;
  else
    while (ok) {
      std::string a;
      ok = r.string(a);
      if (!ok) break;
      args.push_back(std::move(a));
      r.skip_space();
      if (r.i < line.size() && line[r.i] == ',') {
        ++r.i;
        r.skip_space();
        continue;
      }
      if (r.i < line.size() && line[r.i] == ']') {
        ++r.i;
        break;
      }
      ok = r.fail("expected ',' or ']'");
    }
  r.skip_space();
  if (ok && r.i != line.size()) ok = r.fail("unexpected text after the array");
  if (!ok) *error = "bad request: " + r.error;
  return ok;
}

bool control_request(const std::string &path, const std::vector<std::string> &args, ControlReply &reply,
                     std::string *error, int timeout_s) {
  int fd = connect_to(path, error);
  if (fd < 0) return false;
  timeval tv{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  std::string line = encode_control_request(args) + "\n";
  bool sent = send(fd, line.data(), line.size(), MSG_NOSIGNAL) == ssize_t(line.size());
  int send_errno = errno;
  std::string in;
  char buf[65536];
  ssize_t n = 0;
  while ((n = recv(fd, buf, sizeof buf, 0)) > 0) in.append(buf, size_t(n));
  int recv_errno = errno;
  close(fd);
  if (in.empty()) {
    *error = path + ": " + (n < 0 && recv_errno == EAGAIN ? "no answer within " + std::to_string(timeout_s) + " s"
                            : n < 0                        ? strerror(recv_errno)
                            : !sent                        ? strerror(send_errno)
                                                           : "closed without an answer");
    return false;
  }
  size_t eol = in.find('\n');
  std::string status = in.substr(0, eol);
  if (status != "ok" && status != "error") {
    *error = path + ": not a sluice control socket (it answered '" + status.substr(0, 40) + "')";
    return false;
  }
  reply.ok = status == "ok";
  reply.text = eol == std::string::npos ? "" : in.substr(eol + 1);
  return true;
}

}  // namespace sluice
