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
// Then, for both, one key per extension field that has a value (its name).
enum class FlowJsonKeys { FlowLog, GoFlow2 };

// What a GoFlow2 object carries beyond the record.
struct FlowJsonEnvelope {
  uint64_t time_received_ns = 0;  // when the exporter wrote it (UNIX ns)
  uint64_t sequence_num = 0;      // the exporter's count of objects written, this one included
};

// Appends one direction of `r` (reverse: r.rev, with the key's ends
// swapped; else r.fwd) as a JSON object, without a newline.
void append_flow_json(std::string &out, const FlowRecord &r, bool reverse, FlowJsonKeys keys,
                      const std::vector<const FlowExtField *> &fields, const FlowJsonEnvelope &envelope = {});

// The directions of a record that are written: the forward one always, the
// reverse one of a biflow record when it carried packets.
inline int flow_json_directions(const FlowRecord &r) { return r.biflow && r.rev.packets ? 2 : 1; }

}  // namespace sluice::elements
