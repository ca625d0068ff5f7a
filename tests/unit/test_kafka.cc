// KafkaExporter against a real Kafka broker (Apache Kafka from Maven
// Central, KRaft mode) that the test starts on loopback: the messages a
// consumer reads back equal FlowLog's records; a broker killed and
// restarted during a live-like run loses records counted by reason, never
// stalls a lane, and takes the records made after it came back. Skipped,
// with the reason, where no broker can be had (no java or maven, Maven
// Central unreachable).
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <map>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/traffic/traffic_model.hh"
#include "flow_csv_fixture.hh"
#include "run_fixture.hh"

using namespace sluice;
using namespace sluice::test;

namespace {

// A Kafka broker and controller in one process (KRaft), on 127.0.0.1 only.
class KafkaBroker {
 public:
  explicit KafkaBroker(const std::string &dir) : dir_(dir) {
    std::string cache = std::string(SLUICE_TEST_PLUGIN_DIR) + "/kafka-broker";
    Run fetch = run_cmd(std::string(SLUICE_SOURCE_DIR "/tests/kafka/fetch_kafka.sh ") + cache);
    if (fetch.status != 0) {
      why_not_ = "no Kafka broker: " + fetch.out;
      return;
    }
    classpath_ = cache + "/jars/*";
    int fd = bind_loopback(SOCK_STREAM, &port_), cfd = bind_loopback(SOCK_STREAM, &controller_port_);
    close(fd), close(cfd);
    std::string p = std::to_string(port_), c = std::to_string(controller_port_);
    write_file(dir_ + "/server.properties",
               "process.roles=broker,controller\nnode.id=1\n"
               "controller.quorum.voters=1@127.0.0.1:" + c + "\n"
               "listeners=PLAINTEXT://127.0.0.1:" + p + ",CONTROLLER://127.0.0.1:" + c + "\n"
               "advertised.listeners=PLAINTEXT://127.0.0.1:" + p + "\n"
               "controller.listener.names=CONTROLLER\n"
               "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT\n"
               "log.dirs=" + dir_ + "/data\n"
               "num.partitions=3\nauto.create.topics.enable=true\n"
               "offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n"
               "transaction.state.log.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n"
               // a restarted broker waits for its previous session to end: short
               "broker.heartbeat.interval.ms=500\nbroker.session.timeout.ms=1500\n");
    Run format = run_cmd("java -cp '" + classpath_ + "' kafka.tools.StorageTool format -t q1Sh-9_ISia_zwGINzRvyQ -c " +
                         dir_ + "/server.properties");
    if (format.status != 0) {
      why_not_ = "no Kafka broker: formatting its storage failed: " + format.out;
      return;
    }
    start();
  }
  ~KafkaBroker() { stop(); }

  // Empty when the broker runs; else why there is none.
  const std::string &why_not() const { return why_not_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  // Starts the broker and waits until it answers (at most 60 s).
  void start() {
    pid_ = fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      FILE *log = freopen((dir_ + "/broker.log").c_str(), "a", stdout);
      dup2(fileno(log), 2);
      execlp("java", "java", "-Xmx384m", "-XX:+UseSerialGC", "-cp", classpath_.c_str(), "kafka.Kafka",
             (dir_ + "/server.properties").c_str(), (char *)nullptr);
      _exit(127);
    }
    auto began = std::chrono::steady_clock::now();
    while (!answers()) {
      int st;
      INFO(read_file(dir_ + "/broker.log"));
      REQUIRE(waitpid(pid_, &st, WNOHANG) == 0);  // the broker did not exit
      REQUIRE(std::chrono::steady_clock::now() - began < std::chrono::seconds(60));
      usleep(200 * 1000);
    }
  }
  // Kills the broker at once (SIGKILL: an outage, not a shutdown).
  void stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  bool answers() const {
    char err[256];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", address().c_str(), err, sizeof err);
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t *, int, const char *, const char *) {});
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk) return false;
    const rd_kafka_metadata_t *md = nullptr;
    bool ok = rd_kafka_metadata(rk, 1, nullptr, &md, 1000) == RD_KAFKA_RESP_ERR_NO_ERROR;
    if (md) rd_kafka_metadata_destroy(md);
    rd_kafka_destroy(rk);
    return ok;
  }

  std::string dir_, classpath_, why_not_;
  int port_ = 0, controller_port_ = 0;
  pid_t pid_ = -1;
};

