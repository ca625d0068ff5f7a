// The ABI this library was built for: sluice refuses a plugin of another.
#include "engine/core/element_spec.hh"

extern "C" int sluice_plugin_abi() { return sluice::kPluginAbi; }
