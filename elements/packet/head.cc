// Head: the first packets of each lane, like `tcpdump -c`. The whole
// element is this file: its class, its spec and its registration.
#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

// A packet stage: each packet goes to `out` while fewer than `count` have
// gone there, then to `rest`. Fused loops take it into their one pass.
class HeadRuntime final : public PacketStage<HeadRuntime, 2> {
 public:
  HeadRuntime(const Node &n, RunContext &c) : PacketStage(n, c), count_(uint64_t(arg("count").integer)) {
    set_unconnected_reason(1, "past the head");
  }

  void jit_constants(std::vector<ConstantBytes> &out) const override { out.push_back({&count_, sizeof count_}); }

  int classify(rte_mbuf *) {
    if (passed_ == count_) return 1;
    ++passed_;
    return 0;
  }

  // The `passed` handler.
  uint64_t passed() const { return passed_; }

 private:
  uint64_t count_, passed_ = 0;
};

const ElementSpec &head_spec() {
  static const ElementSpec spec =
      ElementSpec("Head")
          .in_group("packet")
          .brief("Pass only the first packets of each lane")
          .describe(
              "Sends the first `count` packets that reach it to `out` and every later one to `rest`, as "
              "`tcpdump -c` stops after `count` packets. Each lane has a Head of its own that counts its own "
              "packets, so with one lane (a trace file, one queue) it keeps exactly the first `count` packets of "
              "the input, in order.\n\n"
              "`Head(1000) -> PcapSink(\"first.pcap\")` writes the first thousand packets of a trace. When "
              "`rest` is unconnected, the later packets are dropped and counted as \"past the head\".")
          .arg(ArgSpec::count("count").needed().pos().describe("Packets to pass, per lane."))
          .handler("passed", "Packets passed to `out` so far.", &HeadRuntime::passed)
          .input(PortSpec::packets("in").describe("Packets."))
          .output(PortSpec::packets("out").describe("The first `count` packets."))
          .output(PortSpec::packets("rest").optional().describe("The packets after them."));
  return spec;
}

SLUICE_ELEMENT(HeadRuntime, head_spec);

}  // namespace sluice::elements
