// A plugin whose element runs: built as jit_plugin.so with its bitcode
// beside it, jit_plugin.so.bc (tests/CMakeLists.txt shows how), so that
// fused loops take it in like the library's own elements (docs/jit.md).
#include "engine/element_spec.hh"
#include "engine/runtime/element_runtime.hh"

namespace {

const sluice::ElementSpec &even_odd_spec() {
  static const sluice::ElementSpec spec =
      sluice::ElementSpec("EvenOdd")
          .in_group("packet")
          .brief("Split packets by the parity of their length (an element from a plugin)")
          .input(sluice::PortSpec::packets("in"))
          .output(sluice::PortSpec::packets("even"))
          .output(sluice::PortSpec::packets("odd").optional());
  return spec;
}
SLUICE_ELEMENT(even_odd_spec);

class EvenOddRuntime final : public sluice::RuntimeElement {
 public:
  EvenOddRuntime(const sluice::Node &n, sluice::RunContext &c) : RuntimeElement(n, c) {
    set_unconnected_reason(1, "odd length");
  }
  void push(int, sluice::PacketBatch &batch) override {
    sluice::PacketBatch odd;
    uint16_t kept = 0;
    for (int i = 0; i < batch.count; ++i) {
      if (sluice::anno(batch.pkts[i]).wire_len % 2 == 0) batch.pkts[kept++] = batch.pkts[i];
      else odd.push(batch.pkts[i]);
    }
    batch.count = kept;
    emit(0, batch);
    emit(1, odd);
  }
};

}  // namespace

SLUICE_RUNTIME("EvenOdd", EvenOddRuntime);

extern "C" int sluice_plugin_abi() { return sluice::kPluginAbi; }
