#include "engine/export/netflow_v9_encoder.hh"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace sluice::netflow_v9 {

namespace {

// RFC 3954 §8 field types (and IANA's flowEndReason).
enum : uint16_t {
  kInBytes = 1,
  kInPkts = 2,
  kProtocol = 4,
  kTcpFlags = 6,
  kL4SrcPort = 7,
  kIpv4SrcAddr = 8,
  kL4DstPort = 11,
  kIpv4DstAddr = 12,
  kLastSwitched = 21,
  kFirstSwitched = 22,
  kMinPktLngth = 25,
  kMaxPktLngth = 26,
  kIpv6SrcAddr = 27,
  kIpv6DstAddr = 28,
  kSrcVlan = 58,
  kFlowEndReason = 136,
};

#define SLUICE_V9_COMMON                                                                                      \
  {kL4SrcPort, 2}, {kL4DstPort, 2}, {kProtocol, 1}, {kSrcVlan, 2}, {kInPkts, 8}, {kInBytes, 8},               \
      {kFirstSwitched, 4}, {kLastSwitched, 4}, {kTcpFlags, 1}, {kMinPktLngth, 2}, {kMaxPktLngth, 2},          \
      {kFlowEndReason, 1}
constexpr FieldSpec kV4[] = {{kIpv4SrcAddr, 4}, {kIpv4DstAddr, 4}, SLUICE_V9_COMMON};
constexpr FieldSpec kV6[] = {{kIpv6SrcAddr, 16}, {kIpv6DstAddr, 16}, SLUICE_V9_COMMON};
#undef SLUICE_V9_COMMON
static_assert(std::size(kV4) == std::size(kV6));
constexpr std::span<const FieldSpec> kTemplates[2] = {kV4, kV6};

int template_index(uint16_t id) {
  if (id != kTemplateV4 && id != kTemplateV6)
    throw std::invalid_argument("no such NetFlow v9 template: " + std::to_string(id));
  return id - kTemplateV4;
}

inline void put_be(uint8_t *p, uint64_t v, size_t len) {
  for (size_t i = len; i-- > 0; v >>= 8) p[i] = uint8_t(v);
}

inline uint64_t ms(uint64_t ns) { return ns / 1000000; }

inline bool is_icmp(const FlowKey &k) { return k.proto == 1 || k.proto == 58; }

inline size_t pad4(size_t n) { return (4 - n % 4) % 4; }

}  // namespace

// Fills packets one FlowSet at a time; data FlowSets are padded to 4 octets
// when closed, and a record is only added when it fits with that padding.
class NetFlowV9Encoder::Builder {
 public:
  Builder(NetFlowV9Encoder &enc, uint32_t export_time_s, uint32_t sys_uptime, std::vector<std::vector<uint8_t>> &out)
      : enc_(enc), export_time_s_(export_time_s), sys_uptime_(sys_uptime), out_(out) {}
  ~Builder() { finish(); }

  uint8_t *add(uint16_t set_id, size_t len) {
    size_t max = enc_.cfg_.max_message;
    if (!msg_) start_packet();
    auto fits = [&](size_t set_start, size_t end) { return end + pad4(end - set_start) <= max; };
    if (!(set_open_ && set_id_ == set_id && fits(set_start_, msg_->size() + len))) {
      close_set();
      if (!fits(msg_->size(), msg_->size() + kFlowSetHeaderLen + len)) {
        finish();
        start_packet();
      }
      set_start_ = msg_->size();
      set_id_ = set_id;
      set_open_ = true;
      msg_->resize(msg_->size() + kFlowSetHeaderLen);
      put_be(msg_->data() + set_start_, set_id, 2);
    }
    size_t at = msg_->size();
    msg_->resize(at + len);
    ++records_;
    return msg_->data() + at;
  }

  void finish() {
    if (!msg_) return;
    close_set();
    put_be(msg_->data() + 2, records_, 2);
    msg_ = nullptr;
  }

 private:
  void start_packet() {
    out_.emplace_back();
    msg_ = &out_.back();
    msg_->reserve(enc_.cfg_.max_message);
    msg_->resize(kHeaderLen);
    uint8_t *h = msg_->data();
    put_be(h, kVersion, 2);
    put_be(h + 4, sys_uptime_, 4);
    put_be(h + 8, export_time_s_, 4);
    put_be(h + 12, enc_.sequence_++, 4);  // packets sent before this one
    put_be(h + 16, enc_.cfg_.source_id, 4);
    records_ = 0;
  }
  void close_set() {
    if (!set_open_) return;
    msg_->resize(msg_->size() + pad4(msg_->size() - set_start_), 0);
    put_be(msg_->data() + set_start_ + 2, msg_->size() - set_start_, 2);
    set_open_ = false;
  }

  NetFlowV9Encoder &enc_;
  uint32_t export_time_s_, sys_uptime_;
  std::vector<std::vector<uint8_t>> &out_;
  std::vector<uint8_t> *msg_ = nullptr;
  size_t set_start_ = 0;
  uint16_t set_id_ = 0;
  bool set_open_ = false;
  uint32_t records_ = 0;
};

