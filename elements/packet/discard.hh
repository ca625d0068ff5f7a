// Discard: drops packets at the end of a branch.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &discard_spec();
}  // namespace sluice::elements
