// Tee: copies every packet to each connected output.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &tee_spec();
}  // namespace sluice::elements
