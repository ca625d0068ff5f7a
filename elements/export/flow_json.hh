// Flow records as JSON objects, one per direction: what FlowLog's jsonl
// lines and KafkaExporter's messages are. One writer for both, so that the
// two say the same things about a record in their own keys.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "engine/flow/flow_extension.hh"
#include "engine/flow/flow_record.hh"

namespace sluice::elements {

// The keys of an object.
//   FlowLog: start_ms end_ms proto src sport dst dport packets bytes
//     tcp_flags end_reason vlan lane, with ": " and ", " between (FlowLog's
//     jsonl format).
//   GoFlow2: those of goflow2's JSON output (type time_received_ns
//     sequence_num time_flow_start_ns time_flow_end_ns bytes packets
//     src_addr dst_addr etype proto src_port dst_port tcp_flags icmp_type
//     icmp_code vlan_id), then Sluice's own flow_end_reason and lane;
//     compact. KafkaExporter's documentation says what each means.
// Then the optional fields of `optional` (FlowField), FlowLog's keys as its
// columns (optional_flow_columns), GoFlow2's in_if out_if flow_direction
// src_mac dst_mac ip_tos ip_ttl (the smallest TTL) max_ttl inner_vlan_id
// mpls_label (a list: the top label, or none); and for both one key per
// extension field that has a value (its name).
enum class FlowJsonKeys { FlowLog, GoFlow2 };

// FlowLog's columns (and jsonl keys) for the optional fields of `set`, in
// order: in_if out_if direction src_mac dst_mac tos min_ttl max_ttl
// inner_vlan icmp_type icmp_code mpls_label.
std::vector<std::string> optional_flow_columns(FlowFieldSet set);
// Appends one direction's values of those columns to a CSV line, each
// after a comma: numbers in decimal (direction 0 ingress, 1 egress;
// mpls_label the label's 20 bits), MAC addresses as aa:bb:cc:dd:ee:ff.
void append_optional_flow_csv(std::string &out, const FlowRecord &r, bool reverse, FlowFieldSet set);
// "aa:bb:cc:dd:ee:ff"
std::string mac_text(const uint8_t mac[6]);

// What a GoFlow2 object carries beyond the record.
struct FlowJsonEnvelope {
  uint64_t time_received_ns = 0;  // when the exporter wrote it (UNIX ns)
  uint64_t sequence_num = 0;      // the exporter's count of objects written, this one included
};

// Appends one direction of `r` (reverse: r.rev, with the key's ends
// swapped; else r.fwd) as a JSON object, without a newline.
void append_flow_json(std::string &out, const FlowRecord &r, bool reverse, FlowJsonKeys keys,
                      const std::vector<const FlowExtField *> &fields, FlowFieldSet optional,
                      const FlowJsonEnvelope &envelope = {});

// The directions of a record that are written: the forward one always, the
// reverse one of a biflow record when it carried packets.
inline int flow_json_directions(const FlowRecord &r) { return r.biflow && r.rev.packets ? 2 : 1; }

}  // namespace sluice::elements
