// A running probe's control plane: the request encoding, the metrics text,
// the segment mailbox (in this process, on DPDK), and end to end as a user
// meets it: `sluice run` in the background, `sluice ctl` against its socket
// (permissions, finding the probe, stats, handlers read and written, the
// largest flows) and its /metrics endpoint checked by promtool.
#include <fcntl.h>
#include <httplib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <cstring>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "engine/control/control_server.hh"
#include "engine/control/control_socket.hh"
#include "engine/control/metrics_writer.hh"
#include "engine/control/probe_lock.hh"
#include "engine/control/probe_metrics.hh"
#include "engine/runtime/runtime.hh"
#include "engine/traffic/traffic_model.hh"
#include "frontend_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;

namespace {

std::string scratch(const std::string &name) { return test::scratch("control", name); }

// `sluice run ARGS` in the background, its output to a log; stopped with
// Ctrl-C (SIGINT) by stop(), killed if the test ends first.
struct BackgroundProbe {
  pid_t pid = -1;
  std::string log;

  BackgroundProbe(const std::string &args, const std::string &log_path, const std::string &env = "") : log(log_path) {
    pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      std::string cmd = "cd " SLUICE_SOURCE_DIR " && exec env " + env + " " SLUICE_BINARY " run --jit-wait " + args + " > " + log + " 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), nullptr);
      _exit(127);
    }
  }
  ~BackgroundProbe() {
    if (pid > 0) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }
  bool running() const { return pid > 0 && waitpid(pid, nullptr, WNOHANG) == 0; }
  // Until `sluice ctl` gets an answer on `socket` (the probe is up), at most 20 s.
  void wait_for_socket(const std::string &socket) const {
    for (int i = 0; i < 200; ++i) {
      if (run_sluice("ctl --socket " + socket + " help").status == 0) return;
      INFO(read_file(log));
      REQUIRE(running());
      usleep(100 * 1000);
    }
    FAIL("no answer on " << socket << "; log:\n" << read_file(log));
  }
  // Ctrl-C, then the exit status once the run has drained (-1: killed).
  int stop() {
    kill(pid, SIGINT);
    int st = 0;
    for (int i = 0; i < 300 && waitpid(pid, &st, WNOHANG) == 0; ++i) usleep(100 * 1000);
    if (waitpid(pid, &st, WNOHANG) == 0) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
    }
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }
};

Run ctl(const std::string &socket, const std::string &command) {
  return run_sluice("ctl --socket " + socket + " " + command);
}

// What `sluice ctl read` printed, without its newline.
std::string read_handler(const std::string &socket, const std::string &target) {
  Run r = ctl(socket, "read " + target);
  INFO("read " << target << ": " << r.out);
  REQUIRE(r.status == 0);
  REQUIRE(!r.out.empty());
  return r.out.substr(0, r.out.size() - 1);
}

uint64_t read_number(const std::string &socket, const std::string &target) {
  return std::stoull(read_handler(socket, target));
}

// A counter of one element from stats JSON (`sluice ctl stats --json` or
// --stats-json): "in", "out", ... or a drop reason.
uint64_t element_stat(const std::string &json, const std::string &element, const std::string &field) {
  std::smatch m;
  std::regex line("\\{\"name\": \"" + std::regex_replace(element, std::regex("[#@/]"), "\\$&") + "\"[^\\n]*");
  INFO(element << "." << field << " in " << json);
  REQUIRE(std::regex_search(json, m, line));
  std::string l = m.str();
  std::smatch v;
  REQUIRE(std::regex_search(l, v, std::regex("\"" + field + "\": ([0-9]+)")));
  return std::stoull(v[1].str());
}

// The value of one sample of the exposition: the metric name with its labels as written.
double sample(const std::string &metrics, const std::string &series) {
  size_t at = metrics.find("\n" + series + " ");
  INFO(series << " in\n" << metrics);
  REQUIRE(at != std::string::npos);
  return std::stod(metrics.substr(at + series.size() + 2));
}

