#include "engine/export/netflow_v9_encoder.hh"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace sluice::netflow_v9 {

namespace {

using flow_export::Protocol;
using flow_export::TemplateField;
using flow_export::View;

inline size_t pad4(size_t n) { return (4 - n % 4) % 4; }

// The v9 records of a flow record: its forward direction and, for a biflow
// whose reverse direction saw packets, the reverse one.
int directions(const FlowRecord &r) { return r.biflow && r.rev.packets ? 2 : 1; }

}  // namespace

NetFlowV9Encoder::NetFlowV9Encoder(const NetFlowV9EncoderConfig &cfg) : cfg_(cfg) {
  for (int t = 0; t < 2; ++t) {
    auto fields = flow_export::record_fields(t == 1, false, cfg.fields);
    if (!cfg.end_reason)
      std::erase_if(fields, [](const TemplateField &f) { return f.field->ipfix_id == flow_export::kFlowEndReasonId; });
    specs_[t] = flow_export::field_specs(fields, Protocol::NetFlowV9);
    ops_[t] = flow_export::record_ops(fields);
    ids_[t] = uint16_t(kTemplateIds[t] + 8 * (kAllFlowFields & ~cfg.fields));
  }
  if (cfg.max_message < min_message_size() || cfg.max_message > 65535)
    throw std::invalid_argument("NetFlow v9 max_message must be within " + std::to_string(min_message_size()) +
                                "..65535 octets, not " + std::to_string(cfg.max_message));
}

std::span<const FieldSpec> NetFlowV9Encoder::template_fields(uint16_t template_id) const {
  if (template_id != ids_[0] && template_id != ids_[1])
    throw std::invalid_argument("no such NetFlow v9 template: " + std::to_string(template_id));
  return specs_[template_id == ids_[1] ? 1 : 0];
}

size_t NetFlowV9Encoder::record_length(uint16_t template_id) const {
  return flow_export::data_record_length(template_fields(template_id));
}

size_t NetFlowV9Encoder::min_message_size() const {
  size_t m = 0;
  for (int t = 0; t < 2; ++t) {
    size_t rec = flow_export::data_record_length(specs_[t]);
    m = std::max({m, flow_export::template_record_length(specs_[t]), rec + pad4(kFlowSetHeaderLen + rec)});
  }
  return kHeaderLen + kFlowSetHeaderLen + m;
}

void NetFlowV9Encoder::set_boot(uint64_t oldest_ms, uint64_t newest_ms) {
  if (booted_ && oldest_ms >= boot_ms_ && newest_ms - boot_ms_ <= kMaxUptimeMs) return;
  uint64_t b = oldest_ms > kBootLeadMs ? oldest_ms - kBootLeadMs : 0;
  if (newest_ms - b > kMaxUptimeMs) b = newest_ms - kMaxUptimeMs;  // the oldest times will be clamped
  if (booted_ && b != boot_ms_) reset_templates();  // a new boot to the collector: templates again
  boot_ms_ = b;
  booted_ = true;
}

uint32_t NetFlowV9Encoder::uptime(uint64_t t_ms) {
  if (t_ms < boot_ms_) {
    ++clamped_;
    return 0;
  }
  if (t_ms - boot_ms_ > kMaxUptimeMs) {
    ++clamped_;
    return uint32_t(kMaxUptimeMs);
  }
  return uint32_t(t_ms - boot_ms_);
}

void NetFlowV9Encoder::begin(uint8_t *h) {
  flow_export::put_be(h, kVersion, 2);
  flow_export::put_be(h + 4, sys_uptime_, 4);
  flow_export::put_be(h + 8, export_time_s_, 4);
  flow_export::put_be(h + 12, sequence_++, 4);  // packets sent before this one
  flow_export::put_be(h + 16, cfg_.source_id, 4);
}

void NetFlowV9Encoder::end(uint8_t *h, size_t, uint32_t data_records, uint32_t records) {
  flow_export::put_be(h + 2, records, 2);  // template and data records
  data_records_ += data_records;
}

flow_export::MessageBuilder NetFlowV9Encoder::builder(uint32_t export_time_s, flow_export::Messages &out,
                                                      std::vector<uint32_t> *flow_records) {
  export_time_s_ = export_time_s;
  sys_uptime_ = uptime(uint64_t(export_time_s) * 1000);
  return flow_export::MessageBuilder({kHeaderLen, cfg_.max_message, true}, *this, out, flow_records);
}

void NetFlowV9Encoder::add_templates(flow_export::MessageBuilder &b) {
  for (int i = 0; i < 2; ++i)
    flow_export::write_template_record(b.add(kTemplateFlowSetId, flow_export::template_record_length(specs_[i]), false),
                                       ids_[i], specs_[i]);
  announced_ = 3;
}

void NetFlowV9Encoder::templates(uint32_t export_time_s, flow_export::Messages &out) {
  uint64_t now = uint64_t(export_time_s) * 1000;
  set_boot(now, now);
  flow_export::MessageBuilder b = builder(export_time_s, out, nullptr);
  add_templates(b);
}

void NetFlowV9Encoder::encode_options(std::span<const flow_export::OptionsRecord> recs, uint32_t export_time_s,
                                      flow_export::Messages &out) {
  uint64_t now = uint64_t(export_time_s) * 1000;
  set_boot(now, now);
  flow_export::MessageBuilder b = builder(export_time_s, out, nullptr);
  flow_export::add_options(b, recs);
}

void NetFlowV9Encoder::encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
                              flow_export::Messages &out, std::vector<uint32_t> *flow_records) {
  // The boot time first: it can ask for the templates again.
  uint64_t now = uint64_t(export_time_s) * 1000, oldest = now, newest = now;
  for (size_t i = 0; i < n; ++i)
    for (int dir = 0; dir < directions(recs[i]); ++dir) {
      View v = View::direction(recs[i], dir == 1);
      oldest = std::min(oldest, v.start_ms);
      newest = std::max(newest, v.end_ms);
    }
  set_boot(oldest, newest);

  flow_export::MessageBuilder b = builder(export_time_s, out, flow_records);
  if (send_templates) add_templates(b);
  // Group by template (IPv4, IPv6), keeping the input order within one.
  size_t n4 = 0;
  for (size_t i = 0; i < n; ++i) n4 += !recs[i].key.is_ipv6;
  order_.resize(n);
  size_t pos[2] = {0, n4};
  for (size_t i = 0; i < n; ++i) order_[pos[recs[i].key.is_ipv6 ? 1 : 0]++] = uint32_t(i);

  for (size_t k = 0; k < n; ++k) {
    const FlowRecord &r = recs[order_[k]];
    int t = r.key.is_ipv6 ? 1 : 0;
    // A template not sent yet: both go (they are small, and a refresh keeps them together).
    if (!(announced_ & (1u << t))) add_templates(b);
    size_t len = flow_export::data_record_length(specs_[t]);
    for (int dir = 0; dir < directions(r); ++dir)
      flow_export::write_data_record<Protocol::NetFlowV9>(b.add(ids_[t], len, true), View::direction(r, dir == 1),
                                                          ops_[t], [this](uint64_t ms) { return uptime(ms); });
    b.flow_record_done();
  }
}

std::string NetFlowV9Encoder::report() const {
  return std::to_string(data_records_) + " v9 records, sequence " + std::to_string(sequence_);
}

}  // namespace sluice::netflow_v9
