// KafkaExporter: flow records as JSON messages (goflow2's keys) to a Kafka
// topic, through librdkafka's producer. Nothing here waits for a broker on
// a live lane: produce() only queues the message in librdkafka (its own
// threads talk to the brokers), a full queue loses the record, counted, and
// the delivery reports are served by rd_kafka_poll(0) from tick(). Offline
// input alone waits for room in the queue, as the flow exporters do.
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <unordered_map>

#include "elements/export/flow_json.hh"
#include "elements/units.hh"
#include "engine/base/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &kafka_exporter_spec();

namespace {

constexpr uint64_t kDrainNs = 5'000'000'000ull;       // the end of a run, a removal
constexpr uint64_t kNoProgressNs = 2'000'000'000ull;  // offline input waiting for room
constexpr uint64_t kPollEveryNs = 1'000'000ull;       // delivery reports served from tick()
constexpr uint64_t kErrorQuietNs = 10'000'000'000ull; // the same broker error printed again after

class KafkaExporterRuntime final : public RuntimeElement {
 public:
  KafkaExporterRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
    brokers_ = arg("brokers").text;
    topic_name_ = arg("topic").text;
    queue_full_ = counters.reason("export queue full", true);
    timed_out_ = counters.reason("delivery timed out", true);
    failed_ = counters.reason("delivery failed", true);
    // The reasons abandon_pending() is given (the end of a run, a reload).
    counters.reason("not sent before the end", true);
    counters.reason("not sent before removal", true);
    fields_ = c.flow_fields();
    optional_ = c.record_fields();
  }
  ~KafkaExporterRuntime() override {
    if (!rk_) return;
    // Whatever is left was counted by abandon_pending(); nothing to wait for.
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    if (topic_) rd_kafka_topic_destroy(topic_);
    rd_kafka_destroy(rk_);
  }

