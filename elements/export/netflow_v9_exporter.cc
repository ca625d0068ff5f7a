#include "elements/export/netflow_v9_exporter.hh"

#include "elements/export/exporter_base.hh"
#include "engine/export/netflow_v9_encoder.hh"

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
          .handler("collector", "The collector: transport, address and port.")
          .handler("messages", "Messages sent.")
          .handler("sent_bytes", "Bytes of messages sent.")
          .handler("errors", "Send errors.")
          .handler("connections", "Connections made (TCP; 1 for UDP).")
          .input(PortSpec::flows("in").many().describe("Flow records to export; takes any number of connections."));
  return spec;
}

SLUICE_ELEMENT(netflow_v9_exporter_spec);

namespace {

// NetFlow v9 over UDP. A biflow becomes two v9 records; the counters count
// flow records as they came in, a lost packet's share of them estimated
// from the v9 records it carried (exact when there are no biflows).
class NetFlowV9ExporterRuntime final : public ExporterBase {
 public:
  NetFlowV9ExporterRuntime(const Node &n, RunContext &c) : ExporterBase(n, c, false) {}

 protected:
  void make_encoder(size_t max_message) override {
    netflow_v9::NetFlowV9EncoderConfig cfg;
    cfg.source_id = uint32_t(arg("source_id").integer);
    cfg.max_message = max_message;
    encoder_ = std::make_unique<netflow_v9::NetFlowV9Encoder>(cfg);
  }
  void encode(const FlowRecord *recs, size_t n, uint32_t now_s, std::vector<std::vector<uint8_t>> &out) override {
    size_t before = out.size();
    encoder_->encode(recs, n, now_s, false, out);
    uint64_t v9 = 0;
    for (size_t i = before; i < out.size(); ++i) v9 += data_records(out[i]);
    per_v9_ = v9 ? double(n) / double(v9) : 0;
    v9_records_ += v9;
  }
  void templates(uint32_t now_s, std::vector<std::vector<uint8_t>> &out) override { encoder_->templates(now_s, out); }
  void reset_templates() override { encoder_->reset_templates(); }
  uint64_t records_in(const std::vector<std::vector<uint8_t>> &msgs, size_t i) const override {
    // Rounded so that the shares of a batch's packets add up to the batch.
    double before = 0;
    for (size_t k = 0; k < i; ++k) before += double(data_records(msgs[k]));
    double upto = before + double(data_records(msgs[i]));
    return uint64_t(upto * per_v9_ + 0.5) - uint64_t(before * per_v9_ + 0.5);
  }
  std::string protocol_report() const override {
    return std::to_string(v9_records_) + " v9 records, sequence " + std::to_string(encoder_->sequence());
  }

 private:
  // Data records in an export packet: each data FlowSet (id >= 256) holds
  // whole records of its template's length, then padding.
  uint64_t data_records(const std::vector<uint8_t> &pkt) const {
    uint64_t n = 0;
    for (size_t off = netflow_v9::kHeaderLen; off + 4 <= pkt.size();) {
      uint16_t id = uint16_t(pkt[off] << 8 | pkt[off + 1]), len = uint16_t(pkt[off + 2] << 8 | pkt[off + 3]);
      if (len < 4) break;
      if (id >= 256) n += (len - 4) / encoder_->record_length(id);
      off += len;
    }
    return n;
  }

  std::unique_ptr<netflow_v9::NetFlowV9Encoder> encoder_;
  double per_v9_ = 0;
  uint64_t v9_records_ = 0;
};

}  // namespace

SLUICE_RUNTIME("NetFlowV9Exporter", NetFlowV9ExporterRuntime);

}  // namespace sluice::elements
