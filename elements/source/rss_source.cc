#include <net/if.h>
#include <rte_ring.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <stdexcept>

#include "engine/core/graph.hh"
#include "engine/packet/parse.hh"
#include "engine/packet/pcap_file_reader.hh"
#include "engine/packet/rss_hash.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/ring_count.hh"
#include "engine/runtime/eth_device.hh"
#include "engine/runtime/run_context.hh"

using namespace sluice;

namespace sluice::elements {

namespace {
// Trace files, every one walked in its mapping: the device's packets point
// at their records (InPlaceRecords), its pool's buffers need no room.
bool walks_in_place(const DeviceSpec &d) {
  return d.kind == DeviceSpec::Kind::Pcap && std::all_of(d.files.begin(), d.files.end(), walked_in_place);
}
// A node's device, parsed; none where it does not parse (the run reports why).
std::optional<DeviceSpec> device_of(const Node &n) {
  DeviceSpec d;
  std::string err;
  if (!parse_device(n.arg("device")->value.text, d, &err)) return std::nullopt;
  return d;
}
}  // namespace

const ElementSpec &rss_source_spec() {
  static const ElementSpec spec =
      ElementSpec("RSSSource")
          .in_group("source")
          .with_flags(kSource)
          .with_time_if([](const Element &e) {  // trace files carry capture times; live devices none
            for (const BoundArg &a : e.args)
              if (a.spec && a.spec->name == "device")  // empty: an undefined $variable, reported already
                return a.literal.text.empty() || a.literal.text.rfind("pcap:", 0) == 0;
            return false;
          })
          .brief("Receive packets from a NIC or a virtual device")
          .describe(
              "Reads packets from a DPDK device and starts one lane per receive queue. The device is a NIC "
              "given by its PCI address (`0000:3b:00.0`) or a virtual device, or a trace file: `pcap:FILE` "
              "replays a trace at full speed, each record into the source's DPDK buffers with its "
              "nanosecond time and wire length, never dropping one (several files, comma-separated, are "
              "read one after the other), `af_packet:IFACE` and "
              "`af_xdp:IFACE` capture from a kernel interface, and `null` receives nothing, for trying a "
              "graph out.\n\n"
              "With `queues N` the device gets N receive queues and everything downstream is replicated "
              "once per queue, with `$queue` bound to the queue number. The RSS hash is symmetric, so both "
              "directions of a connection land in the same lane and a bidirectional flow is metered in one "
              "place. Devices that have no RSS (pcap, af_packet, null) get the same symmetric Toeplitz hash "
              "computed in software. A trace file over several lanes is read whole by each lane, which "
              "keeps the packets that hash gives it and passes over the others without copying them.\n\n"
              "Headers are parsed once, here, into per-packet metadata that every later element reads: L2 "
              "with VLAN, QinQ and MPLS, IPv4 and IPv6 with extension headers, TCP, UDP, ICMP, fragments.")
          .arg(ArgSpec::string("device")
                   .needed()
                   .pos()
                   .describe("The device to read: a PCI address such as `0000:3b:00.0`, `pcap:FILE[,FILE...]`, "
                             "`af_packet:IFACE`, `af_xdp:IFACE` or `null`."))
          .arg(ArgSpec::count("queues").counts_lanes()
                   .def("1")
                   .range(1, 128)
                   .describe("Receive queues to configure; each starts a lane, placed on the NUMA node of the "
                             "device. More lanes than free cores is an error at planning time."))
          .arg(ArgSpec::count("rx_desc")
                   .def("1024")
                   .range(64, 65536)
                   .describe("Receive descriptors per queue: the NIC's own ring, in packets. A larger ring "
                             "absorbs longer bursts before the NIC drops (counted as \"rx missed\")."))
          .arg(ArgSpec::count("burst")
                   .def("32")
                   .range(1, 512)
                   .describe("Largest number of packets fetched per receive call: the batch size of the lane."))
          .arg(ArgSpec::boolean("symmetric")
                   .def("true")
                   .describe("Hash both directions of a flow to the same queue. With `false` the device's "
                             "default hash is used and the two directions of a connection may meet in "
                             "different lanes; use `FlowTable(direction uni)` then."))
          .arg(ArgSpec::count("ifindex")
                   .def("0")
                   .range(0, 0xffffffffll)
                   .describe("The interface index flow records give as ingressInterface (`FlowTable` field "
                             "`in_if`). Default: the kernel interface's index for `af_packet:IFACE` and "
                             "`af_xdp:IFACE`, else 0 (unknown)."))
          .arg(ArgSpec::symbol("direction", {"ingress", "egress"})
                   .def("ingress")
                   .describe("What the device sees of the observed interface, as flow records give it in "
                             "flowDirection (`FlowTable` field `direction`): `ingress` (traffic it receives, "
                             "or a tap of both directions) or `egress` (a mirror of what it sends)."))
          // DPDK's rte_eth_stats of each port, once per device (lane 0's instance).
          .metric(MetricSpec::counter("port_received_packets_total", "Packets the DPDK port received (ipackets).",
                                      {"port", "device"}))
          .metric(MetricSpec::counter("port_received_bytes_total", "Bytes the DPDK port received (ibytes).",
                                      {"port", "device"}))
          .metric(MetricSpec::counter("port_missed_packets_total",
                                      "Packets the port dropped for lack of room in its receive queue (imissed).",
                                      {"port", "device"}))
          .metric(MetricSpec::counter("port_rx_nombuf_total",
                                      "Receive buffer allocation failures of the port (rx_nombuf).", {"port", "device"}))
          .metric(MetricSpec::counter("port_error_packets_total", "Erroneous packets the port received (ierrors).",
                                      {"port", "device"}))
          .output(PortSpec::packets("out").describe("Received packets, parsed, in batches of up to `burst`."))
          .needs_device([](const Node &n) { return n.arg("device")->value.text; })
          .needs_lane_mbufs([](const Node &n) { return unsigned(n.arg("rx_desc")->value.integer); })
          .needs_burst([](const Node &n) { return unsigned(n.arg("burst")->value.integer); })
          .has_buffers_in_place([](const Node &n) {
            std::optional<DeviceSpec> d = device_of(n);
            return d && walks_in_place(*d);
          })
          .has_offline_input([](const Node &n) {  // trace files: live() false
            std::optional<DeviceSpec> d = device_of(n);
            return d && d->kind == DeviceSpec::Kind::Pcap;
          });
  return spec;
}

namespace {

// Headers parsed once, here: every later element reads the annotations.
// The hash is computed only where lanes need it (software RSS over several
// lanes); the NIC's is kept where it made one.
// `symmetric false` gets the key most NIC drivers default to.
struct Interface {
  uint32_t if_index = 0;
  uint8_t direction = 0;
};
void annotate(const EthDevice &dev, rte_mbuf *m, const EthDevice::RxInfo &info, const ToeplitzHash *hash,
              Interface where) {
  PacketAnno &a = anno(m);
  if (info.parsed) {  // a trace's record, kept by this lane by its hash (EthDevice::keep_lane_share)
    a.hash = info.share_hash;
  } else {
    parse_packet(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, dev.link_type(), a.meta, info.wire_len);
    a.hash = dev.hw_rss() ? m->hash.rss : hash ? rss_hash(a.meta, *hash) : 0;
  }
  a.time_ns = info.time_ns;
  a.wire_len = info.wire_len;
  a.if_index = where.if_index;
  a.flow_direction = where.direction;
  a.labels.count = 0;
}

const ToeplitzHash &software_rss_key(bool symmetric) {
  static const ToeplitzHash sym(ToeplitzHash::kSymmetricKey), ms(ToeplitzHash::kMicrosoftKey);
  return symmetric ? sym : ms;
}

// One device shared by the lanes of one RSSSource. When the device spreads
// packets over as many queues as there are lanes, each lane reads its own
// queue. Otherwise (every virtual device but af_packet) whichever lane finds
// its queue empty reads a burst from the device, under a try-lock, and deals
// the packets out to per-lane rings by the symmetric hash: software RSS,
// without a dispatcher thread. Trace files over several lanes are read by
// each lane, whole, each keeping its share by the same hash
// (EthDevice::keep_lane_share): a DeviceReader per lane, no dealing.
struct DeviceReader {
  std::unique_ptr<EthDevice> dev;
  unsigned lanes = 1;
  unsigned burst = 32;
  bool software = false;
  bool lane_share = false;             // a trace file, this lane's share of it
  const ToeplitzHash *hash = nullptr;  // software RSS
  Interface where;
  std::vector<rte_ring *> lane_rings;
  std::vector<std::unique_ptr<Counter>> lane_full;  // dealt to a full lane ring (live input)
  std::atomic_flag busy = ATOMIC_FLAG_INIT;
  std::atomic<bool> end{false};

