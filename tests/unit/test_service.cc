// sluice as a service: what a systemd unit (configs/systemd/sluice@.service)
// relies on, checked without systemd: readiness, reload and stop notified
// on $NOTIFY_SOCKET as sd_notify(3) sends them, SIGHUP reloading the file,
// and root's default control socket under /run/sluice.
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "run_fixture.hh"

using namespace sluice::test;

namespace {

// A datagram socket where systemd would listen for sd_notify messages.
struct NotifySocket {
  int fd = -1;
  std::string path;
  explicit NotifySocket(const std::string &p) : path(p) {
    unlink(p.c_str());
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    REQUIRE(p.size() < sizeof a.sun_path);
    memcpy(a.sun_path, p.c_str(), p.size() + 1);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
  }
  ~NotifySocket() {
    close(fd);
    unlink(path.c_str());
  }
  // The next message, or "" after `ms` without one.
  std::string next(int ms) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, ms) != 1) return "";
    char buf[4096];
    ssize_t n = recv(fd, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, size_t(n)) : "";
  }
  // Messages until one holds `what` (returned), or "" after `ms`.
  std::string until(const std::string &what, int ms, std::vector<std::string> *seen) {
    for (int waited = 0; waited < ms; waited += 100) {
      std::string m = next(100);
      if (m.empty()) continue;
      seen->push_back(m);
      if (m.find(what) != std::string::npos) return m;
    }
    return "";
  }
};

pid_t spawn(const std::vector<std::string> &argv, const std::vector<std::string> &env, const std::string &out) {
  pid_t pid = fork();
  if (pid == 0) {
    for (const std::string &e : env) putenv(const_cast<char *>(e.c_str()));
    (void)!freopen(out.c_str(), "w", stdout);
    dup2(1, 2);
    std::vector<char *> a;
    for (const std::string &s : argv) a.push_back(const_cast<char *>(s.c_str()));
    a.push_back(nullptr);
    execv(a[0], a.data());
    _exit(127);
  }
  return pid;
}

}  // namespace

TEST_CASE("service: ready, reloading and stopping are notified as systemd's Type=notify expects", "[service]") {
  std::string dir = scratch("service", "notify");
  NotifySocket notify(dir + "/notify.sock");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 1Kpps) -> Timestamp -> c :: Counter -> Discard;\n");
  std::string out = dir + "/out.txt";
  pid_t pid = spawn({SLUICE_BINARY, "run", cfg, "--duration", "6s", "--control", dir + "/ctl.sock"},
                    {"NOTIFY_SOCKET=" + notify.path}, out);
  std::vector<std::string> seen;
  std::string ready = notify.until("READY=1", 20000, &seen);
  INFO(read_file(out));
  REQUIRE(!ready.empty());
  CHECK(ready.find("STATUS=running " + cfg) != std::string::npos);
  // Ready means ready: the control socket answers already.
  CHECK(run_sluice("ctl --socket " + dir + "/ctl.sock read c.count").status == 0);

  // `systemctl reload` sends SIGHUP (ExecReload): reloading, then ready again.
  write_file(cfg, "TrafficGen(duration 60s, rate 1Kpps) -> Timestamp -> c :: Counter -> d :: Discard;\n");
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(!notify.until("RELOADING=1", 10000, &seen).empty());
  std::string again = notify.until("READY=1", 20000, &seen);
  CHECK(again.find("STATUS=reloaded") != std::string::npos);
  // A file that does not compile: still ready, the old graph running, the status says why.
  write_file(cfg, "TrafficGen(duration 60s -> Discard;\n");
  REQUIRE(kill(pid, SIGHUP) == 0);
  CHECK(!notify.until("RELOADING=1", 10000, &seen).empty());
  std::string refused = notify.until("READY=1", 20000, &seen);
  CHECK(refused.find("STATUS=reload refused") != std::string::npos);

  // The stop (systemctl stop sends SIGTERM): stopping is notified before the drain.
  REQUIRE(kill(pid, SIGTERM) == 0);
  CHECK(!notify.until("STOPPING=1", 20000, &seen).empty());
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  CHECK(WIFEXITED(st));
  CHECK(WEXITSTATUS(st) == 0);
  std::string text = read_file(out);
  CHECK(text.find("every packet accounted for") != std::string::npos);
  // Not a terminal: no status line in what a journal would keep.
  CHECK(text.find("] lane 0: ") == std::string::npos);
}

