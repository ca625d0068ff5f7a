#include "elements/export/netflow_v9_exporter.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &netflow_v9_exporter_spec() {
  static const ElementSpec spec =
      ElementSpec("NetFlowV9Exporter")
          .in_group("export")
          .brief("Export flows to a NetFlow v9 collector (RFC 3954)")
          .describe(
              "Sends flow records as NetFlow version 9 export packets (RFC 3954) over UDP, for collectors "
              "that do not take IPFIX. The records carry the same fields as IPFIXExporter's. NetFlow v9 has "
              "no biflows: a biflow is sent as two records, one per direction.\n\n"
              "Templates are sent before the data that uses them and again every `template_refresh`. No "
              "packet exceeds `mtu`. Declare it `shared` to have one exporter fed by all lanes.")
          .arg(ArgSpec::host_port("collector")
                   .needed()
                   .pos()
                   .describe("Where to send: `127.0.0.1:2055`, `[2001:db8::1]:2055` or "
                             "`collector.example.net:2055`."))
          .arg(ArgSpec::count("source_id")
                   .def("1")
                   .range(0, 4294967295.0)
                   .describe("Source ID, in every packet header: NetFlow v9's observation domain. Collectors "
                             "keep sequence numbers and templates per source ID."))
          .arg(ArgSpec::duration("template_refresh")
                   .def("10min")
                   .range(1 * kS, 1 * kDay)
                   .describe("How often templates are resent."))
          .arg(ArgSpec::bytes("mtu")
                   .def("1500")
                   .range(576, 9000)
                   .describe("Largest packet an export packet may fill, IP and UDP headers included."))
          .input(PortSpec::flows("in").many().describe("Flow records to export; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(netflow_v9_exporter_spec);

}  // namespace sluice::elements