  ~DeviceReader() {
    for (rte_ring *r : lane_rings) {
      void *m;
      while (rte_ring_dequeue(r, &m) == 0) free_packet(static_cast<rte_mbuf *>(m));
      rte_ring_free(r);
    }
  }

  // Reads one burst and deals it out. Only one lane reads at a time.
  void read_and_deal(const std::atomic<bool> &stop) {
    if (end.load(std::memory_order_acquire) || busy.test_and_set(std::memory_order_acquire)) return;
    if (stop.load(std::memory_order_relaxed)) {
      end.store(true, std::memory_order_release);
      busy.clear(std::memory_order_release);
      return;
    }
    bool room = true;
    if (dev->finite())  // offline: read only when every lane has room, never drop
      for (rte_ring *r : lane_rings) room = room && ring_free_count(r) >= burst;
    if (room) {
      rte_mbuf *pkts[kMaxBurst];
      EthDevice::RxInfo info[kMaxBurst];
      bool at_end = false;
      uint16_t n = dev->receive(0, pkts, info, uint16_t(burst), &at_end);
      // Deal the burst out, keeping each lane's packets in arrival order; no
      // allocation on this path.
      uint16_t lane_of[kMaxBurst];
      for (uint16_t i = 0; i < n; ++i) {
        annotate(*dev, pkts[i], info[i], hash, where);
        lane_of[i] = uint16_t(lane_for(anno(pkts[i]).hash, lanes));
      }
      rte_mbuf *per_lane[kMaxBurst];
      for (unsigned l = 0; l < lanes && n; ++l) {
        unsigned m = 0;
        for (uint16_t i = 0; i < n; ++i)
          if (lane_of[i] == l) per_lane[m++] = pkts[i];
        if (m == 0) continue;
        unsigned k = rte_ring_sp_enqueue_burst(lane_rings[l], reinterpret_cast<void *const *>(per_lane), m, nullptr);
        for (unsigned i = k; i < m; ++i) free_packet(per_lane[i]);
        if (k < m) lane_full[l]->add(m - k);
      }
      if (at_end) end.store(true, std::memory_order_release);
    }
    busy.clear(std::memory_order_release);
  }
};

class RSSSourceRuntime final : public SourceElement {
 public:
  RSSSourceRuntime(const Node &n, RunContext &c) : SourceElement(n, c) {
    std::string err;
    if (!parse_device(arg("device").text, spec_, &err)) throw std::runtime_error("'" + name() + "': " + err);
    burst_ = unsigned(arg("burst").integer);
    queue_ = unsigned(c.graph().lanes[lane()].queue);
    lanes_ = unsigned(arg("queues").integer);
    // A kernel interface has an index of its own; other devices have the one the graph gives.
    if_index_ = uint32_t(arg("ifindex").integer);
    if (!has_arg("ifindex") && (spec_.kind == DeviceSpec::Kind::AfPacket || spec_.kind == DeviceSpec::Kind::AfXdp))
      if_index_ = if_nametoindex(spec_.name.c_str());
  }

