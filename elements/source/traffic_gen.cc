#include "elements/source/traffic_gen.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &traffic_gen_spec() {
  static const ElementSpec spec =
      ElementSpec("TrafficGen")
          .in_group("source")
          .with_flags(kSource)
          .brief("Deterministic synthetic traffic for tests and demos")
          .describe(
              "Generates a synthetic trace into memory before the run starts, then replays it. The same "
              "arguments and `seed` always give the same packets, byte for byte, so runs can be repeated "
              "and compared, and no NIC is needed.\n\n"
              "New flows start at `new_flows_per_s`, with at most `flows` active at once. Flow sizes are "
              "heavy-tailed: many short flows and a few long, large ones. Each flow is a TCP or UDP "
              "conversation in both directions over IPv4 or IPv6; TCP flows open with a handshake and close "
              "with FIN. Timestamps cover `duration` of trace time.\n\n"
              "With `queues N` the flows are split over N lanes by the same symmetric hash RSSSource uses. "
              "With `rate` the replay is paced in wall-clock time; without it packets come as fast as the "
              "lane takes them. `TrafficGen -> PcapSink` writes the generated traffic to a trace file.")
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
          .arg(ArgSpec::count("seed")
                   .def("1")
                   .range(0, 4294967295.0)
                   .describe("Seed of the pseudo-random generator: the same seed gives the same trace."))
          .arg(ArgSpec::any_rate("rate")
                   .describe("Replay pace in bits or packets per second, e.g. `10Gbps` or `14.88Mpps`. When "
                             "absent the replay is unpaced: as fast as the pipeline takes packets."))
          .arg(ArgSpec::count("queues")
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
          .arg(ArgSpec::count("vlan")
                   .range(1, 4094)
                   .describe("Tag every packet with this 802.1Q VLAN id. When absent, packets are untagged."))
          .output(PortSpec::packets("out").describe("The generated packets, in trace-time order within each lane."));
  return spec;
}

SLUICE_ELEMENT(traffic_gen_spec);

}  // namespace sluice::elements