  void prepare() override {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    auto set = [&](const std::string &key, const std::string &value) {
      if (rd_kafka_conf_set(conf, key.c_str(), value.c_str(), err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error("'" + name() + "': " + err);
      }
    };
    set("bootstrap.servers", brokers_);
    set("message.timeout.ms", std::to_string(uint64_t(arg("timeout").integer) / 1000000));
    set("queue.buffering.max.kbytes", std::to_string(uint64_t(arg("queue").integer) / 1024));
    set("queue.buffering.max.messages", "10000000");  // the octets bound the queue, not a count
    set("compression.codec", arg("compression").text);
    set("reconnect.backoff.max.ms", "1000");  // a broker back after an outage is found within a second
    const std::string &options = arg("options").text;
    for (size_t at = 0; at < options.size();) {
      size_t end = options.find(',', at);
      if (end == std::string::npos) end = options.size();
      std::string item = options.substr(at, end - at);
      at = end + 1;
      if (item.empty()) continue;
      size_t eq = item.find('=');
      if (eq == std::string::npos || eq == 0) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error("'" + name() + "': options: '" + item + "' is not name=value");
      }
      set(item.substr(0, eq), item.substr(eq + 1));
    }
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_dr_msg_cb(conf, &KafkaExporterRuntime::on_delivery);
    rd_kafka_conf_set_error_cb(conf, &KafkaExporterRuntime::on_error);
    // Broker errors reach on_error(); librdkafka's own log lines would repeat them.
    rd_kafka_conf_set_log_cb(conf, [](const rd_kafka_t *, int, const char *, const char *) {});
    rk_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);  // owns conf once it succeeds
    if (!rk_) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error("'" + name() + "': " + err);
    }
    topic_ = rd_kafka_topic_new(rk_, topic_name_.c_str(), nullptr);
    if (!topic_) throw std::runtime_error("'" + name() + "': topic '" + topic_name_ + "': " + rd_kafka_err2str(rd_kafka_last_error()));
    // Offline input waits for room rather than losing records, as its rings
    // do: a replay gives the same records whatever the pace.
    offline_ = true;
    for (const Lane &l : ctx_.graph().lanes)
      if ((lane() < 0 || l.id == lane()) && ctx_.lane_source(l.id) && ctx_.lane_source(l.id)->live()) offline_ = false;
  }

  bool wants_tick() const override { return true; }
  void tick() override {
    uint64_t now = mono_ns();
    if (now - last_poll_ns_ < kPollEveryNs) return;
    last_poll_ns_ = now;
    rd_kafka_poll(rk_, 0);  // serves delivery reports and errors here, never waits
  }

  void push(int, PacketBatch &) override {}
  void push_flows(int, FlowBatch &batch) override {
    tick();
    uint64_t now_ns = wall_ns();
    for (int i = 0; i < batch.count; ++i) produce_record(batch.recs[i], now_ns);
    batch.count = 0;
  }

  void flush() override {
    rd_kafka_poll(rk_, 0);
    drain_deadline_ns_ = mono_ns() + kDrainNs;
  }
  bool drain_pending(uint64_t now_ns) override {
    if (!drain_deadline_ns_) flush();
    rd_kafka_poll(rk_, 0);
    return pending_.empty() || now_ns >= drain_deadline_ns_ || ctx_.stop_now.load(std::memory_order_relaxed);
  }
  void abandon_pending(const char *why) override {
    if (!rk_) return;
    abandon_reason_ = counters.reason(why, true);
    rd_kafka_purge(rk_, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    // The purged messages' reports come through poll; a moment for those in flight.
    for (int i = 0; i < 50 && !pending_.empty(); ++i) rd_kafka_poll(rk_, 2);
    for (auto &[id, p] : pending_) counters.drops[p.lost_reason >= 0 ? p.lost_reason : abandon_reason_].add(1);
    pending_.clear();
  }

  void report(std::vector<std::string> &lines) const override {
    std::string line = "kafka " + brokers_ + " topic " + topic_name_ + ": " + std::to_string(delivered_) +
                       " messages delivered, " + std::to_string(delivered_bytes_) + " bytes, " +
                       std::to_string(delivery_errors_) + " delivery errors, " + std::to_string(broker_errors_) +
                       " broker errors";
    if (!last_error_.empty()) line += " (last: " + last_error_ + ")";
    lines.push_back(line);
  }
  void report_metrics(ElementMetrics &out) const override {
    out.counter("kafka_records_total", double(counters.records_absorbed.get()));
    out.counter("kafka_messages_total", double(delivered_));
    out.counter("kafka_bytes_total", double(delivered_bytes_));
    out.counter("kafka_delivery_errors_total", double(delivery_errors_));
    out.counter("kafka_broker_errors_total", double(broker_errors_));
    out.gauge("kafka_queued_messages", double(queued()));
  }

  // Handlers.
  std::string brokers() const { return brokers_; }
  std::string topic() const { return topic_name_; }
  uint64_t delivered() const { return delivered_; }
  uint64_t queued() const { return rk_ ? uint64_t(rd_kafka_outq_len(rk_)) : 0; }
  uint64_t broker_errors() const { return broker_errors_; }

 private:
  // A record waiting for the reports of its messages.
  struct Pending {
    uint8_t messages_left;
    int8_t lost_reason = -1;  // one of its messages failed: the record is lost, for this reason
  };

  static uint64_t wall_ns() {
    return uint64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count());
  }

  // The record is held pending while its messages are produced: waiting for
  // room serves reports, and the first message's report must not end a
  // record whose second message is still to come.
  void produce_record(const FlowRecord &r, uint64_t now_ns) {
    int directions = flow_json_directions(r);
    uint64_t id = ++records_;
    pending_.emplace(id, Pending{1});  // the producer's hold
    for (int d = 0; d < directions; ++d) {
      message_.clear();
      append_flow_json(message_, r, d == 1, FlowJsonKeys::GoFlow2, fields_, optional_, {now_ns, sequence_ + 1});
      int lost = produce(message_, id);
      if (lost < 0) {
        ++sequence_;
        ++pending_.at(id).messages_left;
        continue;
      }
      ++delivery_errors_;
      Pending &p = pending_.at(id);
      if (p.lost_reason < 0) p.lost_reason = int8_t(lost);
      break;
    }
    release(pending_.find(id));
  }

  // One message of a record reported, or the producer's hold let go: the
  // last one counts the record, exported or lost.
  void release(std::unordered_map<uint64_t, Pending>::iterator it) {
    Pending &p = it->second;
    if (--p.messages_left) return;
    if (p.lost_reason >= 0) counters.drops[p.lost_reason].add(1);
    else counters.records_absorbed.add(1);
    pending_.erase(it);
  }

  // Queues one message: -1, or the reason its record is lost. Never waits on
  // live input; offline input waits for room while messages leave.
  int produce(const std::string &m, uint64_t id) {
    uint64_t last_progress = 0;
    size_t queued = 0;
    for (;;) {
      if (rd_kafka_produce(topic_, RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY, const_cast<char *>(m.data()),
                           m.size(), nullptr, 0, reinterpret_cast<void *>(uintptr_t(id))) == 0)
        return -1;
      rd_kafka_resp_err_t e = rd_kafka_last_error();
      if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL) {
        note_error(rd_kafka_err2str(e));
        return failed_;
      }
      if (!offline_ || ctx_.stop_now.load(std::memory_order_relaxed)) return queue_full_;
      uint64_t now = mono_ns();
      size_t q = size_t(rd_kafka_outq_len(rk_));
      if (!last_progress || q < queued) last_progress = now;
      queued = q;
      if (now - last_progress > kNoProgressNs) return queue_full_;
      rd_kafka_poll(rk_, 1);
    }
  }

  static void on_delivery(rd_kafka_t *, const rd_kafka_message_t *m, void *opaque) {
    static_cast<KafkaExporterRuntime *>(opaque)->on_report(m);
  }
  void on_report(const rd_kafka_message_t *m) {
    auto it = pending_.find(uint64_t(reinterpret_cast<uintptr_t>(m->_private)));
    if (it == pending_.end()) return;  // counted already (abandoned)
    Pending &p = it->second;
    if (m->err) {
      ++delivery_errors_;
      bool purged = m->err == RD_KAFKA_RESP_ERR__PURGE_QUEUE || m->err == RD_KAFKA_RESP_ERR__PURGE_INFLIGHT;
      int reason = m->err == RD_KAFKA_RESP_ERR__MSG_TIMED_OUT ? timed_out_
                   : purged && abandon_reason_ >= 0         ? abandon_reason_
                                                            : failed_;
      if (reason == failed_) note_error(rd_kafka_err2str(m->err));
      if (p.lost_reason < 0) p.lost_reason = int8_t(reason);
    } else {
      ++delivered_;
      delivered_bytes_ += m->len;
    }
    release(it);
  }

  static void on_error(rd_kafka_t *, int err, const char *reason, void *opaque) {
    auto *self = static_cast<KafkaExporterRuntime *>(opaque);
    ++self->broker_errors_;
    const char *kind = rd_kafka_err2name(rd_kafka_resp_err_t(err));
    self->note_error(std::string(kind) + ": " + reason, kind);
  }
  // Printed once for each kind in kErrorQuietNs (the text varies: counts
  // of suppressed repeats): an outage is not a flood.
  void note_error(const std::string &what, const std::string &kind = "") {
    last_error_ = what;
    const std::string &key = kind.empty() ? what : kind;
    uint64_t now = mono_ns();
    auto [it, added] = printed_ns_.try_emplace(key, now);
    if (!added && now - it->second < kErrorQuietNs) return;
    it->second = now;
    fprintf(stderr, "KafkaExporter '%s': %s\n", name().c_str(), what.c_str());
  }

  std::string brokers_, topic_name_;
  std::vector<const FlowExtField *> fields_;
  FlowFieldSet optional_ = 0;  // the optional fields of the graph's tables
  rd_kafka_t *rk_ = nullptr;
  rd_kafka_topic_t *topic_ = nullptr;
  bool offline_ = false;
  std::string message_;  // reused
  uint64_t records_ = 0, sequence_ = 0;
  std::unordered_map<uint64_t, Pending> pending_;  // by record id, the messages' opaque
  uint64_t delivered_ = 0, delivered_bytes_ = 0, delivery_errors_ = 0, broker_errors_ = 0;
  uint64_t last_poll_ns_ = 0, drain_deadline_ns_ = 0;
  std::string last_error_;
  std::map<std::string, uint64_t> printed_ns_;  // by kind: when last printed
  int queue_full_, timed_out_, failed_, abandon_reason_ = -1;
};

}  // namespace