// Every message of `topic`, all partitions from the start, read until none
// has come for `quiet` (after `expect` messages, or at most 60 s).
std::vector<std::string> consume_all(const std::string &brokers, const std::string &topic, size_t expect,
                                     std::chrono::milliseconds quiet = std::chrono::milliseconds(2000)) {
  char err[256];
  rd_kafka_conf_t *conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", "sluice-test", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t *, int, const char *, const char *) {});
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE(rk);
  const rd_kafka_metadata_t *md = nullptr;
  rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  REQUIRE(rd_kafka_metadata(rk, 0, t, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  REQUIRE(md->topic_cnt == 1);
  int partitions = md->topics[0].partition_cnt;
  rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  REQUIRE(partitions > 0);
  rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  REQUIRE(rd_kafka_assign(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  std::vector<std::string> out;
  auto began = std::chrono::steady_clock::now(), last = began;
  for (;;) {
    auto now = std::chrono::steady_clock::now();
    if (now - began > std::chrono::seconds(60)) break;
    if (out.size() >= expect && now - last > quiet) break;
    rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    if (!m->err) out.emplace_back(static_cast<const char *>(m->payload), m->len), last = now;
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  return out;
}

// A key's raw value in a flat JSON object (strings without their quotes).
// The first `"key":` followed by a string (its text) or digits. A plain
// search: a std::regex built per call made the broker tests, which read
// some 20,000 messages of a dozen fields, take minutes (six under ASan).
std::string json_value(const std::string &obj, const std::string &key) {
  const std::string name = "\"" + key + "\":";
  for (size_t at = obj.find(name); at != std::string::npos; at = obj.find(name, at + 1)) {
    size_t v = at + name.size();
    if (v < obj.size() && obj[v] == '"') {
      size_t end = obj.find('"', v + 1);
      if (end != std::string::npos) return obj.substr(v + 1, end - v - 1);
    }
    size_t digits = v;
    while (digits < obj.size() && obj[digits] >= '0' && obj[digits] <= '9') ++digits;
    if (digits > v) return obj.substr(v, digits - v);
  }
  return "<no " + key + ">";
}

unsigned protocol_number(const std::string &name) {
  static const std::map<std::string, unsigned> names = {
      {"ICMP", 1}, {"TCP", 6}, {"UDP", 17}, {"ICMPv6", 58}, {"SCTP", 132}};
  auto it = names.find(name);
  return it != names.end() ? it->second : unsigned(std::stoul(name));
}

// A goflow2 JSON message as the FlowLog line of the same direction.
Line as_line(const std::string &msg) {
  INFO(msg);
  auto num = [&](const char *key) { return std::stoull(json_value(msg, key)); };
  Line l{};
  l.start_ms = num("time_flow_start_ns") / 1000000, l.end_ms = num("time_flow_end_ns") / 1000000;
  l.proto = protocol_number(json_value(msg, "proto"));
  l.src = json_value(msg, "src_addr"), l.dst = json_value(msg, "dst_addr");
  l.sport = unsigned(num("src_port")), l.dport = unsigned(num("dst_port"));
  l.packets = num("packets"), l.bytes = num("bytes"), l.flags = unsigned(num("tcp_flags"));
  l.reason = json_value(msg, "flow_end_reason");
  l.vlan = unsigned(num("vlan_id")), l.lane = unsigned(num("lane"));
  CHECK(json_value(msg, "type") == "IPFIX");
  CHECK(json_value(msg, "etype") == (l.src.find(':') != std::string::npos ? "IPv6" : "IPv4"));
  // the optional fields, under FlowLog's column names
  const std::pair<const char *, const char *> optional[] = {
      {"in_if", "in_if"},   {"out_if", "out_if"}, {"flow_direction", "direction"}, {"src_mac", "src_mac"},
      {"dst_mac", "dst_mac"}, {"ip_tos", "tos"},  {"ip_ttl", "min_ttl"},            {"max_ttl", "max_ttl"},
      {"inner_vlan_id", "inner_vlan"}, {"icmp_type", "icmp_type"}, {"icmp_code", "icmp_code"}};
  for (auto [key, column] : optional) l.ext[column] = json_value(msg, key);
  static const std::regex mpls_label("\"mpls_label\":\\[([0-9]*)\\]");
  std::smatch m;
  REQUIRE(std::regex_search(msg, m, mpls_label));
  l.ext["mpls_label"] = m[1].length() ? m[1].str() : "0";
  return l;
}

std::string optional_text(const Line &l) {
  std::string s;
  for (auto &[k, v] : l.ext) s += " " + k + " " + v;
  return s;
}

std::string describe(const Line &l) {
  return l.key() + " start " + std::to_string(l.start_ms) + " end " + std::to_string(l.end_ms) + " packets " +
         std::to_string(l.packets) + " bytes " + std::to_string(l.bytes) + " flags " + std::to_string(l.flags) +
         " reason " + l.reason + " vlan " + std::to_string(l.vlan) + " lane " + std::to_string(l.lane) + optional_text(l);
}

// The element named `element`'s counter `field` (a drop reason too) in --stats-json; 0 when absent.
uint64_t stat(const std::string &json, const std::string &element, const std::string &field) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"name\": \"" + element + "\"[^\n]*\"" + field + "\": ([0-9]+)"))) return 0;
  return std::stoull(m[1]);
}

std::multiset<std::string> described(const std::vector<Line> &lines) {
  std::multiset<std::string> out;
  for (const Line &l : lines) out.insert(describe(l));
  return out;
}

}  // namespace

