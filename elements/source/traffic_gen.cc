#include <algorithm>
#include <memory>
#include <stdexcept>

#include "engine/packet/parse.hh"
#include "engine/base/clock.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/in_place_records.hh"
#include "engine/runtime/run_context.hh"
#include "engine/traffic/traffic_model.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &traffic_gen_spec() {
  static const ElementSpec spec =
      ElementSpec("TrafficGen")
          .in_group("source")
          .with_flags(kSource | kGivesTime)
          .brief("Deterministic synthetic traffic for tests and demos")
          .describe(
              "Generates a synthetic trace into memory before the run starts, then replays it. The same "
              "arguments and `seed` always give the same packets, byte for byte, so runs can be repeated "
              "and compared, and no NIC is needed.\n\n"
              "New flows start at `new_flows_per_s`, with at most `flows` active at once. Flow sizes are "
              "heavy-tailed: many short flows and a few long, large ones. Each flow is a TCP or UDP "
              "conversation in both directions over IPv4 or IPv6; TCP flows open with a handshake and close "
              "with FIN. Timestamps cover `duration` of trace time.\n\n"
              "With `queues N` the flows are split over N lanes by the same symmetric hash RSSSource uses; "
              "each packet carries that hash as a NIC's RSS would give it, computed once per flow when the "
              "traffic is generated, not on the lane. "
              "With `rate` the replay is paced in wall-clock time; without it packets come as fast as the "
              "lane takes them. `TrafficGen -> PcapSink` writes the generated traffic to a trace file.\n\n"
              "Packets are not copied out of the generated memory: each packet's buffer points at its frame "
              "there, as a NIC's buffers hold what it wrote into them (an element that rewrites a packet "
              "rewrites that frame, which is replayed once). Only while a million packets of a lane are "
              "held at once are further frames copied; the summary counts them.")
          .arg(ArgSpec::count("flows")
                   .def("10K")
                   .range(1, 1 * kG)
                   .describe("Largest number of flows active at the same time."))
          .arg(ArgSpec::count("new_flows_per_s")
                   .def("1K")
                   .range(1, 100 * kM)
                   .describe("Flows started per second of trace time."))
          .arg(ArgSpec::bytes("sizes")
                   .lists()
                   .or_words({"imix"})
                   .def("imix")
                   .range(60, 9216)
                   .describe("Frame sizes (Ethernet, without FCS): `imix`, the simple IMIX mix of small, "
                             "medium and full-size packets in the ratio 7:4:1, or a list of sizes picked with "
                             "equal probability, e.g. `[64B, 576B, 1500B]`. A single size gives fixed-size "
                             "packets."))
          .arg(ArgSpec::duration("duration")
                   .def("10s")
                   .range(1 * kMs, 1 * kDay)
                   .describe("Span of trace time the traffic covers, from the first packet to the last."))
          .arg(ArgSpec::count("repeat")
                   .def("1")
                   .range(1, 1000)
                   .describe("Replays the generated traffic this many times, each pass `duration` later in "
                             "trace time than the one before, so that a long run needs no more memory than "
                             "one pass: for benchmarks of a probe's steady state. The same flows come back "
                             "each pass: one still in a flow table then (not timed out, or closed and "
                             "reopened by its SYN) goes on or starts over as a live probe's would, so past "
                             "the first pass the records no longer match the generated flows one for one."))
          .arg(ArgSpec::count("seed")
                   .def("1")
                   .range(0, 4294967295.0)
                   .describe("Seed of the pseudo-random generator: the same seed gives the same trace."))
          .arg(ArgSpec::any_rate("rate")
                   .describe("Replay pace in bits or packets per second, e.g. `10Gbps` or `14.88Mpps`. When "
                             "absent the replay is unpaced: as fast as the pipeline takes packets. A paced "
                             "replay stands for a live port: a full ring drops, and flows also expire by "
                             "wall-clock time."))
          .arg(ArgSpec::boolean("lossless")
                   .def("false")
                   .describe("With `rate`: the replay stays a trace that is merely paced. A full ring holds it "
                             "back instead of dropping and only packet times count, so the records are those "
                             "of an unpaced replay. Gives traffic that lasts a known wall-clock time, e.g. to "
                             "reload a probe under traffic and compare its records with a run without "
                             "reloads."))
          .arg(ArgSpec::count("queues").counts_lanes()
                   .def("1")
                   .range(1, 128)
                   .describe("Lanes to generate into; each lane replays its own share of the flows."))
          .arg(ArgSpec::fraction("ipv6")
                   .def("0.1")
                   .range(0, 1)
                   .describe("Share of the flows that use IPv6; the rest use IPv4."))
          .arg(ArgSpec::fraction("udp")
                   .def("0.3")
                   .range(0, 1)
                   .describe("Share of the flows that are UDP; the rest are TCP."))
          .arg(ArgSpec::count("flow_size_max")
                   .def("10000")
                   .range(1, 1 * kM)
                   .describe("Most data packets in one flow. Flow sizes follow a bounded Pareto law from 1 to "
                             "this; `1` makes every flow as short as it can be (a handshake, one data packet "
                             "and a close for TCP), the most new flows per packet."))
          .arg(ArgSpec::fraction("flow_size_alpha")
                   .def("1")
                   .range(0.1, 1)
                   .describe("Shape of the Pareto law of flow sizes: `1` gives about 9 data packets per flow "
                             "on average with the top 10% of flows carrying 60% of the packets; smaller "
                             "values give fewer, larger flows."))
          .arg(ArgSpec::duration("flow_span")
                   .range(1 * kMs, 8 * kS)
                   .describe("Long flows: each flow's packets spread over about this span (its RTT up to a "
                             "quarter of it) instead of the few milliseconds of round trips they take by "
                             "default. With a span near `duration` and `flows` reached early, that many flows "
                             "stay active at once for the whole trace and each packet meets any of them: a "
                             "flow table's hard case (`tests/bench/bench_matrix.sh`, `TRAFFIC=long`)."))
          .arg(ArgSpec::count("vlan")
                   .range(1, 4094)
                   .describe("Tag every packet with this 802.1Q VLAN id. When absent, packets are untagged."))
          .arg(ArgSpec::count("ifindex")
                   .def("0")
                   .range(0, 0xffffffffll)
                   .describe("The interface index flow records give as ingressInterface (`FlowTable` field "
                             "`in_if`); 0: unknown."))
          .arg(ArgSpec::symbol("direction", {"ingress", "egress"})
                   .def("ingress")
                   .describe("The flowDirection flow records give (`FlowTable` field `direction`)."))
          .output(PortSpec::packets("out").describe("The generated packets, in trace-time order within each lane."))
          .needs_frame_room([](const Node &n) {  // its largest size (imix: none above the default)
            const Value &sizes = n.arg("sizes")->value;
            unsigned room = 0;
            for (const Value &v : sizes.is_list ? sizes.items : std::vector<Value>{sizes})
              if (!v.is_symbol) room = std::max(room, unsigned(v.integer));
            return room;
          })
          .has_buffers_in_place([](const Node &) { return true; })  // its packets point at their frames
          .has_offline_input([](const Node &n) {  // live() false: unpaced, or paced losslessly
            const ResolvedArg *rate = n.arg("rate");
            return !rate || rate->value.real <= 0 || n.arg("lossless")->value.integer != 0;
          });
  return spec;
}

