#include "elements/export/ipfix_exporter.hh"

#include <memory>
#include <stdexcept>

#include "elements/export/exporter_base.hh"
#include "engine/export/ipfix_encoder.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &ipfix_exporter_spec() {
  static const ElementSpec spec =
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
              "in tshark, nfdump (nfcapd) and pmacct (nfacctd).")
          .arg(ArgSpec::host_port("collector")
                   .needed()
                   .pos()
                   .describe("Where to send: `127.0.0.1:4739`, `[2001:db8::1]:4739` or "
                             "`collector.example.net:4739`. 4739 is the IANA port for IPFIX."))
          .arg(ArgSpec::symbol("transport", {"udp", "tcp"})
                   .def("udp")
                   .describe("`udp`, with templates resent every `template_refresh`, or `tcp`, with templates "
                             "sent once per connection."))
          .arg(ArgSpec::count("domain")
                   .def("1")
                   .range(0, 4294967295.0)
                   .describe("Observation domain id, in every message header; collectors keep sequence "
                             "numbers and templates per domain."))
          .arg(ArgSpec::duration("template_refresh")
                   .def("10min")
                   .range(1 * kS, 1 * kDay)
                   .describe("How often templates are resent over UDP. Not used over TCP."))
          .arg(ArgSpec::bytes("mtu")
                   .def("1500")
                   .range(576, 9000)
                   .describe("Largest packet an export message may fill, IP and transport headers included; "
                             "records are packed into messages up to this size."))
          .handler("collector", "The collector: transport, address and port.")
          .handler("messages", "Messages sent.")
          .handler("sent_bytes", "Bytes of messages sent.")
          .handler("errors", "Send errors.")
          .handler("connections", "Connections made (TCP; 1 for UDP).")
          .input(PortSpec::flows("in").many().describe("Flow records to export; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(ipfix_exporter_spec);

namespace {

class IPFIXExporterRuntime final : public ExporterBase {
 public:
  IPFIXExporterRuntime(const Node &n, RunContext &c) : ExporterBase(n, c, n.arg("transport")->value.text == "tcp") {}

 protected:
  void make_encoder(size_t max_message) override {
    ipfix::IpfixEncoderConfig cfg;
    cfg.domain = uint32_t(arg("domain").integer);
    cfg.max_message = max_message;
    encoder_ = std::make_unique<ipfix::IpfixEncoder>(cfg);
  }
  void encode(const FlowRecord *recs, size_t n, uint32_t now_s, std::vector<std::vector<uint8_t>> &out) override {
    encoder_->encode(recs, n, now_s, false, out);
  }
  void templates(uint32_t now_s, std::vector<std::vector<uint8_t>> &out) override { encoder_->templates(now_s, out); }
  void reset_templates() override { encoder_->reset_templates(); }
  // RFC 7011: a message's sequence number counts the data records sent
  // before it, so the next message's (or the encoder's) tells this one's.
  uint64_t records_in(const std::vector<std::vector<uint8_t>> &msgs, size_t i) const override {
    uint32_t next = i + 1 < msgs.size() ? sequence_of(msgs[i + 1]) : encoder_->sequence();
    return uint32_t(next - sequence_of(msgs[i]));
  }
  std::string protocol_report() const override { return "sequence " + std::to_string(encoder_->sequence()); }

 private:
  static uint32_t sequence_of(const std::vector<uint8_t> &m) {
    return uint32_t(m[8]) << 24 | uint32_t(m[9]) << 16 | uint32_t(m[10]) << 8 | m[11];
  }
  std::unique_ptr<ipfix::IpfixEncoder> encoder_;
};

}  // namespace

SLUICE_RUNTIME("IPFIXExporter", IPFIXExporterRuntime);

}  // namespace sluice::elements
