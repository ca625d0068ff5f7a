#include "elements/flow/flow_table.hh"

#include <stdexcept>

#include "engine/runtime/clock.hh"
#include "engine/runtime/run_context.hh"

#include "elements/units.hh"

using namespace sluice;
using namespace sluice::units;

namespace sluice::elements {

const ElementSpec &flow_table_spec() {
  static const ElementSpec spec =
      ElementSpec("FlowTable")
          .in_group("flow")
          .brief("Per-lane flow cache: packets in, flow records out")
          .describe(
              "Keeps one entry per flow. A flow is identified by the fields of `key` (by default the "
              "5-tuple and the VLAN id), compared in full, never by hash alone. Each entry holds packet and "
              "octet counts (octets at IP level: the total length), the first and last packet times, the "
              "TCP flags seen, and the smallest and largest packet.\n\n"
              "With `direction bi` the two directions of a conversation share one entry and become one "
              "biflow record (RFC 5103) with forward and reverse counters; with `uni` each direction is a "
              "flow of its own.\n\n"
              "A TCP FIN or RST ends a flow (end reason \"end of flow\"): the rest of the close still counts "
              "in it, and a SYN after the end starts a new flow. Records leave on `flows` when a packet ends "
              "a flow here: a SYN after the end, a packet that finds its flow past a timeout, a flow evicted "
              "because the table is full (reason \"lack of resources\", counted). The idle and active "
              "timeouts of flows that see no more packets are applied by a GCSlicer that names this table "
              "(`GCSlicer(table ft)`), and those records come out of it, so a FlowTable is normally followed "
              "by its GCSlicer: `ft :: FlowTable -> GCSlicer(table ft) -> exporter`.\n\n"
              "Packets that are not IP (or whose IP header is broken) are not metered: they are dropped and "
              "counted as \"not ip\". With `on_full drop`, a packet that would start a flow in a full table "
              "is dropped and counted as \"flow table full\".\n\n"
              "All times are packet times, from Timestamp. There is one table per lane, allocated when the "
              "probe starts on the lane's NUMA node; at the end of input every remaining flow is exported "
              "with reason \"forced end\" (\"end of flow\" for those that saw their FIN or RST, the "
              "timeout's reason for those already past one).")
          .arg(ArgSpec::count("capacity")
                   .def("1M")
                   .range(1 * kK, 1 * kG)
                   .describe("Flows the table holds, per lane. Its memory is allocated up front."))
          .arg(ArgSpec::duration("idle")
                   .def("15s")
                   .range(1 * kMs, 1 * kDay)
                   .describe("Idle timeout: a flow with no packet for this long ends (reason \"idle timeout\")."))
          .arg(ArgSpec::duration("active")
                   .def("30min")
                   .range(1 * kS, 7 * kDay)
                   .describe("Active timeout: a flow that has lasted this long is exported (reason \"active "
                             "timeout\") and counting starts again in a new record, so long flows are reported "
                             "while they last."))
          .arg(ArgSpec::symbol("direction", {"uni", "bi"})
                   .def("bi")
                   .describe("`bi`: both directions of a conversation in one biflow record (RFC 5103); "
                             "`uni`: one record per direction."))
          .arg(ArgSpec::symbol("key", {"src", "dst", "proto", "sport", "dport", "vlan"})
                   .lists()
                   .def("[src, dst, proto, sport, dport, vlan]")
                   .describe("The fields that identify a flow: `src` and `dst` (IP addresses), `proto` (IP "
                             "protocol), `sport` and `dport` (TCP or UDP ports), `vlan` (VLAN id). Packets "
                             "that differ only in fields left out are counted in the same flow."))
          .arg(ArgSpec::symbol("on_full", {"evict", "drop"})
                   .def("evict")
                   .describe("When a packet starts a new flow and the table is full: `evict` an existing flow "
                             "(exported with reason \"lack of resources\") to make room, or `drop` the packet "
                             "(counted as \"flow table full\") and keep the table as it is."))
          .input(PortSpec::packets("in").describe("Timestamped packets."))
          .output(PortSpec::flows("flows").many().describe(
              "Records of the flows that ended here: TCP FIN or RST, and evictions. Flows that time out "
              "come out of the GCSlicer instead; connect this output to it."))
          .output(PortSpec::packets("packets").optional().describe(
              "Every packet, after it has been accounted to its flow."));
  return spec;
}

SLUICE_ELEMENT(flow_table_spec);

FlowTableRuntime::FlowTableRuntime(const Node &n, RunContext &c) : RuntimeElement(n, c) {
  FlowCacheConfig cfg;
  cfg.capacity = uint64_t(arg("capacity").integer);
  cfg.idle_ns = uint64_t(arg("idle").integer);
  cfg.active_ns = uint64_t(arg("active").integer);
  cfg.bidirectional = arg("direction").text == "bi";
  const Value &key = arg("key");
  auto in_key = [&](const char *f) {
    if (!key.is_list) return key.text == f;
    for (const Value &v : key.items)
      if (v.text == f) return true;
    return false;
  };
  cfg.key_src = in_key("src"), cfg.key_dst = in_key("dst"), cfg.key_proto = in_key("proto");
  cfg.key_sport = in_key("sport"), cfg.key_dport = in_key("dport"), cfg.key_vlan = in_key("vlan");
  cfg.evict_when_full = arg("on_full").text == "evict";
  cfg.lane = uint16_t(lane() < 0 ? 0 : lane());
  cache_ = std::make_unique<FlowCache>(cfg);
  not_ip_ = counters.reason("not ip");
  full_ = counters.reason("flow table full");
}

void FlowTableRuntime::prepare() {
  SourceElement *src = ctx_.lane_source(lane());
  live_ = src && src->live();
  last_wall_ns_ = mono_ns();
}

// The whole batch goes to the cache at once: it hashes and prefetches ahead
// (two cache misses per packet otherwise). Records of flows the batch ended
// leave in chunks that fit a FlowBatch.
void FlowTableRuntime::push(int, PacketBatch &batch) {
  last_wall_ns_ = mono_ns();
  constexpr unsigned kChunk = kMaxFlowBatch / FlowCache::kMaxRecordsPerPacket;
  PacketBatch pass;
  for (int start = 0; start < batch.count; start += kChunk) {
    unsigned n = std::min<unsigned>(kChunk, unsigned(batch.count - start));
    const PacketMeta *metas[kChunk];
    uint64_t times[kChunk];
    FlowPacketOutcome outcomes[kChunk];
    for (unsigned i = 0; i < n; ++i) {
      const PacketAnno &a = anno(batch.pkts[start + i]);
      metas[i] = &a.meta;
      times[i] = a.time_ns;
      if (a.time_ns > now_ns_) now_ns_ = a.time_ns;
    }
    unsigned records = 0;
    cache_->account_batch(metas, times, n, outcomes, out_.recs, &records);
    out_.count = uint16_t(records);
    emit_flows(0, out_);
    for (unsigned i = 0; i < n; ++i) {
      rte_mbuf *m = batch.pkts[start + i];
      switch (outcomes[i]) {
        case FlowPacketOutcome::Counted: pass.push(m); break;
        case FlowPacketOutcome::NotIp: drop(m, not_ip_); break;
        case FlowPacketOutcome::TableFull: drop(m, full_); break;
      }
    }
  }
  peak_active_ = std::max(peak_active_, cache_->active());
  // Metered packets go on if the packets output is connected; else they end here.
  if (!targets(1).empty()) emit(1, pass);
  else absorb_all(pass);
}

void FlowTableRuntime::flush() {
  // End of input: every remaining flow leaves ("forced end"; "end of flow"
  // for those that saw their FIN or RST).
  for (size_t left = 1; left > 0;) {
    size_t n = 0;
    left = cache_->flush(out_.recs, kMaxFlowBatch, &n);
    out_.count = uint16_t(n);
    emit_flows(0, out_);
  }
}

void FlowTableRuntime::report(std::vector<std::string> &lines) const {
  const FlowCache::Stats &st = cache_->stats();
  std::string ends;
  for (int r = 1; r <= 5; ++r)
    if (st.ended[r]) ends += std::string(ends.empty() ? "" : ", ") + flow_end_reason_name(FlowEndReason(r)) + " " + std::to_string(st.ended[r]);
  lines.push_back("flows: created " + std::to_string(st.created) + ", at most " + std::to_string(peak_active_) +
                  " at once, active " + std::to_string(cache_->active()) +
                  " of " + std::to_string(cache_->capacity()) + " (" + std::to_string(cache_->bytes() >> 20) +
                  " MiB), evicted " + std::to_string(st.evicted) + (ends.empty() ? "" : "; ended: " + ends));
}

SLUICE_RUNTIME("FlowTable", FlowTableRuntime);

}  // namespace sluice::elements