NetFlowV9Encoder::NetFlowV9Encoder(const NetFlowV9EncoderConfig &cfg)
    : cfg_(cfg), nfields_(std::size(kV4) - (cfg.end_reason ? 0 : 1)) {
  if (cfg.max_message < min_message_size() || cfg.max_message > 65535)
    throw std::invalid_argument("NetFlow v9 max_message must be within " + std::to_string(min_message_size()) +
                                "..65535 octets, not " + std::to_string(cfg.max_message));
}

std::span<const FieldSpec> NetFlowV9Encoder::template_fields(uint16_t template_id) const {
  return kTemplates[template_index(template_id)].first(nfields_);
}

size_t NetFlowV9Encoder::record_length(uint16_t template_id) const {
  size_t n = 0;
  for (const FieldSpec &f : template_fields(template_id)) n += f.length;
  return n;
}

size_t NetFlowV9Encoder::min_message_size() const {
  size_t m = std::max(4 + 4 * nfields_, record_length(kTemplateV6) + pad4(kFlowSetHeaderLen + record_length(kTemplateV6)));
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

void NetFlowV9Encoder::add_templates(Builder &b) {
  for (int i = 0; i < 2; ++i) {
    std::span<const FieldSpec> f = kTemplates[i].first(nfields_);
    uint8_t *p = b.add(kTemplateFlowSetId, 4 + 4 * f.size());
    put_be(p, kTemplateIds[i], 2);
    put_be(p + 2, f.size(), 2);
    p += 4;
    for (const FieldSpec &s : f) {
      put_be(p, s.type, 2);
      put_be(p + 2, s.length, 2);
      p += 4;
    }
  }
  announced_ = 3;
}

void NetFlowV9Encoder::templates(uint32_t export_time_s, std::vector<std::vector<uint8_t>> &out) {
  uint64_t now = uint64_t(export_time_s) * 1000;
  set_boot(now, now);
  Builder b(*this, export_time_s, uptime(now), out);
  add_templates(b);
}

void NetFlowV9Encoder::encode(const FlowRecord *recs, size_t n, uint32_t export_time_s, bool send_templates,
                              std::vector<std::vector<uint8_t>> &out) {
  // The boot time first: it can ask for the templates again.
  uint64_t now = uint64_t(export_time_s) * 1000, oldest = now, newest = now;
  for (size_t i = 0; i < n; ++i) {
    const FlowRecord &r = recs[i];
    oldest = std::min(oldest, ms(r.fwd.first_ns));
    newest = std::max(newest, ms(r.fwd.last_ns));
    if (r.biflow && r.rev.packets) {
      oldest = std::min(oldest, ms(r.rev.first_ns));
      newest = std::max(newest, ms(r.rev.last_ns));
    }
  }
  set_boot(oldest, newest);

  Builder b(*this, export_time_s, uptime(now), out);
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
    if (!(announced_ & (1u << t))) {
      // A template not sent yet (both go: they are small, and a refresh
      // keeps them together).
      add_templates(b);
    }
    std::span<const FieldSpec> fields = kTemplates[t].first(nfields_);
    size_t len = 0;
    for (const FieldSpec &f : fields) len += f.length;
    for (int dir = 0; dir < (r.biflow && r.rev.packets ? 2 : 1); ++dir) {
      const FlowCounters &c = dir ? r.rev : r.fwd;
      bool swap = dir == 1;
      bool swap_ports = swap && !is_icmp(r.key);
      const uint8_t *src = swap ? r.key.dst_addr : r.key.src_addr;
      const uint8_t *dst = swap ? r.key.src_addr : r.key.dst_addr;
      uint64_t first = ms(c.first_ns), last = std::max(first, ms(c.last_ns));
      uint8_t *p = b.add(kTemplateIds[t], len);
      for (const FieldSpec &f : fields) {
        switch (f.type) {
          case kIpv4SrcAddr: std::memcpy(p, src + 12, 4); break;
          case kIpv4DstAddr: std::memcpy(p, dst + 12, 4); break;
          case kIpv6SrcAddr: std::memcpy(p, src, 16); break;
          case kIpv6DstAddr: std::memcpy(p, dst, 16); break;
          case kL4SrcPort: put_be(p, swap_ports ? r.key.dst_port : r.key.src_port, 2); break;
          case kL4DstPort: put_be(p, swap_ports ? r.key.src_port : r.key.dst_port, 2); break;
          case kProtocol: put_be(p, r.key.proto, 1); break;
          case kSrcVlan: put_be(p, r.key.vlan & 0x0fff, 2); break;
          case kInPkts: put_be(p, c.packets, 8); break;
          case kInBytes: put_be(p, c.octets, 8); break;
          case kFirstSwitched: put_be(p, uptime(first), 4); break;
          case kLastSwitched: put_be(p, uptime(last), 4); break;
          case kTcpFlags: put_be(p, c.tcp_flags, 1); break;
          case kMinPktLngth: put_be(p, c.min_len, 2); break;
          case kMaxPktLngth: put_be(p, c.max_len, 2); break;
          case kFlowEndReason: put_be(p, uint8_t(r.reason), 1); break;
        }
        p += f.length;
      }
    }
  }
}

}  // namespace sluice::netflow_v9
