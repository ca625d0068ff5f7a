#include "engine/runtime/element_runtime.hh"

using namespace sluice;

namespace sluice::elements {

const ElementSpec &tee_spec() {
  static const ElementSpec spec =
      ElementSpec("Tee")
          .in_group("packet")
          .brief("Copy every packet to each connected output")
          .describe(
              "Sends every packet to each connected output: `t[0] -> a; t[1] -> b;` gives `a` and `b` all "
              "the packets. Outputs are numbered from 0, as many as are connected. The copies share the "
              "packet's buffer, so no packet data is copied.\n\n"
              "To send flow records to several places, no Tee is needed: a flows output may be connected "
              "to several elements (`-> exp, FlowLog`).")
          .input(PortSpec::packets("in").describe("Packets to copy."))
          .output(PortSpec::packets("out").repeated().describe("Output N: every packet. Connect outputs 0, 1, 2, ... "
                                                              "as needed."));
  return spec;
}

// Every connected output gets every packet, one mbuf reference each: the
// copies share the buffer.
class TeeRuntime final : public RuntimeElement {
 public:
  using RuntimeElement::RuntimeElement;

  void prepare() override {  // the connected outputs, once wiring is done
    for (size_t p = 0; p < output_count(); ++p)
      if (!targets(int(p)).empty()) ports_.push_back(int(p));
  }

 public:
  void push(int, PacketBatch &batch) override {
    if (ports_.size() > 1) {
      for (int i = 0; i < batch.count; ++i) rte_mbuf_refcnt_update(batch.pkts[i], int16_t(ports_.size() - 1));
      counters.copies.add(uint64_t(batch.count) * (ports_.size() - 1));
    }
    for (size_t k = 0; k + 1 < ports_.size(); ++k) {
      PacketBatch copy;  // receivers may reorder their batch
      copy.count = batch.count;
      std::copy(batch.pkts, batch.pkts + batch.count, copy.pkts);
      emit(ports_[k], copy);
    }
    emit(ports_.back(), batch);
  }

 private:
  std::vector<int> ports_;
};
SLUICE_ELEMENT(TeeRuntime, tee_spec);

}  // namespace sluice::elements
