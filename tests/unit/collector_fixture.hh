// Collectors nobody here wrote, for tests that export to them: nfdump's
// nfcapd as a child process on a loopback port, and what nfdump reads back.
// Tests skip with a message where nfdump is not installed.
#pragma once
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "run_fixture.hh"

namespace sluice::test {

// A collector process (argv), stopped (SIGTERM: nfcapd writes its last
// file) by stop() or at the end. With `udp_port` the constructor returns once
// the process's network namespace has a UDP socket bound to that port
// (/proc/PID/net/udp and udp6: `ip netns exec` collectors too), and fails the
// test when the process exits first or takes more than a minute. A fixed
// second's wait was not always enough on a loaded machine: goflow2 was not
// listening yet, and the records of a run of 40 ms went nowhere. Without a
// port, a second's wait.
struct Collector {
  pid_t pid = -1;
  explicit Collector(const std::vector<std::string> &argv, int udp_port = 0) {
    pid = fork();
    if (pid == 0) {
      std::vector<char *> a;
      for (const std::string &s : argv) a.push_back(const_cast<char *>(s.c_str()));
      a.push_back(nullptr);
      (void)!freopen("/dev/null", "w", stdout);
      (void)!freopen("/dev/null", "w", stderr);
      execvp(a[0], a.data());
      _exit(127);
    }
    if (udp_port <= 0) {
      usleep(1000 * 1000);
      return;
    }
    const std::string what = argv.front() + " on UDP port " + std::to_string(udp_port);
    for (int i = 0; i < 600; ++i) {
      if (udp_port_bound(pid, udp_port)) return;
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        FAIL("the collector " << what << " exited before it listened");
      }
      usleep(100 * 1000);
    }
    stop();
    FAIL("the collector " << what << " was not listening after a minute");
  }
  // Whether process pid's network namespace has a UDP socket bound to port.
  static bool udp_port_bound(pid_t pid, int port) {
    for (const char *table : {"udp", "udp6"}) {
      FILE *f = fopen(("/proc/" + std::to_string(pid) + "/net/" + table).c_str(), "r");
      if (!f) continue;
      char line[512];
      bool found = false;
      while (!found && fgets(line, sizeof line, f)) {
        unsigned local_port;
        // "  sl  local_address ...": "  12: 0100007F:4E20 ..."
        if (sscanf(line, " %*u: %*[0-9A-Fa-f]:%x", &local_port) == 1 && int(local_port) == port) found = true;
      }
      fclose(f);
      if (found) return true;
    }
    return false;
  }
  Collector(Collector &&o) noexcept : pid(o.pid) { o.pid = -1; }
  Collector(const Collector &) = delete;
  void stop() {
    if (pid <= 0) return;
    kill(pid, SIGTERM);
    for (int i = 0; i < 50; ++i) {
      int st;
      if (waitpid(pid, &st, WNOHANG) == pid) {
        pid = -1;
        return;
      }
      usleep(100 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = -1;
  }
  ~Collector() { stop(); }
};

// A loopback port for this test process (tests run in parallel).
inline int test_port(int offset) { return 20000 + (getpid() * 7 + offset) % 20000; }

// nfdump's nfcapd and nfdump, or a warning that the test is skipped.
inline bool have_nfdump() {
  if (have_tool("nfcapd") && have_tool("nfdump")) return true;
  WARN("skipped: nfdump is not installed (apt-get install nfdump)");
  return false;
}

// nfcapd writing into `dir` (made here), listening on 127.0.0.1:port;
// `netns`: in that network namespace's loopback.
inline Collector nfcapd_at(const std::string &dir, int port, const std::string &netns = "") {
  std::filesystem::create_directories(dir);
  std::vector<std::string> argv = {"nfcapd", "-w", dir, "-p", std::to_string(port), "-b", "127.0.0.1"};
  if (!netns.empty()) argv.insert(argv.begin(), {"ip", "netns", "exec", netns});
  return Collector(argv, port);
}

// nfdump -I over a collector's directory: "Flows" and "Sequence failures".
inline std::map<std::string, uint64_t> nfdump_summary(const std::string &dir) {
  Run n = run_cmd("nfdump -R " + dir + " -I");
  REQUIRE(n.status == 0);
  std::map<std::string, uint64_t> out;
  std::smatch m;
  for (const char *key : {"Flows", "Sequence failures"}) {
    INFO(n.out);
    REQUIRE(std::regex_search(n.out, m, std::regex(std::string("\n") + key + ": ([0-9]+)")));
    out[key] = std::stoull(m[1]);
  }
  return out;
}

// A collector that accepts TCP connections and never reads: its receive
// buffer (4 KB, set before listen() so that accepted sockets inherit it)
// fills, then the exporter's socket buffer, and the exporter's messages wait
// in its queue.
struct SilentTcpCollector {
  int fd = -1, port = 0;
  SilentTcpCollector() {
    fd = bind_loopback(SOCK_STREAM, &port);
    int small = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    REQUIRE(listen(fd, 4) == 0);  // the kernel completes the handshake; nothing accepts or reads
  }
  ~SilentTcpCollector() { close(fd); }
};

}  // namespace sluice::test
