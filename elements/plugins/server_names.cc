// ServerNames: the server name a TLS or QUIC client asks for, and the name a
// DNS query asks about, into the flow record. The payloads are read by
// server_name_parse.cc; this file is the element.
#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>

#include "engine/flow/flow_extension.hh"
#include "engine/runtime/element_runtime.hh"
#include "plugin_fields.hh"
#include "server_name_parse.hh"

using namespace sluice;
using namespace sluice::server_names;

namespace sluice_plugins {


SLUICE_FLOW_FIELD(kServerNameField, {"serverName", "server_name", FlowExtKind::Text, 80, kSluiceEnterprise, 3,
                                     "The server name (SNI) of the flow's TLS or QUIC ClientHello (ServerNames)."});
SLUICE_FLOW_FIELD(kDnsQueryNameField, {"dnsQueryName", "dns_query_name", FlowExtKind::Text, 96, kSluiceEnterprise, 4,
                                       "The name the flow's first DNS query asked about, without the final dot "
                                       "(ServerNames)."});

namespace {
enum Kind { kTls, kQuic, kDns, kKinds };
constexpr const char *kKindNames[kKinds] = {"tls", "quic", "dns"};
}  // namespace

// A packet stage: every packet goes on to `out`, with the names it holds as
// flow labels.
class ServerNamesRuntime final : public PacketStage<ServerNamesRuntime> {
 public:
  ServerNamesRuntime(const Node &n, RunContext &c)
      : PacketStage(n, c),
        server_slot_(kServerNameField.slot),
        dns_slot_(kDnsQueryNameField.slot),
        quic_(std::make_unique<QuicInitialDecryptor>()) {}

  void prepare() override {
    if (!quic_->ok())
      throw std::runtime_error(name() + ": OpenSSL's libcrypto gave no HKDF, AES-128-ECB or AES-128-GCM context");
  }

  void jit_constants(std::vector<ConstantBytes> &out) const override {
    out.push_back({&server_slot_, sizeof server_slot_});
    out.push_back({&dns_slot_, sizeof dns_slot_});
    out.push_back({&quic_, sizeof quic_});
  }

  // Reads only members: the JIT compiles this from bitcode, where the
  // fields' statics are not initialized.
  int classify(rte_mbuf *m) {
    PacketAnno &a = anno(m);
    char server[kMaxName], dns[kMaxName];
    FoundNames found;
    find_names(a.meta, rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, *quic_, server, dns, kMaxName, found);
    if (found.quic != QuicOutcome::NotInitial) quic_outcomes_[int(found.quic)].add();
    if (found.server != FoundNames::None) {
      found_[found.server == FoundNames::Tls ? kTls : kQuic].add();
      label(a.labels, server_slot_, server, found.server_len);
    }
    if (found.dns_len) {
      found_[kDns].add();
      label(a.labels, dns_slot_, dns, found.dns_len);
    }
    return 0;
  }

  // Handlers (server_names_spec).
  uint64_t tls() const { return found_[kTls].get(); }
  uint64_t quic() const { return found_[kQuic].get(); }
  uint64_t dns() const { return found_[kDns].get(); }
  uint64_t cut() const { return cut_.get(); }
  uint64_t unlabelled() const { return unlabelled_.get(); }
  uint64_t quic_not_decrypted() const { return outcome(QuicOutcome::NotDecrypted); }
  uint64_t quic_without_name() const { return outcome(QuicOutcome::NoName) + outcome(QuicOutcome::Truncated); }

  void report(std::vector<std::string> &lines) const override {
    std::string line = "names found: tls " + std::to_string(tls()) + ", quic " + std::to_string(quic()) + ", dns " +
                       std::to_string(dns()) + "; cut " + std::to_string(cut()) + "; QUIC Initials not decrypted " +
                       std::to_string(quic_not_decrypted()) + ", without a name " + std::to_string(quic_without_name());
    if (uint64_t n = unlabelled()) line += "; " + std::to_string(n) + " without labels (no room left)";
    lines.push_back(line);
  }
  void event_counts(std::vector<std::pair<std::string, uint64_t>> &out) const override {
    for (int k = 0; k < kKinds; ++k) out.emplace_back(std::string(kKindNames[k]) + " names", found_[k].get());
    out.emplace_back("names cut", cut());
    out.emplace_back("names without labels", unlabelled());
    out.emplace_back("QUIC Initials not decrypted", quic_not_decrypted());
    out.emplace_back("QUIC Initials without a name", quic_without_name());
  }
  void report_metrics(ElementMetrics &out) const override {
    for (int k = 0; k < kKinds; ++k)
      out.counter("server_names_total", double(found_[k].get()), {{"kind", kKindNames[k]}});
    out.counter("server_names_cut_total", double(cut()));
    out.counter("server_names_unlabelled_total", double(unlabelled()));
    const std::pair<QuicOutcome, const char *> outcomes[] = {{QuicOutcome::Name, "name"},
                                                             {QuicOutcome::NoName, "no_name"},
                                                             {QuicOutcome::Truncated, "truncated"},
                                                             {QuicOutcome::NotDecrypted, "not_decrypted"}};
    for (auto &[o, what] : outcomes)
      out.counter("server_names_quic_initials_total", double(outcome(o)), {{"outcome", what}});
  }

 private:
  void label(PacketLabels &l, const FlowExtSlot &slot, const char *name, size_t len) {
    LabelResult r = set_packet_label(l, slot, name, std::min(len, kMaxName));
    if (r == LabelResult::Cut) cut_.add();
    else if (r == LabelResult::NoRoom) unlabelled_.add();
  }
  uint64_t outcome(QuicOutcome o) const { return quic_outcomes_[int(o)].get(); }

