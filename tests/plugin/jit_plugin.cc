// A plugin whose element runs: built as jit_plugin.so with its bitcode
// beside it, jit_plugin.so.bc (tests/CMakeLists.txt shows how), so that
// fused loops take it in like the library's own elements (docs/jit.md).
#include "engine/core/element_spec.hh"
#include "engine/runtime/element_runtime.hh"

namespace {

class EvenOddRuntime final : public sluice::PacketStage<EvenOddRuntime, 2> {
 public:
  EvenOddRuntime(const sluice::Node &n, sluice::RunContext &c) : PacketStage(n, c) {
    set_unconnected_reason(1, "odd length");
  }
  int classify(rte_mbuf *m) { return sluice::anno(m).wire_len % 2; }
};

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
}  // namespace

SLUICE_ELEMENT(EvenOddRuntime, even_odd_spec);

extern "C" int sluice_plugin_abi() { return sluice::kPluginAbi; }
