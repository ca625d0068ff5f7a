// TunnelDecap: meters VXLAN, GTP-U and GRE traffic by the packet inside the
// tunnel, the tunnel's type and id going into the flow record. The headers
// are walked by tunnel_headers.cc; this file is the element.
#include <string>

#include "engine/flow/flow_extension.hh"
#include "engine/runtime/element_runtime.hh"
#include "plugin_fields.hh"
#include "tunnel_headers.hh"

using namespace sluice;

namespace sluice_plugins {


SLUICE_FLOW_FIELD(kTunnelTypeField, {"tunnelType", "tunnel_type", FlowExtKind::Number, 1, kSluiceEnterprise, 1,
                                     "The tunnel the flow's packets came through: 1 VXLAN, 2 GTP-U, 3 GRE "
                                     "(TunnelDecap); none for traffic outside tunnels."});
SLUICE_FLOW_FIELD(kTunnelIdField, {"tunnelId", "tunnel_id", FlowExtKind::Number, 4, kSluiceEnterprise, 2,
                                   "The tunnel's id: the VXLAN VNI, the GTP-U TEID or the GRE key (0 without "
                                   "one) (TunnelDecap)."});

namespace {
// The outcomes counted by tunnel type; NotTunnel has no type.
constexpr DecapResult kCounted[] = {DecapResult::Decapsulated, DecapResult::Malformed, DecapResult::Unsupported};
constexpr TunnelType kTypes[] = {TunnelType::Vxlan, TunnelType::GtpU, TunnelType::Gre};
}  // namespace

// A packet stage: every packet goes on to `out`, a tunnelled one with the
// inner packet's headers in its meta and its tunnel in its labels.
class TunnelDecapRuntime final : public PacketStage<TunnelDecapRuntime> {
 public:
  TunnelDecapRuntime(const Node &n, RunContext &c)
      : PacketStage(n, c), type_slot_(kTunnelTypeField.slot), id_slot_(kTunnelIdField.slot) {}

  void jit_constants(std::vector<ConstantBytes> &out) const override {
    out.push_back({&type_slot_, sizeof type_slot_});
    out.push_back({&id_slot_, sizeof id_slot_});
  }

  // Reads only members: the JIT compiles this from bitcode, where the
  // fields' statics are not initialized.
  int classify(rte_mbuf *m) {
    PacketAnno &a = anno(m);
    Tunnel t;
    DecapResult r = decapsulate(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, a.wire_len, a.meta, t);
    counts_[int(r)][int(t.type)].add();
    if (r != DecapResult::Decapsulated) return 0;
    // both labels or neither: a record with a tunnel type must have its id
    if (packet_labels_free(a.labels) < 2 || packet_label_octets_free(a.labels) < size_t(type_slot_.size + id_slot_.size)) {
      unlabelled_.add();
      return 0;
    }
    uint8_t type = uint8_t(t.type);
    uint8_t id[4] = {uint8_t(t.id >> 24), uint8_t(t.id >> 16), uint8_t(t.id >> 8), uint8_t(t.id)};
    set_packet_label(a.labels, type_slot_, &type, 1);
    set_packet_label(a.labels, id_slot_, id, sizeof id);
    return 0;
  }

  // Handlers (tunnel_decap_spec): "vxlan N\ngtp-u N\ngre N".
  std::string decapsulated() const { return by_type(DecapResult::Decapsulated); }
  std::string malformed() const { return by_type(DecapResult::Malformed); }
  std::string unsupported() const { return by_type(DecapResult::Unsupported); }
  uint64_t not_tunnel() const { return count(DecapResult::NotTunnel, TunnelType::None); }
  uint64_t unlabelled() const { return unlabelled_.get(); }

  void report(std::vector<std::string> &lines) const override {
    std::string line = "tunnels:";
    for (DecapResult r : kCounted) {
      line += std::string(r == kCounted[0] ? " " : "; ") + decap_result_name(r);
      for (TunnelType t : kTypes) line += std::string(" ") + tunnel_type_name(t) + " " + std::to_string(count(r, t));
    }
    line += "; not tunnelled " + std::to_string(not_tunnel());
    if (uint64_t n = unlabelled()) line += "; " + std::to_string(n) + " without labels (no room left)";
    lines.push_back(line);
  }
  void event_counts(std::vector<std::pair<std::string, uint64_t>> &out) const override {
    for (DecapResult r : kCounted)
      for (TunnelType t : kTypes)
        out.emplace_back(std::string(decap_result_name(r)) + " " + tunnel_type_name(t), count(r, t));
    out.emplace_back("decapsulated without labels", unlabelled());
  }
  void report_metrics(ElementMetrics &out) const override {
    for (DecapResult r : kCounted)
      for (TunnelType t : kTypes)
        out.counter("tunnel_packets_total", double(count(r, t)), {{"outcome", decap_result_name(r)}, {"tunnel", tunnel_type_name(t)}});
    out.counter("tunnel_unlabelled_packets_total", double(unlabelled()));
  }