TEST_CASE("kafka: a consumer reads back from a real broker the records FlowLog wrote", "[kafka]") {
  std::string dir = scratch("kafka", "equal");
  KafkaBroker broker(dir);
  if (!broker.why_not().empty()) {
    WARN("skipped: " << broker.why_not());
    return;
  }
  // Offline traffic over 2 lanes, an exporter per lane, biflows: the
  // records' two directions are two messages, as they are two lines. The
  // end-of-run burst (about 1.1 MB per lane) overflows a 1 MB queue: offline
  // input waits for room instead of losing records.
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 2000, new_flows_per_s 1000, duration 3s, seed 7, ipv6 0.3, udp 0.3, queues 2)\n"
      " -> Timestamp(clock pcap) -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction bi)"
      " -> GCSlicer(table ft) -> exp :: KafkaExporter(\"" + broker.address() + "\", topic flows, queue 1MB), log;\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  INFO(r.out);
  REQUIRE(r.status == 0);
  std::vector<Line> logged = read_csv(dir + "/flows.csv");
  REQUIRE(logged.size() > 2000);
  std::string json = read_file(dir + "/stats.json");
  uint64_t in = stat(json, "exp#0", "records_in") + stat(json, "exp#1", "records_in");
  uint64_t exported = stat(json, "exp#0", "records_absorbed") + stat(json, "exp#1", "records_absorbed");
  CHECK(in > 1000);
  CHECK(exported == in);  // every record acknowledged by the broker
  CHECK(r.out.find("every record accounted for") != std::string::npos);

  std::vector<std::string> msgs = consume_all(broker.address(), "flows", logged.size());
  REQUIRE(msgs.size() == logged.size());
  std::vector<Line> read;
  std::set<std::pair<unsigned, uint64_t>> sequence;  // (lane, sequence_num): each message once
  for (const std::string &m : msgs) {
    read.push_back(as_line(m));
    sequence.insert({read.back().lane, std::stoull(json_value(m, "sequence_num"))});
  }
  CHECK(sequence.size() == msgs.size());
  std::multiset<std::string> want = described(logged), got = described(read);
  std::vector<std::string> missing, extra;
  std::set_difference(want.begin(), want.end(), got.begin(), got.end(), std::back_inserter(missing));
  std::set_difference(got.begin(), got.end(), want.begin(), want.end(), std::back_inserter(extra));
  INFO("in FlowLog, not in Kafka: " << missing.size() << (missing.empty() ? "" : ", e.g. " + missing[0]));
  INFO("in Kafka, not in FlowLog: " << extra.size() << (extra.empty() ? "" : ", e.g. " + extra[0]));
  CHECK(missing.empty());
  CHECK(extra.empty());
}

