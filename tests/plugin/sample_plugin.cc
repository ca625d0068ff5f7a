// A plugin for the `require "x.so"` tests: one element class, registered
// into the running sluice's registry when the shared object is loaded.
#include "engine/core/element_spec.hh"

namespace {

const sluice::ElementSpec &plugin_counter_spec() {
  static const sluice::ElementSpec spec =
      sluice::ElementSpec(SAMPLE_PLUGIN_ELEMENT)
          .in_group("packet")
          .brief("Count packets (an element that comes from a plugin)")
          .input(sluice::PortSpec::packets("in"))
          .output(sluice::PortSpec::packets("out"))
          .arg(sluice::ArgSpec::count("limit").def("1K").pos().describe("Packets to count."));
  return spec;
}
SLUICE_ELEMENT_SPEC(plugin_counter_spec);

}  // namespace

// SAMPLE_PLUGIN_ABI lets the tests build a plugin for another ABI,
// SAMPLE_PLUGIN_ELEMENT one whose element has a name taken already.
extern "C" int sluice_plugin_abi() { return SAMPLE_PLUGIN_ABI; }