  bool live() const override { return spec_.kind != DeviceSpec::Kind::Pcap; }
  LinkType link_type() const override { return reader_->dev->link_type(); }
  bool has_capture_time() const override { return !live() && reader_->dev->has_timestamps(); }
  bool has_hw_timestamps() const override { return live() && reader_->dev->has_timestamps(); }

  void start() override {
    if (spec_.kind == DeviceSpec::Kind::Pcap && lanes_ > 1) {  // each lane reads the file, keeps its share
      reader_ = open_reader(1);
      reader_->lane_share = true;
      reader_->dev->keep_lane_share(lane_index(), lanes_, *reader_->hash);
      return;
    }
    reader_ = ctx_.shared_source_state<DeviceReader>(node().element, [&] {
      std::shared_ptr<DeviceReader> r = open_reader(lanes_);
      r->software = r->dev->hw_queues() < lanes_;
      if (r->software)
        for (unsigned l = 0; l < lanes_; ++l) {
          static std::atomic<unsigned> next{0};  // names are process-wide in DPDK
          std::string rn = "rss" + std::to_string(next++);
          rte_ring *ring = rte_ring_create(rn.c_str(), 4096, SOCKET_ID_ANY, RING_F_SP_ENQ | RING_F_SC_DEQ);
          if (!ring)
            throw std::runtime_error("'" + ctx_.graph().graph->elements[node().element].name +
                                     "': cannot create the software RSS rings");
          r->lane_rings.push_back(ring);
          r->lane_full.push_back(std::make_unique<Counter>());
        }
      return r;
    });
  }

  // A trace's bytes walked by this lane's reader (each lane of a trace walks it whole).
  std::optional<std::pair<double, double>> input_progress() const override {
    if (!reader_ || live()) return std::nullopt;
    return reader_->dev->file_progress();
  }