std::string fetch_metrics(const std::string &log) {
  std::smatch m;
  std::string text = read_file(log);
  INFO(text);
  REQUIRE(std::regex_search(text, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")));
  httplib::Client client("127.0.0.1", std::stoi(m[1].str()));
  auto res = client.Get("/metrics");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  CHECK(res->get_header_value("Content-Type").find("version=0.0.4") != std::string::npos);
  return "\n" + res->body;  // so that sample() finds the first line too
}

}  // namespace

TEST_CASE("control: requests are JSON arrays of strings, any bytes in them", "[control]") {
  std::vector<std::string> args = {"write", "f.expr", "tcp and \"port\" 443\\ \n\ttab", "", "\x01"};
  std::string line = encode_control_request(args);
  CHECK(line.find('\n') == std::string::npos);  // one line on the wire
  std::vector<std::string> back;
  std::string err;
  REQUIRE(decode_control_request(line, back, &err));
  CHECK(back == args);
  // What another client may send: spaces, escapes, surrogate pairs.
  REQUIRE(decode_control_request(" [ \"read\" , \"a\\u00e9\\ud83d\\ude00\\/\" ] ", back, &err));
  CHECK(back == std::vector<std::string>{"read", "a\xc3\xa9\xf0\x9f\x98\x80/"});
  REQUIRE(decode_control_request("[]", back, &err));
  CHECK(back.empty());
  for (const char *bad : {"stats", "[\"stats\"", "[\"stats\",]", "[1]", "[\"a\"] x", "[\"\\q\"]", "[\"\\u12\"]"}) {
    INFO(bad);
    CHECK_FALSE(decode_control_request(bad, back, &err));
    CHECK(err.rfind("bad request: ", 0) == 0);
  }
  // Half a surrogate pair is no character: refused where its escape starts,
  // rather than decoded to bytes that are not UTF-8.
  for (auto [bad, why] : std::vector<std::pair<std::string, std::string>>{
           {"[\"ab\\ud83d\"]", "a high surrogate \\u escape without its low half at byte 5"},
           {"[\"ab\\ud83d\\u0041\"]", "a high surrogate \\u escape without its low half at byte 5"},
           {"[\"ab\\ude00\"]", "a low surrogate \\u escape without its high half at byte 5"}}) {
    INFO(bad);
    CHECK_FALSE(decode_control_request(bad, back, &err));
    CHECK(err == "bad request: " + why);
  }
}

TEST_CASE("metrics: families once each with HELP and TYPE, labels escaped", "[control][metrics]") {
  MetricsWriter w;
  w.set_context({{"lane", "0"}, {"element", "f"}});
  w.counter("element_dropped_packets_total", "Packets dropped,\nby reason \\ cause.", 7, {{"reason", "say \"no\"\n\\"}});
  w.gauge("ring_occupancy_packets", "Packets in the ring.", 12);
  w.set_context({{"lane", "1"}, {"element", "f"}});
  w.counter("element_dropped_packets_total", "Packets dropped,\nby reason \\ cause.", 3, {{"reason", "filtered"}});
  w.set_context({});
  w.histogram("gc_slice_duration_seconds", "Slice time.", {{1e-6, 2}, {1e-3, 5}}, 0.25, 6);
  w.comment("a note");
  std::string t = w.text();
  CHECK(t ==
        "# a note\n"
        "# HELP sluice_element_dropped_packets_total Packets dropped,\\nby reason \\\\ cause.\n"
        "# TYPE sluice_element_dropped_packets_total counter\n"
        "sluice_element_dropped_packets_total{lane=\"0\",element=\"f\",reason=\"say \\\"no\\\"\\n\\\\\"} 7\n"
        "sluice_element_dropped_packets_total{lane=\"1\",element=\"f\",reason=\"filtered\"} 3\n"
        "# HELP sluice_ring_occupancy_packets Packets in the ring.\n"
        "# TYPE sluice_ring_occupancy_packets gauge\n"
        "sluice_ring_occupancy_packets{lane=\"0\",element=\"f\"} 12\n"
        "# HELP sluice_gc_slice_duration_seconds Slice time.\n"
        "# TYPE sluice_gc_slice_duration_seconds histogram\n"
        "sluice_gc_slice_duration_seconds_bucket{le=\"1e-06\"} 2\n"
        "sluice_gc_slice_duration_seconds_bucket{le=\"0.001\"} 5\n"
        "sluice_gc_slice_duration_seconds_bucket{le=\"+Inf\"} 6\n"
        "sluice_gc_slice_duration_seconds_sum 0.25\n"
        "sluice_gc_slice_duration_seconds_count 6\n");
  CHECK_THROWS_AS(w.gauge("element_dropped_packets_total", "", 1), std::logic_error);  // a counter already
  CHECK_THROWS_AS(w.gauge("bad-name", "", 1), std::logic_error);
  CHECK(metric_value_text(123456789012.0) == "123456789012");
  CHECK(metric_value_text(0.5) == "0.5");
}

TEST_CASE("metrics: an element reports only the metrics its spec declares, with the spec's help and type",
          "[control][metrics]") {
  ElementSpec spec = ElementSpec("Gauged")
                         .metric(MetricSpec::gauge("gauged_level_items", "Items held."))
                         .metric(MetricSpec::counter("gauged_seen_total", "Items seen, by colour.", {"colour"}));
  MetricsWriter w;
  w.set_context({{"lane", "0"}, {"element", "g"}});
  ElementMetrics out(spec, w);
  out.gauge("gauged_level_items", 3);
  out.counter("gauged_seen_total", 9, {{"colour", "red"}});
  CHECK(w.text() ==
        "# HELP sluice_gauged_level_items Items held.\n"
        "# TYPE sluice_gauged_level_items gauge\n"
        "sluice_gauged_level_items{lane=\"0\",element=\"g\"} 3\n"
        "# HELP sluice_gauged_seen_total Items seen, by colour.\n"
        "# TYPE sluice_gauged_seen_total counter\n"
        "sluice_gauged_seen_total{lane=\"0\",element=\"g\",colour=\"red\"} 9\n");
  CHECK_THROWS_WITH(out.gauge("gauged_other", 1),
                    Catch::Contains("Gauged reports metric gauged_other that its spec does not declare"));
  CHECK_THROWS_WITH(out.counter("gauged_level_items", 1), Catch::Contains("as a counter, declared a gauge"));
  CHECK_THROWS_WITH(out.counter("gauged_seen_total", 1), Catch::Contains("with labels other than those declared"));
  CHECK_THROWS_WITH(out.counter("gauged_seen_total", 1, {{"shade", "red"}}),
                    Catch::Contains("with labels other than those declared"));
}

TEST_CASE("segment: call() runs jobs on the segment's thread, times out when it is stuck in a batch",
          "[control][runtime]") {
  // Unpaced (offline) input into a small ring: while its consumer is held,
  // the producer fills the ring and waits for room inside its batch.
  auto c = compile_text("TrafficGen(flows 100, duration 2s) -> Ring(capacity 64) -> cnt :: Counter -> Discard;");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  o.status_line = false;
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  REQUIRE(rt.segments().size() == 2);
  SegmentRunner &producer = *rt.segments()[0], &consumer = *rt.segments()[1];
  std::thread::id helper_id, producer_id, consumer_id;
  std::atomic<bool> release{false};
  bool held = false, stuck_call = true, late_job_ran = false, after = false;
  std::string thrown;
  std::thread helper, holder;
  rt.on_started([&] {
    helper = std::thread([&] {
      helper_id = std::this_thread::get_id();
      holder = std::thread([&] {
        held = consumer.call([&] {
          consumer_id = std::this_thread::get_id();
          while (!release) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }, 2'000'000'000);
      });
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      stuck_call = producer.call([&] { late_job_ran = true; }, 100'000'000);
      release = true;
      holder.join();
      after = producer.call([&] { producer_id = std::this_thread::get_id(); }, 2'000'000'000);
      try {
        producer.call([] { throw HandlerError("from the job"); }, 2'000'000'000);
      } catch (const HandlerError &e) {
        thrown = e.what();
      }
    });
  });
  rt.run();
  helper.join();
  CHECK(held);
  CHECK_FALSE(stuck_call);     // the producer waited for room inside its batch
  CHECK_FALSE(late_job_ran);   // and the job that timed out was withdrawn, never run
  CHECK(after);
  CHECK(thrown == "from the job");
  CHECK(producer_id != std::thread::id());
  CHECK(producer_id != consumer_id);
  CHECK(producer_id != helper_id);
  CHECK(rt.totals().balanced());
  // Once the thread is gone, a job runs on the caller's thread.
  std::thread::id ran_on;
  CHECK(producer.call([&] { ran_on = std::this_thread::get_id(); }, 1));
  CHECK(ran_on == std::this_thread::get_id());
}

TEST_CASE("metrics: Runtime::record_reload feeds sluice_reloads_total and the pause histogram", "[control][metrics]") {
  auto c = compile_text("TrafficGen(flows 10, duration 100ms) -> Timestamp(clock pcap) -> Discard;");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  o.status_line = false;
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  rt.run();
  std::string before = "\n" + probe_metrics_text(rt);
  CHECK(sample(before, "sluice_reloads_total{result=\"applied\"}") == 0);
  CHECK(sample(before, "sluice_reload_pause_seconds_count") == 0);
  rt.record_reload(true, {20'000, 3'000'000});  // two lanes paused 20 us and 3 ms
  rt.record_reload(false, {});                  // refused: no lane paused
  std::string m = "\n" + probe_metrics_text(rt);
  CHECK(sample(m, "sluice_reloads_total{result=\"applied\"}") == 1);
  CHECK(sample(m, "sluice_reloads_total{result=\"failed\"}") == 1);
  CHECK(sample(m, "sluice_reload_pause_seconds_bucket{le=\"1e-05\"}") == 0);
  CHECK(sample(m, "sluice_reload_pause_seconds_bucket{le=\"5e-05\"}") == 1);
  CHECK(sample(m, "sluice_reload_pause_seconds_bucket{le=\"0.001\"}") == 1);
  CHECK(sample(m, "sluice_reload_pause_seconds_bucket{le=\"0.005\"}") == 2);
  CHECK(sample(m, "sluice_reload_pause_seconds_bucket{le=\"+Inf\"}") == 2);
  CHECK(sample(m, "sluice_reload_pause_seconds_count") == 2);
  CHECK(sample(m, "sluice_reload_pause_seconds_sum") == Approx(0.00302));
}

// The file sinks' metrics: bytes written, failed writes, and what those lost
// under the drop counters (reason "write error"), equal to the run's counts.
TEST_CASE("metrics: FlowLog and PcapSink report bytes written and failed writes", "[control][metrics][write-errors]") {
  std::string dir = scratch("file_metrics");
  std::string trace = dir + "/ok.pcap";
  auto c = compile_text("TrafficGen(flows 100, new_flows_per_s 100, duration 1s) -> Timestamp(clock pcap)"
                        " -> ft :: FlowTable(capacity 4K) -> GCSlicer(table ft) -> log :: FlowLog(\"/dev/full\");\n"
                        "ft[1] -> s :: PcapSink(\"" + trace + "\");\n");
  REQUIRE(c->ok);
  RunOptions o;
  o.eal_args = {"--no-huge"};
  o.status_line = false;
  Runtime rt(c->pipe, o);
  std::string err;
  REQUIRE(rt.setup(&err));
  rt.run();
  std::string m = "\n" + probe_metrics_text(rt);
  const RuntimeElement *log = rt.find("log#0"), *sink = rt.find("s#0");
  REQUIRE(log);
  REQUIRE(sink);
  CHECK(log->counters.records_in.get() > 50);
  CHECK(sample(m, "sluice_element_dropped_records_total{lane=\"0\",element=\"log\",reason=\"write error\"}") ==
        log->counters.records_in.get());
  CHECK(sample(m, "sluice_file_write_errors_total{lane=\"0\",element=\"log\"}") == log->counters.write_errors.get());
  CHECK(log->counters.write_errors.get() >= 1);
  CHECK(sample(m, "sluice_file_written_bytes_total{lane=\"0\",element=\"log\"}") == 0);
  CHECK(sample(m, "sluice_flow_log_lines_total{lane=\"0\",element=\"log\"}") == 0);
  CHECK(sample(m, "sluice_file_write_errors_total{lane=\"0\",element=\"s\"}") == 0);
  CHECK(sample(m, "sluice_file_written_bytes_total{lane=\"0\",element=\"s\"}") == double(std::filesystem::file_size(trace)));
  CHECK(sample(m, "sluice_element_absorbed_packets_total{lane=\"0\",element=\"s\"}") == sink->counters.in.get());
}

TEST_CASE("ctl: the control socket is the owner's alone", "[control][ctl]") {
  std::string dir = scratch("permissions");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 2Kpps) -> t :: Timestamp(clock tsc) -> Discard;\n");
  std::string xdg = dir + "/xdg";
  std::filesystem::create_directories(xdg);
  BackgroundProbe probe(cfg, dir + "/log.txt", "XDG_RUNTIME_DIR=" + xdg);
  std::string socket = xdg + "/sluice/" + std::to_string(probe.pid) + ".sock";  // exec keeps the pid
  probe.wait_for_socket(socket);

  struct stat st;
  REQUIRE(lstat(socket.c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0600);
  CHECK(st.st_uid == geteuid());
  REQUIRE(lstat((xdg + "/sluice").c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK((st.st_mode & 0777) == 0700);
  CHECK(st.st_uid == geteuid());
  // The start-up line names it; ctl finds it without --socket.
  CHECK(read_file(dir + "/log.txt").find("control socket " + socket) != std::string::npos);
  Run r = run_cmd("cd " SLUICE_SOURCE_DIR " && XDG_RUNTIME_DIR=" + xdg + " " SLUICE_BINARY " ctl read t.in");
  INFO(r.out);
  CHECK(r.status == 0);
  CHECK(std::stoull(r.out) > 0);

  if (geteuid() == 0) {
    // Another user: kept out by the directory; with the directory and the
    // socket opened to all, by the server's own check of the peer.
    auto other_user_request = [&] {
      int pipefd[2];
      REQUIRE(pipe(pipefd) == 0);
      pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        close(pipefd[0]);
        if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(3);
        ControlReply reply;
        std::string err;
        std::string result = control_request(socket, {"stats"}, reply, &err) ? (reply.ok ? "ok" : "refused: " + reply.text)
                                                                             : "unreachable: " + err;
        (void)!write(pipefd[1], result.data(), result.size());
        _exit(0);
      }
      close(pipefd[1]);
      std::string result;
      char buf[512];
      for (ssize_t n; (n = read(pipefd[0], buf, sizeof buf)) > 0;) result.append(buf, size_t(n));
      close(pipefd[0]);
      waitpid(child, nullptr, 0);
      return result;
    };
    std::string first = other_user_request();
    CHECK(first.rfind("unreachable: ", 0) == 0);
    CHECK(first.find("Permission denied") != std::string::npos);
    chmod(dir.c_str(), 0755);
    chmod(xdg.c_str(), 0755);
    chmod((xdg + "/sluice").c_str(), 0777);
    chmod(socket.c_str(), 0777);
    bool reachable = true;  // every directory above the socket searchable by others
    for (std::filesystem::path p = std::filesystem::path(socket).parent_path(); p != p.root_path(); p = p.parent_path())
      reachable = reachable && stat(p.c_str(), &st) == 0 && (st.st_mode & 0001);
    std::string second = other_user_request();
    INFO(second);
    if (reachable) CHECK(second.rfind("refused: permission denied", 0) == 0);
    else WARN("a directory above " << socket << " is closed to others: the server's peer check was not reached");
  } else {
    WARN("not root: another user's access was not tried");
  }
  CHECK(probe.stop() == 0);
  CHECK_FALSE(std::filesystem::exists(socket));  // removed at the end of the run
}

TEST_CASE("ctl: finds the one running probe, lists several, and says when none runs", "[control][ctl]") {
  std::string dir = scratch("discovery");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 1Kpps) -> Timestamp(clock tsc) -> Discard;\n");
  std::string xdg = dir + "/xdg";
  std::filesystem::create_directories(xdg);
  std::string ctl_here = "cd " SLUICE_SOURCE_DIR " && XDG_RUNTIME_DIR=" + xdg + " " SLUICE_BINARY " ctl ";
  Run none = run_cmd(ctl_here + "stats");
  CHECK(none.status == 1);
  CHECK(none.out.find("no running probe") != std::string::npos);
  Run no_command = run_cmd(ctl_here);
  CHECK(no_command.status == 2);
  CHECK(no_command.out.find("a command is needed") != std::string::npos);

  BackgroundProbe a(cfg, dir + "/a.txt", "XDG_RUNTIME_DIR=" + xdg);
  std::string sa = xdg + "/sluice/" + std::to_string(a.pid) + ".sock";
  a.wait_for_socket(sa);
  CHECK(run_cmd(ctl_here + "stats").status == 0);
  BackgroundProbe b(cfg, dir + "/b.txt", "XDG_RUNTIME_DIR=" + xdg);
  std::string sb = xdg + "/sluice/" + std::to_string(b.pid) + ".sock";
  b.wait_for_socket(sb);
  Run several = run_cmd(ctl_here + "stats");
  INFO(several.out);
  CHECK(several.status == 1);
  CHECK(several.out.find("2 probes are running") != std::string::npos);
  CHECK(several.out.find(sa) != std::string::npos);
  CHECK(several.out.find(sb) != std::string::npos);
  CHECK(several.out.find("pid " + std::to_string(b.pid) + ": ") != std::string::npos);
  CHECK(b.stop() == 0);
  CHECK(run_cmd(ctl_here + "stats").status == 0);
  // A directory others may use is refused: the probe runs without a socket.
  CHECK(a.stop() == 0);
  chmod((xdg + "/sluice").c_str(), 0777);
  Run open_dir = run_cmd("cd " SLUICE_SOURCE_DIR " && XDG_RUNTIME_DIR=" + xdg + " " SLUICE_BINARY " run " +
                         write_file(dir + "/short.pipe", "TrafficGen(duration 10ms) -> Discard;\n"));
  CHECK(open_dir.status == 0);
  CHECK(open_dir.out.find("running without a control socket: refusing the control directory") != std::string::npos);
  CHECK(open_dir.out.find("others may use it") != std::string::npos);
}

TEST_CASE("ctl: stats --json on a running probe shows counters that grow", "[control][ctl]") {
  std::string dir = scratch("stats");
  std::string cfg = write_file(dir + "/p.pipe", "src :: TrafficGen(duration 60s, rate 4Kpps, queues 2) -> Timestamp(clock tsc) -> "
                                                "Ring(capacity 1K) -> c :: Counter -> Discard;\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket, dir + "/log.txt");
  probe.wait_for_socket(socket);
  Run first = ctl(socket, "stats --json");
  REQUIRE(first.status == 0);
  usleep(700 * 1000);
  Run second = ctl(socket, "stats --json");
  REQUIRE(second.status == 0);
  INFO(first.out << "\n" << second.out);
  for (const char *e : {"src#0", "src#1", "c#0", "c#1"})
    CHECK(element_stat(second.out, e, "in") > element_stat(first.out, e, "in"));
  CHECK(element_stat(second.out, "c#0", "bytes") > element_stat(first.out, "c#0", "bytes"));
  // The text form shows the lanes, the elements and the accounting.
  Run text = ctl(socket, "stats");
  CHECK(text.status == 0);
  CHECK(text.out.find("lane 1: received ") != std::string::npos);
  CHECK(text.out.find("ring: capacity 1024") != std::string::npos);
  CHECK(text.out.find("accounting: received ") != std::string::npos);
  Run bad = ctl(socket, "stats --yaml");
  CHECK(bad.status == 1);
  CHECK(bad.out.find("usage: stats [--json]") != std::string::npos);
  Run unknown = ctl(socket, "frobnicate");
  CHECK(unknown.status == 1);
  CHECK(unknown.out.find("unknown command 'frobnicate'") != std::string::npos);
  Run plan = ctl(socket, "plan");
  CHECK(plan.status == 0);
  CHECK(plan.out.find("lane 1") != std::string::npos);
  // A second probe on the same socket is refused; the first keeps it.
  Run rival = run_sluice("run -q --duration 1s --control " + socket + " " + cfg);
  CHECK(rival.status == 1);
  CHECK(rival.out.find("--control: another process listens on " + socket) != std::string::npos);
  CHECK(ctl(socket, "stats").status == 0);
  CHECK(probe.stop() == 0);
}

TEST_CASE("ctl: handlers: a Filter's expression and a FlowTable's timeouts, written while running", "[control][ctl]") {
  std::string dir = scratch("handlers");
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(duration 60s, rate 4Kpps, udp 0.5, queues 2) -> Timestamp(clock pcap) -> f :: Filter(\"tcp\") -> "
      "ft :: FlowTable(capacity 4K, idle 15s) -> gc :: GCSlicer(table ft) -> FlowLog(\"" + dir + "/flows$queue.csv\");\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket, dir + "/log.txt");
  probe.wait_for_socket(socket);
  CHECK(ctl(socket, "read f.expr").out == "f#0: tcp\nf#1: tcp\n");
  CHECK(read_handler(socket, "f#1.expr") == "tcp");

  // An expression that matches nothing: from the write on, nothing passes.
  Run none = ctl(socket, "write f.expr 'ip proto 99'");
  INFO(none.out);
  REQUIRE(none.status == 0);
  CHECK(read_handler(socket, "f#0.expr") == "ip proto 99");
  uint64_t passed = read_number(socket, "f#0.out"), seen = read_number(socket, "f#0.in");
  usleep(500 * 1000);
  CHECK(read_number(socket, "f#0.in") > seen);
  CHECK(read_number(socket, "f#0.out") == passed);

  // Back to tcp: packets pass again. A bad expression is refused and the
  // old one keeps working.
  Run back = ctl(socket, "write f.expr tcp");
  INFO(back.out);
  REQUIRE(back.status == 0);
  usleep(300 * 1000);
  Run bad = ctl(socket, "write f.expr 'tcp and and'");
  INFO(bad.out);
  CHECK(bad.status == 1);
  CHECK(bad.out.find("cannot write 'tcp and and' to f#0.expr: syntax error") != std::string::npos);
  CHECK(bad.out.find("nothing was changed") != std::string::npos);
  CHECK(read_handler(socket, "f#0.expr") == "tcp");
  CHECK(read_handler(socket, "f#1.expr") == "tcp");
  passed = read_number(socket, "f#0.out");
  usleep(500 * 1000);
  CHECK(read_number(socket, "f#0.out") > passed);

  // Timeouts: written to every lane, read back; checked like the .pipe's.
  REQUIRE(ctl(socket, "write ft.idle_timeout 42s").status == 0);
  CHECK(ctl(socket, "read ft.idle_timeout").out == "ft#0: 42s\nft#1: 42s\n");
  REQUIRE(ctl(socket, "write ft#1.active_timeout 2min").status == 0);
  CHECK(read_handler(socket, "ft#1.active_timeout") == "2min");
  CHECK(read_handler(socket, "ft#0.active_timeout") == "30min");
  Run too_long = ctl(socket, "write ft.idle_timeout 2d");
  CHECK(too_long.status == 1);
  CHECK(too_long.out.find("cannot write '2d' to ft#0.idle_timeout") != std::string::npos);
  CHECK(ctl(socket, "write ft.idle_timeout soon").status == 1);
  CHECK(read_handler(socket, "ft#0.idle_timeout") == "42s");
  Run read_only = ctl(socket, "write ft.active 3");
  CHECK(read_only.status == 1);
  CHECK(read_only.out.find("'ft.active' is read-only") != std::string::npos);

  // The table's own handlers agree with each other.
  uint64_t active = read_number(socket, "ft#0.active"), size = read_number(socket, "ft#0.size");
  CHECK(size == 4096);
  CHECK(active > 0);
  CHECK(read_handler(socket, "ft#0.ended").find("end of flow: ") != std::string::npos);
  Run missing = ctl(socket, "read ft.bogus");
  CHECK(missing.status == 1);
  CHECK(missing.out.find("has no handler 'bogus'; it has size, active") != std::string::npos);
  Run typo = ctl(socket, "read fx.in");
  CHECK(typo.status == 1);
  CHECK(typo.out.find("did you mean 'f'?") != std::string::npos);
  // Every handler the running elements declare can be read.
  Run listing = ctl(socket, "handlers");
  REQUIRE(listing.status == 0);
  std::regex handler_line("^  ([a-z_]+) +read");
  std::string element;
  std::istringstream lines(listing.out);
  int handlers = 0;
  for (std::string l; std::getline(lines, l);) {
    std::smatch m;
    if (!l.empty() && l[0] != ' ' && l.find(" (") != std::string::npos) element = l.substr(0, l.find(" ("));
    else if (std::regex_search(l, m, handler_line)) {
      INFO(element << "." << m[1]);
      CHECK(ctl(socket, "read " + element + "." + m[1].str()).status == 0);
      ++handlers;
    }
  }
  CHECK(handlers >= 12);  // Filter, FlowTable, GCSlicer
  CHECK(probe.stop() == 0);
}

TEST_CASE("ctl: flows --top N lists the largest active flows of every lane", "[control][ctl]") {
  std::string dir = scratch("flows");
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(flows 300, duration 60s, rate 4Kpps, queues 2) -> Timestamp(clock pcap) -> "
                               "ft :: FlowTable(capacity 4K) -> gc :: GCSlicer(table ft) -> FlowLog(\"" + dir +
                                   "/flows$queue.csv\");\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket, dir + "/log.txt");
  probe.wait_for_socket(socket);
  usleep(1000 * 1000);
  auto top = [&](int n) {
    Run r = ctl(socket, "flows --top " + std::to_string(n));
    INFO(r.out);
    REQUIRE(r.status == 0);
    std::istringstream in(r.out);
    std::string header;
    std::getline(in, header);
    CHECK(header.find("destination") != std::string::npos);
    std::vector<std::pair<std::string, uint64_t>> rows;  // lane, bytes
    std::regex row("^(0|1) +ft +(tcp|udp|icmp|icmpv6) +\\S+:[0-9]+ +\\S+:[0-9]+ +([0-9]+) +([0-9]+) +[0-9.]+$");
    for (std::string l; std::getline(in, l);) {
      std::smatch m;
      INFO(l);
      REQUIRE(std::regex_match(l, m, row));
      CHECK(std::stoull(m[3].str()) > 0);
      rows.emplace_back(m[1].str(), std::stoull(m[4].str()));
    }
    return rows;
  };
  auto five = top(5);
  REQUIRE(five.size() == 5);
  for (size_t i = 1; i < five.size(); ++i) CHECK(five[i - 1].second >= five[i].second);
  // Asked for more than there are: every active flow, from both lanes.
  auto all = top(100000);
  std::map<std::string, int> lanes;
  for (auto &[lane, bytes] : all) ++lanes[lane];
  CHECK(lanes["0"] > 0);
  CHECK(lanes["1"] > 0);
  CHECK(all.size() > five.size());
  CHECK(ctl(socket, "flows --top 0").status == 1);
  CHECK(probe.stop() == 0);
}

TEST_CASE("metrics: /metrics passes promtool and agrees with the run summary", "[control][metrics]") {
  std::string dir = scratch("metrics");
  // Lane 0 replays a finite trace and ends; the null device's lane keeps the
  // probe running, so the counters of lane 0 hold still to be compared.
  TrafficConfig tc;
  tc.flows = 200, tc.new_flows_per_s = 500, tc.duration_ns = 2'000'000'000ull, tc.seed = 5;
  uint64_t packets = generate_traffic(tc).packets;
  std::string cfg = write_file(
      dir + "/p.pipe",
      "gen :: TrafficGen(flows 200, new_flows_per_s 500, duration 2s, seed 5) -> Timestamp(clock pcap) -> "
      "f :: Filter(\"tcp\") -> r :: Ring(capacity 512) -> ft :: FlowTable(capacity 4K) -> gc :: GCSlicer(table ft) -> "
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n"
      "idle :: RSSSource(device \"null\") -> ri :: Ring(capacity 512) -> Discard;\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket + " --metrics 0 --stats-json " + dir + "/stats.json",
                        dir + "/log.txt");
  probe.wait_for_socket(socket);
  std::string m;
  auto ended_flows = [&] {
    double ended = 0;
    for (const char *reason : {"idle timeout", "active timeout", "end of flow", "forced end", "lack of resources"})
      ended += sample(m, "sluice_flow_table_ended_flows_total{lane=\"0\",element=\"ft\",reason=\"" +
                             std::string(reason) + "\"}");
    return ended;
  };
  // Until lane 0 has taken in its trace and flushed its table, and the
  // shared FlowLog has taken every record (its segment wakes for the
  // channel within a few ms, not at once).
  for (int i = 0; i < 200; ++i) {
    m = fetch_metrics(dir + "/log.txt");
    if (sample(m, "sluice_element_received_packets_total{lane=\"0\",element=\"gen\"}") == double(packets) &&
        sample(m, "sluice_flow_table_active_flows{lane=\"0\",element=\"ft\"}") == 0 &&
        sample(m, "sluice_element_absorbed_records_total{lane=\"shared\",element=\"log\"}") == ended_flows())
      break;
    usleep(100 * 1000);
  }
  REQUIRE(sample(m, "sluice_lane_received_packets_total{lane=\"0\"}") == double(packets));

  if (have_tool("promtool")) {
    write_file(dir + "/metrics.txt", m.substr(1));
    Run check = run_cmd("promtool check metrics < " + dir + "/metrics.txt");
    INFO(check.out);
    CHECK(check.status == 0);
  } else {
    WARN("promtool is not installed (Debian package prometheus): the exposition was not linted");
  }
  // Every family is the engine's (docs/control.md lists those) or declared,
  // with its type, by the spec of an element of the graph (docs/elements.md).
  std::string control_md = read_file(std::string(SLUICE_SOURCE_DIR) + "/docs/control.md");
  std::set<std::string> in_graph = {"TrafficGen", "Timestamp", "Filter", "Ring", "FlowTable", "GCSlicer", "FlowLog",
                                    "RSSSource", "Discard"};
  std::smatch type_line;
  for (auto it = m.cbegin(); std::regex_search(it, m.cend(), type_line, std::regex("\n# TYPE sluice_(\\w+) (\\w+)"));
       it = type_line.suffix().first) {
    std::string name = type_line[1].str(), type = type_line[2].str();
    INFO("metric family sluice_" << name << " (" << type << ")");
    const MetricSpec *declared = nullptr;
    for (const ElementSpec *spec : ElementRegistry::global().all())
      if (const MetricSpec *d = spec->find_metric(name); d && in_graph.count(spec->name)) declared = d;
    if (declared) {
      CHECK(metric_kind_name(declared->kind) == type);
    } else {  // the table names a family whole, or by its end after the first word
      CHECK((control_md.find("`sluice_" + name + "`") != std::string::npos ||
             control_md.find("`_" + name.substr(name.find('_') + 1) + "`") != std::string::npos));
    }
  }
  // Every kind of metric is there.
  for (const char *family :
       {"sluice_element_dropped_packets_total", "sluice_ring_occupancy_packets", "sluice_flow_table_created_flows_total",
        "sluice_flow_table_ended_flows_total", "sluice_flow_table_evicted_flows_total",
        "sluice_gc_slice_duration_seconds", "sluice_port_missed_packets_total", "sluice_port_rx_nombuf_total",
        "sluice_port_error_packets_total", "sluice_reloads_total", "sluice_reload_pause_seconds",
        "sluice_merge_queue_occupancy_items"})
    CHECK(m.find("\n# TYPE " + std::string(family) + " ") != std::string::npos);
  CHECK(sample(m, "sluice_port_received_packets_total{lane=\"1\",element=\"idle\",port=\"0\",device=\"null\"}") == 0);
  CHECK(sample(m, "sluice_gc_slice_duration_seconds_count{lane=\"0\",element=\"gc\"}") > 0);
  // The live lane's Ring (lane 0's runs in its thread where its segments
  // would share a cpu: it has no ring of its own then).
  CHECK(sample(m, "sluice_ring_capacity_packets{lane=\"1\",element=\"ri\"}") == 512);

  CHECK(probe.stop() == 0);
  std::string json = read_file(dir + "/stats.json");
  // Lane 0 held still: its metrics are the summary's numbers.
  CHECK(sample(m, "sluice_element_received_packets_total{lane=\"0\",element=\"f\"}") == element_stat(json, "f#0", "in"));
  CHECK(sample(m, "sluice_element_sent_packets_total{lane=\"0\",element=\"f\"}") == element_stat(json, "f#0", "out"));
  CHECK(sample(m, "sluice_element_dropped_packets_total{lane=\"0\",element=\"f\",reason=\"filtered\"}") ==
        element_stat(json, "f#0", "filtered"));
  CHECK(sample(m, "sluice_element_absorbed_packets_total{lane=\"0\",element=\"ft\"}") ==
        element_stat(json, "ft#0", "absorbed"));
  CHECK(sample(m, "sluice_element_received_bytes_total{lane=\"0\",element=\"gen\"}") ==
        element_stat(json, "gen#0", "bytes"));
  uint64_t records = element_stat(json, "log", "records_absorbed");
  CHECK(records > 0);
  CHECK(sample(m, "sluice_element_absorbed_records_total{lane=\"shared\",element=\"log\"}") == records);
  // lane 0's queue into the shared log: every record went through it, none waits
  CHECK(sample(m, "sluice_merge_queue_occupancy_items{lane=\"0\",element=\"gc\",to=\"log\"}") == 0);
  CHECK(ended_flows() == records);
  CHECK(sample(m, "sluice_flow_table_ended_flows_total{lane=\"0\",element=\"ft\",reason=\"forced end\"}") > 0);
}

namespace {

// A client of the control socket that connects and then does nothing.
int connect_unix(const std::string &path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  REQUIRE(path.size() < sizeof addr.sun_path);
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&addr), sizeof addr) == 0);
  return fd;
}

int connect_loopback(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof a) == 0);
  return fd;
}

// Neither answered nor closed by the server so far.
bool still_waiting(int fd) {
  char c;
  return recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

int metrics_port(const std::string &log) {
  std::smatch m;
  std::string text = read_file(log);
  INFO(text);
  REQUIRE(std::regex_search(text, m, std::regex("metrics on http://127\\.0\\.0\\.1:([0-9]+)/metrics")));
  return std::stoi(m[1].str());
}

// One scrape; "" when there is no answer within 20 s.
std::string scrape(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(20, 0);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : "";
}

// User plus system time of a process so far, in clock ticks.
long cpu_ticks(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  std::istringstream in(stat.substr(stat.rfind(')') + 2));  // the command may hold spaces
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

}  // namespace

TEST_CASE("ctl: a client that connects and sends nothing holds up no other", "[control][ctl]") {
  std::string dir = scratch("stalled");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 1Kpps) -> t :: Timestamp(clock tsc) -> Discard;\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket, dir + "/log.txt");
  probe.wait_for_socket(socket);
  int stalled = connect_unix(socket);
  // Answered while the stalled client is still connected and waiting: the
  // server did not have to give up on it first (5 s) to get to this one.
  ControlReply reply;
  std::string err;
  REQUIRE(control_request(socket, {"read", "t.in"}, reply, &err, 20));
  CHECK(reply.ok);
  CHECK(std::stoull(reply.text) > 0);
  CHECK(still_waiting(stalled));
  // The stalled one gets its timeout, as an answer.
  std::string got;
  timeval tv{20, 0};
  setsockopt(stalled, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char buf[256];
  for (ssize_t n; (n = recv(stalled, buf, sizeof buf, 0)) > 0;) got.append(buf, size_t(n));
  CHECK(got == "error\nno complete request within 5 s: send a JSON array of strings and a newline");
  close(stalled);
  CHECK(probe.stop() == 0);
}

TEST_CASE("control: requests are answered at once up to a bound, and one more is told the server is busy",
          "[control]") {
  std::string dir = scratch("busy");
  ProbeLock lock;
  ControlServer server(lock);
  std::string err;
  REQUIRE(server.listen(dir + "/ctl.sock", &err));
  server.start();
  std::vector<int> stalled;
  for (int i = 0; i < ControlServer::kMaxClients; ++i) stalled.push_back(connect_unix(server.path()));
  // Connections are accepted in order: this one comes after every stalled one has a worker.
  ControlReply reply;
  REQUIRE(control_request(server.path(), {"help"}, reply, &err, 20));
  CHECK_FALSE(reply.ok);
  CHECK(reply.text == "busy: 8 requests are being answered, the most at once; try again");
  for (int fd : stalled) CHECK(still_waiting(fd));  // none was given up on to make room
  // A worker free again answers.
  close(stalled.back());
  stalled.pop_back();
  bool answered = false;
  for (int i = 0; i < 100 && !answered; ++i) {
    REQUIRE(control_request(server.path(), {"help"}, reply, &err, 20));
    answered = reply.ok;
    if (!answered) usleep(20 * 1000);
  }
  CHECK(answered);
  CHECK(reply.text.find("list the commands") != std::string::npos);
  for (int fd : stalled) close(fd);
  server.stop();
}

TEST_CASE("control: out of file descriptors, the server does not spin and answers again once some are free",
          "[control]") {
  // The server runs in a child process whose descriptors the test uses up:
  // with its reserve descriptor (taken at start) it tells the waiting client
  // so; without one (used up before start) the client waits in the backlog.
  // Either way it takes almost no cpu meanwhile, and answers once
  // descriptors are free.
  for (bool reserve : {true, false}) {
    DYNAMIC_SECTION((reserve ? "with" : "without") << " its reserve descriptor") {
      std::string dir = scratch(reserve ? "fd_limit_reserve" : "fd_limit");
      std::string path = dir + "/ctl.sock";
      int to_child[2], from_child[2];
      REQUIRE(pipe(to_child) == 0);
      REQUIRE(pipe(from_child) == 0);
      pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        close(to_child[1]);  // the test gone, reads see the end and the child ends too
        close(from_child[0]);
        rlimit lim{64, 64};
        setrlimit(RLIMIT_NOFILE, &lim);
        ProbeLock lock;
        ControlServer server(lock);
        std::string err;
        if (!server.listen(path, &err)) _exit(3);
        std::vector<int> held;
        auto use_up = [&] {
          for (int fd; (fd = open("/dev/null", O_RDONLY)) >= 0;) held.push_back(fd);
        };
        if (reserve) server.start(), use_up();
        else use_up(), server.start();
        char c;
        (void)!write(from_child[1], "u", 1);  // used up
        (void)!read(to_child[0], &c, 1);
        for (int fd : held) close(fd);
        (void)!write(from_child[1], "f", 1);  // free again
        (void)!read(to_child[0], &c, 1);
        server.stop();
        _exit(0);
      }
      close(to_child[0]);
      close(from_child[1]);
      struct Reaped {  // should a REQUIRE fail
        pid_t pid;
        ~Reaped() {
          if (pid > 0) kill(pid, SIGKILL), waitpid(pid, nullptr, 0);
        }
      } reaped{child};
      char c = 0;
      REQUIRE(read(from_child[0], &c, 1) == 1);
      REQUIRE(c == 'u');
      // A client in the backlog: accept() fails for want of a descriptor.
      ControlReply reply;
      std::string err;
      std::thread client;
      bool first_answered = false;
      if (reserve) {
        REQUIRE(control_request(path, {"help"}, reply, &err, 20));
        CHECK_FALSE(reply.ok);
        CHECK(reply.text == "the probe is out of file descriptors (RLIMIT_NOFILE); try again later");
      } else {
        client = std::thread([&] { first_answered = control_request(path, {"help"}, reply, &err, 30) && reply.ok; });
      }
      long before = cpu_ticks(child);
      usleep(2000 * 1000);
      long used = cpu_ticks(child) - before;
      CHECK(used < sysconf(_SC_CLK_TCK) / 20);  // under 50 ms of cpu in 2 s
      CHECK(write(to_child[1], "g", 1) == 1);
      if (!reserve) {
        client.join();
        INFO(err);
        CHECK(first_answered);  // the waiting client, once descriptors were free
      }
      REQUIRE(read(from_child[0], &c, 1) == 1);
      ControlReply again;
      REQUIRE(control_request(path, {"help"}, again, &err, 20));
      CHECK(again.ok);
      CHECK(again.text.find("list the commands") != std::string::npos);
      CHECK(write(to_child[1], "s", 1) == 1);
      int st = 0;
      waitpid(child, &st, 0);
      reaped.pid = -1;
      CHECK(WIFEXITED(st));
      CHECK(WEXITSTATUS(st) == 0);
      close(to_child[1]);
      close(from_child[0]);
    }
  }
}

TEST_CASE("metrics: a client that connects and sends nothing holds up no scrape", "[control][metrics]") {
  std::string dir = scratch("metrics_stalled");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 1Kpps) -> Timestamp(clock tsc) -> Discard;\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket + " --metrics 0", dir + "/log.txt");
  probe.wait_for_socket(socket);
  int port = metrics_port(dir + "/log.txt");
  int silent = connect_loopback(port);
  int half = connect_loopback(port);  // half a request line
  REQUIRE(send(half, "GET /metr", 9, 0) == 9);
  std::string m = scrape(port);
  CHECK(m.find("sluice_lane_received_packets_total{lane=\"0\"}") != std::string::npos);
  // Both still connected: the scrape did not wait for the server to give up on them.
  CHECK(still_waiting(silent));
  CHECK(still_waiting(half));
  close(silent);
  close(half);
  CHECK(probe.stop() == 0);
}

TEST_CASE("reload: while the new file is being compiled, stats and metrics answer", "[control][ctl][reload]") {
  std::string dir = scratch("reload_reads");
  std::string cfg = write_file(dir + "/p.pipe", "TrafficGen(duration 60s, rate 2Kpps) -> f :: Filter(\"tcp\") -> Discard;\n");
  std::string socket = dir + "/ctl.sock";
  // The new file requires a plugin whose loading waits until the test
  // creates the gate file: its compilation goes on until then.
  std::string gate = dir + "/gate";
  BackgroundProbe probe(cfg + " --control " + socket + " --metrics 0", dir + "/log.txt", "SLUICE_TEST_GATE=" + gate);
  probe.wait_for_socket(socket);
  int port = metrics_port(dir + "/log.txt");
  std::string next = write_file(dir + "/next.pipe", "require \"" SLUICE_TEST_PLUGIN_DIR "/gate_plugin.so\";\n"
                                                    "TrafficGen(duration 60s, rate 2Kpps) -> f :: Filter(\"udp\") -> Discard;\n");
  std::atomic<bool> reload_answered{false};
  ControlReply reload_reply;
  std::string reload_err;
  std::thread reload([&] {
    control_request(socket, {"reload", next}, reload_reply, &reload_err, 60);
    reload_answered = true;
  });
  // The plugin says when it is loading: the reload is compiling.
  for (int i = 0; i < 2000 && access((gate + ".loading").c_str(), F_OK) != 0; ++i) usleep(10 * 1000);
  REQUIRE(access((gate + ".loading").c_str(), F_OK) == 0);
  ControlReply stats;
  std::string err;
  CHECK(control_request(socket, {"stats", "--json"}, stats, &err, 20));
  INFO(err);
  CHECK(stats.ok);
  CHECK(stats.text.find("\"received\": ") != std::string::npos);
  CHECK(scrape(port).find("sluice_reloads_total{result=\"applied\"} 0") != std::string::npos);
  CHECK_FALSE(reload_answered);  // both answered while the reload was still compiling
  write_file(gate, "");
  reload.join();
  INFO(reload_err << reload_reply.text);
  CHECK(reload_reply.ok);
  CHECK(reload_reply.text.find("applied") != std::string::npos);
  CHECK(read_handler(socket, "f.expr") == "udp");
  CHECK(scrape(port).find("sluice_reloads_total{result=\"applied\"} 1") != std::string::npos);
  CHECK(probe.stop() == 0);
}

TEST_CASE("reload: a Filter of more than 256 terms is refused where the bound is passed, before libpcap compiles it",
          "[control][reload]") {
  std::string dir = scratch("filter_terms");
  auto terms = [](int n) {
    std::string e;
    for (int i = 0; i < n; ++i) e += (i ? " or host 10.0." : "host 10.0.") + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);
    return e;
  };
  std::string head = "TrafficGen(duration 1s) -> Filter(\"";
  Run ok = run_sluice("check " + write_file(dir + "/256.pipe", head + terms(256) + "\") -> Discard;\n"));
  INFO(ok.out);
  CHECK(ok.status == 0);
  std::string expr = terms(300);
  size_t or_257 = 0;  // the 256th `or`: where the 257th term starts
  for (int k = 0; k < 256; ++k) or_257 = expr.find(" or ", or_257 + 1);
  Run refused = run_sluice("check " + write_file(dir + "/300.pipe", head + expr + "\") -> Discard;\n"));
  INFO(refused.out);
  CHECK(refused.status == 1);
  CHECK(refused.out.find(dir + "/300.pipe:1:" + std::to_string(head.size() + or_257 + 2) +
                         ": error: the expression has more than 256 terms joined by and/or") != std::string::npos);
}

