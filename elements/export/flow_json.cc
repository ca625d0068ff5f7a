#include "elements/export/flow_json.hh"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string_view>

namespace sluice::elements {

namespace {

// goflow2's names for the protocols it names; any other as its number.
std::string protocol_name(uint8_t proto) {
  switch (proto) {
    case 1: return "ICMP";
    case 6: return "TCP";
    case 17: return "UDP";
    case 58: return "ICMPv6";
    case 132: return "SCTP";
  }
  return std::to_string(proto);
}

uint32_t mpls_label(const FlowRecord &r) {
  return uint32_t(r.mpls_top[0]) << 12 | uint32_t(r.mpls_top[1]) << 4 | r.mpls_top[2] >> 4;
}

// goflow2's keys for the optional fields (and Sluice's where it has none).
void append_goflow2_optional(std::string &out, const FlowRecord &r, bool reverse, FlowFieldSet set);

// flow_ext_text's \xHH escapes, for JSON: the backslash doubled.
std::string json_text(const std::string &v) {
  std::string out;
  for (char c : v) out += c == '\\' ? "\\\\" : std::string(1, c);
  return out;
}

bool has(FlowFieldSet set, FlowField f) { return (set & flow_field_bit(f)) != 0; }

void append_goflow2_optional(std::string &out, const FlowRecord &r, bool reverse, FlowFieldSet set) {
  const FlowCounters &c = reverse ? r.rev : r.fwd, &other = reverse ? r.fwd : r.rev;
  auto num = [&](const char *key, uint64_t v) { out += std::string(",\"") + key + "\":" + std::to_string(v); };
  if (has(set, FlowField::InIf)) num("in_if", c.if_index);
  if (has(set, FlowField::OutIf)) num("out_if", other.if_index);
  if (has(set, FlowField::Direction)) num("flow_direction", r.flow_direction);
  if (has(set, FlowField::SrcMac)) out += ",\"src_mac\":\"" + mac_text(c.src_mac) + "\"";
  if (has(set, FlowField::DstMac)) out += ",\"dst_mac\":\"" + mac_text(c.dst_mac) + "\"";
  if (has(set, FlowField::Tos)) num("ip_tos", c.tos);
  if (has(set, FlowField::Ttl)) num("ip_ttl", c.min_ttl), num("max_ttl", c.max_ttl);
  if (has(set, FlowField::InnerVlan)) num("inner_vlan_id", r.vlan_inner);
  if (has(set, FlowField::Mpls)) {
    uint32_t label = mpls_label(r);
    bool any = r.mpls_top[0] | r.mpls_top[1] | r.mpls_top[2];
    out += ",\"mpls_label\":[" + (any ? std::to_string(label) : std::string()) + "]";
  }
}

// One direction's optional values, as text, by FlowLog column.
struct OptionalValues {
  std::vector<std::pair<const char *, std::string>> v;
  void add(const char *column, std::string text) { v.emplace_back(column, std::move(text)); }
};

OptionalValues optional_values(const FlowRecord &r, bool reverse, FlowFieldSet set) {
  const FlowCounters &c = reverse ? r.rev : r.fwd, &other = reverse ? r.fwd : r.rev;
  bool icmp = r.key.proto == 1 || r.key.proto == 58;
  OptionalValues o;
  if (has(set, FlowField::InIf)) o.add("in_if", std::to_string(c.if_index));
  if (has(set, FlowField::OutIf)) o.add("out_if", std::to_string(other.if_index));
  if (has(set, FlowField::Direction)) o.add("direction", std::to_string(r.flow_direction));
  if (has(set, FlowField::SrcMac)) o.add("src_mac", mac_text(c.src_mac));
  if (has(set, FlowField::DstMac)) o.add("dst_mac", mac_text(c.dst_mac));
  if (has(set, FlowField::Tos)) o.add("tos", std::to_string(c.tos));
  if (has(set, FlowField::Ttl)) o.add("min_ttl", std::to_string(c.min_ttl)), o.add("max_ttl", std::to_string(c.max_ttl));
  if (has(set, FlowField::InnerVlan)) o.add("inner_vlan", std::to_string(r.vlan_inner));
  if (has(set, FlowField::Icmp)) {
    o.add("icmp_type", std::to_string(icmp ? r.key.dst_port >> 8 : 0));
    o.add("icmp_code", std::to_string(icmp ? r.key.dst_port & 0xff : 0));
  }
  if (has(set, FlowField::Mpls)) o.add("mpls_label", std::to_string(mpls_label(r)));
  return o;
}

}  // namespace

std::string mac_text(const uint8_t m[6]) {
  char buf[18];
  snprintf(buf, sizeof buf, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4], m[5]);
  return buf;
}

