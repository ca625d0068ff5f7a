#include "engine/flow/flow_record.hh"

#include <arpa/inet.h>

namespace sluice {

const char *flow_end_reason_name(FlowEndReason r) {
  switch (r) {
    case FlowEndReason::IdleTimeout: return "idle timeout";
    case FlowEndReason::ActiveTimeout: return "active timeout";
    case FlowEndReason::EndOfFlow: return "end of flow";
    case FlowEndReason::ForcedEnd: return "forced end";
    case FlowEndReason::LackOfResources: return "lack of resources";
  }
  return "unknown";
}

const char *flow_field_name(FlowField f) {
  switch (f) {
    case FlowField::InIf: return "in_if";
    case FlowField::OutIf: return "out_if";
    case FlowField::Direction: return "direction";
    case FlowField::SrcMac: return "src_mac";
    case FlowField::DstMac: return "dst_mac";
    case FlowField::Tos: return "tos";
    case FlowField::Ttl: return "ttl";
    case FlowField::InnerVlan: return "inner_vlan";
    case FlowField::Icmp: return "icmp";
    case FlowField::Mpls: return "mpls";
  }
  return "?";
}

std::string flow_address_text(const uint8_t addr[16], bool ipv6) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(ipv6 ? AF_INET6 : AF_INET, ipv6 ? addr : addr + 12, buf, sizeof buf);
  return buf;
}

}  // namespace sluice
