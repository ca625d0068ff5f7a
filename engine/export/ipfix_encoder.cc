#include "engine/export/ipfix_encoder.hh"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sluice::ipfix {

namespace {

using flow_export::Protocol;
using flow_export::record_fields;
using flow_export::TemplateField;

// The four templates, in the order of kTemplateIds: their fields (how each
// is taken from a record) and their specifiers (what the template record says).
constexpr auto kV4 = record_fields<false, false>();
constexpr auto kV6 = record_fields<true, false>();
constexpr auto kV4Bi = record_fields<false, true>();
constexpr auto kV6Bi = record_fields<true, true>();
constexpr std::span<const TemplateField> kFieldsOf[4] = {kV4, kV6, kV4Bi, kV6Bi};

constexpr auto kSpecV4 = flow_export::field_specs(kV4, Protocol::Ipfix);
constexpr auto kSpecV6 = flow_export::field_specs(kV6, Protocol::Ipfix);
constexpr auto kSpecV4Bi = flow_export::field_specs(kV4Bi, Protocol::Ipfix);
constexpr auto kSpecV6Bi = flow_export::field_specs(kV6Bi, Protocol::Ipfix);
constexpr std::span<const FieldSpec> kSpecs[4] = {kSpecV4, kSpecV6, kSpecV4Bi, kSpecV6Bi};

constexpr std::array<size_t, 4> kRecordLen = {
    flow_export::data_record_length(kSpecV4), flow_export::data_record_length(kSpecV6),
    flow_export::data_record_length(kSpecV4Bi), flow_export::data_record_length(kSpecV6Bi)};
constexpr std::array<size_t, 4> kTemplateLen = {
    flow_export::template_record_length(kSpecV4), flow_export::template_record_length(kSpecV6),
    flow_export::template_record_length(kSpecV4Bi), flow_export::template_record_length(kSpecV6Bi)};
static_assert(kRecordLen[0] == 53 && kRecordLen[1] == 77 && kRecordLen[2] == 74 && kRecordLen[3] == 98,
              "the record lengths documented in ipfix_encoder.hh");

int template_index(uint16_t id) {
  if (id < kTemplateV4 || id > kTemplateV6Bi) throw std::invalid_argument("no such IPFIX template: " + std::to_string(id));
  return id - kTemplateV4;
}

}  // namespace

std::span<const FieldSpec> template_fields(uint16_t template_id) { return kSpecs[template_index(template_id)]; }
size_t record_length(uint16_t template_id) { return kRecordLen[template_index(template_id)]; }
size_t template_record_length(uint16_t template_id) { return kTemplateLen[template_index(template_id)]; }

size_t min_message_size() {
  size_t m = 0;
  for (int i = 0; i < 4; ++i) m = std::max({m, kTemplateLen[i], kRecordLen[i]});
  return kMessageHeaderLen + kSetHeaderLen + m;
}

IpfixEncoder::IpfixEncoder(const IpfixEncoderConfig &cfg) : cfg_(cfg) {
  size_t min = min_message_size();
  size_t ext_template = 0, ext_record = 0;
  for (const IpfixExtField &f : cfg.ext) {
    ext_template += f.pen ? 8 : 4;
    ext_record += f.slot.kind == FlowExtKind::Text ? 1 + f.slot.size : f.slot.size;
  }
  for (int t = 0; t < 4; ++t) {
    specs_[t].assign(kSpecs[t].begin(), kSpecs[t].end());
    for (const IpfixExtField &f : cfg.ext)
      specs_[t].push_back({f.id, uint16_t(f.slot.kind == FlowExtKind::Text ? 65535 : f.slot.size), f.pen});
    template_len_[t] = kTemplateLen[t] + ext_template;
    min = std::max({min, kMessageHeaderLen + kSetHeaderLen + template_len_[t],
                    kMessageHeaderLen + kSetHeaderLen + kRecordLen[t] + ext_record});
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
  uint8_t *p = b.add(template_id(t), kRecordLen[t] + ext, true);
  flow_export::write_data_record(p, v, kFieldsOf[t], Protocol::Ipfix, [](uint64_t ms) { return ms; });
  if (ext) write_ext(p + kRecordLen[t], r);
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
