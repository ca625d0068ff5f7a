#include "elements/packet/counter.hh"

#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &counter_spec() {
  static const ElementSpec spec =
      ElementSpec("Counter")
          .in_group("packet")
          .brief("Count the packets and bytes passing through")
          .describe(
              "Counts the packets and bytes (frame length) that pass and hands them on unchanged. There is "
              "one count per lane; `sluice ctl stats` and the metrics endpoint show them. Counting survives "
              "JIT fusion, so it costs almost nothing in a fused loop.")
          // several streams may be merged into one count (`f[match], f[reject] -> Counter`)
          .input(PortSpec::packets("in").many().describe("Packets to count; may be connected several times, "
                                                         "the streams are merged."))
          .output(PortSpec::packets("out").describe("The same packets."));
  return spec;
}

SLUICE_ELEMENT(counter_spec);

// Counting is what every element does (RuntimeElement::receive counts in);
// a Counter also counts bytes and passes the packets on.
class CounterRuntime final : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;

 protected:
  void push(int, PacketBatch &batch) override {
    counters.in_bytes.add(batch.wire_bytes());
    emit(0, batch);
  }
  void report(std::vector<std::string> &lines) const override {
    lines.push_back("bytes: " + std::to_string(counters.in_bytes.get()));
  }
};
SLUICE_RUNTIME("Counter", CounterRuntime);

}  // namespace sluice::elements