TEST_CASE("service: root's control socket is under /run/sluice by default, and sluice ctl finds it there", "[service][ctl]") {
  if (geteuid() != 0) {
    WARN("skipped: not root");
    return;
  }
  std::string dir = scratch("service", "run_dir");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 1Kpps) -> Timestamp -> c :: Counter -> Discard;\n");
  std::string out = dir + "/out.txt";
  pid_t pid = spawn({"/usr/bin/env", "-u", "XDG_RUNTIME_DIR", SLUICE_BINARY, "run", cfg, "--duration", "20s"}, {}, out);
  std::string sock = "/run/sluice/" + std::to_string(pid) + ".sock";  // env execs sluice: the same pid
  bool listening = false;
  for (int i = 0; i < 200 && !listening; ++i) {
    listening = read_file(out).find("control socket " + sock) != std::string::npos;
    if (!listening) usleep(100 * 1000);
  }
  INFO(read_file(out));
  CHECK(listening);
  // The directory is root's alone.
  struct stat st;
  REQUIRE(stat("/run/sluice", &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  CHECK(st.st_uid == 0);
  // `sluice ctl` without --socket lists the probes there (others may run in parallel tests).
  Run ctl = run_cmd("env -u XDG_RUNTIME_DIR " SLUICE_BINARY " ctl --socket " + sock + " read c.count");
  CHECK(ctl.status == 0);
  Run none = run_cmd("env -u XDG_RUNTIME_DIR " SLUICE_BINARY " ctl read c.count");
  CHECK((none.status == 0 || none.out.find(sock) != std::string::npos));  // alone: answered; else listed
  kill(pid, SIGTERM);
  int ws = 0;
  waitpid(pid, &ws, 0);
  CHECK(WIFEXITED(ws));
  CHECK(access(sock.c_str(), F_OK) != 0);  // removed at the end
}

TEST_CASE("service: the probe's log has levels, a time on each line off a terminal, priorities in the journal",
          "[service][log]") {
  std::string dir = scratch("service", "log");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(flows 50, duration 200ms) -> Timestamp -> full :: PcapSink(\"/dev/full\");\n");
  // A file: every line of the log starts with the time, UTC, to the millisecond.
  Run r = run_sluice("run " + cfg + " --control " + dir + "/ctl.sock");
  INFO(r.out);
  CHECK(r.status == 3);
  std::regex stamped("(^|\n)[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z sluice: running ");
  CHECK(std::regex_search(r.out, stamped));
  std::regex error("(^|\n)[0-9-]{10}T[0-9:.]{12}Z sluice: error: 'full#0': cannot write '/dev/full': ");
  CHECK(std::regex_search(r.out, error));
  // --log-level warning: the error stays, the information goes.
  Run w = run_sluice("run " + cfg + " --control " + dir + "/ctl.sock --log-level warning");
  CHECK(w.out.find("sluice: running ") == std::string::npos);
  CHECK(w.out.find("sluice: control socket ") == std::string::npos);
  CHECK(std::regex_search(w.out, error));
  CHECK(run_sluice("run " + cfg + " --log-level chatty").status == 2);

  // Under systemd ($JOURNAL_STREAM names stderr), messages go to the journal
  // with their priority. Where no journald runs, the test listens on its
  // socket itself.
  const char *journal = "/run/systemd/journal/socket";
  struct stat js;
  if (geteuid() != 0 || stat(journal, &js) == 0) {
    WARN("journal part skipped: " << (geteuid() ? "not root" : "a journald runs here"));
    return;
  }
  mkdir("/run/systemd", 0755);
  mkdir("/run/systemd/journal", 0755);
  NotifySocket fake_journal(journal);
  std::string out = dir + "/journal-stream.txt";
  write_file(out, "");
  struct stat os;
  REQUIRE(stat(out.c_str(), &os) == 0);
  std::string stream = std::to_string(os.st_dev) + ":" + std::to_string(os.st_ino);
  pid_t pid = spawn({SLUICE_BINARY, "run", cfg, "--control", dir + "/ctl.sock"}, {"JOURNAL_STREAM=" + stream}, out);
  int st = 0;
  REQUIRE(waitpid(pid, &st, 0) == pid);
  std::vector<std::string> entries;
  for (std::string e; !(e = fake_journal.next(500)).empty();) entries.push_back(e);
  rmdir("/run/systemd/journal");
  rmdir("/run/systemd");
  bool error_entry = false, info_entry = false;
  for (const std::string &e : entries) {
    CHECK(e.find("SYSLOG_IDENTIFIER=sluice") != std::string::npos);
    error_entry |= e.find("PRIORITY=3") != std::string::npos &&
                   e.find("MESSAGE=error: 'full#0': cannot write '/dev/full'") != std::string::npos;
    info_entry |= e.find("PRIORITY=6") != std::string::npos && e.find("MESSAGE=running ") != std::string::npos;
  }
  CHECK(error_entry);
  CHECK(info_entry);
  // Not also on stderr: the journal has them once.
  CHECK(read_file(out).find("cannot write '/dev/full'") == std::string::npos);
  CHECK(read_file(out).find("accounting:") != std::string::npos);  // the summary stays on stdout
}
