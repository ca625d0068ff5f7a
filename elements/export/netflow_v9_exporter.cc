#include <memory>

#include "elements/export/exporter_base.hh"
#include "engine/export/netflow_v9_encoder.hh"
#include "engine/runtime/run_context.hh"

namespace sluice::elements {

const ElementSpec &netflow_v9_exporter_spec() {
  static const ElementSpec spec = exporter_spec(
      ElementSpec("NetFlowV9Exporter")
          .in_group("export")
          .brief("Export flows to a NetFlow v9 collector (RFC 3954)")
          .describe(
              "Sends flow records as NetFlow version 9 export packets (RFC 3954) over UDP, for collectors "
              "that do not take IPFIX. The records carry the same fields as IPFIXExporter's. NetFlow v9 has "
              "no biflows: a biflow is sent as two records, one per direction.\n\n"
              "Templates are sent before the data that uses them and again every `template_refresh`. No "
              "packet exceeds `mtu`; packets leave at the pace `rate`. The source id is NetFlow v9's "
              "observation domain: declare it `shared` to have one exporter fed by all lanes, with one "
              "source id (`source_id`) unless `source_id_per lane`; otherwise each lane exports on its own, "
              "with source id `source_id` + lane.\n\n"
              "Options templates (FlowSet id 1, scope System = the source id) and their records go before the "
              "first data, with every template refresh and after the last records at the end of input or "
              "removal. 65280, exporter statistics: TOTAL_BYTES_EXP, TOTAL_PKTS_EXP (export packets) and "
              "TOTAL_FLOWS_EXP, counting what was handed to the transport before this packet, and "
              "notSentFlowTotalCount 166 (flow records lost). 65281, sampling, when a `Sample` is upstream of "
              "the FlowTables: SAMPLING_INTERVAL (1/rate rounded), selectorAlgorithm 304 = 4 (uniform "
              "probabilistic) and samplingProbability 311 (the rate), IANA ids as flowEndReason; nfcapd "
              "multiplies packets and octets by the interval. SAMPLING_ALGORITHM 35 is not sent: nfcapd 1.7.1 "
              "ignores a sampling record that has it."),
      "Where to send: `127.0.0.1:2055`, `[2001:db8::1]:2055` or `collector.example.net:2055`.",
      {}, "source_id", "source id");
  return spec;
}

namespace {

// NetFlow v9 over UDP. A biflow becomes two v9 records; the counters count
// flow records as they came in, a record counted in the packet that carries
// its last v9 record.
class NetFlowV9ExporterRuntime final : public ExporterBase {
 public:
  NetFlowV9ExporterRuntime(const Node &n, RunContext &c) : ExporterBase(n, c, false, "source_id") {}

 protected:
  flow_export::Protocol options_protocol() const override { return flow_export::Protocol::NetFlowV9; }
  std::unique_ptr<FlowEncoder> make_encoder(uint32_t source_id, size_t max_message) override {
    netflow_v9::NetFlowV9EncoderConfig cfg;
    cfg.source_id = source_id;
    cfg.max_message = max_message;
    cfg.fields = ctx_.record_fields();
    return std::make_unique<netflow_v9::NetFlowV9Encoder>(cfg);
  }
};

}  // namespace

SLUICE_ELEMENT(NetFlowV9ExporterRuntime, netflow_v9_exporter_spec);

}  // namespace sluice::elements
