#include "engine/export/ipfix_encoder.hh"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sluice::ipfix {

namespace {

using flow_export::Protocol;
using flow_export::TemplateField;

constexpr bool biflow_kind(int kind) { return kind >= 2; }
constexpr bool ipv6_kind(int kind) { return kind % 2 == 1; }

}  // namespace

uint16_t template_id(int kind, FlowFieldSet fields, bool ext) {
  FlowFieldSet omitted = kAllFlowFields & ~fields;
  return uint16_t(kTemplateV4 + 8 * omitted + (ext ? kExtTemplateOffset : 0) + kind);
}

std::vector<FieldSpec> template_fields(uint16_t id) {
  unsigned off = id >= kTemplateV4 ? id - kTemplateV4 : ~0u;
  if (off > 8 * kAllFlowFields + 3 || (off & kExtTemplateOffset))
    throw std::invalid_argument("no such IPFIX template without extension fields: " + std::to_string(id));
  int kind = int(off % 4);
  FlowFieldSet fields = kAllFlowFields & ~FlowFieldSet(off / 8);
  auto t = flow_export::record_fields(ipv6_kind(kind), biflow_kind(kind), fields);
  return flow_export::field_specs(t, Protocol::Ipfix);
}
size_t record_length(uint16_t id) { return flow_export::data_record_length(template_fields(id)); }
size_t template_record_length(uint16_t id) { return flow_export::template_record_length(template_fields(id)); }

size_t min_message_size() {
  size_t m = 0;
  for (uint16_t id : kTemplateIds) m = std::max({m, template_record_length(id), record_length(id)});
  return kMessageHeaderLen + kSetHeaderLen + m;
}

IpfixEncoder::IpfixEncoder(const IpfixEncoderConfig &cfg) : cfg_(cfg) {
  size_t min = 0;
  size_t ext_record = 0;
  for (const IpfixExtField &f : cfg.ext) ext_record += f.slot.kind == FlowExtKind::Text ? 1 + f.slot.size : f.slot.size;
  for (int t = 0; t < 4; ++t) {
    ids_[t] = ipfix::template_id(t, cfg.fields & kAllFlowFields, !cfg.ext.empty());
    auto fields = flow_export::record_fields(ipv6_kind(t), biflow_kind(t), cfg.fields);
    specs_[t] = flow_export::field_specs(fields, Protocol::Ipfix);
    ops_[t] = flow_export::record_ops(fields);
    record_len_[t] = flow_export::data_record_length(specs_[t]);
    for (const IpfixExtField &f : cfg.ext)
      specs_[t].push_back({f.id, uint16_t(f.slot.kind == FlowExtKind::Text ? 65535 : f.slot.size), f.pen});
    template_len_[t] = flow_export::template_record_length(specs_[t]);
    min = std::max({min, kMessageHeaderLen + kSetHeaderLen + template_len_[t],
                    kMessageHeaderLen + kSetHeaderLen + record_len_[t] + ext_record});
  }
  if (cfg.max_message < min || cfg.max_message > 65535)
    throw std::invalid_argument("IPFIX max_message must be within " + std::to_string(min) + "..65535 octets, not " +
                                std::to_string(cfg.max_message));
}

size_t IpfixEncoder::ext_length(const FlowRecord &r) const {
  size_t n = 0;
  for (const IpfixExtField &f : cfg_.ext)
    n += f.slot.kind == FlowExtKind::Text ? 1 + flow_ext_value(r, f.slot).size() : f.slot.size;
  return n;
}

void IpfixEncoder::write_ext(uint8_t *p, const FlowRecord &r) const {
  for (const IpfixExtField &f : cfg_.ext) {
    std::string_view v = flow_ext_value(r, f.slot);
    // (an unset field's value is empty, and its data() may be null)
    if (f.slot.kind == FlowExtKind::Text) {
      *p++ = uint8_t(v.size());  // < 255: the one-octet form
      if (!v.empty()) std::memcpy(p, v.data(), v.size());
      p += v.size();
    } else {  // unset: zero
      std::memset(p, 0, f.slot.size);
      if (!v.empty()) std::memcpy(p + f.slot.size - v.size(), v.data(), v.size());
      p += f.slot.size;
    }
  }
}

