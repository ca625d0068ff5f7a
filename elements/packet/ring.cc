#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/channel.hh"
#include "engine/runtime/run_context.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

// The ring itself is the channel the runtime puts on this element's output
// (a thread boundary); the element hands batches to it and reports on it.
class RingRuntime final : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;

 public:
  void push(int, PacketBatch &batch) override { emit(0, batch); }
  void report(std::vector<std::string> &lines) const override {
    if (const Channel *ch = channel())
      lines.push_back("ring: capacity " + std::to_string(ch->capacity()) + ", highest occupancy " +
                      std::to_string(ch->max_occupancy()) + ", waits for room " + std::to_string(ch->waits()));
    else if (lane() >= 0 && ctx_.graph().lanes[size_t(lane())].rings_folded)
      lines.push_back("ring: none, batches passed on in the lane's thread (its input is offline and its "
                      "segments had one cpu)");
  }

  // Handlers (ring_spec): the channel's numbers, none before it is there.
  std::optional<std::string> capacity() const { return of_channel(&Channel::capacity); }
  std::optional<std::string> occupancy() const { return of_channel(&Channel::occupancy); }
  std::optional<std::string> peak() const { return of_channel(&Channel::max_occupancy); }
  std::optional<std::string> waits() const { return of_channel(&Channel::waits); }

  void report_metrics(ElementMetrics &out) const override {
    const Channel *ch = channel();
    if (!ch) return;
    out.gauge("ring_occupancy_packets", double(ch->occupancy()));
    out.gauge("ring_capacity_packets", double(ch->capacity()));
    out.gauge("ring_peak_occupancy_packets", double(ch->max_occupancy()));
    out.counter("ring_producer_waits_total", double(ch->waits()));
  }

 private:
  // The runtime puts a channel on the output of a thread boundary.
  const Channel *channel() const {
    for (const OutputTarget &t : targets(0))
      if (t.channel) return t.channel;
    return nullptr;
  }
  template <class N>
  std::optional<std::string> of_channel(N (Channel::*number)() const) const {
    const Channel *ch = channel();
    if (!ch) return std::nullopt;
    return std::to_string((ch->*number)());
  }
};

const ElementSpec &ring_spec() {
  static const ElementSpec spec =
      ElementSpec("Ring")
          .in_group("packet")
          .with_flags(kThreadBoundary)
          .brief("Lock-free queue between two threads of a lane")
          .describe(
              "Ends one segment of a lane and starts the next: what comes before the Ring runs on one core, "
              "what comes after it on another. It is a lock-free single-producer, single-consumer ring on "
              "the lane's NUMA node, and the large buffer that absorbs processing jitter (a burst of new "
              "flows, a slow export) so that the NIC's receive queue does not overflow.\n\n"
              "When the ring is full on a live lane (a NIC, an interface, a paced TrafficGen), arriving "
              "packets are dropped and counted as \"ring full\". On an offline lane (a trace file, an unpaced "
              "TrafficGen) the producer waits for room instead, so that replaying a trace gives the same "
              "result every time; it also keeps no more than 2048 packets in the ring (whatever its "
              "capacity), so that packets are processed while their buffers are still in the caches. At "
              "the end of input the ring is drained before the next segment stops, so "
              "no packet is left in it. The run summary shows its highest occupancy.\n\n"
              "An offline lane whose segments the plan would put on one cpu has no use for the ring (nothing "
              "to absorb, two threads taking turns): the Ring then passes its batches on in the lane's thread, "
              "and `sluice plan` and the run summary say so.")
          .arg(ArgSpec::count("capacity")
                   .def("64K")
                   .range(64, 16 * kM)
                   .pos()
                   .describe("Packets the ring holds. 64K packets absorb "
                             "about 4.4ms of traffic at 14.88Mpps (10Gbps of minimum-size frames)."))
          .handler("capacity", "Packets the ring holds.", &RingRuntime::capacity)
          .handler("occupancy", "Packets in the ring now.", &RingRuntime::occupancy)
          .handler("peak", "Highest occupancy so far.", &RingRuntime::peak)
          .handler("waits", "Times an offline producer waited for room.", &RingRuntime::waits)
          .metric(MetricSpec::gauge("ring_occupancy_packets", "Packets in the ring."))
          .metric(MetricSpec::gauge("ring_capacity_packets", "Packets the ring holds."))
          .metric(MetricSpec::gauge("ring_peak_occupancy_packets", "Highest occupancy of the ring so far."))
          .metric(MetricSpec::counter("ring_producer_waits_total",
                                      "Times an offline producer waited for room in the ring."))
          .input(PortSpec::packets("in").describe("Packets from the segment before the ring."))
          .output(PortSpec::packets("out").describe("The same packets, in order, on the segment after the ring."))
          .needs_channel_capacity([](const Node &n) { return unsigned(n.arg("capacity")->value.integer); });
  return spec;
}

SLUICE_ELEMENT(RingRuntime, ring_spec);

}  // namespace sluice::elements