namespace {

// The traffic is generated once (engine/traffic) for all lanes of the
// element, each lane then replays its own share: each packet's buffer points
// at its frame in the generated memory (InPlaceRecords, as a trace's records
// in its file's mapping: the buffers of the pool have no room of their own),
// parsed like any received packet and stamped with its trace time. Only
// when a million packets are out at once (InPlaceRecords::kMaxBlocks) is a
// frame copied, into a buffer of a small pool for copies. The copy was 8%
// of an in-memory lane at 1M flows (docs/performance.md).
class TrafficGenRuntime final : public SourceElement {
 public:
  TrafficGenRuntime(const Node &n, RunContext &c) : SourceElement(n, c) {
    cfg_.flows = uint64_t(arg("flows").integer);
    cfg_.new_flows_per_s = uint64_t(arg("new_flows_per_s").integer);
    const Value &sizes = arg("sizes");
    if (sizes.is_list)
      for (const Value &v : sizes.items) cfg_.sizes.push_back(uint32_t(v.integer));
    else if (!sizes.is_symbol)
      cfg_.sizes.push_back(uint32_t(sizes.integer));
    cfg_.duration_ns = uint64_t(arg("duration").integer);
    cfg_.seed = uint64_t(arg("seed").integer);
    repeat_ = uint64_t(arg("repeat").integer);
    cfg_.ipv6 = arg("ipv6").real;
    cfg_.udp = arg("udp").real;
    cfg_.flow_size_max = uint32_t(arg("flow_size_max").integer);
    cfg_.flow_size_alpha = arg("flow_size_alpha").real;
    if (has_arg("vlan")) cfg_.vlan = uint16_t(arg("vlan").integer);
    if (has_arg("flow_span")) cfg_.flow_span_ns = uint64_t(arg("flow_span").integer);
    cfg_.lanes = uint32_t(arg("queues").integer);
    if (has_arg("rate")) {
      const Value &r = arg("rate");
      (r.rate_unit == RateUnit::Packets ? rate_pps_ : rate_bps_) = r.real;
    }
    lossless_ = arg("lossless").integer != 0;
    if_index_ = uint32_t(arg("ifindex").integer);
    direction_ = arg("direction").text == "egress" ? 1 : 0;
    lane_index_ = unsigned(c.graph().lanes[lane()].queue);
  }

