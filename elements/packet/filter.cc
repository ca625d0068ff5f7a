#include "elements/packet/filter.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &filter_spec() {
  static const ElementSpec spec =
      ElementSpec("Filter")
          .in_group("packet")
          .brief("Split packets by a pcap-filter expression")
          .describe(
              "Matches each packet against an expression in pcap-filter syntax, as tcpdump takes it: "
              "`tcp and port 443`, `net 10.0.0.0/8`, `vlan 100`, `ip6`, `not udp`. Matching packets leave on "
              "`match`, the others on `reject`.\n\n"
              "The expression is compiled, not interpreted: in JIT mode it becomes part of the fused loop "
              "of its segment, and it reads the headers the source already parsed.")
          .arg(ArgSpec::string("expr")
                   .needed()
                   .pos()
                   .describe("The filter expression, in pcap-filter syntax (see pcap-filter(7)), e.g. "
                             "`\"tcp and port 443\"`."))
          .input(PortSpec::packets("in").describe("Packets to test."))
          .output(PortSpec::packets("match").describe("Packets that match the expression."))
          .output(PortSpec::packets("reject").optional().describe(
              "Packets that do not match. When unconnected they are dropped and counted as \"filtered\"."));
  return spec;
}

SLUICE_ELEMENT(filter_spec);

}  // namespace sluice::elements
