// Counter: counts the packets and bytes passing through.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &counter_spec();
}  // namespace sluice::elements