std::vector<std::string> optional_flow_columns(FlowFieldSet set) {
  FlowRecord r{};
  std::vector<std::string> cols;
  for (auto &[column, text] : optional_values(r, false, set).v) cols.push_back(column);
  return cols;
}

void append_optional_flow_csv(std::string &out, const FlowRecord &r, bool reverse, FlowFieldSet set) {
  for (auto &[column, text] : optional_values(r, reverse, set).v) out += ',' + text;
}

void append_flow_json(std::string &out, const FlowRecord &r, bool reverse, FlowJsonKeys keys,
                      const std::vector<const FlowExtField *> &fields, FlowFieldSet optional,
                      const FlowJsonEnvelope &envelope) {
  const FlowKey &k = r.key;
  const FlowCounters &c = reverse ? r.rev : r.fwd;
  bool v6 = k.is_ipv6;
  std::string src = flow_address_text(reverse ? k.dst_addr : k.src_addr, v6),
              dst = flow_address_text(reverse ? k.src_addr : k.dst_addr, v6);
  unsigned sport = reverse ? k.dst_port : k.src_port, dport = reverse ? k.src_port : k.dst_port;
  char buf[640];
  int n;
  if (keys == FlowJsonKeys::FlowLog) {
    n = snprintf(buf, sizeof buf,
                 "{\"start_ms\": %" PRIu64 ", \"end_ms\": %" PRIu64 ", \"proto\": %u, \"src\": \"%s\", \"sport\": %u, "
                 "\"dst\": \"%s\", \"dport\": %u, \"packets\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"tcp_flags\": %u, "
                 "\"end_reason\": \"%s\", \"vlan\": %u, \"lane\": %u",
                 c.first_ns / 1000000, c.last_ns / 1000000, k.proto, src.c_str(), sport, dst.c_str(), dport, c.packets,
                 c.octets, c.tcp_flags, flow_end_reason_name(r.reason), k.vlan, r.lane);
  } else {
    bool icmp = k.proto == 1 || k.proto == 58;
    n = snprintf(buf, sizeof buf,
                 "{\"type\":\"IPFIX\",\"time_received_ns\":%" PRIu64 ",\"sequence_num\":%" PRIu64
                 ",\"time_flow_start_ns\":%" PRIu64 ",\"time_flow_end_ns\":%" PRIu64 ",\"bytes\":%" PRIu64
                 ",\"packets\":%" PRIu64 ",\"src_addr\":\"%s\",\"dst_addr\":\"%s\",\"etype\":\"%s\",\"proto\":\"%s\","
                 "\"src_port\":%u,\"dst_port\":%u,\"tcp_flags\":%u,\"icmp_type\":%u,\"icmp_code\":%u,\"vlan_id\":%u,"
                 "\"flow_end_reason\":\"%s\",\"lane\":%u",
                 envelope.time_received_ns, envelope.sequence_num, c.first_ns, c.last_ns, c.octets, c.packets,
                 src.c_str(), dst.c_str(), v6 ? "IPv6" : "IPv4", protocol_name(k.proto).c_str(), sport, dport,
                 c.tcp_flags, icmp ? unsigned(k.dst_port >> 8) : 0u, icmp ? unsigned(k.dst_port & 0xff) : 0u, k.vlan,
                 flow_end_reason_name(r.reason), r.lane);
  }
  out.append(buf, size_t(std::min<int>(n, int(sizeof buf) - 1)));
  if (keys == FlowJsonKeys::FlowLog) {
    for (auto &[column, text] : optional_values(r, reverse, optional).v) {
      bool quoted = std::string_view(column).ends_with("_mac");
      out += std::string(", \"") + column + "\": " + (quoted ? "\"" + text + "\"" : text);
    }
  } else {
    append_goflow2_optional(out, r, reverse, optional);
  }
  const char *sep = keys == FlowJsonKeys::FlowLog ? ", \"" : ",\"";
  const char *colon = keys == FlowJsonKeys::FlowLog ? "\": " : "\":";
  for (const FlowExtField *f : fields) {
    std::string v = flow_ext_text(r, *f);
    if (v.empty()) continue;
    bool text = f->slot.kind == FlowExtKind::Text;
    out += sep;
    out += f->def.name;
    out += colon;
    out += text ? "\"" + json_text(v) + "\"" : v;
  }
  out += '}';
}

}  // namespace sluice::elements
