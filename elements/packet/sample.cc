#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &sample_spec() {
  static const ElementSpec spec =
      ElementSpec("Sample")
          .in_group("packet")
          .with_flags(kSamples)
          .brief("Keep a pseudo-random fraction of the packets")
          .describe(
              "Sends the share `rate` of the packets to `sampled` and the others to `rest`. Each packet is "
              "picked independently by a pseudo-random generator seeded per lane, so replaying a trace "
              "picks the same packets.\n\n"
              "`Sample(1/100)` keeps one packet in a hundred on average. When `rest` is unconnected, the "
              "packets not picked are dropped and counted as \"not sampled\".\n\n"
              "Flows metered from sampled packets (a FlowTable after a Sample) count only the packets "
              "picked: IPFIXExporter and NetFlowV9Exporter tell their collectors the sampling interval "
              "(1/`rate`, rounded to an integer; a product for Samples in series) in a sampling options "
              "record, and collectors such as nfdump scale packets and octets by it.")
          .arg(ArgSpec::fraction("rate")
                   .needed()
                   .pos()
                   .describe("Share of the packets to keep: `1/100`, or the same as a decimal, `0.01`."))
          .input(PortSpec::packets("in").describe("Packets to sample."))
          .output(PortSpec::packets("sampled").describe("The packets picked."))
          .output(PortSpec::packets("rest").optional().describe("The packets not picked."));
  return spec;
}

// A splitmix64 stream per lane: the same trace picks the same packets.
class SampleRuntime final : public PacketStage<SampleRuntime, 2> {
 public:
  SampleRuntime(const Node &n, RunContext &c) : PacketStage(n, c) {
    double rate = arg("rate").real;
    threshold_ = rate >= 1.0 ? UINT64_MAX : uint64_t(rate * 18446744073709551616.0);
    state_ = 0x5eed0000u + uint64_t(lane() + 1);
    set_unconnected_reason(1, "not sampled");
  }

 public:
  void jit_constants(std::vector<ConstantBytes> &out) const override {
    out.push_back({&threshold_, sizeof threshold_});
  }

  // A packet stage: sampled, or not.
  int classify(rte_mbuf *) { return next() < threshold_ ? 0 : 1; }

 private:
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  uint64_t threshold_, state_;
};
SLUICE_ELEMENT(SampleRuntime, sample_spec);

}  // namespace sluice::elements
