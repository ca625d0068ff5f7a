#include "elements/packet/tee.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &tee_spec() {
  static const ElementSpec spec =
      ElementSpec("Tee")
          .in_group("packet")
          .brief("Copy every packet to each connected output")
          .describe(
              "Sends every packet to each connected output: `t[0] -> a; t[1] -> b;` gives `a` and `b` all "
              "the packets. Outputs are numbered from 0, as many as are connected. The copies share the "
              "packet's buffer, so no packet data is copied.\n\n"
              "To send flow records to several places, no Tee is needed: a flows output may be connected "
              "to several elements (`-> exp, FlowLog`).")
          .input(PortSpec::packets("in").describe("Packets to copy."))
          .output(PortSpec::packets("out").repeated().describe("Output N: every packet. Connect outputs 0, 1, 2, ... "
                                                              "as needed."));
  return spec;
}

SLUICE_ELEMENT(tee_spec);

}  // namespace sluice::elements
