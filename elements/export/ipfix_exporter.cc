#include "elements/export/ipfix_exporter.hh"

#include <memory>

#include "elements/export/exporter_base.hh"
#include "engine/export/ipfix_encoder.hh"

namespace sluice::elements {

const ElementSpec &ipfix_exporter_spec() {
  static const ElementSpec spec = exporter_spec(
      ElementSpec("IPFIXExporter")
          .in_group("export")
          .brief("Export flows to an IPFIX collector (RFC 7011)")
          .describe(
              "Sends flow records as IPFIX messages (RFC 7011) to a collector over UDP or TCP. Each record "
              "has the flow key, start and end times in milliseconds, packet and octet counts (octets at IP "
              "level), the TCP flags and flowEndReason: 1 idle timeout, 2 active timeout, 3 end of flow, 4 "
              "forced end, 5 lack of resources. Biflows from `FlowTable(direction bi)` are sent as RFC 5103 "
              "biflows, their reverse fields under private enterprise number 29305.\n\n"
              "Templates are sent before the data that uses them and, over UDP, again every "
              "`template_refresh`, so that a collector started later can decode. No message exceeds `mtu`. "
              "Sequence numbers count the data records sent per observation domain.\n\n"
              "Declare it `shared` (`exp :: shared IPFIXExporter(...)`) to have one exporter, one sequence "
              "and one socket fed by all lanes; otherwise each lane exports on its own. The output decodes "
              "in tshark, nfdump (nfcapd) and pmacct (nfacctd)."),
      "Where to send: `127.0.0.1:4739`, `[2001:db8::1]:4739` or `collector.example.net:4739`. 4739 is the "
      "IANA port for IPFIX.",
      {ArgSpec::symbol("transport", {"udp", "tcp"})
           .def("udp")
           .describe("`udp`, with templates resent every `template_refresh`, or `tcp`, with templates sent once "
                     "per connection."),
       ArgSpec::count("domain")
           .def("1")
           .range(0, 4294967295.0)
           .describe("Observation domain id, in every message header; collectors keep sequence numbers and "
                     "templates per domain.")});
  return spec;
}

SLUICE_ELEMENT(ipfix_exporter_spec);

namespace {

class IPFIXExporterRuntime final : public ExporterBase {
 public:
  IPFIXExporterRuntime(const Node &n, RunContext &c) : ExporterBase(n, c, n.arg("transport")->value.text == "tcp") {}

 protected:
  std::unique_ptr<FlowEncoder> make_encoder(size_t max_message) override {
    return std::make_unique<ipfix::IpfixEncoder>(
        ipfix::IpfixEncoderConfig{uint32_t(arg("domain").integer), max_message});
  }
};

}  // namespace

SLUICE_RUNTIME("IPFIXExporter", IPFIXExporterRuntime);

}  // namespace sluice::elements