TEST_CASE("kafka: a broker killed and restarted during a live run: losses counted by reason, no lane stalled", "[kafka]") {
  std::string dir = scratch("kafka", "outage");
  KafkaBroker broker(dir);
  if (!broker.why_not().empty()) {
    WARN("skipped: " << broker.why_not());
    return;
  }
  // Paced (live-like) traffic for about 25 s over 2 lanes, an exporter on
  // each lane, short timeouts: records leave all through the run. A message
  // unacknowledged for 2 s is lost.
  TrafficConfig tc;
  tc.flows = 1500, tc.new_flows_per_s = 500, tc.duration_ns = 20'000'000'000ull, tc.seed = 9;
  tc.ipv6 = 0.3, tc.udp = 0.3, tc.lanes = 2;
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 1500, new_flows_per_s 500, duration 20s, seed 9, ipv6 0.3, udp 0.3, queues 2, rate 5Kpps)\n"
      " -> Timestamp(clock pcap) -> Ring(capacity 4K) -> ft :: FlowTable(capacity 64K, idle 200ms, active 1s, direction bi)"
      " -> GCSlicer(table ft, period 20ms, slices 4)"
      " -> exp :: KafkaExporter(\"" + broker.address() + "\", topic outage, timeout 2s), log;\n"
      "log :: shared FlowLog(\"" + dir + "/flows.csv\");\n");
  Run r{};
  auto began = std::chrono::steady_clock::now();
  std::thread run([&] { r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json"); });
  // Down from 2 s until it is up again (started at 4 s, it takes 4 to 10 s
  // on a loaded machine, 11 s once in a CI simulation beside another test
  // run): longer than the timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  broker.stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(2000));
  broker.start();
  uint64_t back_ns = uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::system_clock::now().time_since_epoch())
                                  .count());
  double back_after_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  run.join();
  double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  INFO(r.out);
  INFO("broker back after " << back_after_s << " s, run took " << run_s << " s");
  REQUIRE(back_after_s < 20);  // it came back while the traffic still ran
  std::string json = read_file(dir + "/stats.json");

  // The lanes took every packet: none dropped anywhere, every one in a record.
  GeneratedTraffic truth = generate_traffic(tc);
  uint64_t logged_packets = 0;
  std::vector<Line> logged = read_csv(dir + "/flows.csv");
  for (const Line &l : logged) logged_packets += l.packets;
  CHECK(logged_packets == truth.packets);
  CHECK(r.out.find("accounting: received " + std::to_string(truth.packets) + " + copies 0 = absorbed " +
                   std::to_string(truth.packets) + " + dropped 0: every packet accounted for") != std::string::npos);
  // On time: the traffic's 25 s, the end-of-run drain (5 s at most), slack for a loaded machine.
  CHECK(run_s < 40);

  // Losses counted by reason, every record accounted for.
  uint64_t in = 0, exported = 0, timed_out = 0, other_losses = 0;
  for (const char *exp : {"exp#0", "exp#1"}) {
    in += stat(json, exp, "records_in"), exported += stat(json, exp, "records_absorbed");
    timed_out += stat(json, exp, "delivery timed out");
    for (const char *reason : {"export queue full", "delivery failed", "not sent before the end"})
      other_losses += stat(json, exp, reason);
  }
  CHECK(in > 5000);
  CHECK(timed_out > 0);
  CHECK(exported > 0);
  CHECK(in == exported + timed_out + other_losses);
  CHECK(r.status == 3);  // data lost
  CHECK(r.out.find("every record accounted for") != std::string::npos);
  CHECK(r.out.find("KafkaExporter 'exp") != std::string::npos);  // the outage was said

  // What the brokers acknowledged is in the topic, records FlowLog wrote;
  // records made after the restart among them.
  uint64_t delivered = 0;
  std::regex delivered_line("topic outage: ([0-9]+) messages delivered");
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), delivered_line), end; it != end; ++it)
    delivered += std::stoull((*it)[1]);
  CHECK(delivered >= exported);
  std::vector<std::string> msgs = consume_all(broker.address(), "outage", delivered);
  std::multiset<std::string> want = described(logged);
  std::set<std::pair<unsigned, uint64_t>> sequence;
  size_t after_restart = 0, not_logged = 0;
  for (const std::string &m : msgs) {
    Line l = as_line(m);
    sequence.insert({l.lane, std::stoull(json_value(m, "sequence_num"))});
    if (!want.count(describe(l))) ++not_logged;
    if (std::stoull(json_value(m, "time_received_ns")) > back_ns) ++after_restart;
  }
  INFO(msgs.size() << " messages read, " << sequence.size() << " distinct, " << delivered << " acknowledged");
  CHECK(sequence.size() >= delivered);  // retries may write a message twice; none acknowledged is missing
  CHECK(not_logged == 0);
  CHECK(after_restart > 100);
}

// Needs no broker: what a user sees with a bad property and with brokers
// that are not there.
TEST_CASE("kafka: a property librdkafka does not know is an error naming the element", "[kafka]") {
  std::string dir = scratch("kafka", "bad-option");
  std::string cfg = write_file(dir + "/p.pipe",
                               "TrafficGen(flows 10, duration 1s) -> ft :: FlowTable -> GCSlicer(table ft)"
                               " -> exp :: KafkaExporter(\"127.0.0.1:1\", options \"linger.ms=5,no.such.property=1\");\n");
  Run r = run_sluice("run -q " + cfg);
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(r.out.find("'exp") != std::string::npos);
  CHECK(r.out.find("no.such.property") != std::string::npos);
  cfg = write_file(dir + "/q.pipe", "TrafficGen(flows 10, duration 1s) -> ft :: FlowTable -> GCSlicer(table ft)"
                                    " -> exp :: KafkaExporter(\"127.0.0.1:1\", options \"linger.ms\");\n");
  r = run_sluice("run -q " + cfg);
  INFO(r.out);
  CHECK(r.status != 0);
  CHECK(r.out.find("'linger.ms' is not name=value") != std::string::npos);
}

