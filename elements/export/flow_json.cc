#include "elements/export/flow_json.hh"

#include <algorithm>
#include <cinttypes>
#include <charconv>
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
// Calls fn(column, number, mac) for each optional field of `set`, in
// FlowLog's column order: mac is the address for the MAC columns (number
// unused), null for the others. No allocation: FlowLog writes these for
// every line on the lane's thread.
template <class Fn>
void for_each_optional(const FlowRecord &r, bool reverse, FlowFieldSet set, Fn &&fn) {
  const FlowCounters &c = reverse ? r.rev : r.fwd, &other = reverse ? r.fwd : r.rev;
  bool icmp = r.key.proto == 1 || r.key.proto == 58;
  const uint8_t *none = nullptr;
  if (has(set, FlowField::InIf)) fn("in_if", c.if_index, none);
  if (has(set, FlowField::OutIf)) fn("out_if", other.if_index, none);
  if (has(set, FlowField::Direction)) fn("direction", r.flow_direction, none);
  if (has(set, FlowField::SrcMac)) fn("src_mac", 0, c.src_mac);
  if (has(set, FlowField::DstMac)) fn("dst_mac", 0, c.dst_mac);
  if (has(set, FlowField::Tos)) fn("tos", c.tos, none);
  if (has(set, FlowField::Ttl)) fn("min_ttl", c.min_ttl, none), fn("max_ttl", c.max_ttl, none);
  if (has(set, FlowField::InnerVlan)) fn("inner_vlan", r.vlan_inner, none);
  if (has(set, FlowField::Icmp)) {
    fn("icmp_type", icmp ? r.key.dst_port >> 8 : 0, none);
    fn("icmp_code", icmp ? r.key.dst_port & 0xff : 0, none);
  }
  if (has(set, FlowField::Mpls)) fn("mpls_label", mpls_label(r), none);
}

// "aa:bb:cc:dd:ee:ff" at p (17 characters); returns the end.
char *put_mac(char *p, const uint8_t *m) {
  static const char hex[] = "0123456789abcdef";
  for (int i = 0; i < 6; ++i) {
    if (i) *p++ = ':';
    *p++ = hex[m[i] >> 4];
    *p++ = hex[m[i] & 15];
  }
  return p;
}

}  // namespace

std::string mac_text(const uint8_t m[6]) {
  char buf[17];
  return std::string(buf, put_mac(buf, m));
}

std::vector<std::string> optional_flow_columns(FlowFieldSet set) {
  FlowRecord r{};
  std::vector<std::string> cols;
  for_each_optional(r, false, set, [&](const char *column, uint64_t, const uint8_t *) { cols.push_back(column); });
  return cols;
}

void append_optional_flow_csv(std::string &out, const FlowRecord &r, bool reverse, FlowFieldSet set) {
  char buf[256];  // 12 columns of at most 20 characters
  char *p = buf;
  for_each_optional(r, reverse, set, [&](const char *, uint64_t number, const uint8_t *mac) {
    *p++ = ',';
    p = mac ? put_mac(p, mac) : std::to_chars(p, buf + sizeof buf, number).ptr;
  });
  out.append(buf, size_t(p - buf));
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
    for_each_optional(r, reverse, optional, [&](const char *column, uint64_t number, const uint8_t *mac) {
      out += ", \"";
      out += column;
      out += mac ? "\": \"" + mac_text(mac) + "\"" : "\": " + std::to_string(number);
    });
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
