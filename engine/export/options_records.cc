#include "engine/export/options_records.hh"

#include <array>
#include <cmath>
#include <cstring>
#include <span>

namespace sluice::flow_export {

namespace {

// Scope first, then the options fields (see options_records.hh).
constexpr std::array<FieldSpec, 5> kIpfixStats = {{{144, 4, 0}, {41, 8, 0}, {40, 8, 0}, {42, 8, 0}, {166, 8, 0}}};
constexpr std::array<FieldSpec, 4> kIpfixSampling = {{{149, 4, 0}, {34, 4, 0}, {304, 1, 0}, {311, 8, 0}}};
constexpr std::array<FieldSpec, 5> kV9Stats = {{{1, 4, 0}, {40, 8, 0}, {41, 8, 0}, {42, 8, 0}, {166, 8, 0}}};
constexpr std::array<FieldSpec, 4> kV9Sampling = {{{1, 4, 0}, {34, 4, 0}, {304, 1, 0}, {311, 8, 0}}};
constexpr size_t kScopeFields = 1;

// RFC 7011 §3.4.2.2: id, field count, scope field count, specifiers.
OptionsRecord ipfix_options_template(uint16_t id, std::span<const FieldSpec> f) {
  std::vector<uint8_t> b(6 + 4 * f.size());
  put_be(b.data(), id, 2);
  put_be(b.data() + 2, f.size(), 2);
  put_be(b.data() + 4, kScopeFields, 2);
  for (size_t i = 0; i < f.size(); ++i) {
    put_be(b.data() + 6 + 4 * i, f[i].id, 2);
    put_be(b.data() + 8 + 4 * i, f[i].length, 2);
  }
  return {kIpfixOptionsTemplateSetId, std::move(b), false, true};
}

// RFC 3954 §6.1: id, scope length and options length in octets, specifiers.
OptionsRecord v9_options_template(uint16_t id, std::span<const FieldSpec> f) {
  std::vector<uint8_t> b(6 + 4 * f.size());
  put_be(b.data(), id, 2);
  put_be(b.data() + 2, 4 * kScopeFields, 2);
  put_be(b.data() + 4, 4 * (f.size() - kScopeFields), 2);
  for (size_t i = 0; i < f.size(); ++i) {
    put_be(b.data() + 6 + 4 * i, f[i].id, 2);
    put_be(b.data() + 8 + 4 * i, f[i].length, 2);
  }
  return {kV9OptionsTemplateFlowSetId, std::move(b), false, true};
}

// A data record of `values` in the fields' lengths.
OptionsRecord data_record(uint16_t id, std::span<const FieldSpec> f, std::span<const uint64_t> values) {
  std::vector<uint8_t> b(data_record_length(f));
  uint8_t *p = b.data();
  for (size_t i = 0; i < f.size(); ++i) {
    put_be(p, values[i], f[i].length);
    p += f[i].length;
  }
  return {id, std::move(b), true, false};
}

// IEEE 754 binary64, as IPFIX's float64 (RFC 7011 §6.1.3), big-endian by put_be.
uint64_t float64_bits(double v) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

}  // namespace

uint32_t sampling_interval(double rate) {
  if (!(rate > 0) || rate >= 1) return 0;
  double n = std::round(1 / rate);
  return n >= 4294967295.0 ? 4294967295u : uint32_t(n);
}

std::vector<OptionsRecord> options_templates(Protocol p, bool sampling) {
  std::vector<OptionsRecord> out;
  auto make = p == Protocol::Ipfix ? ipfix_options_template : v9_options_template;
  out.push_back(make(kStatsTemplateId, p == Protocol::Ipfix ? std::span<const FieldSpec>(kIpfixStats) : kV9Stats));
  if (sampling)
    out.push_back(
        make(kSamplingTemplateId, p == Protocol::Ipfix ? std::span<const FieldSpec>(kIpfixSampling) : kV9Sampling));
  return out;
}

std::vector<OptionsRecord> options_data(Protocol p, uint32_t domain, const ExporterStats &s, double rate) {
  std::vector<OptionsRecord> out;
  if (p == Protocol::Ipfix) {
    const uint64_t stats[] = {s.process_id, s.messages, s.octets, s.flow_records, s.not_sent_flows};
    out.push_back(data_record(kStatsTemplateId, kIpfixStats, stats));
  } else {
    const uint64_t stats[] = {domain, s.octets, s.messages, s.flow_records, s.not_sent_flows};
    out.push_back(data_record(kStatsTemplateId, kV9Stats, stats));
  }
  if (uint32_t interval = sampling_interval(rate)) {
    const uint64_t sampling[] = {domain, interval, kSelectorUniformProbabilistic, float64_bits(rate)};
    out.push_back(data_record(kSamplingTemplateId, p == Protocol::Ipfix ? kIpfixSampling : kV9Sampling, sampling));
  }
  return out;
}

void add_options(MessageBuilder &b, std::span<const OptionsRecord> recs) {
  for (const OptionsRecord &r : recs) {
    if (r.own_set) b.close_set();
    std::memcpy(b.add(r.set_id, r.bytes.size(), r.data), r.bytes.data(), r.bytes.size());
  }
}

}  // namespace sluice::flow_export