  bool paced() const { return rate_pps_ > 0 || rate_bps_ > 0; }
  bool live() const override { return paced() && !lossless_; }
  bool has_capture_time() const override { return true; }
  const GeneratedTraffic &traffic() const { return *traffic_; }

  void start() override {
    traffic_ = ctx_.shared_source_state<GeneratedTraffic>(node().element, [&] {
      try {
        return std::make_shared<GeneratedTraffic>(generate_traffic(cfg_));
      } catch (const std::exception &e) {
        throw std::runtime_error("'" + ctx_.graph().graph->elements[node().element].name + "': " + e.what());
      }
    });
    uint32_t largest = 2048;
    for (uint32_t s : cfg_.sizes) largest = std::max(largest, s);
    pool_ = ctx_.pool_for_source(node().element, 0, live());
    copy_pool_ = ctx_.copy_pool_for_source(node().element, largest);
    lane_ = &traffic_->lanes[lane_index_];
    // A paced lane sends its share of the rate, so that all lanes end together.
    double share = traffic_->packets ? double(lane_->size()) / double(traffic_->packets) : 0;
    rate_pps_ *= share, rate_bps_ *= share;
  }

  std::optional<std::pair<double, double>> input_progress() const override {
    if (!lane_) return std::nullopt;
    return std::pair{double(counters.in.get()), double(repeat_ * lane_->size())};
  }