  FlowExtSlot server_slot_, dns_slot_;
  std::unique_ptr<QuicInitialDecryptor> quic_;  // its OpenSSL contexts and buffers, this instance's alone
  Counter found_[kKinds];                       // read from other threads
  Counter cut_, unlabelled_;
  Counter quic_outcomes_[int(QuicOutcome::Name) + 1];
};

const ElementSpec &server_names_spec() {
  static const ElementSpec spec =
      ElementSpec("ServerNames")
          .in_group("packet")
          .brief("Put TLS and QUIC server names and DNS query names into the flow records")
          .describe(
              "Looks into each packet's payload for the name its flow is about, and gives it to the FlowTable "
              "after it: the server name (SNI) of a TLS ClientHello over TCP or of a QUIC client Initial, as "
              "`server_name`, and the name a DNS query asks about, as `dns_query_name`. They are FlowLog columns "
              "and IPFIX fields `serverName` (text, up to 80 octets) and `dnsQueryName` (up to 96), enterprise "
              "32473, elements 3 and 4: the number RFC 5612 reserves for documentation, which Sluice uses until "
              "it has its own. A longer name is kept cut, and counted. Every packet goes on unchanged. Put it "
              "just before the table, after TunnelDecap when both are used (so that it reads the packet inside "
              "the tunnel):\n\n"
              "    src -> Timestamp -> TunnelDecap -> ServerNames -> ft :: FlowTable -> ...\n\n"
              "TLS: a ClientHello at the start of a TCP payload, on any port (after a PROXY protocol header or "
              "a ChangeCipherSpec record, if any). Each packet is read alone, without TCP reassembly: the name "
              "is found when the server_name extension is whole in the segment, also when the ClientHello "
              "goes on in the next one; a ClientHello whose extension starts in a later segment gives none.\n\n"
              "QUIC: a client's Initial packet, at the start of a UDP datagram of at least 1200 octets, on any "
              "port, of QUIC version 1, 2 (RFC 9369), the IETF drafts 23 to 34, Facebook's mvfst "
              "(0xfaceb001, 0xfaceb002, 0xfaceb00e), Google's T050 and T051, or a version that forces version "
              "negotiation (0x?a?a?a?a, with the draft-29 keys as Wireshark uses). It is decrypted with the "
              "keys its Destination Connection ID gives (RFC 9001, with OpenSSL's libcrypto), and the name "
              "read from the CRYPTO frames of that packet, put together by offset from 0. A ClientHello over "
              "two Initials gives its name when the extension is in the data of the first one, from offset 0 "
              "on; the second alone gives none. Initials that do not decrypt (a server's, a client's later ones "
              "sent to the connection ID the server chose) are counted. gQUIC (Q0xx) is not read.\n\n"
              "DNS: the name of the first question of a query (not of a response), over UDP or TCP, to or "
              "from port 53, 5353 (mDNS) or 5355 (LLMNR), as dotted text without the final dot; nothing for the root.\n\n"
              "A flow keeps the first name it gets of each field (through active timeouts): the first DNS "
              "query of a flow of several, the name of the first ClientHello. A packet carries at most 4 "
              "labels in 160 octets; a name that finds no room left is counted `unlabelled`.\n\n"
              "`sluice ctl read sn.tls` (and `quic`, `dns`, `cut`, `quic_not_decrypted`) gives the counts; "
              "the metrics have `sluice_server_names_total{kind}` and "
              "`sluice_server_names_quic_initials_total{outcome}`. Decrypting an Initial costs a few "
              "microseconds (its key derivation, AES-GCM over the packet); other packets a few compares.")
          .sets_flow_field("serverName")
          .sets_flow_field("dnsQueryName")
          .handler("tls", "TLS server names found.", &ServerNamesRuntime::tls)
          .handler("quic", "QUIC server names found.", &ServerNamesRuntime::quic)
          .handler("dns", "DNS query names found.", &ServerNamesRuntime::dns)
          .handler("cut", "Names longer than their field, kept cut.", &ServerNamesRuntime::cut)
          .handler("unlabelled", "Names found on packets with no room left for labels.",
                   &ServerNamesRuntime::unlabelled)
          .handler("quic_not_decrypted", "QUIC Initials the client keys of their connection ID did not open.",
                   &ServerNamesRuntime::quic_not_decrypted)
          .handler("quic_without_name", "QUIC Initials opened (or cut short) without a server name in them.",
                   &ServerNamesRuntime::quic_without_name)
          .metric(MetricSpec::counter("server_names_total",
                                      "Names found, by kind: TLS and QUIC server names, DNS query names (ServerNames).",
                                      {"kind"}))
          .metric(MetricSpec::counter("server_names_cut_total",
                                      "Names longer than their flow field, kept cut (ServerNames)."))
          .metric(MetricSpec::counter("server_names_unlabelled_total",
                                      "Names found on packets with no room left for labels (ServerNames)."))
          .metric(MetricSpec::counter("server_names_quic_initials_total",
                                      "QUIC Initial packets looked into, by outcome: a server name, none, cut short, "
                                      "not decrypted (ServerNames).",
                                      {"outcome"}))
          .input(PortSpec::packets("in").describe("Packets, parsed as they arrived (after TunnelDecap, if any)."))
          .output(PortSpec::packets("out").describe("Every packet, the names it holds as flow labels."));
  return spec;
}

SLUICE_ELEMENT(ServerNamesRuntime, server_names_spec);

}  // namespace sluice_plugins
