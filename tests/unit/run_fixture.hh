// Helpers for tests that run the sluice binary as a user would: run a
// command and collect its output and exit status, scratch directories under
// the build tree, small files.
#pragma once
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace sluice::test {

struct Run {
  int status;       // exit status, -1 when killed by a signal
  std::string out;  // stdout and stderr together
};

inline Run run_cmd(const std::string &cmd) {
  FILE *p = popen((cmd + " 2>&1").c_str(), "r");
  REQUIRE(p);
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

// `sluice ARGS` from the repository root.
inline Run run_sluice(const std::string &args) {
  return run_cmd(std::string("cd " SLUICE_SOURCE_DIR " && " SLUICE_BINARY " ") + args);
}

// A fresh, empty directory per test case: build/tests/AREA/NAME.
inline std::string scratch(const std::string &area, const std::string &name) {
  std::filesystem::path d = std::filesystem::path(SLUICE_TEST_PLUGIN_DIR) / area / name;
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d.string();
}

inline std::string write_file(const std::string &path, const std::string &text) {
  std::ofstream(path) << text;
  return path;
}

inline std::string read_file(const std::string &path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

inline bool have_tool(const char *tool) {
  return system((std::string("command -v ") + tool + " > /dev/null 2>&1").c_str()) == 0;
}

// A socket of `type` (SOCK_DGRAM, SOCK_STREAM) bound to 127.0.0.1 on a port
// the kernel picks, which *port gets: a collector for an exporter to send to.
inline int bind_loopback(int type, int *port) {
  int fd = socket(AF_INET, type, 0);
  REQUIRE(fd >= 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(getsockname(fd, reinterpret_cast<sockaddr *>(&a), &len) == 0);
  *port = ntohs(a.sin_port);
  return fd;
}

}  // namespace sluice::test
