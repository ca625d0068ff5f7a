#include "elements/export/exporter_base.hh"

#include <time.h>

#include <stdexcept>

#include "elements/units.hh"
#include "engine/runtime/clock.hh"

namespace sluice::elements {

using namespace sluice::units;

ElementSpec exporter_spec(ElementSpec spec, std::string collector_doc, std::vector<ArgSpec> protocol_args) {
  spec.args.push_back(ArgSpec::host_port("collector").needed().pos().describe(std::move(collector_doc)));
  for (ArgSpec &a : protocol_args) spec.args.push_back(std::move(a));
  return std::move(spec)
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
}

namespace {
uint32_t export_time() { return uint32_t(time(nullptr)); }
}  // namespace

ExporterBase::ExporterBase(const Node &n, RunContext &c, bool tcp) : RuntimeElement(n, c), tcp_(tcp) {
  refresh_ns_ = uint64_t(arg("template_refresh").integer);
  unreachable_ = counters.reason("collector unreachable", true);
  lost_ = counters.reason("connection lost", true);
}

void ExporterBase::prepare() {
  const Value &c = arg("collector");
  try {
    link_ = std::make_unique<CollectorLink>(c.text, uint16_t(c.integer),
                                            tcp_ ? CollectorLink::Transport::Tcp : CollectorLink::Transport::Udp);
    bool v6 = c.text.find(':') != std::string::npos;
    encoder_ = make_encoder(size_t(arg("mtu").integer) - (v6 ? 40 : 20) - (tcp_ ? 32 : 8));
  } catch (const std::exception &e) {
    throw std::runtime_error("'" + name() + "': " + e.what());
  }
}

void ExporterBase::tick() {
  uint64_t now = mono_ns();
  link_->poll(now);
  if (link_->take_new_connection()) {
    encoder_->reset_templates();  // a new TCP connection (or the first UDP use) gets the templates first
    next_refresh_ = now + refresh_ns_;
  } else if (!tcp_ && now >= next_refresh_) {
    flow_export::Messages msgs;
    encoder_->templates(export_time(), msgs);
    send_all(msgs, std::vector<uint32_t>(msgs.size(), 0));
    next_refresh_ = now + refresh_ns_;
  }
  settle();
}

// Records the link wrote count as exported, those it lost as lost.
void ExporterBase::settle() {
  counters.records_absorbed.add(link_->take_sent_records());
  if (uint64_t l = link_->take_lost_records()) counters.drops[lost_].add(l);
}

void ExporterBase::send_all(flow_export::Messages &msgs, const std::vector<uint32_t> &records) {
  for (size_t i = 0; i < msgs.size(); ++i)
    if (!link_->send(std::move(msgs[i]), records[i])) counters.drops[unreachable_].add(records[i]);
}

void ExporterBase::push_flows(int, FlowBatch &batch) {
  tick();
  if (!link_->accepting()) {  // TCP collector away: the records are lost, counted, nothing waits
    counters.drops[unreachable_].add(batch.count);
    batch.count = 0;
    return;
  }
  flow_export::Messages msgs;
  std::vector<uint32_t> records;
  encoder_->encode(batch.recs, batch.count, export_time(), false, msgs, &records);
  send_all(msgs, records);
  settle();
  batch.count = 0;
}

void ExporterBase::flush() {
  link_->drain(2'000'000'000ull);
  settle();
}

std::optional<std::string> ExporterBase::read_handler(const std::string &name) const {
  if (name == "collector") return link_->describe();
  if (name == "messages") return std::to_string(link_->messages());
  if (name == "sent_bytes") return std::to_string(link_->bytes());
  if (name == "errors") return std::to_string(link_->errors());
  if (name == "connections") return std::to_string(link_->connects());
  return RuntimeElement::read_handler(name);
}

void ExporterBase::report_metrics(MetricSink &out) const {
  out.counter("exporter_records_total", "Flow records sent to the collector.", double(counters.records_absorbed.get()));
  out.counter("exporter_messages_total", "Messages sent to the collector.", double(link_->messages()));
  out.counter("exporter_bytes_total", "Bytes of messages sent to the collector.", double(link_->bytes()));
  out.counter("exporter_send_errors_total", "Messages the socket refused.", double(link_->errors()));
  out.counter("exporter_connections_total", "Connections to the collector (TCP; 1 for UDP).", double(link_->connects()));
}

void ExporterBase::report(std::vector<std::string> &lines) const {
  lines.push_back("collector " + link_->describe() + ": " + std::to_string(link_->messages()) + " messages, " +
                  std::to_string(link_->bytes()) + " bytes, " + std::to_string(link_->errors()) + " send errors, " +
                  std::to_string(link_->connects()) + " connection(s); " + encoder_->report());
}

}  // namespace sluice::elements
