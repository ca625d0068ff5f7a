#include <memory>

#include "elements/export/exporter_base.hh"
#include "engine/export/ipfix_encoder.hh"
#include "engine/runtime/run_context.hh"

namespace sluice::elements {

const ElementSpec &ipfix_exporter_spec() {
  static const ElementSpec spec = exporter_spec(
      ElementSpec("IPFIXExporter")
          .in_group("export")
          .brief("Export flows to an IPFIX collector (RFC 7011)")
          .describe(
              "Sends flow records as IPFIX messages (RFC 7011) to a collector over UDP or TCP. Each record "
              "has the flow key, start and end times in milliseconds, packet and octet counts (octets at IP "
              "level), the TCP flags, the smallest and largest IP length and flowEndReason: 1 idle timeout, 2 "
              "active timeout, 3 end of flow, 4 forced end, 5 lack of resources; then the optional fields the "
              "graph's FlowTables keep (`fields`: interfaces, flowDirection, MAC addresses, ToS, TTLs, inner "
              "VLAN, ICMP type and code, top MPLS label), all IANA elements (docs/flow-records.md lists them). Biflows from `FlowTable(direction bi)` are sent as RFC 5103 "
              "biflows, their reverse fields under private enterprise number 29305, or as two uniflows "
              "(`biflow uniflows`).\n\n"
              "Templates are sent before the data that uses them and, over UDP, again every "
              "`template_refresh`, so that a collector started later can decode. No message exceeds `mtu`. "
              "Over UDP messages leave at the pace `rate` (see below). Sequence numbers count the data "
              "records sent per observation domain.\n\n"
              "Declare it `shared` (`exp :: shared IPFIXExporter(...)`) to have one exporter and one socket "
              "fed by all lanes, with one observation domain (`domain`) unless `domain_per lane`; otherwise "
              "each lane exports on its own, in observation domain `domain` + lane, so that the collector "
              "keeps each lane's sequence numbers apart. The output decodes in tshark, nfdump (nfcapd) and "
              "pmacct (nfacctd).\n\n"
              "Templates 256 to 259 (IPv4, IPv6, IPv4 biflow, IPv6 biflow) carry every optional field; a "
              "table that keeps fewer gets other ids, one set per layout. When elements add fields to the flow "
              "records (`sluice elements` says which: ServerNames, TunnelDecap), the ids are 4 more and the "
              "templates carry those fields after the others, under the enterprise number each field names (texts as variable-length strings, "
              "empty where a flow got no value). The fields are those of the graph the exporter started "
              "with.\n\n"
              "Options templates (set id 3, one scope field) and their records go at the start (UDP: before the "
              "first data; TCP: on each connection), with every template refresh over UDP, every "
              "`template_refresh` over TCP, and after the last records at the end of input or removal. 65280, "
              "exporter statistics (RFC 7011 §4.1, §4.3): scope exportingProcessId (the instance's first "
              "domain), exportedMessageTotalCount, exportedOctetTotalCount and exportedFlowRecordTotalCount "
              "(messages handed to the transport before this one, their octets and flow records) and "
              "notSentFlowTotalCount (flow records lost, every reason). 65281, sampling, when a `Sample` is "
              "upstream of the FlowTables whose records reach the exporter: scope observationDomainId, "
              "samplingInterval (1/rate rounded), selectorAlgorithm 4 (uniform probabilistic: Sample picks "
              "each packet independently) and samplingProbability (the rate); nfdump's nfcapd and pmacct's "
              "nfacctd (`nfacctd_renormalize: true`) multiply packets and octets by the interval. Samples in "
              "series multiply; flows sampled at different rates cannot share an exporter (`sluice check` "
              "says where)."),
      "Where to send: `127.0.0.1:4739`, `[2001:db8::1]:4739` or `collector.example.net:4739`. 4739 is the "
      "IANA port for IPFIX.",
      {ArgSpec::symbol("transport", {"udp", "tcp"})
           .def("udp")
           .describe("`udp`, with templates resent every `template_refresh` and messages paced at `rate`, or "
                     "`tcp`, with templates sent once per connection."),
       ArgSpec::symbol("biflow", {"rfc5103", "uniflows"})
           .def("rfc5103")
           .describe("How a biflow record of `FlowTable(direction bi)` is sent. `rfc5103`: one record, the "
                     "reverse direction's counters in RFC 5103 reverse elements (nfdump, pmacct, tshark read "
                     "them). `uniflows`: two records of the uniflow templates, as NetFlow v9 sends them: the "
                     "forward one as the key says, the reverse one with its endpoints swapped, each with its "
                     "own counters and times (a direction that saw no packet sends none). For collectors "
                     "that drop reverse elements unless configured for them (goflow2, akvorado). Records "
                     "of `direction uni` tables go the same way in both.")},
      "domain", "observation domain");
  return spec;
}

namespace {

class IPFIXExporterRuntime final : public ExporterBase {
 public:
  IPFIXExporterRuntime(const Node &n, RunContext &c)
      : ExporterBase(n, c, n.arg("transport")->value.text == "tcp", "domain"),
        uniflows_(n.arg("biflow")->value.text == "uniflows") {}

 protected:
  flow_export::Protocol options_protocol() const override { return flow_export::Protocol::Ipfix; }
  std::unique_ptr<FlowEncoder> make_encoder(uint32_t domain, size_t max_message) override {
    ipfix::IpfixEncoderConfig cfg{domain, max_message, {}, uniflows_, ctx_.record_fields()};
    for (const FlowExtField *f : ctx_.flow_fields()) cfg.ext.push_back({f->slot, f->def.element_id, f->def.enterprise});
    return std::make_unique<ipfix::IpfixEncoder>(cfg);
  }

 private:
  bool uniflows_;
};

}  // namespace

SLUICE_ELEMENT(IPFIXExporterRuntime, ipfix_exporter_spec);

}  // namespace sluice::elements
