#include "elements/export/flow_json.hh"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

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

// flow_ext_text's \xHH escapes, for JSON: the backslash doubled.
std::string json_text(const std::string &v) {
  std::string out;
  for (char c : v) out += c == '\\' ? "\\\\" : std::string(1, c);
  return out;
}

}  // namespace

void append_flow_json(std::string &out, const FlowRecord &r, bool reverse, FlowJsonKeys keys,
                      const std::vector<const FlowExtField *> &fields, const FlowJsonEnvelope &envelope) {
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
