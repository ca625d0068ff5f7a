#include "elements/packet/pcap_sink.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &pcap_sink_spec() {
  static const ElementSpec spec =
      ElementSpec("PcapSink")
          .in_group("packet")
          .brief("Write packets to a pcap file")
          .describe(
              "Writes every packet it receives, with its timestamp, to a pcap file that tcpdump, tshark and "
              "`RSSSource(device \"pcap:FILE\")` read. `TrafficGen -> PcapSink` turns generated traffic into "
              "a trace.\n\n"
              "With several lanes, give each its own file with `$queue` (`PcapSink(\"out-$queue.pcap\")`), "
              "or declare the sink `shared` to write the packets of all lanes into one file.")
          .arg(ArgSpec::string("file")
                   .needed()
                   .pos()
                   .describe("Path of the pcap file; an existing file is replaced."))
          .arg(ArgSpec::bytes("snaplen")
                   .def("65535")
                   .range(64, 256 * kKB)
                   .describe("Bytes kept of each packet. Longer packets are truncated in the file; their "
                             "original length is recorded."))
          .input(PortSpec::packets("in").many().describe("Packets to write; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(pcap_sink_spec);

}  // namespace sluice::elements
