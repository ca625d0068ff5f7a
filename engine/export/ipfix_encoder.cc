#include "engine/export/ipfix_encoder.hh"

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sluice::ipfix {

namespace {

// IANA information element ids used here.
enum : uint16_t {
  kOctetDeltaCount = 1,
  kPacketDeltaCount = 2,
  kProtocolIdentifier = 4,
  kTcpControlBits = 6,
  kSourceTransportPort = 7,
  kSourceIPv4Address = 8,
  kDestinationTransportPort = 11,
  kDestinationIPv4Address = 12,
  kMinimumIpTotalLength = 25,
  kMaximumIpTotalLength = 26,
  kSourceIPv6Address = 27,
  kDestinationIPv6Address = 28,
  kVlanId = 58,
  kFlowEndReason = 136,
  kFlowStartMilliseconds = 152,
  kFlowEndMilliseconds = 153,
};

#define SLUICE_IPFIX_KEY_V4 {kSourceIPv4Address, 4, 0}, {kDestinationIPv4Address, 4, 0}
#define SLUICE_IPFIX_KEY_V6 {kSourceIPv6Address, 16, 0}, {kDestinationIPv6Address, 16, 0}
#define SLUICE_IPFIX_COMMON                                                                                    \
  {kSourceTransportPort, 2, 0}, {kDestinationTransportPort, 2, 0}, {kProtocolIdentifier, 1, 0}, {kVlanId, 2, 0}, \
      {kPacketDeltaCount, 8, 0}, {kOctetDeltaCount, 8, 0}, {kFlowStartMilliseconds, 8, 0},                      \
      {kFlowEndMilliseconds, 8, 0}, {kTcpControlBits, 1, 0}, {kMinimumIpTotalLength, 2, 0},                      \
      {kMaximumIpTotalLength, 2, 0}, {kFlowEndReason, 1, 0}
#define SLUICE_IPFIX_REVERSE                                                                               \
  {kPacketDeltaCount, 8, kReversePen}, {kOctetDeltaCount, 8, kReversePen},                                 \
      {kTcpControlBits, 1, kReversePen}, {kMinimumIpTotalLength, 2, kReversePen},                          \
      {kMaximumIpTotalLength, 2, kReversePen}

constexpr FieldSpec kV4[] = {SLUICE_IPFIX_KEY_V4, SLUICE_IPFIX_COMMON};
constexpr FieldSpec kV6[] = {SLUICE_IPFIX_KEY_V6, SLUICE_IPFIX_COMMON};
constexpr FieldSpec kV4Bi[] = {SLUICE_IPFIX_KEY_V4, SLUICE_IPFIX_COMMON, SLUICE_IPFIX_REVERSE};
constexpr FieldSpec kV6Bi[] = {SLUICE_IPFIX_KEY_V6, SLUICE_IPFIX_COMMON, SLUICE_IPFIX_REVERSE};

#undef SLUICE_IPFIX_KEY_V4
#undef SLUICE_IPFIX_KEY_V6
#undef SLUICE_IPFIX_COMMON
#undef SLUICE_IPFIX_REVERSE

constexpr std::span<const FieldSpec> kTemplates[4] = {kV4, kV6, kV4Bi, kV6Bi};

constexpr size_t sum_lengths(std::span<const FieldSpec> f) {
  size_t n = 0;
  for (const FieldSpec &s : f) n += s.length;
  return n;
}
constexpr size_t template_len(std::span<const FieldSpec> f) {
  size_t n = 4;
  for (const FieldSpec &s : f) n += s.pen ? 8 : 4;
  return n;
}
constexpr std::array<size_t, 4> kRecordLen = {sum_lengths(kV4), sum_lengths(kV6), sum_lengths(kV4Bi),
                                              sum_lengths(kV6Bi)};
constexpr std::array<size_t, 4> kTemplateLen = {template_len(kV4), template_len(kV6), template_len(kV4Bi),
                                                template_len(kV6Bi)};
static_assert(kRecordLen[0] == 53 && kRecordLen[1] == 77 && kRecordLen[2] == 74 && kRecordLen[3] == 98,
              "the record lengths documented in ipfix_encoder.hh");

int template_index(uint16_t id) {
  if (id < kTemplateV4 || id > kTemplateV6Bi) throw std::invalid_argument("no such IPFIX template: " + std::to_string(id));
  return id - kTemplateV4;
}

int index_for(const FlowRecord &r) { return (r.key.is_ipv6 ? 1 : 0) + (r.biflow ? 2 : 0); }

inline void put_be(uint8_t *p, uint64_t v, size_t len) {
  for (size_t i = len; i-- > 0; v >>= 8) p[i] = uint8_t(v);
}

inline uint64_t ms(uint64_t ns) { return ns / 1000000; }

// The value of one numeric field of a record.
uint64_t field_value(const FlowRecord &r, const FieldSpec &f) {
  const FlowCounters &c = f.pen ? r.rev : r.fwd;
  switch (f.id) {
    case kSourceTransportPort: return r.key.src_port;
    case kDestinationTransportPort: return r.key.dst_port;
    case kProtocolIdentifier: return r.key.proto;
    case kVlanId: return r.key.vlan & 0x0fff;
    case kPacketDeltaCount: return c.packets;
    case kOctetDeltaCount: return c.octets;
    // The whole flow's times: for a biflow, from its first packet in either
    // direction to its last (there are no reverse times, see the header).
    case kFlowStartMilliseconds: return ms(r.first_ns());
    case kFlowEndMilliseconds: return std::max(ms(r.first_ns()), ms(r.last_ns()));  // start <= end
    case kTcpControlBits: return c.tcp_flags;
    case kMinimumIpTotalLength: return c.min_len;
    case kMaximumIpTotalLength: return c.max_len;
    case kFlowEndReason: return uint8_t(r.reason);
  }
  return 0;
}

void write_record(uint8_t *p, const FlowRecord &r, std::span<const FieldSpec> fields) {
  for (const FieldSpec &f : fields) {
    switch (f.id) {
      case kSourceIPv4Address: std::memcpy(p, r.key.src_addr + 12, 4); break;
      case kDestinationIPv4Address: std::memcpy(p, r.key.dst_addr + 12, 4); break;
      case kSourceIPv6Address: std::memcpy(p, r.key.src_addr, 16); break;
      case kDestinationIPv6Address: std::memcpy(p, r.key.dst_addr, 16); break;
      default: put_be(p, field_value(r, f), f.length);
    }
    p += f.length;
  }
}

void write_template(uint8_t *p, uint16_t id, std::span<const FieldSpec> fields) {
  put_be(p, id, 2);
  put_be(p + 2, fields.size(), 2);
  p += 4;
  for (const FieldSpec &f : fields) {
    put_be(p, f.pen ? (0x8000u | f.id) : f.id, 2);
    put_be(p + 2, f.length, 2);
    p += 4;
    if (f.pen) {
      put_be(p, f.pen, 4);
      p += 4;
    }
  }
}

}  // namespace

std::span<const FieldSpec> template_fields(uint16_t template_id) { return kTemplates[template_index(template_id)]; }
size_t record_length(uint16_t template_id) { return kRecordLen[template_index(template_id)]; }
size_t template_record_length(uint16_t template_id) { return kTemplateLen[template_index(template_id)]; }
uint16_t template_for(const FlowRecord &rec) { return kTemplateIds[index_for(rec)]; }

size_t min_message_size() {
  size_t m = 0;
  for (int i = 0; i < 4; ++i) m = std::max({m, kTemplateLen[i], kRecordLen[i]});
  return kMessageHeaderLen + kSetHeaderLen + m;
}

// Fills messages one set at a time; a message is closed when the next record
// (with a set header if a new set is needed) would not fit.
class IpfixEncoder::Builder {
 public:
  Builder(IpfixEncoder &enc, uint32_t export_time_s, std::vector<std::vector<uint8_t>> &out)
      : enc_(enc), export_time_s_(export_time_s), out_(out) {}
  ~Builder() { finish(); }

  // Room for one record of `len` octets in a set `set_id`; returns where it goes.
  uint8_t *add(uint16_t set_id, size_t len, bool data) {
    size_t max = enc_.cfg_.max_message;
    if (!msg_) start_message();
    if (!(set_open_ && set_id_ == set_id && msg_->size() + len <= max)) {
      close_set();
      if (msg_->size() + kSetHeaderLen + len > max) {
        finish();
        start_message();
      }
      set_start_ = msg_->size();
      set_id_ = set_id;
      set_open_ = true;
      msg_->resize(msg_->size() + kSetHeaderLen);
      put_be(msg_->data() + set_start_, set_id, 2);
    }
    size_t at = msg_->size();
    msg_->resize(at + len);
    if (data) ++data_records_;
    return msg_->data() + at;
  }

  void finish() {
    if (!msg_) return;
    close_set();
    put_be(msg_->data() + 2, msg_->size(), 2);
    enc_.sequence_ += data_records_;
    msg_ = nullptr;
  }

 private:
  void start_message() {
    out_.emplace_back();
    msg_ = &out_.back();
    msg_->reserve(enc_.cfg_.max_message);
    msg_->resize(kMessageHeaderLen);
    uint8_t *h = msg_->data();
    put_be(h, kVersion, 2);
    put_be(h + 4, export_time_s_, 4);
    put_be(h + 8, enc_.sequence_, 4);  // data records sent before this message
    put_be(h + 12, enc_.cfg_.domain, 4);
    data_records_ = 0;
  }
  void close_set() {
    if (!set_open_) return;
    put_be(msg_->data() + set_start_ + 2, msg_->size() - set_start_, 2);
    set_open_ = false;
  }

  IpfixEncoder &enc_;
  uint32_t export_time_s_;
  std::vector<std::vector<uint8_t>> &out_;
  std::vector<uint8_t> *msg_ = nullptr;
  size_t set_start_ = 0;
  uint16_t set_id_ = 0;
  bool set_open_ = false;
  uint32_t data_records_ = 0;
};

IpfixEncoder::IpfixEncoder(const IpfixEncoderConfig &cfg) : cfg_(cfg) {
  if (cfg.max_message < min_message_size() || cfg.max_message > 65535)
    throw std::invalid_argument("IPFIX max_message must be within " + std::to_string(min_message_size()) +
                                "..65535 octets, not " + std::to_string(cfg.max_message));
}

void IpfixEncoder::add_templates(Builder &b) {
  for (int i = 0; i < 4; ++i)
    write_template(b.add(kTemplateSetId, kTemplateLen[i], false), kTemplateIds[i], kTemplates[i]);
  announced_ = 0xf;
}

void IpfixEncoder::templates(uint32_t export_time_s, std::vector<std::vector<uint8_t>> &out) {
  Builder b(*this, export_time_s, out);
  add_templates(b);
}

void IpfixEncoder::encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
                          std::vector<std::vector<uint8_t>> &out) {
  Builder b(*this, export_time_s, out);
  if (send_templates) add_templates(b);
  // Group by template, keeping the input order within a template.
  size_t count[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; ++i) ++count[index_for(recs[i])];
  size_t start[4] = {0, count[0], count[0] + count[1], count[0] + count[1] + count[2]};
  order_.resize(n);
  size_t pos[4] = {start[0], start[1], start[2], start[3]};
  for (size_t i = 0; i < n; ++i) order_[pos[index_for(recs[i])]++] = uint32_t(i);

  for (int t = 0; t < 4; ++t) {
    if (!count[t]) continue;
    if (!(announced_ & (1u << t))) {
      write_template(b.add(kTemplateSetId, kTemplateLen[t], false), kTemplateIds[t], kTemplates[t]);
      announced_ |= 1u << t;
    }
    for (size_t k = start[t]; k < start[t] + count[t]; ++k)
      write_record(b.add(kTemplateIds[t], kRecordLen[t], true), recs[order_[k]], kTemplates[t]);
  }
}

}  // namespace sluice::ipfix