  PollStatus poll(PacketBatch &batch) override {
    if (next_ >= lane_->size() && pass_ + 1 < repeat_) {  // the next pass, `duration` later
      ++pass_;
      next_ = 0;
      shift_ns_ += cfg_.duration_ns;
    }
    if (next_ >= lane_->size() || ctx_.stop_sources.load(std::memory_order_relaxed)) return PollStatus::End;
    size_t n = std::min<size_t>(burst_, lane_->size() - next_);
    if (paced()) {  // no more than the rate allows since the start
      if (start_ns_ == 0) start_ns_ = wall_ns();
      double elapsed = double(wall_ns() - start_ns_) * 1e-9;
      if (rate_pps_ > 0) {
        const size_t allowed = size_t(rate_pps_ * elapsed), sent = pass_ * lane_->size() + next_;
        if (allowed <= sent) return PollStatus::Idle;
        n = std::min(n, allowed - sent);
      } else {
        double budget = rate_bps_ / 8 * elapsed;
        size_t k = 0;
        for (uint64_t b = sent_bytes_; k < n && double(b + lane_->packets[next_ + k].length) <= budget; ++k)
          b += lane_->packets[next_ + k].length;
        if (k == 0) return PollStatus::Idle;
        n = k;
      }
    }
    if (alloc_packets(pool_, batch.pkts, unsigned(n)) != 0) {
      no_buffer_.add();
      return PollStatus::Idle;  // buffers come back as the lane drains
    }
    // The next burst's frames on their way from memory while this one is
    // copied (a NIC's DMA would have put them in the caches): the copy was
    // 15% of an in-memory lane, 5% with this (docs/performance.md).
    for (size_t i = next_ + n, end = std::min(lane_->size(), next_ + 2 * n); i < end; ++i)
      __builtin_prefetch(lane_->frame(i), 0, 3);
    // And the packets' entries two bursts further (24 bytes each, read just
    // above to find their frames): that read waited for memory, 27% of this
    // function's samples at 1M flows in memory (19% with this).
    {
      const GeneratedPacket *all = lane_->packets.data();
      const uintptr_t from = reinterpret_cast<uintptr_t>(all + std::min(lane_->size(), next_ + 2 * n)) & ~uintptr_t(63);
      const uintptr_t to = reinterpret_cast<uintptr_t>(all + std::min(lane_->size(), next_ + 3 * n));
      for (uintptr_t at = from; at < to; at += 64) __builtin_prefetch(reinterpret_cast<const void *>(at), 0, 3);
    }
    size_t i = 0;
    for (; i < n; ++i) {
      const GeneratedPacket &p = lane_->packets[next_ + i];
      const uint8_t *frame = lane_->frame(next_ + i);
      uint16_t len = uint16_t(p.length);
      if (!in_place_.attach(batch.pkts[i], frame, len, next_ + i, traffic_) && !copy_into(batch.pkts[i], frame, len))
        break;  // the pool for copies is empty too: the rest waits
      rte_mbuf *m = batch.pkts[i];
      const uint8_t *d = rte_pktmbuf_mtod(m, const uint8_t *);
      PacketAnno &a = anno(m);
      parse_packet(d, len, LinkType::Ethernet, a.meta, len);
      a.time_ns = p.ts_ns + shift_ns_;
      a.hash = p.rss_hash;
      a.wire_len = len;
      a.if_index = if_index_;
      a.flow_direction = direction_;
      a.labels.count = 0;
      sent_bytes_ += len;
    }
    if (i < n) {
      free_packets(batch.pkts + i, unsigned(n - i));
      n = i;
      if (n == 0) {
        no_buffer_.add();
        return PollStatus::Idle;
      }
    }
    batch.count = uint16_t(n);
    next_ += n;
    counters.in.add(n);
    counters.in_bytes.add(batch.wire_bytes());
    return PollStatus::Packets;
  }

  void report(std::vector<std::string> &lines) const override {
    if (lane_index_ == 0) lines.push_back("generated: " + describe(cfg_));
    lines.push_back("replayed " + std::to_string(pass_ * lane_->size() + next_) + " of " +
                    std::to_string(repeat_ * lane_->size()) + " packets of this lane" +
                    (repeat_ > 1 ? " (" + std::to_string(pass_ + 1) + " of " + std::to_string(repeat_) + " passes)" : "") + (copied_ ? ", " + std::to_string(copied_) + " of them copied (a million out at once)" : "") +
                    (no_buffer_.get() ? ", waited for buffers " + std::to_string(no_buffer_.get()) + " times" : ""));
  }

 private:
  // The frame copied into a buffer of the pool for copies, put in *slot in
  // place of the buffer there (freed): false, *slot untouched, when that
  // pool has none free.
  bool copy_into(rte_mbuf *&slot, const uint8_t *frame, uint16_t len) {
    rte_mbuf *c;
    if (alloc_packets(copy_pool_, &c, 1) != 0) return false;
    std::memcpy(rte_pktmbuf_append(c, len), frame, len);
    free_packet(slot);
    slot = c;
    ++copied_;
    return true;
  }

  TrafficConfig cfg_;
  double rate_pps_ = 0, rate_bps_ = 0;
  bool lossless_ = false;
  uint32_t if_index_ = 0;
  uint8_t direction_ = 0;
  unsigned lane_index_ = 0, burst_ = 32;
  std::shared_ptr<GeneratedTraffic> traffic_;
  const GeneratedLane *lane_ = nullptr;
  rte_mempool *pool_ = nullptr;       // buffers without room: they point at their frames
  rte_mempool *copy_pool_ = nullptr;  // with room, for the few frames copied
  InPlaceRecords in_place_;
  uint64_t copied_ = 0;
  size_t next_ = 0;    // the next packet of the pass
  uint64_t repeat_ = 1, pass_ = 0;  // passes over the lane's packets, and the one under way
  uint64_t shift_ns_ = 0;           // added to the pass's times: pass_ * duration
  uint64_t sent_bytes_ = 0, start_ns_ = 0;
  Counter no_buffer_;
};

}  // namespace

SLUICE_ELEMENT(TrafficGenRuntime, traffic_gen_spec);

}  // namespace sluice::elements