 private:
  uint64_t count(DecapResult r, TunnelType t) const { return counts_[int(r)][int(t)].get(); }
  std::string by_type(DecapResult r) const {
    std::string out;
    for (TunnelType t : kTypes)
      out += std::string(out.empty() ? "" : "\n") + tunnel_type_name(t) + " " + std::to_string(count(r, t));
    return out;
  }

  FlowExtSlot type_slot_, id_slot_;
  Counter counts_[kDecapResults][kTunnelTypes];  // [result][tunnel type]; read from other threads
  Counter unlabelled_;
};

const ElementSpec &tunnel_decap_spec() {
  static const ElementSpec spec =
      ElementSpec("TunnelDecap")
          .in_group("packet")
          .brief("Meter tunnelled traffic by the packet inside: VXLAN, GTP-U, GRE")
          .describe(
              "Opens the outermost VXLAN, GTP-U or GRE tunnel of each packet so that a FlowTable after it meters "
              "the packet inside the tunnel, not the tunnel, and puts the tunnel into the flow record: "
              "`tunnel_type` (1 VXLAN, 2 GTP-U, 3 GRE) and `tunnel_id` (the VXLAN VNI, the GTP-U TEID, the GRE "
              "key or 0), as FlowLog columns and IPFIX fields (enterprise 32473, elements 1 and 2: the number "
              "RFC 5612 reserves for documentation, which Sluice uses until it has its own). Every packet goes "
              "on: others unchanged, so the table meters them as they are. Put it just before the table:\n\n"
              "    src -> Timestamp -> TunnelDecap -> ft :: FlowTable -> ...\n\n"
              "What it opens: VXLAN to UDP port 4789 or 8472 (the Linux default), with the I flag set; GTP-U "
              "G-PDUs to UDP port 2152 (GTPv1, with extension headers), carrying IPv4 or IPv6; GRE version 0 "
              "(with checksum, key and sequence number) carrying IPv4, IPv6 or Ethernet (0x6558). The inner "
              "packet's octets are what the flow counts. Its VLAN is its own: an inner Ethernet frame's tags, "
              "none for inner IP; the outer tags belong to the transport network, as the outer addresses do.\n\n"
              "What it does not: one level only (a tunnel in the tunnel is the inner packet's payload); GRE "
              "version 1 (PPTP), GRE with RFC 1701 routing, GTP-U signalling (echo, end marker, error "
              "indication), inner protocols other than IP (ARP, PPP, MPLS) and tunnel packets split into IP "
              "fragments are metered as the outer packet and counted `unsupported`; a header that cannot be "
              "walked (cut short, lengths that disagree) goes on as the outer packet, counted `malformed`. "
              "Flows of different tunnels with the same inner addresses, ports and protocol are one flow, "
              "which keeps the first tunnel seen (an inner VLAN, if any, keeps them apart); so does a biflow "
              "whose directions use different ids (GTP-U has a TEID per direction). Lanes are chosen on the "
              "outer headers, before the tunnel is opened: the packets of one inner flow that come through "
              "different outer UDP source ports (VXLAN senders pick it, per direction and not always the same) "
              "may reach different lanes and be metered as a flow in each. One lane does not split them.\n\n"
              "`sluice ctl read d.decapsulated` (and `malformed`, `unsupported`) gives the packets per tunnel "
              "type; the metrics have `sluice_tunnel_packets_total{outcome,tunnel}`.")
          .sets_flow_field("tunnelType")
          .sets_flow_field("tunnelId")
          .handler("decapsulated", "Packets metered by their inner packet, per tunnel type.",
                   &TunnelDecapRuntime::decapsulated)
          .handler("malformed", "Packets whose tunnel header could not be walked, per tunnel type.",
                   &TunnelDecapRuntime::malformed)
          .handler("unsupported", "Tunnel packets of a kind not opened (GRE version 1, GTP-U signalling, "
                   "inner protocol not IP, fragments), per tunnel type.",
                   &TunnelDecapRuntime::unsupported)
          .handler("not_tunnel", "Packets outside the tunnels it knows.", &TunnelDecapRuntime::not_tunnel)
          .handler("unlabelled", "Decapsulated packets that had no room left for the tunnel's labels.",
                   &TunnelDecapRuntime::unlabelled)
          .metric(MetricSpec::counter("tunnel_packets_total",
                                      "Tunnelled packets by outcome (decapsulated, malformed, unsupported) and tunnel "
                                      "type (TunnelDecap).",
                                      {"outcome", "tunnel"}))
          .metric(MetricSpec::counter("tunnel_unlabelled_packets_total",
                                      "Decapsulated packets with no room left for the tunnel's flow labels (TunnelDecap)."))
          .input(PortSpec::packets("in").describe("Packets, parsed as they arrived."))
          .output(PortSpec::packets("out").describe(
              "Every packet: a tunnelled one with its inner packet's headers and its tunnel as flow labels."));
  return spec;
}

SLUICE_ELEMENT(TunnelDecapRuntime, tunnel_decap_spec);

}  // namespace sluice_plugins
