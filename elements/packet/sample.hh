// Sample: keeps a pseudo-random fraction of the packets.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &sample_spec();
}  // namespace sluice::elements