  PollStatus poll(PacketBatch &batch) override {
    DeviceReader &r = *reader_;
    if (!r.software) {
      if (ctx_.stop_sources.load(std::memory_order_relaxed)) return PollStatus::End;
      bool end = false;
      EthDevice::RxInfo info[kMaxBurst];
      batch.count = r.dev->receive(queue_, batch.pkts, info, uint16_t(burst_), &end);
      if (batch.count == 0) return end ? PollStatus::End : PollStatus::Idle;
      for (int i = 0; i < batch.count; ++i) annotate(*r.dev, batch.pkts[i], info[i], nullptr, r.where);
    } else {
      rte_ring *mine = r.lane_rings[lane_index()];
      batch.count = uint16_t(rte_ring_sc_dequeue_burst(mine, reinterpret_cast<void **>(batch.pkts), burst_, nullptr));
      if (batch.count == 0) {
        if (r.end.load(std::memory_order_acquire))
          return ring_count(mine) == 0 ? PollStatus::End : PollStatus::Idle;
        r.read_and_deal(ctx_.stop_sources);
        return PollStatus::Idle;
      }
    }
    counters.in.add(batch.count);
    counters.in_bytes.add(batch.wire_bytes());
    return PollStatus::Packets;
  }

  void device_drops(std::vector<std::pair<std::string, uint64_t>> &out) const override {
    if (!reader_) return;
    if (reader_->software) out.emplace_back("lane queue full", reader_->lane_full[lane_index()]->get());
    if (lane_index() == 0)  // the device's own losses, once per device
      for (auto &l : reader_->dev->losses()) out.push_back(l);
  }

  // DPDK's port statistics, once per device.
  void report_metrics(ElementMetrics &out) const override {
    if (!reader_ || lane_index() != 0) return;
    for (const EthDevice::PortStats &p : reader_->dev->port_stats()) {
      ElementMetrics::Labels l = {{"port", std::to_string(p.port)}, {"device", spec_.text}};
      out.counter("port_received_packets_total", double(p.ipackets), l);
      out.counter("port_received_bytes_total", double(p.ibytes), l);
      out.counter("port_missed_packets_total", double(p.imissed), l);
      out.counter("port_rx_nombuf_total", double(p.rx_nombuf), l);
      out.counter("port_error_packets_total", double(p.ierrors), l);
    }
  }

  void report(std::vector<std::string> &lines) const override {
    if (!reader_) return;
    if (lane_index() != 0) return;
    const std::string symmetric = arg("symmetric").integer ? "symmetric " : "";
    if (reader_->lane_share)
      lines.push_back("device " + spec_.text + ": read by each of " + std::to_string(lanes_) +
                      " lanes, each keeping its share by " + symmetric + "software RSS");
    else
      lines.push_back("device " + spec_.text + ": " + std::to_string(reader_->dev->hw_queues()) + " receive queue(s), " +
                      (reader_->software ? symmetric + "software RSS over " + std::to_string(lanes_) + " lanes"
                                         : reader_->dev->hw_rss() ? "NIC RSS" : "one queue per lane"));
  }

 private:
  unsigned lane_index() const { return queue_; }

  // The device opened with `queues` receive queues, over the source's pool.
  std::shared_ptr<DeviceReader> open_reader(unsigned queues) {
    const Element &e = ctx_.graph().graph->elements[node().element];
    auto r = std::make_shared<DeviceReader>();
    // af_xdp lays its UMEM over the pool: DPDK's default pool order only
    // (from a last-freed-first pool it received nothing)
    // A trace walked in place: buffers without room of their own, and a
    // small pool for the records copied (run_context.hh).
    const bool in_place = walks_in_place(spec_);
    rte_mempool *pool = ctx_.pool_for_source(node().element, in_place ? 0 : RTE_MBUF_DEFAULT_DATAROOM, live(),
                                             /*lifo=*/spec_.kind != DeviceSpec::Kind::AfXdp);
    rte_mempool *copies = in_place ? ctx_.copy_pool_for_source(node().element, RTE_MBUF_DEFAULT_DATAROOM) : nullptr;
    r->dev = std::make_unique<EthDevice>(spec_, e.name, queues, unsigned(arg("rx_desc").integer),
                                         arg("symmetric").integer != 0, pool, copies);
    r->lanes = lanes_;
    r->burst = burst_;
    r->hash = &software_rss_key(arg("symmetric").integer != 0);
    r->where = {if_index_, uint8_t(arg("direction").text == "egress" ? 1 : 0)};
    return r;
  }

  DeviceSpec spec_;
  unsigned burst_ = 32, queue_ = 0, lanes_ = 1;
  uint32_t if_index_ = 0;
  std::shared_ptr<DeviceReader> reader_;
};

}  // namespace

SLUICE_ELEMENT(RSSSourceRuntime, rss_source_spec);

}  // namespace sluice::elements
