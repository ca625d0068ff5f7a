#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &discard_spec() {
  static const ElementSpec spec =
      ElementSpec("Discard")
          .in_group("packet")
          .brief("Drop packets at the end of a branch")
          .describe(
              "Frees every packet it receives. It ends a branch whose packets are no longer needed, e.g. "
              "after a Counter.")
          .input(PortSpec::packets("in").many().describe("Packets to drop; takes any number of connections."));
  return spec;
}

class DiscardRuntime final : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;

 public:
  void push(int, PacketBatch &batch) override { absorb_all(batch); }
};
SLUICE_ELEMENT(DiscardRuntime, discard_spec);

}  // namespace sluice::elements