void IpfixEncoder::begin(uint8_t *h) {
  flow_export::put_be(h, kVersion, 2);
  flow_export::put_be(h + 4, export_time_s_, 4);
  flow_export::put_be(h + 8, sequence_, 4);  // data records sent before this message
  flow_export::put_be(h + 12, cfg_.domain, 4);
}

void IpfixEncoder::end(uint8_t *h, size_t length, uint32_t data_records, uint32_t) {
  flow_export::put_be(h + 2, length, 2);
  sequence_ += data_records;
}

flow_export::MessageBuilder IpfixEncoder::builder(flow_export::Messages &out, std::vector<uint32_t> *flow_records) {
  return flow_export::MessageBuilder({kMessageHeaderLen, cfg_.max_message, false}, *this, out, flow_records);
}

void IpfixEncoder::add_template(flow_export::MessageBuilder &b, int t) {
  flow_export::write_template_record(b.add(kTemplateSetId, template_len_[t], false), template_id(t), specs_[t]);
  announced_ |= 1u << t;
}

void IpfixEncoder::templates(uint32_t export_time_s, flow_export::Messages &out) {
  export_time_s_ = export_time_s;
  flow_export::MessageBuilder b = builder(out, nullptr);
  for (int t = 0; t < kinds(); ++t) add_template(b, t);
}

void IpfixEncoder::encode_options(std::span<const flow_export::OptionsRecord> recs, uint32_t export_time_s,
                                  flow_export::Messages &out) {
  export_time_s_ = export_time_s;
  flow_export::MessageBuilder b = builder(out, nullptr);
  flow_export::add_options(b, recs);
}

int IpfixEncoder::template_of(const FlowRecord &r) const {
  return (r.key.is_ipv6 ? 1 : 0) + (r.biflow && !cfg_.uniflows ? 2 : 0);
}

void IpfixEncoder::add_record(flow_export::MessageBuilder &b, int t, const flow_export::View &v, const FlowRecord &r) {
  size_t ext = cfg_.ext.empty() ? 0 : ext_length(r);
  uint8_t *p = b.add(template_id(t), record_len_[t] + ext, true);
  flow_export::write_data_record<Protocol::Ipfix>(p, v, ops_[t], [](uint64_t ms) { return ms; });
  if (ext) write_ext(p + record_len_[t], r);
}

void IpfixEncoder::encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
                          flow_export::Messages &out, std::vector<uint32_t> *flow_records) {
  export_time_s_ = export_time_s;
  flow_export::MessageBuilder b = builder(out, flow_records);
  if (send_templates)
    for (int t = 0; t < kinds(); ++t) add_template(b, t);
  // Group by template, keeping the input order within a template.
  size_t count[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) ++count[template_of(recs[i])];
  size_t start[4] = {0, count[0], count[0] + count[1], count[0] + count[1] + count[2]};
  order_.resize(n);
  size_t pos[4] = {start[0], start[1], start[2], start[3]};
  for (size_t i = 0; i < n; ++i) order_[pos[template_of(recs[i])]++] = uint32_t(i);

  for (int t = 0; t < kinds(); ++t) {
    if (!count[t]) continue;
    if (!(announced_ & (1u << t))) add_template(b, t);
    for (size_t k = start[t]; k < start[t] + count[t]; ++k) {
      const FlowRecord &r = recs[order_[k]];
      if (!r.biflow || !cfg_.uniflows) {
        add_record(b, t, flow_export::View::whole(r), r);
      } else {  // each direction that saw packets, as NetFlow v9 sends them
        bool forward = r.fwd.packets || !r.rev.packets;
        if (forward) add_record(b, t, flow_export::View::direction(r, false), r);
        if (r.rev.packets) add_record(b, t, flow_export::View::direction(r, true), r);
      }
      b.flow_record_done();
    }
  }
}

std::string IpfixEncoder::report() const { return "sequence " + std::to_string(sequence_); }

}  // namespace sluice::ipfix