TEST_CASE("kafka: with no broker reachable every record is counted lost, the run ends on time", "[kafka]") {
  std::string dir = scratch("kafka", "no-broker");
  int fd, port;
  fd = bind_loopback(SOCK_STREAM, &port);  // bound, never listening: connections are refused
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 300, new_flows_per_s 300, duration 3s, seed 5, rate 5Kpps) -> Timestamp(clock pcap)"
      " -> Ring(capacity 4K) -> ft :: FlowTable(capacity 64K, idle 100ms, active 1s, direction uni)"
      " -> GCSlicer(table ft, period 20ms, slices 4)"
      " -> exp :: KafkaExporter(\"127.0.0.1:" + std::to_string(port) + "\", timeout 1s), log;\n"
      "log :: FlowLog(\"" + dir + "/flows.csv\");\n");
  auto began = std::chrono::steady_clock::now();
  Run r = run_sluice("run -q " + cfg + " --stats-json " + dir + "/stats.json");
  double run_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  close(fd);
  INFO(r.out);
  CHECK(r.status == 3);
  std::string json = read_file(dir + "/stats.json");
  uint64_t in = stat(json, "exp#0", "records_in");
  CHECK(in == read_csv(dir + "/flows.csv").size());  // uniflows: a line per record
  CHECK(in > 300);
  CHECK(stat(json, "exp#0", "records_absorbed") == 0);
  // Timed out while the run went on; the last ones at the end of the run,
  // after waiting 5 s at most.
  CHECK(stat(json, "exp#0", "delivery timed out") + stat(json, "exp#0", "not sent before the end") == in);
  CHECK(stat(json, "exp#0", "delivery timed out") > 0);
  CHECK(r.out.find("dropped, ring full") == std::string::npos);  // the lane never waited
  CHECK(r.out.find("Connection refused") != std::string::npos);   // said, with the cause
  CHECK(run_s < 15);  // about 3 s of traffic, 5 s of drain at most, slack for a loaded machine
}

// A biflow record is two messages. On offline input a full queue makes the
// exporter wait between them while reports come in: the record's first
// message, reported alone, once ended the record and the second began it
// again, counted twice (found by the reads-back test, 1 run in 3).
TEST_CASE("kafka: a record whose messages are queued on both sides of a wait for room is counted once", "[kafka]") {
  std::string dir = scratch("kafka", "wait-between-messages");
  int fd, port;
  fd = bind_loopback(SOCK_STREAM, &port);  // bound, never listening: every message times out
  // Unpaced: offline input, which waits for room in the 1 MB queue (about
  // 2,000 messages) while messages time out after 1 s; the queue fills
  // again and again, at any point of a record.
  std::string cfg = write_file(
      dir + "/p.pipe",
      "TrafficGen(flows 2500, new_flows_per_s 2500, duration 2s, seed 11, udp 0)"
      " -> Timestamp(clock pcap) -> ft :: FlowTable(capacity 64K, idle 1h, active 1h, direction bi)"
      " -> GCSlicer(table ft)"
      " -> exp :: KafkaExporter(\"127.0.0.1:" + std::to_string(port) + "\", timeout 1s, queue 1MB);\n");
  Run r = run_sluice("run -q --no-jit " + cfg + " --stats-json " + dir + "/stats.json");
  close(fd);
  INFO(r.out);
  CHECK(r.status == 3);  // records lost, every one accounted for (1: the records do not balance)
  CHECK(r.out.find("MISMATCH") == std::string::npos);
  std::string json = read_file(dir + "/stats.json");
  uint64_t in = stat(json, "exp#0", "records_in");
  uint64_t lost = stat(json, "exp#0", "delivery timed out") + stat(json, "exp#0", "export queue full") +
                  stat(json, "exp#0", "not sent before the end");
  CHECK(in > 2500);
  CHECK(stat(json, "exp#0", "records_absorbed") == 0);
  CHECK(lost == in);
  CHECK(stat(json, "exp#0", "delivery timed out") > 2000);  // the queue filled more than once
}
