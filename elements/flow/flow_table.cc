#include "elements/flow/flow_table.hh"

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
              "A flow ends here, and its record leaves on `flows`, when a TCP FIN or RST is seen (end reason "
              "\"end of flow\"), or when the table is full and a flow is evicted to make room (reason "
              "\"lack of resources\", counted). The idle and active timeouts are applied by a GCSlicer that "
              "names this table (`GCSlicer(table ft)`), and the expired flows come out of it, so a FlowTable "
              "is normally followed by its GCSlicer: `ft :: FlowTable -> GCSlicer(table ft) -> exporter`.\n\n"
              "All times are packet times, from Timestamp. There is one table per lane, allocated when the "
              "probe starts on the lane's NUMA node; at the end of input every remaining flow is exported "
              "with reason \"forced end\".")
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

}  // namespace sluice::elements
