#include "elements/source/rss_source.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &rss_source_spec() {
  static const ElementSpec spec =
      ElementSpec("RSSSource")
          .in_group("source")
          .with_flags(kSource)
          .brief("Receive packets from a NIC or a virtual device")
          .describe(
              "Reads packets from a DPDK device and starts one lane per receive queue. The device is a NIC "
              "given by its PCI address (`0000:3b:00.0`) or a virtual device: `pcap:FILE` replays a trace "
              "(several files, comma-separated, are read one after the other), `af_packet:IFACE` and "
              "`af_xdp:IFACE` capture from a kernel interface, and `null` receives nothing, for trying a "
              "graph out.\n\n"
              "With `queues N` the device gets N receive queues and everything downstream is replicated "
              "once per queue, with `$queue` bound to the queue number. The RSS hash is symmetric, so both "
              "directions of a connection land in the same lane and a bidirectional flow is metered in one "
              "place. Devices that have no RSS (pcap, af_packet, null) get the same symmetric Toeplitz hash "
              "computed in software.\n\n"
              "Headers are parsed once, here, into per-packet metadata that every later element reads: L2 "
              "with VLAN, QinQ and MPLS, IPv4 and IPv6 with extension headers, TCP, UDP, ICMP, fragments.")
          .arg(ArgSpec::string("device")
                   .needed()
                   .pos()
                   .describe("The device to read: a PCI address such as `0000:3b:00.0`, `pcap:FILE[,FILE...]`, "
                             "`af_packet:IFACE`, `af_xdp:IFACE` or `null`."))
          .arg(ArgSpec::count("queues")
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
          .output(PortSpec::packets("out").describe("Received packets, parsed, in batches of up to `burst`."));
  return spec;
}

SLUICE_ELEMENT(rss_source_spec);

}  // namespace sluice::elements
