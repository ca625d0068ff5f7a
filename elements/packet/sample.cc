#include "elements/packet/sample.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &sample_spec() {
  static const ElementSpec spec =
      ElementSpec("Sample")
          .in_group("packet")
          .brief("Keep a pseudo-random fraction of the packets")
          .describe(
              "Sends the share `rate` of the packets to `sampled` and the others to `rest`. Each packet is "
              "picked independently by a pseudo-random generator seeded per lane, so replaying a trace "
              "picks the same packets.\n\n"
              "`Sample(1/100)` keeps one packet in a hundred on average. When `rest` is unconnected, the "
              "packets not picked are dropped and counted as \"not sampled\".")
          .arg(ArgSpec::fraction("rate")
                   .needed()
                   .pos()
                   .describe("Share of the packets to keep: `1/100`, or the same as a decimal, `0.01`."))
          .input(PortSpec::packets("in").describe("Packets to sample."))
          .output(PortSpec::packets("sampled").describe("The packets picked."))
          .output(PortSpec::packets("rest").optional().describe("The packets not picked."));
  return spec;
}

SLUICE_ELEMENT(sample_spec);

}  // namespace sluice::elements