// ---------------------------------------------------------------- monitoring
// configs/monitoring: the Prometheus alert rules and the Grafana dashboard
// shipped for the metrics above.

TEST_CASE("monitoring: the alert rules pass promtool's check and their unit tests", "[control][metrics][monitoring]") {
  if (!have_tool("promtool")) {
    WARN("skipped: promtool is not installed (Debian package prometheus)");
    return;
  }
  Run check = run_cmd("promtool check rules " SLUICE_SOURCE_DIR "/configs/monitoring/sluice-alerts.yml");
  INFO(check.out);
  CHECK(check.status == 0);
  CHECK(check.out.find("SUCCESS: 8 rules found") != std::string::npos);
  Run unit = run_cmd("cd " SLUICE_SOURCE_DIR "/tests/monitoring && promtool test rules sluice-alerts.test.yml");
  INFO(unit.out);
  CHECK(unit.status == 0);
  CHECK(unit.out.find("SUCCESS") != std::string::npos);
}

TEST_CASE("monitoring: every dashboard and alert query parses and uses only metrics a running probe exports",
          "[control][metrics][monitoring]") {
  if (!have_tool("promtool")) {
    WARN("skipped: promtool is not installed (Debian package prometheus)");
    return;
  }
  std::string dir = scratch("monitoring");
  // Every kind of element the dashboard shows: rings, filters, flow tables
  // and their slicers, an exporter (to a port where no one listens: records
  // lost, counted) and a FlowLog, on two lanes.
  std::string cfg = write_file(
      dir + "/p.pipe",
      "src :: TrafficGen(flows 500, new_flows_per_s 500, duration 60s, rate 2Kpps, queues 2);\n"
      "exp :: shared IPFIXExporter(collector 127.0.0.1:9, transport udp);\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n"
      "src -> Timestamp -> Ring(capacity 1K) -> Filter(\"ip or ip6\") -> ft :: FlowTable(capacity 4K, idle 1s)"
      " -> GCSlicer(table ft) -> exp, log;\n");
  std::string socket = dir + "/ctl.sock";
  BackgroundProbe probe(cfg + " --control " + socket + " --metrics 0", dir + "/log.txt");
  probe.wait_for_socket(socket);
  std::string m = fetch_metrics(dir + "/log.txt");
  std::set<std::string> exported;
  std::regex name_re("\n(sluice_[a-z_]+)[{ ]");
  for (auto it = std::sregex_iterator(m.begin(), m.end(), name_re); it != std::sregex_iterator(); ++it)
    exported.insert((*it)[1].str());
  REQUIRE(exported.size() > 30);

  // The queries: the dashboard's "expr" strings (JSON), the rules' expr lines.
  std::vector<std::string> queries;
  std::string dash = read_file(SLUICE_SOURCE_DIR "/configs/monitoring/sluice-dashboard.json");
  std::regex expr_json("\"expr\": \"((?:[^\"\\\\]|\\\\.)*)\"");
  for (auto it = std::sregex_iterator(dash.begin(), dash.end(), expr_json); it != std::sregex_iterator(); ++it)
    queries.push_back(std::regex_replace((*it)[1].str(), std::regex("\\\\(.)"), "$1"));
  size_t panels = queries.size();
  CHECK(panels >= 15);
  std::string rules = read_file(SLUICE_SOURCE_DIR "/configs/monitoring/sluice-alerts.yml");
  std::regex expr_yaml("\n +expr: (.*)");
  for (auto it = std::sregex_iterator(rules.begin(), rules.end(), expr_yaml); it != std::sregex_iterator(); ++it)
    queries.push_back((*it)[1].str());
  CHECK(queries.size() == panels + 8);

  std::string recording = "groups:\n  - name: dashboard\n    rules:\n";
  for (size_t i = 0; i < queries.size(); ++i) {
    std::string q = queries[i];
    INFO(q);
    std::regex metric("sluice_[a-z_]+");
    for (auto it = std::sregex_iterator(q.begin(), q.end(), metric); it != std::sregex_iterator(); ++it)
      CHECK(exported.count((*it).str()) == 1);
    // Grafana's variables as Prometheus would get them
    q = std::regex_replace(q, std::regex("\\$__rate_interval"), "1m");
    q = std::regex_replace(q, std::regex("\\$instance"), ".*");
    std::string quoted;
    for (char c : q) quoted += c == '\'' ? std::string("''") : std::string(1, c);
    recording += "      - record: query_" + std::to_string(i) + "\n        expr: '" + quoted + "'\n";
  }
  write_file(dir + "/queries.yml", recording);
  Run check = run_cmd("promtool check rules " + dir + "/queries.yml");
  INFO(check.out);
  CHECK(check.status == 0);
}