const ElementSpec &kafka_exporter_spec() {
  static const ElementSpec spec =
      ElementSpec("KafkaExporter")
          .in_group("export")
          .brief("Send flow records as JSON messages to a Kafka topic")
          .describe(
              "Produces one Kafka message per direction of each flow record (a biflow record whose reverse "
              "direction carried packets gives two, as FlowLog gives two lines), a JSON object with the keys "
              "of goflow2's JSON output, so that pipelines built on goflow2 (Kafka to ClickHouse, Elastic, "
              "Logstash) read Sluice's records as they are:\n\n"
              "- `type`: `\"IPFIX\"` (goflow2's name for the flows of an IPFIX exporter, which is what "
              "Sluice's records are);\n"
              "- `time_received_ns`: when the exporter wrote the message (UNIX ns);\n"
              "- `sequence_num`: the exporter instance's count of messages, this one included (from 1; "
              "per lane for an exporter replicated per lane);\n"
              "- `time_flow_start_ns`, `time_flow_end_ns`: the times of the direction's first and last "
              "packet (UNIX ns);\n"
              "- `bytes` (at IP level: the sum of IP total lengths), `packets`;\n"
              "- `src_addr`, `dst_addr`: addresses as text; `etype`: `\"IPv4\"` or `\"IPv6\"`;\n"
              "- `proto`: `\"ICMP\"`, `\"TCP\"`, `\"UDP\"`, `\"ICMPv6\"`, `\"SCTP\"` (goflow2's names), any "
              "other protocol as its number in a string (`\"47\"`);\n"
              "- `src_port`, `dst_port` (ICMP: 0 and type * 256 + code, as in the IPFIX records); "
              "`icmp_type`, `icmp_code`: those of the flow's key for ICMP and ICMPv6, else 0;\n"
              "- `tcp_flags`: the OR of the direction's TCP flags (FIN = 1, SYN = 2, RST = 4, ...);\n"
              "- `vlan_id`: the outer VLAN id, 0 when untagged;\n"
              "- Sluice's own, after goflow2's: `flow_end_reason` (`idle timeout`, `active timeout`, "
              "`end of flow`, `forced end`, `lack of resources`) and `lane` (the lane that metered it);\n"
              "- the optional fields the graph's FlowTables keep (`fields`, docs/flow-records.md), goflow2's "
              "keys where it has one: `in_if`, `out_if`, `flow_direction`, `src_mac`, `dst_mac` "
              "(`\"aa:bb:cc:dd:ee:ff\"`), `ip_tos`, `ip_ttl` (the smallest TTL) and Sluice's `max_ttl`, "
              "Sluice's `inner_vlan_id`, `mpls_label` (a list: the top label, or empty);\n"
              "- one key per extension field with a value, named as FlowLog's JSON names it (`serverName`).\n\n"
              "goflow2's keys for what Sluice's records do not hold (`sampler_address`, `sampling_rate`, "
              "AS numbers, next hops) are left out rather than sent as zeros. "
              "Messages have no key: librdkafka spreads them over the topic's partitions.\n\n"
              "Delivery: a record counts as exported (`records_absorbed`) once the broker has acknowledged "
              "each of its messages (acks from all in-sync replicas, librdkafka's default). While no broker "
              "is reachable messages wait in librdkafka's queue (at most `queue` octets) and are sent when "
              "one comes back; a message still unacknowledged after `timeout` loses its record, counted as "
              "`delivery timed out`; a message the queue has no room for, as `export queue full` (on "
              "offline input, trace files and unpaced TrafficGen, the exporter waits for room instead, as "
              "the flow exporters do, unless nothing has left for 2 s); one the broker refuses, as "
              "`delivery failed`. A lane never waits for a broker. At the end of a run, and when a reload "
              "removes the exporter, the queue has up to 5 s to go out; what is left is counted as `not "
              "sent before the end` (or `before removal`), although a message already in flight may still "
              "arrive. Broker errors (a refused connection, all brokers down) are counted and printed, "
              "each kind once in 10 s.")
          .arg(ArgSpec::string("brokers")
                   .needed()
                   .pos()
                   .describe("Kafka's bootstrap servers: `host:port`, or several separated by commas."))
          .arg(ArgSpec::string("topic").def("\"flow-messages\"").describe("The topic (goflow2's default name)."))
          .arg(ArgSpec::duration("timeout")
                   .def("30s")
                   .range(1 * kS, 1 * kHour)
                   .describe("How long a message may wait for a broker's acknowledgement (librdkafka's "
                             "`message.timeout.ms`): beyond, its record is counted lost (`delivery timed "
                             "out`). A broker away for less than this loses nothing."))
          .arg(ArgSpec::bytes("queue")
                   .def("64MB")
                   .range(1 * kM, 2 * kG)
                   .describe("Octets of messages that may wait in the producer's queue (librdkafka's "
                             "`queue.buffering.max.kbytes`), e.g. while no broker is reachable."))
          .arg(ArgSpec::symbol("compression", {"none", "gzip", "snappy", "lz4", "zstd"})
                   .def("none")
                   .describe("How message batches are compressed on the way to the broker."))
          .arg(ArgSpec::string("options")
                   .def("\"\"")
                   .describe("More librdkafka producer properties, `name=value` separated by commas (e.g. "
                             "`\"security.protocol=ssl,ssl.ca.location=/etc/ssl/ca.pem\"`); a property "
                             "librdkafka does not know, or a bad value, is an error when the run starts."))
          .handler("brokers", "The bootstrap servers.", &KafkaExporterRuntime::brokers)
          .handler("topic", "The topic.", &KafkaExporterRuntime::topic)
          .handler("delivered", "Messages the brokers acknowledged.", &KafkaExporterRuntime::delivered)
          .handler("queued", "Messages waiting in the producer's queue or in flight.", &KafkaExporterRuntime::queued)
          .handler("broker_errors", "Broker errors librdkafka reported.", &KafkaExporterRuntime::broker_errors)
          .metric(MetricSpec::counter("kafka_records_total", "Flow records whose messages the brokers acknowledged."))
          .metric(MetricSpec::counter("kafka_messages_total", "Messages the brokers acknowledged."))
          .metric(MetricSpec::counter("kafka_bytes_total", "Octets of messages the brokers acknowledged."))
          .metric(MetricSpec::counter("kafka_delivery_errors_total",
                                      "Messages that failed (timed out, refused, not sent before the end)."))
          .metric(MetricSpec::counter("kafka_broker_errors_total",
                                      "Broker errors librdkafka reported (connections refused or lost, all brokers down)."))
          .metric(MetricSpec::gauge("kafka_queued_messages", "Messages waiting in the producer's queue or in flight."))
          .input(PortSpec::flows("in").many().describe("Flow records to export; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(KafkaExporterRuntime, kafka_exporter_spec);

}  // namespace sluice::elements
