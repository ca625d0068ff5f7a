// Timestamp: stamps packets with packet time from a chosen clock.
#pragma once
#include "engine/element_spec.hh"

namespace sluice::elements {
const ElementSpec &timestamp_spec();
}  // namespace sluice::elements
