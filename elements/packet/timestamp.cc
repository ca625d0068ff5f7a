#include "elements/packet/timestamp.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &timestamp_spec() {
  static const ElementSpec spec =
      ElementSpec("Timestamp")
          .in_group("packet")
          .brief("Stamp packets with their arrival time")
          .describe(
              "Sets each packet's timestamp, in nanoseconds, from the chosen clock. All flow logic "
              "(FlowTable, GCSlicer, the exporters' start and end times) runs on these timestamps, not on "
              "the wall clock, so replaying a trace with `clock pcap` gives the same flows every time.\n\n"
              "Put it right after the source, before any Ring, so that the time is taken as close to "
              "reception as possible.")
          .arg(ArgSpec::symbol("clock", {"pcap", "tsc", "hw"})
                   .def("tsc")
                   .pos()
                   .describe("Where the time comes from: `pcap`, the capture times recorded in a trace (for "
                             "`pcap:` devices and TrafficGen); `tsc`, the CPU's time-stamp counter, read once "
                             "per batch and interpolated over the batch's packets; `hw`, the NIC's receive "
                             "timestamps, where the device provides them."))
          .input(PortSpec::packets("in").describe("Packets to stamp."))
          .output(PortSpec::packets("out").describe("The same packets, stamped."));
  return spec;
}

SLUICE_ELEMENT(timestamp_spec);

}  // namespace sluice::elements
