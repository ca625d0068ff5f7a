// Ring: the SPSC ring between two segments of a lane (a thread boundary).
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &ring_spec();
}  // namespace sluice::elements
