#include <cstdio>
#include <optional>
#include <stdexcept>

#include "engine/packet/pcap_filter.hh"
#include "engine/runtime/element_runtime.hh"
#include "engine/runtime/run_context.hh"

using namespace sluice;

namespace sluice::elements {

class FilterRuntime final : public PacketStage<FilterRuntime, 2> {
 public:
  FilterRuntime(const Node &n, RunContext &c) : PacketStage(n, c) {
    set_unconnected_reason(1, "filtered");
  }

  // Compiled once the lane's link type is known (its source is open).
  void prepare() override {
    std::string err;
    auto f = compile(arg("expr").text, &err);
    if (!f) throw std::runtime_error("'" + name() + "': " + err);
    filter_.emplace(std::move(*f));
  }

  // A reload with a new expression, compiled before the switch for the
  // lane's link type: one libpcap refuses for it (it compiled for Ethernet
  // at check time) abandons the reload, the old expression stays.
  Change prepare_reconfigure(const Node &next) override {
    std::string err;
    auto f = compile(next.arg("expr")->value.text, &err);
    if (!f) throw std::runtime_error("'" + name() + "': " + err);
    auto compiled = std::make_shared<PcapFilter>(std::move(*f));
    return [this, compiled] { filter_.emplace(std::move(*compiled)); };
  }

  void report(std::vector<std::string> &lines) const override {
    lines.push_back(ctx_.options.jit ? "filter: part of its segment's fused loop once compiled (placement, below), "
                                       "libpcap's interpreter until then"
                                     : "filter: libpcap's interpreter (--no-jit)");
  }

  // The fused loop runs the program as IR of its own, in place of matches().
  const PcapFilter *jit_pcap_filter() const override { return filter_ ? &*filter_ : nullptr; }

  // The `expr` handler (filter_spec).
  std::string expression() const { return filter_->expression(); }
  // Compiled here, on the control thread; the data path only swaps programs.
  HandlerChange prepare_expression(const std::string &value) {
    std::string err;
    auto f = compile(value, &err);
    if (!f) throw HandlerError(err);
    auto compiled = std::make_shared<PcapFilter>(std::move(*f));
    return [this, compiled] { filter_.emplace(std::move(*compiled)); };
  }

 public:
  // A packet stage: match, or reject.
  int classify(rte_mbuf *m) {
    return filter_->matches(rte_pktmbuf_mtod(m, const uint8_t *), m->data_len, anno(m).wire_len) ? 0 : 1;
  }

 private:
  // libpcap compiles the expression and interprets its program; a fused
  // loop has the program as IR of its own (passes/inline_filter_programs).
  // Not compiled natively here: that loaded LLVM at the start of every
  // --jit run, one that ends before it compiles anything included.
  std::optional<PcapFilter> compile(const std::string &expr, std::string *error) {
    return PcapFilter::compile(expr, link(), error);
  }

  // The lane's link type: fixed once its source is open.
  LinkType link() const {
    SourceElement *src = ctx_.lane_source(lane() >= 0 ? lane() : 0);
    return src ? src->link_type() : LinkType::Ethernet;
  }

  std::optional<PcapFilter> filter_;
};

const ElementSpec &filter_spec() {
  static const ElementSpec spec =
      ElementSpec("Filter")
          .in_group("packet")
          .brief("Split packets by a pcap-filter expression")
          .describe(
              "Matches each packet against an expression in pcap-filter syntax, as tcpdump takes it: "
              "`tcp and port 443`, `net 10.0.0.0/8`, `vlan 100`, `ip6`, `not udp`. Matching packets leave on "
              "`match`, the others on `reject`.\n\n"
              "libpcap compiles the expression, as tcpdump would, so it accepts exactly the packets tcpdump's "
              "filter accepts, for the link type of the lane's source (a trace may be other than Ethernet). "
              "The compiled program runs on the packet's bytes; in JIT mode it becomes part of the fused loop "
              "of its segment.")
          .arg(ArgSpec::string("expr")
                   .live()
                   .needed()
                   .pos()
                   .describe("The filter expression, in pcap-filter syntax (see pcap-filter(7)), e.g. "
                             "`\"tcp and port 443\"`.")
                   // libpcap compiles it (for Ethernet) at check time; errors point inside the string
                   .check([](const Value &v) -> std::optional<ArgProblem> {
                     auto e = check_filter_expression(v.text);
                     if (!e) return std::nullopt;
                     return ArgProblem{e->message, e->offset, e->length};
                   }))
          .writable_handler("expr",
                            "The expression. A write is compiled by libpcap off the data path and replaces the "
                            "old one between two batches; an expression libpcap refuses is an error and the old "
                            "one stays.",
                            &FilterRuntime::expression, &FilterRuntime::prepare_expression)
          .input(PortSpec::packets("in").describe("Packets to test."))
          .output(PortSpec::packets("match").describe("Packets that match the expression."))
          .output(PortSpec::packets("reject").optional().describe(
              "Packets that do not match. When unconnected they are dropped and counted as \"filtered\"."));
  return spec;
}

SLUICE_ELEMENT(FilterRuntime, filter_spec);

}  // namespace sluice::elements
